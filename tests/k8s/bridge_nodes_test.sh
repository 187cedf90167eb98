#!/usr/bin/env bash
# admit-k8s reports the cluster's Node objects to the ledger (docs/k8s.md, "Node inventory"), on a real
# API server with admitd on TLS and the bridge's certificate given the `bridge` role alone.
# Node objects are created through the API (`start --no-nodes`: no KWOK node, no kubelet; the
# test posts their allocatable and Ready condition itself and renews their Leases in
# kube-node-lease, so that the node lifecycle controller does not take them for lost):
# - before the bridge starts: flavors gpu-a (pool=gpu-a), any-gpu (accel=nvidia), both
#   tolerating nvidia.com/gpu, untolerating (accel=nvidia, no toleration) and cpu (pool=cpu);
#   nodes gpu-1 (pool=gpu-a, accel=nvidia, tainted nvidia.com/gpu=present:NoSchedule), cpu-1
#   (pool=cpu), down-1 (pool=cpu, Ready False) and other-1 (pool=other);
# - the bridge's first list: the ledger holds gpu-1/gpu-a and gpu-1/any-gpu with gpu-1's
#   allocatable, cpu-1/cpu, down-1/cpu failed, nothing of other-1 nor of untolerating, and the
#   inventory complete, said by exactly one event, the last healthy report of that first list
#   (one call);
# - a Job admitted on gpu-a and released, one of its pods bound to gpu-1 (by kube-scheduler, or
#   by the test through the binding subresource); its pods posted Running and Ready by hand:
#   the bridge reports `pods ready` with the admission's token, once, and the Workload shows
#   PodsReady True (Started); gpu-1 set NotReady -> nodeFailed for both of its flavors, naming
#   the Job's workload, which the ledger evicts (NodeFailure; PodsReady False, WaitForStart);
#   Ready again -> nodeRecovered; cpu-1 cordoned -> nodeFailed, uncordoned -> nodeRecovered; its
#   allocatable changed -> nodeCapacityChanged; a flavor's nodeLabels changed -> the nodes that
#   left it fail, the ones that joined are reported;
# - the bridge restarted: no node event recorded (and no second `pods ready`);
# - gpu-1 deleted -> nodeFailed for both of its flavors; other-1 (in flavor cpu by then)
#   deleted -> nodeFailed;
# - `admitctl replay --verify` of the ledger passes.
#   tests/k8s/bridge_nodes_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-nodes-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=default
# How often the test renews its nodes' Leases (the node lifecycle controller's grace period is
# 50 s).
readonly LEASE_RENEW_SECONDS=10

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "a control plane"
# No KWOK nodes: the test's nodes are its own (the scheduler still places pods on them).
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }

step "flavors gpu-a, any-gpu and cpu, a ClusterQueue on gpu-a, and four nodes"
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu-a}
spec:
  nodeLabels: {pool: gpu-a}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: any-gpu}
spec:
  nodeLabels: {accel: nvidia}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: untolerating}
spec: {nodeLabels: {accel: nvidia}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
spec: {nodeLabels: {pool: cpu}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: gpu-a
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 8Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: gpu-local, namespace: $NAMESPACE}
spec: {clusterQueue: gpu-queue}
EOF
# node_yaml NAME LABELS(k: v, ...) [TAINTS]: a Node of the test's.
node_yaml() {
  cat <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $1
  labels: {$2}
spec: {taints: [${3:-}]}
EOF
}
# set_status NAME READY [CPU]: the node's allocatable (CPU cpus, default 8; 32Gi, 4 GPUs, 110
# pods) and its Ready condition (True or False), as a kubelet posts them.
set_status() {
  local now
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  kubectl patch node "$1" --subresource=status --type=merge -p "{\"status\": {
    \"allocatable\": {\"cpu\": \"${3:-8}\", \"memory\": \"32Gi\", \"nvidia.com/gpu\": \"4\", \"pods\": \"110\"},
    \"capacity\": {\"cpu\": \"${3:-8}\", \"memory\": \"32Gi\", \"nvidia.com/gpu\": \"4\", \"pods\": \"110\"},
    \"conditions\": [{\"type\": \"Ready\", \"status\": \"$2\", \"reason\": \"KubeletReady\",
      \"lastHeartbeatTime\": \"$now\", \"lastTransitionTime\": \"$now\"}]}}" > /dev/null
}
# renew_leases: each node's Lease in kube-node-lease renewed now, as a kubelet's heartbeat.
renew_leases() {
  local now name
  now="$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
  for name in "$@"; do
    cat <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: $name, namespace: kube-node-lease}
spec: {holderIdentity: $name, leaseDurationSeconds: 40, renewTime: "$now"}
---
EOF
  done | kubectl apply -f - > /dev/null
}
readonly NODES=(gpu-1 cpu-1 down-1 other-1)
{
  node_yaml gpu-1 "pool: gpu-a, accel: nvidia" "{key: nvidia.com/gpu, value: present, effect: NoSchedule}"
  echo ---
  node_yaml cpu-1 "pool: cpu"; echo ---
  node_yaml down-1 "pool: cpu"; echo ---
  node_yaml other-1 "pool: other"
} | kubectl create -f - > /dev/null
renew_leases "${NODES[@]}"
# The heartbeat, in the background while the test runs (a failed renewal is retried next time).
# The subshell drops the test's traps: its end must not stop the cluster.
# shellcheck disable=SC2016  # $$ is the test's own pid, also in the subshell
( trap - EXIT INT TERM
  while sleep "$LEASE_RENEW_SECONDS" && kill -0 "$$" 2> /dev/null; do
    renew_leases "${NODES[@]}" 2> /dev/null || true
  done ) > /dev/null 2>&1 &
