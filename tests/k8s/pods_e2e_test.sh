#!/usr/bin/env bash
# Pods that run under the ledger: the whole local cluster of `ops/k8s/cluster.sh start` (control
# plane, kube-scheduler, KWOK GPU nodes of ops/k8s/nodes/default.yaml, admitd, the bridge):
# - the bridge reports the nodes that match a ResourceFlavor (with the flavor and allocatable)
#   and completes the inventory; the CPU-only flavor's nodes carry no GPU;
# - Kueue's quick start runs to the end with the repository's own examples: the Job is held
#   suspended, admitted, released with the ledger's token, its pods are scheduled onto nodes
#   whose labels match the admitted flavor, run and finish, and the Job completes; the ledger
#   records ready and finished with the Job's token, and `billing report` counts core-seconds
#   equal to the pods' run time within the scheduling latency (computed from the pods' own
#   timestamps);
# - two GPU flavors on different nodes: a Job admitted to one never has a pod on the other's
#   nodes; billing's GPU-seconds match the pods' run time;
# - a node set NotReady under a running Job: the ledger records the failure naming the Job's
#   workload, evicts it (NodeFailure), the quota is released only after the pods are reported
#   gone (terminated), and the Job is admitted again and runs on another node; the node back
#   Ready recovers in the ledger; a node deleted under a running Job likewise;
# - `replay --verify` of the ledger passes.
#   tests/k8s/pods_e2e_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-pods-e2e-test "$@"

readonly NAMESPACE=default
readonly examples_dir="$top/ops/k8s/examples"
readonly cluster="$dir/cluster"
readonly RUNTIME_ANNOTATION=admission-ledger.io/simulated-runtime
readonly H100=NVIDIA-H100-80GB-HBM3
readonly A100=NVIDIA-A100-SXM4-40GB
# How far billing's used time may exceed the pods' own run time, per pod: from the bridge's
# released report (before the Job is unsuspended) to the pod's start (the Job controller, the
# scheduler and KWOK), and from the pod's end to the bridge's finished report.
readonly BILLING_SLACK_SECONDS_PER_POD=20

step "cluster.sh start: control plane, scheduler, KWOK nodes, admitd and the bridge"
kubeconfig="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
ledger() { "$admitctl" --connect "unix:$cluster/admitd.sock" "$@"; }

step "definitions: a CPU flavor and two GPU flavors on their nodes"
# (Retried: right after start, under a loaded machine, the API server or the bridge's webhooks
# may refuse a first call for a moment.)
applied() { kubectl apply -f "$1" > "$dir/apply.out" 2>&1 || { cat "$dir/apply.out" >&2; false; }; }
wait_until "kubectl apply of the quick start's setup" applied "$examples_dir/quick-start-setup.yaml"
wait_until "kubectl apply of the GPU flavors" applied "$examples_dir/gpu-flavors.yaml"

# nodes_json: the ledger's nodes (admitctl get nodes -o json).
nodes_json() { ledger get nodes -o json; }
# node_count FLAVOR: how many healthy nodes of FLAVOR the ledger holds.
node_count() {
  nodes_json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(1 for n in items if n["flavor"] == sys.argv[1] and not n["failed"]))' "$1"
}
# has_nodes FLAVOR N: the ledger holds N healthy nodes of FLAVOR (polled: evaluated each time).
has_nodes() { [[ "$(node_count "$1")" == "$2" ]]; }
wait_until "the ledger holds the two CPU nodes" has_nodes default-flavor 2
wait_until "the ledger holds the two H100 nodes" has_nodes h100 2
wait_until "the ledger holds the two A100 nodes" has_nodes a100 2
nodes_json | python3 -c '
import json, sys
for n in json.load(sys.stdin)["items"]:
    gpus = n["capacity"].get("nvidia.com/gpu")
    if n["flavor"] == "default-flavor" and gpus:
        sys.exit("a CPU node reports GPUs: %s" % n)
    if n["flavor"] in ("h100", "a100") and gpus != "8":
        sys.exit("a GPU node does not report its 8 GPUs: %s" % n)' || fail "node capacity"
