#!/usr/bin/env bash
# Load (issue 33): 200 Jobs of mixed sizes and priorities from three tenants on the 20 KWOK GPU
# nodes of ops/k8s/nodes/load-20.yaml (12 H100 and 8 A100 nodes of 8 GPUs), under admitd and
# the bridge of `cluster.sh start`, run to completion. tests/k8s/pods_load.py writes the
# definitions (flavors h100 and a100, one ClusterQueue per tenant namespace in one cohort whose
# nominal GPU quotas add up to the nodes' GPUs, with a borrowing and a lending limit,
# preemption withinClusterQueue LowerPriority and reclaimWithinCohort Any, three
# WorkloadPriorityClasses named by the kueue.x-k8s.io/priority-class label, LocalQueues) and
# the Jobs (seeded: 1 to 4 pods of 1, 2, 4 or 8 GPUs, simulated runtimes of 2 to 10 s, some
# pinned to a GPU model by nodeSelector), created in bursts. A watch records every pod's states
# (deleted ones too). Then, from the ledger and the cluster (pods_load.py check):
# - every Job is Complete;
# - folding the ledger's QuotaReserved and QuotaReleased, after every event no ClusterQueue
#   uses more than its nominal quota plus borrowing limit, the cohort no more than the lent
#   quota, and no flavor more than its healthy nodes report (once the inventory is complete);
# - every admission has a token of its own, one `released` report per token, no report with a
#   token the ledger did not admit; each Job and its pod template carry a released token of
#   the Job's own workload;
# - every pod carries an admitted token of its own Job's workload, was created and started no
#   earlier than that admission and its released report, and ended before its quota was
#   released;
# - billing's GPU-seconds per flavor equal the pods' run time x GPUs within a per-pod slack;
# - `replay --verify` of the stopped cluster's ledger passes.
# Prints each phase's wall time, the admitted-to-running latency (p50, p99) and both billing
# figures.
#   tests/k8s/pods_load_test.sh ADMITCTL ADMITD ADMIT_K8S
# LOAD_SEED, LOAD_JOBS and LOAD_BURSTS change the run (default 33, 200, 4).
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder (the ledger, the pods' watch, every JSON read).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-pods-load-test "$@"

readonly SEED="${LOAD_SEED:-33}"
readonly JOBS="${LOAD_JOBS:-200}"
readonly BURSTS="${LOAD_BURSTS:-4}"
# Seconds between the starts of two bursts.
readonly BURST_INTERVAL_SECONDS=10
# How long the bridge may take to report the nodes and complete its inventory after the
# flavors are defined (a bridge without node reports: the checks say "no node reports").
readonly INVENTORY_WAIT_SECONDS=30
# Every Job complete within this long after the first burst: the work is ~56 s on all GPUs,
# done in ~145 s on a quiet 2-core machine (docs/benchmarks.md); the rest is room for a CI run
# that shares the machine with another test's cluster.
readonly RUN_WAIT_SECONDS=360
# Then every workload finished in the ledger (its quota released) within this long.
readonly DRAIN_WAIT_SECONDS=60
readonly LOAD_LABEL=admission-ledger.io/load-test
readonly cluster="$dir/cluster"
readonly load_py="$script_dir/pods_load.py"

test_started=$SECONDS
phase_started=$SECONDS
phases=()
# phase NAME: the wall time since the previous phase ended.
phase() {
  phases+=("$1 $((SECONDS - phase_started))s")
  echo "phase $1: $((SECONDS - phase_started)) s" >&2
  phase_started=$SECONDS
}

step "cluster.sh start --nodes load-20.yaml: control plane, scheduler, 22 KWOK nodes, admitd, bridge"
kubeconfig="$("$cluster_sh" start --nodes "$top/ops/k8s/nodes/load-20.yaml" \
  --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=30s "$@"; }
ledger() { "$admitctl" --connect "unix:$cluster/admitd.sock" "$@"; }
phase start

step "definitions and Jobs (seed $SEED): $JOBS Jobs in $BURSTS bursts"
python3 "$load_py" generate --seed "$SEED" --jobs "$JOBS" --bursts "$BURSTS" --out "$dir/gen"
# Every pod of the test, every state it passed through, deleted ones included (the checks need
# the pods a preemption deleted). Started before the first Job; must still run at the end.
"$kubectl_bin" --kubeconfig "$kubeconfig" get pods -A -l "$LOAD_LABEL" -w \
  --output-watch-events -o json 2> "$dir/watch.err" \
  > >(python3 "$load_py" watch "$dir/pods-watch.jsonl") &
watch_pid=$!
# The library's cleanup, after stopping the watch (its reader ends with kubectl's output).
# cleanup reads the exit status from $?, which the if's condition sets again for either branch.
stop_watch_and_clean_up() {
  local status=$?
  kill "$watch_pid" 2>/dev/null || true
  echo "wall time $((SECONDS - test_started)) s: ${phases[*]}" >&2
  if (exit "$status"); then cleanup; else cleanup; fi
}
trap stop_watch_and_clean_up EXIT
kubectl apply -f "$dir/gen/definitions.yaml" > /dev/null
# inventory_complete: a node report in the ledger completes the bridge's inventory.
inventory_complete() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == "nodeCapacityChanged" and \
       e["event"]["body"]["nodeCapacityChanged"].get("inventoryComplete"):
        sys.exit(0)
sys.exit(1)'
}
queues_defined() {
  [[ "$(ledger get clusterqueues -o json | python3 -c '
import json, sys
print(len(json.load(sys.stdin)["items"]))')" == 3 ]]
}
wait_until "the ledger holds the three ClusterQueues" queues_defined
deadline=$((SECONDS + INVENTORY_WAIT_SECONDS))
until inventory_complete; do
  if ((SECONDS >= deadline)); then
    echo "no node reports: the bridge completed no node inventory within ${INVENTORY_WAIT_SECONDS}s" >&2
    break
  fi
  sleep 1
done
phase definitions

step "the Jobs, in bursts ${BURST_INTERVAL_SECONDS}s apart"
run_started=$SECONDS
for ((burst = 0; burst < BURSTS; burst++)); do
  pause=$((run_started + burst * BURST_INTERVAL_SECONDS - SECONDS))
  ((pause <= 0)) || sleep "$pause"
  kubectl create -f "$dir/gen/burst-$burst.yaml" > /dev/null
  echo "burst $burst created at +$((SECONDS - run_started))s" >&2
done
phase bursts

step "every Job complete"
# job_counts: "TOTAL COMPLETE FAILED" of the test's Jobs.
job_counts() {
  kubectl get jobs -A -l "$LOAD_LABEL" -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
def true(j, t):
    return any(c["type"] == t and c["status"] == "True" for c in j["status"].get("conditions", []))
print(len(items), sum(true(j, "Complete") for j in items), sum(true(j, "Failed") for j in items))'
}
# describe_stuck: what the cluster and the ledger say of each Job not Complete (a CI run keeps
# no folder: this is the evidence its log carries).
describe_stuck() {
  kubectl get jobs -A -l "$LOAD_LABEL" -o json > "$dir/jobs.json" || true
  kubectl get pods -A -l "$LOAD_LABEL" -o json > "$dir/pods.json" || true
  ledger get workloads -o json > "$dir/workloads.json" || true
  ledger log -o json > "$dir/log.jsonl" || true
  python3 "$load_py" stuck "$dir" "$cluster/admit-k8s.log" "$cluster/kube-controller-manager.log" \
    || true
}
deadline=$((run_started + RUN_WAIT_SECONDS))
last_report=0
while true; do
  read -r total complete failed <<< "$(job_counts)"
  ((failed == 0)) || fail "$failed Jobs failed"
  ((total == JOBS && complete == JOBS)) && break
  if ((SECONDS >= deadline)); then
    describe_stuck >&2
    fail "after ${RUN_WAIT_SECONDS}s: $complete of $JOBS Jobs complete (above: the others)"
  fi
  if ((SECONDS - last_report >= 10)); then
    echo "  +$((SECONDS - run_started))s: $complete of $total Jobs complete" >&2
    last_report=$SECONDS
  fi
  sleep 2
done
echo "all $JOBS Jobs complete $((SECONDS - run_started))s after the first burst" >&2
phase run

step "every workload finished in the ledger"
unfinished() {
  ledger get workloads -o json | python3 -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin)["items"]
          if w["metadata"]["namespace"].startswith("team-") and
          w["status"].get("phase") != "Finished"))'
}
deadline=$((SECONDS + DRAIN_WAIT_SECONDS))
until [[ "$(unfinished)" == 0 ]]; do
  ((SECONDS < deadline)) || fail "after ${DRAIN_WAIT_SECONDS}s: $(unfinished) workloads not finished"
  sleep 1
done
phase drain

step "what the checks read"
kill -0 "$watch_pid" 2>/dev/null || fail "the pods' watch stopped early: $(cat "$dir/watch.err")"
kubectl get jobs -A -l "$LOAD_LABEL" -o json > "$dir/jobs.json"
kubectl get pods -A -l "$LOAD_LABEL" -o json > "$dir/pods.json"
kubectl get nodes -o json > "$dir/nodes.json"
ledger log -o json > "$dir/log.jsonl"
ledger get workloads -o json > "$dir/workloads.json"
ledger billing report --by flavor -o json > "$dir/billing.json"
kill "$watch_pid" 2>/dev/null || true
wait "$watch_pid" 2>/dev/null || true
sleep 1  # the reader's last lines
phase collect

step "replay --verify"
"$cluster_sh" stop "$cluster"
"$admitctl" --ledger "$cluster/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify: $(cat "$dir/replay.out")"
phase verify

step "the checks"
python3 "$load_py" check "$dir" || fail "the checks failed (above)"
phase checks

echo "PASS" >&2
