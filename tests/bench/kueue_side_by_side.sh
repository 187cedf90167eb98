#!/usr/bin/env bash
# Kueue's own scalability benchmark (sigs.k8s.io/kueue v0.17.0, test/performance/scheduler),
# run unchanged against Kueue and against the ledger on one local control plane
# (docs/benchmarks.md, "Kueue's scalability benchmark, side by side"). Kueue's runner creates the
# profile's ResourceFlavor, ClusterQueues, namespaces, LocalQueues and Workloads, plays their
# owner (finishes an admitted Workload after its runtime, completes an eviction by clearing the
# reservation) and writes summary.yaml (time to admission and to finish per workload class,
# usage per ClusterQueue class, evictions). Each round runs it twice, the order alternating
# between rounds:
#   kueue:  Kueue's CRDs and minimalkueue (Kueue's scheduler and core controllers) on the cluster;
#   ledger: our CRDs, admitd on a fresh RocksDB ledger and admit-k8s (the bridge).
# For each it keeps the summary and prints, side by side, per workload class the average time to
# admission and to finish and the evictions, per ClusterQueue class the average usage, the run's
# wall time, the admission stack's CPU seconds (minimalkueue; admitd + admit-k8s) per admitted
# workload and peak RSS, and the API server's CPU, from /proc of that round's processes. Then
# `admitctl replay --verify` of the ledger's round. Lines `name: value`; goals printed, never
# enforced. Fails when a side leaves a workload unfinished or the ledger does not verify.
#   tests/bench/kueue_side_by_side.sh ADMITCTL ADMITD ADMIT_K8S
# KUEUE_PROFILE: baseline (default: the module's configs/baseline/generator.yaml, 15,000
# workloads), or a generator file of Kueue's schema (the large-scale profile, for one);
# KUEUE_DIVIDE=N divides each workload set's count by N (the CI smoke run: 50); KUEUE_ROUNDS
# (default 1); KUEUE_TIMEOUT (the runner's -timeout, default 40m); KUEUE_ATTEMPTS (default 3):
# a side's round in which the runner stopped early (it stops when, as generation ends, no
# ClusterQueue in its informer shows work; on two cores its informer can lag the API server by
# seconds, on either side) is run again, at most this many times in all; the report counts
# them (ROUND.SIDE.early_stops) and keeps each in ROUND-SIDE.earlyN/. The runner and minimalkueue
# are built once per machine by `ops/k8s/cluster.sh build`, next to the Kubernetes binaries
# (kueue-perf/). Exits 77 when they, the Kubernetes binaries or admit-k8s are not built.
# KUEUE_SIDES="kueue ledger" (the default) or one side alone (a profile of one side; no goals).
# K8S_TEST_KEEP_DIR=1 keeps its folder (summaries, logs, the ledger).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../k8s" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" kueue-side-by-side "$@"

readonly KUEUE_VERSION=v0.17.0
readonly PROFILE="${KUEUE_PROFILE:-baseline}"
readonly DIVIDE="${KUEUE_DIVIDE:-1}"
readonly ROUNDS="${KUEUE_ROUNDS:-1}"
read -r -a SIDES <<< "${KUEUE_SIDES:-kueue ledger}"
readonly SIDES
for side in "${SIDES[@]}"; do
  [[ "$side" == kueue || "$side" == ledger ]] || fail "KUEUE_SIDES: no side $side (kueue, ledger)"
done
readonly ATTEMPTS="${KUEUE_ATTEMPTS:-3}"
readonly RUNNER_TIMEOUT="${KUEUE_TIMEOUT:-40m}"
readonly PRINCIPAL=admit-k8s
readonly kueue_dir="$bin_dir/kueue-perf"
readonly bench_py="$top/tests/bench/kueue_side_by_side.py"
readonly cluster="$dir/cluster"

if [[ ! -x "$kueue_dir/runner" || ! -x "$kueue_dir/minimalkueue" ]]; then
  echo "SKIP: Kueue $KUEUE_VERSION's runner is not built in $kueue_dir;" \
    "run ops/k8s/cluster.sh build"
  exit "$SKIP_STATUS"
fi

case "$PROFILE" in
  baseline) generator_src="$kueue_dir/configs/baseline/generator.yaml" ;;
  *) generator_src="$PROFILE" ;;
esac
[[ -f "$generator_src" ]] || fail "no generator file $generator_src"
python3 "$bench_py" divide "$generator_src" "$DIVIDE" > "$dir/generator.yaml"