# events TYPE: the bodies of the ledger's events of TYPE, one JSON object per line.
events() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == sys.argv[1]:
        print(json.dumps(e["event"]["body"][sys.argv[1]]))' "$1"
}
# (Read whole, not piped into `grep -q`: under pipefail a writer cut off by grep's early exit
# makes the pipeline fail.)
inventory_completed() { [[ "$(events nodeCapacityChanged)" == *'"inventoryComplete": true'* ]]; }
wait_until "a node report completes the inventory" inventory_completed
# reports TOKEN: the kinds of the pods reports with TOKEN (released when unset), in order.
reports() {
  events podsReported | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r.get("fencingToken") == sys.argv[1]:
        print(r.get("report", "released"))' "$1"
}

# job_condition JOB: the Job's Complete or Failed condition type, if true.
job_condition() {
  kubectl get job "$1" -n "$NAMESPACE" \
    -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}'
}
# pods_of JOB: "POD NODE PHASE STARTED FINISHED" per pod (container start and finish times).
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    t = (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated", {})
    print(p["metadata"]["name"], p["spec"].get("nodeName", "-"), p["status"]["phase"],
          t.get("startedAt", "-"), t.get("finishedAt", "-"))'
}
# node_label NODE KEY
node_label() { kubectl get node "$1" -o jsonpath="{.metadata.labels['${2//./\\.}']}"; }
# seconds_run JOB: the sum over its pods of finishedAt - startedAt.
seconds_run() {
  pods_of "$1" | python3 -c '
import sys
from datetime import datetime
total = 0
for line in sys.stdin:
    name, node, phase, start, end = line.split()
    if start == "-" or end == "-":
        sys.exit("pod %s has no start or end" % name)
    f = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
    total += (f(end) - f(start)).total_seconds()
print(int(total))'
}
# billed FLAVOR RESOURCE NAMESPACE: billing's used resource-seconds (integer part).
billed() {
  ledger billing report --by namespace --by flavor -o json | python3 -c '
import json, sys
flavor, resource, ns = sys.argv[1:4]
total = 0.0
for row in json.load(sys.stdin)["rows"]:
    if row.get("flavor") == flavor and row.get("resource") == resource and \
       row.get("namespace") == ns:
        total += float(row["used"])
print(int(total))' "$1" "$2" "$3"
}
# workload_of JOB: the ledger workload's name (the Job's Workload object).
workload_of() { kubectl get workloads -n "$NAMESPACE" -l "kueue.x-k8s.io/job-uid=$(
  kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.metadata.uid}')" \
  -o jsonpath='{.items[0].metadata.name}'; }

step "the quick start runs to the end"
# create_job FILE RUNTIME [PARALLELISM]: creates the example Job with that simulated runtime
# ("" for none: its pods run until deleted); prints its name.
create_job() {
  local text created
  text="$(<"$1")"
  if [[ -n "$2" ]]; then
    text="$(sed "s/simulated-runtime: .*/simulated-runtime: $2/" <<< "$text")"
  else
    text="$(sed '/simulated-runtime:/d' <<< "$text")"
  fi
  if [[ -n "${3:-}" ]]; then
    text="$(sed -e "s/parallelism: .*/parallelism: $3/" -e "s/completions: .*/completions: $3/" \
      <<< "$text")"
  fi
  created="$(kubectl create -f - -o name <<< "$text")"
  echo "${created#job.batch/}"
}
job_complete() { [[ "$(job_condition "$1")" == *Complete* ]]; }
job="$(create_job "$examples_dir/quick-start-job.yaml" 5s)"
wait_until "the quick-start Job $job completes" job_complete "$job"
pods_of "$job" > "$dir/quick-pods.txt"
cat "$dir/quick-pods.txt" >&2
[[ "$(wc -l < "$dir/quick-pods.txt")" == 3 ]] || fail "not 3 pods: $(cat "$dir/quick-pods.txt")"
while read -r pod node phase _; do
  [[ "$phase" == Succeeded ]] || fail "pod $pod is $phase"
  [[ "$(node_label "$node" node.kubernetes.io/instance-type)" == n2-standard-32 ]] \
    || fail "pod $pod ran on $node, not a node of default-flavor"
