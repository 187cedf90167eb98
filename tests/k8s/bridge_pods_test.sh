#!/usr/bin/env bash
# admit-k8s with pods that run (docs/k8s.md, "Jobs" step 8 and "Node inventory"): the local
# cluster's KWOK nodes (ops/k8s/nodes/default.yaml: 2 CPU nodes, 4 GPU nodes tainted
# nvidia.com/gpu), kube-scheduler, admitd on TLS and the bridge's certificate given the
# `bridge` role alone:
# - the quick-start setup of ops/k8s/examples (default-flavor, no nodeLabels, no tolerations):
#   the bridge reports cpu-1 and cpu-2 under default-flavor with their allocatable (31 cpu,
#   120Gi), no GPU node (their taint is not tolerated), and completes the inventory;
# - the quick-start Job (3 pods of 1 cpu) with a simulated runtime of 8 s: admitted, released,
#   its pods placed by the scheduler on the CPU nodes and made Running and Ready by KWOK; the
#   bridge reports `pods ready` with the admission's token, once, and the Workload shows
#   PodsReady True (Started); the pods Succeed, the Job completes, `finished` is reported and
#   the ledger finishes the workload; the Workload keeps PodsReady True. The token's reports
#   are released, ready, finished, each once, all by the bridge;
# - `admitctl replay --verify` of the ledger passes.
#   tests/k8s/bridge_pods_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries, KWOK or admit-k8s are not
# built. K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-pods-bridge-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=default
readonly RUNTIME=8s

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "the cluster with its KWOK nodes, and the bridge"
kubeconfig="$("$cluster_sh" start --control-plane-only "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
start_bridge

step "the quick-start setup: cpu-1 and cpu-2 under default-flavor, no GPU node, the inventory complete"
kubectl apply -f "$top/ops/k8s/examples/quick-start-setup.yaml" > /dev/null
# nodes: the ledger's nodes, NAME FLAVOR CPU MEMORY FAILED per line, and a last line
# `complete True|False`.
nodes() {
  ledger get nodes -o json | python3 -c '
import json, sys
d = json.load(sys.stdin)
for n in d["items"]:
    print(n["metadata"]["name"], n["flavor"], n["capacity"].get("cpu"), n["capacity"].get("memory"),
          n["failed"])
print("complete", d["inventoryComplete"])'
}
expected="cpu-1/default-flavor default-flavor 31 120Gi False
cpu-2/default-flavor default-flavor 31 120Gi False
complete True"
inventory() { [[ "$(nodes)" == "$expected" ]]; }
wait_until "the ledger's nodes are not the CPU nodes under default-flavor: $(nodes)" inventory

step "the quick-start Job, $RUNTIME of simulated runtime: released, its pods ready, finished"
sed "s/simulated-runtime: 30s/simulated-runtime: $RUNTIME/" "$top/ops/k8s/examples/quick-start-job.yaml" \
  > "$dir/job.yaml"
grep -q "simulated-runtime: $RUNTIME" "$dir/job.yaml" || fail "the example Job has no simulated runtime to shorten"
job="$(kubectl create -f "$dir/job.yaml" -o jsonpath='{.metadata.name}')"
readonly job workload="job-$job"
# reports: the ledger's pod reports of the Job's workload, one per line: REPORT TOKEN ACTOR.
reports() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] != "podsReported":
        continue
    b = e["event"]["body"]["podsReported"]
    if b["workload"]["name"] == sys.argv[1]:
        print(b.get("report", "released"), b["fencingToken"], e["event"].get("actor", ""))' "$workload"
}
pods_ready_condition() {
  kubectl get workload "$workload" -n "$NAMESPACE" \
    -o jsonpath='{.status.conditions[?(@.type=="PodsReady")].status}/{.status.conditions[?(@.type=="PodsReady")].reason}'
}
reported_ready() { reports | grep -q '^ready '; }
wait_until "pods ready of $workload is not in the ledger: $(reports)" reported_ready
on_cpu_nodes() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$job" \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -v '^cpu-[12]$' || true
}
[[ -z "$(on_cpu_nodes)" ]] || fail "pods of $job ran elsewhere than cpu-1 and cpu-2: $(on_cpu_nodes)"
workload_ready() { [[ "$(pods_ready_condition)" == True/Started ]]; }
wait_until "the Workload $workload does not show PodsReady True (Started): $(pods_ready_condition)" workload_ready
finished() {
  [[ "$(ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["metadata"]["name"] == sys.argv[1]:
        print(w["status"]["phase"])' "$workload")" == Finished ]]
}
wait_until "the ledger did not finish $workload after its pods succeeded" finished
token="$(kubectl get job "$job" -n "$NAMESPACE" -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}')"
[[ -n "$token" ]] || fail "Job $job has no fencing token"
want="released $token $PRINCIPAL
ready $token $PRINCIPAL
finished $token $PRINCIPAL"
[[ "$(reports)" == "$want" ]] || fail "the pod reports of $workload are
$(reports)
not
$want"
workload_still_ready() { [[ "$(pods_ready_condition)" == True/Started ]]; }
sleep 2
workload_still_ready || fail "the finished Workload's PodsReady changed: $(pods_ready_condition)"

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: the CPU nodes reported under default-flavor, the GPU nodes not; the quick-start Job's pods ran on KWOK nodes: released, ready and finished with its token, once each; PodsReady True" >&2
