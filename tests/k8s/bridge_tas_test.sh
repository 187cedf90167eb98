#!/usr/bin/env bash
# Topology-aware scheduling through admitd and the bridge (docs/tas.md) on the local cluster's
# KWOK nodes of ops/k8s/nodes/tas-16.yaml: 2 blocks x 2 racks x 4 hosts (labels
# topology.admission-ledger.io/block, topology.admission-ledger.io/rack,
# kubernetes.io/hostname), 8 H100 GPUs each, tainted nvidia.com/gpu:
# - a Topology of those three levels, a ResourceFlavor naming it (topologyName), a ClusterQueue
#   of 128 GPUs: the Topology is recorded, the ledger's nodes carry their labels;
# - A, 4 pods x 8 GPUs requiring a rack (podset-required-topology): released with the gate
#   kueue.x-k8s.io/topology, each pod given a host's node selector and ungated by the bridge, all
#   four on the nodes of one rack (spec.nodeName), the Workload's status showing the topology
#   assignment (v1beta2 slices);
# - B, 6 x 8 GPUs preferring a block: one block fits (the one without A), all there;
# - C, 5 x 8 GPUs = 40 GPUs requiring a block (a rack holds only 32): pending while 48 GPUs are
#   free (4 hosts in one block, 2 in the other), its message naming the topology;
# - A deleted (it ends): C admitted, all in A's block;
# - D, 5 x 8 GPUs preferring a block: no block has 5 free hosts (3 and 2), so it spreads over
#   both;
# - `admitctl replay --verify` of the ledger passes.
#   tests/k8s/bridge_tas_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries, KWOK or admit-k8s are not
# built. K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-tas-bridge-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=default
readonly TOPOLOGY=gpu-topology
readonly BLOCK=topology.admission-ledger.io/block
readonly RACK=topology.admission-ledger.io/rack

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "the cluster with 16 KWOK GPU nodes in 2 blocks x 2 racks x 4 hosts, and the bridge"
kubeconfig="$("$cluster_sh" start --control-plane-only --nodes "$top/ops/k8s/nodes/tas-16.yaml" \
  "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
start_bridge

step "a Topology, a ResourceFlavor naming it, a ClusterQueue of 128 GPUs"
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata:
  name: $TOPOLOGY
spec:
  levels:
  - nodeLabel: $BLOCK
  - nodeLabel: $RACK
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: h100
spec:
  nodeLabels:
    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3
  topologyName: $TOPOLOGY
  tolerations:
  - key: nvidia.com/gpu
    operator: Exists
    effect: NoSchedule
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: gpus
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - name: nvidia.com/gpu
        nominalQuota: 128
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: gpus
  namespace: $NAMESPACE
spec:
  clusterQueue: gpus
EOF
topology_event() {
  kubectl get events -A --field-selector "involvedObject.kind=Topology,involvedObject.name=$TOPOLOGY" \
    -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}'
}
topology_recorded() {
  ! topology_event | grep -q '^LedgerRefused' ||
    fail "the ledger refused the Topology $TOPOLOGY (its reader takes kind Topology from engine v26): $(topology_event)"
  topology_event | grep -q '^Recorded'
}
wait_until "the Topology $TOPOLOGY is not recorded (the ledger's reader takes kind Topology from engine v26): $(topology_event)" \
  topology_recorded
# labelled_nodes: the ledger's nodes of flavor h100 that show their rack label.
labelled_nodes() {
  ledger get nodes -o json | python3 -c '
import json, sys
print(sum(1 for n in json.load(sys.stdin)["items"]
          if n["flavor"] == "h100" and not n["failed"] and (n.get("labels") or {}).get(sys.argv[1])))' "$RACK"
}
all_labelled() { [[ "$(labelled_nodes)" == 16 ]]; }
wait_until "the ledger does not show the 16 nodes of h100 with their labels: $(labelled_nodes)" all_labelled