done < "$dir/quick-pods.txt"
token="$(kubectl get job "$job" -n "$NAMESPACE" \
  -o jsonpath="{.metadata.annotations['admission-ledger\.io/fencing-token']}")"
[[ -n "$token" ]] || fail "the Job carries no fencing token"
# (grep reads all its input: with -q it may close the pipe early, and pipefail would fail it.)
has_report() { reports "$1" | grep -x "$2" > /dev/null; }
wait_until "the ledger records finished with the Job's token" has_report "$token" finished
reports "$token" | tr '\n' ' ' >&2; echo >&2
has_report "$token" ready || fail "no ready report with $token"
ran="$(seconds_run "$job")"
cores="$(billed default-flavor cpu "$NAMESPACE")"
echo "quick start: pods ran ${ran} core-seconds; billing counts ${cores}" >&2
(( cores >= ran && cores <= ran + 3 * BILLING_SLACK_SECONDS_PER_POD )) \
  || fail "billing's ${cores} core-seconds is not the pods' ${ran} within the slack"

# pods_on_flavor JOB FLAVOR_PRODUCT: fails unless every pod of JOB ran on a node of that GPU.
pods_on_product() {
  local pod node phase
  while read -r pod node phase _; do
    [[ "$(node_label "$node" nvidia.com/gpu.product)" == "$2" ]] \
      || fail "pod $pod of $1 ran on $node ($(node_label "$node" nvidia.com/gpu.product)), not $2"
  done < <(pods_of "$1")
}
# product_of JOB: the GPU product of the flavor the ledger admitted the Job to (the bridge puts
# the flavor's node labels into the pod template's nodeSelector when it releases the Job).
product_of() {
  kubectl get job "$1" -n "$NAMESPACE" \
    -o jsonpath='{.spec.template.spec.nodeSelector.nvidia\.com/gpu\.product}'
}

step "two GPU flavors: each Job's pods only on its flavor's nodes"
gpu_cores_before="$(billed h100 nvidia.com/gpu "$NAMESPACE")"
first="$(create_job "$examples_dir/gpu-job.yaml" 8s)"
second="$(create_job "$examples_dir/gpu-job.yaml" 8s)"
wait_until "Job $first completes" job_complete "$first"
wait_until "Job $second completes" job_complete "$second"
p1="$(product_of "$first")" p2="$(product_of "$second")"
echo "$first: $p1, $second: $p2" >&2
[[ "$p1 $p2" == "$H100 $A100" || "$p1 $p2" == "$A100 $H100" ]] \
  || fail "the two Jobs were not admitted one to each GPU flavor: '$p1', '$p2'"
pods_on_product "$first" "$p1"
pods_on_product "$second" "$p2"
h100_job="$first"; [[ "$p1" == "$H100" ]] || h100_job="$second"
ran="$(seconds_run "$h100_job")"
gpus=$(( $(billed h100 nvidia.com/gpu "$NAMESPACE") - gpu_cores_before ))
echo "H100 Job: pods ran ${ran} s x 8 GPUs; billing counts ${gpus} GPU-seconds" >&2
(( gpus >= 8 * ran && gpus <= 8 * (ran + 2 * BILLING_SLACK_SECONDS_PER_POD) )) \
  || fail "billing's ${gpus} GPU-seconds is not 8 x the pods' ${ran} s within the slack"