set_status gpu-1 True
set_status cpu-1 True 16
set_status down-1 False
set_status other-1 True

# node_field NAME EXPRESSION: a Python expression over the ledger's node NAME, n, as `get nodes
# -o json` shows it (None when the ledger does not hold it).
node_field() {
  ledger get nodes -o json | python3 -c '
import json, sys
nodes = {n["metadata"]["name"]: n for n in json.load(sys.stdin)["items"]}
n = nodes.get(sys.argv[1])
print(eval(sys.argv[2]))
' "$1" "$2"
}
inventory_complete() {
  [[ "$(ledger get nodes -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["inventoryComplete"])')" == True ]]
}
# node_events [KIND]: the ledger's node events (of KIND), one per line: SEQUENCE KIND NODE
# ACTOR COMPLETE WORKLOADS (namespace/name,...; - for none).
node_events() {
  ledger log -o json | python3 -c '
import json, sys
kinds = {"nodeCapacityChanged", "nodeFailed", "nodeRecovered"}
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] not in kinds or (len(sys.argv) > 1 and e["type"] != sys.argv[1]):
        continue
    body = e["event"]["body"][e["type"]]
    refs = ",".join(w["namespace"] + "/" + w["name"] for w in body.get("workloads", [])) or "-"
    print(e["sequence"], e["type"], body["node"], e["event"].get("actor", ""),
          body.get("inventoryComplete", False), refs)
' "$@"
}
# count_events KIND NODE: how many events of KIND about the ledger's node NODE it holds.
count_events() { node_events "$1" | awk -v n="$2" '$3 == n' | wc -l; }

step "the bridge lists the nodes: each node of a flavor reported once per flavor, the inventory completed"
start_bridge
wait_until "the ledger's inventory is not complete" inventory_complete
for entry in gpu-1/gpu-a gpu-1/any-gpu cpu-1/cpu down-1/cpu; do
  [[ "$(node_field "$entry" 'n is not None')" == True ]] || fail "the ledger holds no node $entry: $(ledger get nodes)"
done
[[ "$(node_field gpu-1/gpu-a 'n["flavor"], sorted(n["capacity"].items()), n["failed"]')" == \
  "('gpu-a', [('cpu', '8'), ('memory', '32Gi'), ('nvidia.com/gpu', '4'), ('pods', '110')], False)" ]] \
  || fail "gpu-1/gpu-a: $(node_field gpu-1/gpu-a n)"
[[ "$(node_field cpu-1/cpu 'n["capacity"]["cpu"], n["failed"]')" == "('16', False)" ]] \
  || fail "cpu-1/cpu: $(node_field cpu-1/cpu n)"
[[ "$(node_field down-1/cpu 'n["failed"]')" == True ]] || fail "down-1/cpu: $(node_field down-1/cpu n)"
# (Read whole first: `grep -q` quits at the first match, and under pipefail the writer's broken
# pipe would make the pipeline false, hiding the match.)
listed=$(ledger get nodes)
grep -q other-1 <<< "$listed" && fail "other-1 matches no flavor but is in the ledger: $listed"
grep -q untolerating <<< "$listed" \
  && fail "gpu-1's taint is not tolerated by flavor untolerating, yet it is reported: $(ledger get nodes)"