# job NAME PODS ANNOTATION LEVEL: an Indexed Job of PODS pods of 8 GPUs each, asking for the
# topology LEVEL with the pod set annotation ANNOTATION (required or preferred), running until
# deleted.
job() {
  kubectl create -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NAMESPACE
  labels:
    kueue.x-k8s.io/queue-name: gpus
spec:
  parallelism: $2
  completions: $2
  completionMode: Indexed
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-$3-topology: $4
    spec:
      restartPolicy: Never
      containers:
      - name: train
        image: registry.example/train:1
        resources:
          requests: {nvidia.com/gpu: "8"}
          limits: {nvidia.com/gpu: "8"}
EOF
}
# placed JOB: one line per pod of JOB: NODE BLOCK RACK GATED, the pod's node (or -) and the
# node's block and rack (from the tas-16 names: h100-N is in rack (N-1)/4+1, block (N-1)/8+1).
placed() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    node = p["spec"].get("nodeName", "")
    gated = any(g["name"] == "kueue.x-k8s.io/topology" for g in p["spec"].get("schedulingGates", []))
    if p["status"].get("phase") in ("Succeeded", "Failed"):
        continue
    if not node:
        print("-", "-", "-", gated)
        continue
    n = int(node.split("-")[1])
    print(node, "b%d" % ((n - 1) // 8 + 1), "r%d" % ((n - 1) // 4 + 1), gated)'
}
# running JOB PODS: PODS pods of JOB are bound to nodes, none gated.
running() {
  local lines
  lines="$(placed "$1")"
  [[ "$(grep -c '^h100-.* False$' <<< "$lines")" == "$2" && "$(wc -l <<< "$lines")" == "$2" ]]
}
distinct() { placed "$1" | awk -v c="$2" '{print $c}' | sort -u | wc -l; }
ledger_status() {
  ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["metadata"]["name"] == sys.argv[1]:
        s = w["status"]
        print(s["phase"], json.dumps(s.get("pendingReason", {}).get("message", "")),
              json.dumps([c.get("message", "") for c in s.get("conditions", []) if c["type"] == "QuotaReserved"]))' "$1"
}

step "A: 4 x 8 GPUs requiring a rack, on the 4 hosts of one rack"
job tas-a 4 required "$RACK"
wait_until "Job tas-a's pods are not all placed: $(placed tas-a) (ledger: $(ledger_status job-tas-a))" running tas-a 4
[[ "$(distinct tas-a 3)" == 1 && "$(distinct tas-a 1)" == 4 ]] || fail "Job tas-a is not on 4 hosts of one rack: $(placed tas-a)"
rack_a="$(placed tas-a | awk '{print $3}' | head -1)"
block_a="$(placed tas-a | awk '{print $2}' | head -1)"
gate="$(kubectl get job tas-a -n "$NAMESPACE" -o jsonpath='{.spec.template.spec.schedulingGates[*].name}')"
[[ "$gate" == kueue.x-k8s.io/topology ]] || fail "Job tas-a's template has the gates '$gate'"
levels="$(kubectl get workload job-tas-a -n "$NAMESPACE" \
  -o jsonpath='{.status.admission.podSetAssignments[0].topologyAssignment.levels}')"
[[ "$levels" == *kubernetes.io/hostname* ]] || fail "the Workload job-tas-a shows no topology assignment: '$levels'"
slices="$(kubectl get workload job-tas-a -n "$NAMESPACE" \
  -o jsonpath='{.status.admission.podSetAssignments[0].topologyAssignment.slices[0].domainCount}')"
[[ "$slices" == 4 ]] || fail "the Workload job-tas-a's topology assignment is not one slice of 4 domains: '$slices'"
echo "  tas-a on rack $rack_a (block $block_a)" >&2

step "B: 6 x 8 GPUs preferring a block: the other block fits, all there"
job tas-b 6 preferred "$BLOCK"
wait_until "Job tas-b's pods are not all placed: $(placed tas-b) (ledger: $(ledger_status job-tas-b))" running tas-b 6
[[ "$(distinct tas-b 2)" == 1 ]] || fail "Job tas-b spreads although a block fits: $(placed tas-b)"
[[ "$(placed tas-b | awk '{print $2}' | head -1)" != "$block_a" ]] || fail "Job tas-b is in A's block: $(placed tas-b)"

step "C: 40 GPUs requiring a block, pending with 48 GPUs free (4 hosts + 2), the topology named"
job tas-c 5 required "$BLOCK"
c_pending() { [[ "$(ledger_status job-tas-c)" == Pending* && "$(ledger_status job-tas-c)" == *$TOPOLOGY* ]]; }
wait_until "job-tas-c is not pending with a message naming $TOPOLOGY: $(ledger_status job-tas-c)" c_pending
sleep 3
[[ -z "$(placed tas-c)" ]] || fail "Job tas-c has pods although pending: $(placed tas-c)"
message="$(kubectl get workload job-tas-c -n "$NAMESPACE" \
  -o jsonpath='{.status.conditions[?(@.type=="QuotaReserved")].message}')"
[[ "$message" == *$TOPOLOGY* ]] || fail "the Workload job-tas-c's QuotaReserved message does not name $TOPOLOGY: $message"
echo "  pending: $message" >&2

step "A ends (deleted): C admitted, in A's block"
kubectl delete job tas-a -n "$NAMESPACE" --wait=false > /dev/null
wait_until "Job tas-c's pods are not all placed: $(placed tas-c) (ledger: $(ledger_status job-tas-c))" running tas-c 5
[[ "$(distinct tas-c 2)" == 1 && "$(placed tas-c | awk '{print $2}' | head -1)" == "$block_a" ]] \
  || fail "Job tas-c is not in block $block_a alone: $(placed tas-c)"

step "D: 5 x 8 GPUs preferring a block: no block has 5 free hosts (3 and 2), it spreads"
job tas-d 5 preferred "$BLOCK"
wait_until "Job tas-d's pods are not all placed: $(placed tas-d) (ledger: $(ledger_status job-tas-d))" running tas-d 5
[[ "$(distinct tas-d 2)" == 2 ]] || fail "Job tas-d is not spread over both blocks: $(placed tas-d)"

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: a rack's Job on one rack, a block-preferring Job in one block, a 40-GPU block-requiring Job pending (topology named) until A ended, then in A's block; a Job spread when no block fits; replay --verify" >&2