step "cluster.sh start --control-plane-only --no-nodes: etcd, API server, controllers"
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=60s "$@"; }
apiserver_pid="$(<"$cluster/kube-apiserver.pid")"
# Our CRDs as cluster.sh installed them (conversion webhook included), to put back after Kueue's.
# Without the conversion webhook unless KUEUE_CONVERSION=webhook: as Kueue's runner installs
# Kueue's CRDs (kueue_side_by_side.py, our-crds).
kubectl get crd -o json |
  python3 "$bench_py" our-crds --conversion "${KUEUE_CONVERSION:-none}" > "$dir/our-crds.json"
echo "crd_conversion: ${KUEUE_CONVERSION:-none} (Kueue's side: none, as its runner installs them)"

# proc_cpu PID...: the processes' utime + stime in seconds; proc_rss PID...: their VmHWM in MiB.
proc_cpu() {
  local pid total=0 hz
  hz="$(getconf CLK_TCK)"
  for pid in "$@"; do
    total=$((total + $(awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$pid/stat")))
  done
  awk -v t="$total" -v h="$hz" 'BEGIN { printf "%.2f", t / h }'
}
# since A B: B - A.
since() { awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'; }
proc_rss() {
  local pid total=0
  for pid in "$@"; do
    total=$((total + $(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")))
  done
  awk -v t="$total" 'BEGIN { printf "%.0f", t / 1024 }'
}

# api_requests OUT: the API server's request counters (apiserver_request_total), to tell the
# writes of a round from the difference of two.
api_requests() {
  kubectl get --raw /metrics |
    grep -E '^(apiserver_request_total|apiserver_crd_conversion_webhook_duration_seconds_count)\{' > "$1" || true
}

# kueue_crds: the names of the kueue.x-k8s.io CRDs installed.
kueue_crds() {
  kubectl get crd -o name |
    sed -n 's|^customresourcedefinition.apiextensions.k8s.io/\(.*kueue\.x-k8s\.io\)$|\1|p'
}

# drop_finalizers CRD...: removes every finalizer from the objects of these CRDs, which are
# about to go with them. A round the runner stopped early leaves its ClusterQueues and its
# ResourceFlavor (it cleans up only at its end) with the finalizer of the side that served it
# (ours, or Kueue's kueue.x-k8s.io/resource-in-use) after that side stopped, and deleting the
# CRDs would wait for them forever.
drop_finalizers() {
  local crd ns name finalizers
  for crd in "$@"; do
    kubectl get "$crd" -A --no-headers \
      -o custom-columns=NS:.metadata.namespace,NAME:.metadata.name,F:.metadata.finalizers |
      while read -r ns name finalizers; do
        [[ "$finalizers" == "<none>" ]] && continue
        [[ "$ns" == "<none>" ]] && ns=""
        kubectl patch "$crd" "$name" ${ns:+-n "$ns"} --type=merge \
          -p '{"metadata":{"finalizers":null}}' > /dev/null
      done
  done
}

# swap_crds kueue|ours: deletes the kueue.x-k8s.io CRDs (and every object of them) and installs
# the other side's.
swap_crds() {
  local names
  mapfile -t names < <(kueue_crds)
  ((${#names[@]} == 0)) || drop_finalizers "${names[@]}"
  ((${#names[@]} == 0)) || kubectl delete crd --wait=true "${names[@]}" > /dev/null
  if [[ "$1" == kueue ]]; then
    kubectl apply --server-side -f "$kueue_dir/crds" > /dev/null
  else
    kubectl apply --server-side -f "$dir/our-crds.json" > /dev/null
  fi
  mapfile -t names < <(kueue_crds)
  kubectl wait --for condition=established --timeout=60s "${names[@]/#/crd/}" > /dev/null
}

# wait_cleaned: the runner's clean-up (it deletes its namespaces, LocalQueues, ClusterQueues and
# ResourceFlavor) done, while the side that holds finalizers on them still runs.
wait_cleaned() {
  local deadline=$((SECONDS + 600)) left
  while true; do
    left="$(kubectl get namespaces -l kueue.x-k8s.io/performance-scheduler-cleanup -o name)"
    [[ -z "$left" ]] && return 0
    ((SECONDS < deadline)) || fail "after 600 s the runner's namespaces are still there: $left"
    sleep 2
  done
}

# run_runner OUT: Kueue's runner against the cluster (its "existing cluster" mode), from the
# folder its test utilities take as Kueue's (PROJECT_DIR), its summary and log in OUT.
run_runner() {
  mkdir -p "$1"
  KUBECONFIG="$kubeconfig" PROJECT_DIR="$kueue_dir/project" "$kueue_dir/runner" \
    -o "$1" -generatorConfig "$dir/generator.yaml" -timeout "$RUNNER_TIMEOUT" \
    > "$1/runner.log" 2>&1 || fail "the runner failed (log: $1/runner.log)"
}

# round_kueue OUT: minimalkueue on Kueue's CRDs.
round_kueue() {
  local out="$1" mk_pid api0 started wall
  swap_crds kueue
  "$kueue_dir/minimalkueue" --kubeconfig "$kubeconfig" > "$out.minimalkueue.log" 2>&1 &
  mk_pid=$!
  api_requests "$out.requests-before"
  api0="$(proc_cpu "$apiserver_pid")"
  started=$SECONDS
  run_runner "$out"
  wall=$((SECONDS - started))
  wait_cleaned
  api_requests "$out.requests-after"
  python3 "$bench_py" requests "$out.requests-before" "$out.requests-after" > "$out/requests.json"
  python3 "$bench_py" stats "$out/stack.json" --wall "$wall" \
    --cpu "$(proc_cpu "$mk_pid")" --rss "$(proc_rss "$mk_pid")" \
    --apiserver-cpu "$(since "$api0" "$(proc_cpu "$apiserver_pid")")"
  kill -INT "$mk_pid"
  wait "$mk_pid" || true
}

# round_ledger OUT: admitd on a fresh ledger and the bridge on our CRDs.
round_ledger() {
  local out="$1" api0 started wall
  swap_crds ours
  rm -rf "$dir/ledger" "$dir/ready"
  start_test_admitd "$admitd" "$top" "$PRINCIPAL"
  start_bridge
  api_requests "$out.requests-before"
  api0="$(proc_cpu "$apiserver_pid")"
  started=$SECONDS
  run_runner "$out"
  wall=$((SECONDS - started))
  wait_cleaned
  api_requests "$out.requests-after"
  python3 "$bench_py" requests "$out.requests-before" "$out.requests-after" > "$out/requests.json"
  python3 "$bench_py" stats "$out/stack.json" --wall "$wall" \
    --cpu "$(proc_cpu "$admitd_pid" "$bridge_pid")" \
    --cpu-admitd "$(proc_cpu "$admitd_pid")" \
    --rss "$(proc_rss "$admitd_pid" "$bridge_pid")" \
    --apiserver-cpu "$(since "$api0" "$(proc_cpu "$apiserver_pid")")"
  stop_admitd_and_bridge
  admitd_pid="" bridge_pid=""
  "$admitctl" --ledger "$dir/ledger" replay --verify > "$out/replay.txt" 2>&1 ||
    fail "replay --verify of the ledger's round failed: $(tail -3 "$out/replay.txt")"
  # The runner counts a workload it saw created; the ledger must have finished each one.
  "$admitctl" --ledger "$dir/ledger" log -o json | python3 "$bench_py" finished > "$out/finished"
  cp -r "$dir/ledger" "$out/ledger"
}

# run_side SIDE OUT: round_SIDE into OUT until the runner recorded every workload the
# generator makes, at most ATTEMPTS times (the early ones moved to OUT.earlyN).
run_side() {
  local side="$1" out="$2" attempt recorded expected
  expected="$(python3 "$bench_py" expected "$dir/generator.yaml")"
  for ((attempt = 1; ; attempt++)); do
    "round_$side" "$out"
    recorded="$(python3 "$bench_py" recorded "$out/summary.yaml")"
    ((recorded < expected && attempt < ATTEMPTS)) || return 0
    echo "$side: the runner stopped early (it recorded $recorded of $expected workloads);" \
      "attempt $((attempt + 1)) of $ATTEMPTS"
    mv "$out" "$out.early$attempt"
  done
}

for ((round = 1; round <= ROUNDS; round++)); do
  order=()
  for side in "${SIDES[@]}"; do
    if ((round % 2 == 1)); then order+=("$side"); else order=("$side" "${order[@]}"); fi
  done
  for side in "${order[@]}"; do
    step "round $round: $side"
    run_side "$side" "$dir/round$round-$side"
  done
done
python3 "$bench_py" report "$dir" "$ROUNDS" --sides "${SIDES[@]}"