# running_on JOB: the node of the Job's one Running pod (empty when none runs).
running_on() { pods_of "$1" | awk '$3 == "Running" {print $2; exit}'; }
# failed_names_workload NODE JOB: a nodeFailed report of NODE names the Job's workload.
failed_names_workload() {
  events nodeFailed | python3 -c '
import json, sys
for line in sys.stdin:
    f = json.loads(line)
    if f["node"].split("/")[0] == sys.argv[1] and \
       any(w.get("name") == sys.argv[2] for w in f.get("workloads", [])):
        sys.exit(0)
sys.exit(1)' "$1" "$(workload_of "$2")"
}
running_elsewhere() { local n; n="$(running_on "$1")"; [[ -n "$n" && "$n" != "$2" ]]; }

step "a node set NotReady under a running Job"
long="$(create_job "$examples_dir/gpu-job.yaml" "" 1)"
for _ in $(seq 200); do [[ -n "$(running_on "$long")" ]] && break; sleep 0.5; done
lost="$(running_on "$long")"
[[ -n "$lost" ]] || fail "Job $long has no Running pod: $(pods_of "$long")"
echo "Job $long runs on $lost; KWOK stops playing its kubelet and the node goes NotReady" >&2
kubectl annotate node "$lost" kwok.x-k8s.io/node- > /dev/null
kubectl patch node "$lost" --subresource=status --type=strategic -p \
  '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletStopped","message":"the test stopped it"}]}}' \
  > /dev/null
wait_until "the ledger records $lost failed, naming $long's workload" \
  failed_names_workload "$lost" "$long"
# The Job is suspended, its pods go (KWOK deletes them at once here; on a real dead node only
# when Kubernetes gives up on them), the bridge reports them terminated, and only then is the
# quota released: the ledger's order says so.
wait_until "Job $long is admitted again and runs on another node" running_elsewhere "$long" "$lost"
pods_on_product "$long" "$(product_of "$long")"
ledger log -o json > "$dir/log.json"
python3 - "$dir/log.json" "$(workload_of "$long")" "$lost" <<'PY' || fail "the ledger's order"
import json, sys
path, name, node = sys.argv[1:4]
order = []
for line in open(path):
    e = json.loads(line)
    body = e["event"]["body"][e["type"]]
    ref = body.get("workload", {})
    if e["type"] == "nodeFailed" and body["node"].split("/")[0] == node and \
            any(w.get("name") == name for w in body.get("workloads", [])):
        order.append("nodeFailed")
    elif ref.get("name") == name and e["type"] == "evictionStarted":
        order.append("evicted:" + body.get("reason", ""))
    elif ref.get("name") == name and e["type"] == "podsReported" and \
            body.get("report") == "terminated":
        order.append("terminated")
    elif ref.get("name") == name and e["type"] == "quotaReleased":
        order.append("released")
print("ledger order:", " ".join(order), file=sys.stderr)
i = order.index("nodeFailed")
rest = order[i:]
assert "evicted:NodeFailure" in rest, "no NodeFailure eviction after the failure"
assert rest.index("terminated") < rest.index("released"), "quota released before terminated"
PY

step "the node back Ready: capacity returns"
kubectl annotate node "$lost" kwok.x-k8s.io/node=fake > /dev/null
wait_until "the ledger holds the two H100 nodes healthy ($(node_count h100) now)" has_nodes h100 2
wait_until "and the two A100 nodes" has_nodes a100 2

step "a node deleted under a running Job"
gone="$(running_on "$long")"
kubectl get node "$gone" -o yaml > "$dir/deleted-node.yaml"
kubectl delete node "$gone" --wait=false > /dev/null
wait_until "the ledger records $gone failed, naming $long's workload" \
  failed_names_workload "$gone" "$long"
wait_until "Job $long runs again on another node" running_elsewhere "$long" "$gone"
kubectl delete job "$long" -n "$NAMESPACE" > /dev/null

step "replay --verify"
"$cluster_sh" stop "$cluster"
"$admitctl" --ledger "$cluster/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify: $(cat "$dir/replay.out")"
echo "PASS" >&2
