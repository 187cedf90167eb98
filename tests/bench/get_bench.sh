#!/usr/bin/env bash
# get_bench: what admitd's `get` of every ClusterQueue and every LocalQueue costs it, the read
# the bridge's status copy makes several times a second (docs/benchmarks.md). A fresh ledger of
# QUEUES ClusterQueues in cohorts of 100 with a LocalQueue each (Kueue's large-scale profile's
# shape: 1,000) is served by admitd; `admitctl --connect get KIND -o json` runs CALLS times per
# kind; admitd's own admitd_rpc_call_duration_seconds{method="get"} gives the time it spent
# answering (not the client's). `name: value` lines; no goal. Exits 1 when a call fails.
#   tests/bench/get_bench.sh ADMITCTL ADMITD [QUEUES (1000)] [CALLS (50)]
set -euo pipefail
admitctl=$1 admitd=$2 queues=${3:-1000} calls=${4:-50}
work=$(mktemp -d "${TMPDIR:-/tmp}/get-bench.XXXXXX")
pid=
cleanup() {
  [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

{
  printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\nmetadata: {name: rf}\n'
  for ((i = 0; i < queues; i++)); do
    name="cq-$((i % 100))-cohort-$((i / 100))"
    printf -- '---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: %s}\n' "$name"
    printf 'spec:\n  cohort: cohort-%d\n' "$((i / 100))"
    printf '  preemption: {reclaimWithinCohort: Any, withinClusterQueue: LowerPriority}\n'
    printf '  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n    - name: rf\n'
    printf '      resources:\n      - {name: cpu, nominalQuota: 20, borrowingLimit: 100}\n'
    printf -- '---\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n'
    printf 'metadata: {name: %s, namespace: %s}\nspec: {clusterQueue: %s}\n' "$name" "$name" "$name"
  done
} > "$work/queues.yaml"
"$admitctl" --ledger "$work/ledger" apply -f "$work/queues.yaml" > /dev/null

"$admitd" --ledger "$work/ledger" --listen "unix:$work/admitd.sock" --metrics-listen 127.0.0.1:0 \
  --ready-file "$work/ready" > "$work/admitd.log" 2>&1 &
pid=$!
for ((i = 0; i < 100; i++)); do
  [[ -s "$work/ready" ]] && break
  sleep 0.1
done
[[ -s "$work/ready" ]] || { echo "get_bench: admitd was not ready: $(tail -3 "$work/admitd.log")" >&2; exit 1; }
metrics=$(grep '^http://' "$work/ready" | head -1)
get_seconds() {
  curl -sf "$metrics/metrics" |
    awk '/^admitd_rpc_call_duration_seconds_sum\{method="get"\}/ {print $2}'
}

echo "get.queues: $queues"
before=$(get_seconds)
before=${before:-0}
for kind in clusterqueues localqueues; do
  for ((i = 0; i < calls; i++)); do
    "$admitctl" --connect "unix:$work/admitd.sock" get "$kind" -o json > "$work/out.json"
  done
  after=$(get_seconds)
  awk -v a="$after" -v b="$before" -v n="$calls" -v k="$kind" \
    'BEGIN { printf "get.%s_ms: %.2f\n", k, (a - b) * 1000 / n }'
  echo "get.${kind}_bytes: $(wc -c < "$work/out.json")"
  before=$after
done