node_events > "$dir/first.txt"
echo "  the first report:" >&2
sed 's/^/    /' "$dir/first.txt" >&2
[[ "$(wc -l < "$dir/first.txt")" == 4 ]] || fail "the first report is not 4 node events"
awk '$4 != "admit-k8s" {exit 1}' "$dir/first.txt" || fail "a node event not by the bridge"
[[ "$(awk '$5 == "True"' "$dir/first.txt" | wc -l)" == 1 ]] || fail "not exactly one event completes the inventory"
# One call: the last healthy report carries it (docs/k8s.md, "Node inventory": Completeness).
[[ "$(awk '$2 == "nodeCapacityChanged"' "$dir/first.txt" | tail -n 1 | awk '{print $5}')" == True ]] \
  || fail "the inventory is not completed by the first list's last healthy report"
grep -q "nodeFailed down-1/cpu" "$dir/first.txt" || fail "down-1 (NotReady) is not reported failed"

step "a Job admitted on gpu-a and released; one of its pods bound to gpu-1"
kubectl create -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: on-gpu
  namespace: $NAMESPACE
  labels: {kueue.x-k8s.io/queue-name: gpu-local}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources: {requests: {cpu: 500m, memory: 100Mi}}
      restartPolicy: Never
EOF
job_pods() {
  kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=on-gpu \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName}{"\n"}{end}'
}
two_pods() { [[ "$(job_pods | wc -l)" == 2 ]]; }
wait_until "the Job on-gpu was not released (no pods)" two_pods
# The scheduler places them on gpu-1, the one node of pool gpu-a; one it has not bound yet is
# bound by the test as a scheduler binds (an answer that it is bound already is fine).
pod="$(job_pods | awk 'NR == 1 {print $1}')"
kubectl create --raw "/api/v1/namespaces/$NAMESPACE/pods/$pod/binding" -f - > /dev/null 2>&1 <<EOF || true
{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "$pod"},
 "target": {"apiVersion": "v1", "kind": "Node", "name": "gpu-1"}}
EOF
bound() { [[ "$(kubectl get pod "$pod" -n "$NAMESPACE" -o jsonpath='{.spec.nodeName}')" == gpu-1 ]]; }
wait_until "pod $pod is not bound to gpu-1" bound

step "its pods Running and Ready (posted by hand: no kubelet): pods ready reported once, the Workload PodsReady"
for p in $(job_pods | awk '{print $1}'); do
  kubectl patch pod "$p" -n "$NAMESPACE" --subresource=status --type=merge -p '{"status": {
    "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}' > /dev/null
done
# ready_reports: the ledger's `pods ready` reports of job-on-gpu, one per line: ACTOR TOKEN.
ready_reports() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] != "podsReported":
        continue
    b = e["event"]["body"]["podsReported"]
    if b["workload"]["name"] == "job-on-gpu" and b.get("report") == "ready":
        print(e["event"].get("actor", ""), b["fencingToken"])'
}
reported_ready() { [[ "$(ready_reports | wc -l)" == 1 ]]; }
wait_until "pods ready of job-on-gpu is not in the ledger" reported_ready
token="$(kubectl get job on-gpu -n "$NAMESPACE" -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}')"
[[ "$(ready_reports)" == "$PRINCIPAL $token" ]] || fail "pods ready: $(ready_reports), not by $PRINCIPAL with $token"
pods_ready_condition() {
  kubectl get workload job-on-gpu -n "$NAMESPACE" \
    -o jsonpath='{.status.conditions[?(@.type=="PodsReady")].status}/{.status.conditions[?(@.type=="PodsReady")].reason}'
}
workload_ready() { [[ "$(pods_ready_condition)" == True/Started ]]; }
wait_until "the Workload job-on-gpu does not show PodsReady True (Started): $(pods_ready_condition)" workload_ready

step "gpu-1 NotReady: both of its flavors fail, naming the Job's workload; the ledger evicts it"
set_status gpu-1 False
gpu_failed() { [[ "$(count_events nodeFailed gpu-1/gpu-a)" == 1 && "$(count_events nodeFailed gpu-1/any-gpu)" == 1 ]]; }
wait_until "gpu-1's failure is not in the ledger" gpu_failed
node_events nodeFailed | grep " gpu-1/" > "$dir/gpu-failed.txt"
awk '$6 != "default/job-on-gpu" {exit 1}' "$dir/gpu-failed.txt" \
  || fail "gpu-1's failure does not name default/job-on-gpu: $(cat "$dir/gpu-failed.txt")"
evicted() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] != "evictionStarted":
        continue
    b = e["event"]["body"]["evictionStarted"]
    if b["workload"]["name"] == "job-on-gpu" and b.get("reason") == "NodeFailure":
        sys.exit(0)
sys.exit(1)'
}
wait_until "the ledger did not evict job-on-gpu for the node failure" evicted
workload_not_ready() { [[ "$(pods_ready_condition)" == False/WaitForStart ]]; }
wait_until "the evicted Workload job-on-gpu does not show PodsReady False (WaitForStart)" workload_not_ready

step "gpu-1 Ready again: both recover"
set_status gpu-1 True
gpu_recovered() { [[ "$(count_events nodeRecovered gpu-1/gpu-a)" == 1 && "$(count_events nodeRecovered gpu-1/any-gpu)" == 1 ]]; }
wait_until "gpu-1's recovery is not in the ledger" gpu_recovered
[[ "$(node_field gpu-1/gpu-a 'n["failed"]')" == False ]] || fail "gpu-1/gpu-a is still failed"

step "cpu-1 cordoned: failed; uncordoned: recovered; its allocatable changed: reported again"
kubectl cordon cpu-1 > /dev/null
cpu_failed() { [[ "$(count_events nodeFailed cpu-1/cpu)" == 1 ]]; }
wait_until "cpu-1's cordon is not in the ledger" cpu_failed
kubectl uncordon cpu-1 > /dev/null
cpu_recovered() { [[ "$(count_events nodeRecovered cpu-1/cpu)" == 1 ]]; }
wait_until "cpu-1's uncordon is not in the ledger" cpu_recovered
set_status cpu-1 True 12
cpu_shrunk() { [[ "$(node_field cpu-1/cpu 'n["capacity"]["cpu"]')" == 12 ]]; }
wait_until "cpu-1's new allocatable is not in the ledger" cpu_shrunk
[[ "$(count_events nodeCapacityChanged cpu-1/cpu)" == 2 ]] || fail "cpu-1's capacity change is not one nodeCapacityChanged"

step "flavor cpu now selects pool=other: cpu-1 leaves it (failed), other-1 joins it"
kubectl patch resourceflavor cpu --type=merge -p '{"spec": {"nodeLabels": {"pool": "other"}}}' > /dev/null
moved() {
  [[ "$(node_field other-1/cpu 'n is not None and not n["failed"]')" == True &&
    "$(node_field cpu-1/cpu 'n["failed"]')" == True ]]
}
wait_until "the flavor's new nodeLabels are not in the ledger's nodes" moved
[[ "$(node_field down-1/cpu 'n["failed"]')" == True ]] || fail "down-1/cpu recovered"

step "the bridge restarted: no node event"
before="$(node_events | wc -l)"
kill -TERM "$bridge_pid"
wait "$bridge_pid" || true
bridge_pid=""
start_bridge
in_step() { grep -q "the ledger's nodes are in step with the cluster's" "$dir/bridge-$bridge_runs.log"; }
wait_until "the restarted bridge did not compare the inventory" in_step
sleep 2
[[ "$(node_events | wc -l)" == "$before" ]] \
  || fail "the restarted bridge recorded node events: $(node_events | tail -n +$((before + 1)))"

[[ "$(ready_reports | wc -l)" == 1 ]] || fail "pods ready reported more than once: $(ready_reports)"

step "gpu-1 deleted: both of its flavors fail; other-1 deleted: fails too (it joined cpu)"
kubectl delete node gpu-1 > /dev/null
gpu_gone() { [[ "$(count_events nodeFailed gpu-1/gpu-a)" == 2 && "$(count_events nodeFailed gpu-1/any-gpu)" == 2 ]]; }
wait_until "gpu-1's deletion is not in the ledger" gpu_gone
kubectl delete node other-1 > /dev/null
other_gone() { [[ "$(count_events nodeFailed other-1/cpu)" == 1 ]]; }
wait_until "other-1's deletion is not in the ledger" other_gone
echo "  $(node_events | wc -l) node events, all by the bridge:" >&2
node_events | sed 's/^/    /' >&2
node_events | awk '$4 != "admit-k8s" {exit 1}' || fail "a node event not by the bridge"

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: nodes of flavors reported with their allocatable, one of none not; the inventory completed once, by the first list's last healthy report; a tainted node kept out of the flavor that does not tolerate it; pods ready reported once, PodsReady shown; NotReady, cordoned and deleted nodes failed, naming the workload of the pod bound to one, which was evicted; recovered; allocatable and flavor changes reported; a restarted bridge recorded nothing"
