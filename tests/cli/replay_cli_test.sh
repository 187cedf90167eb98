#!/usr/bin/env bash
# End-to-end tests of admitctl's replay and audit commands (replay --verify, explain, get --at)
# on a real embedded ledger.
# Usage: replay_cli_test.sh ADMITCTL
set -uo pipefail
admitctl=$1
source "$(dirname "$0")/lib.sh"
D="$work/demo"

for cmd in "replay" "explain"; do
  expect_rc 0 $admitctl $cmd --help
  contains "$out" "Usage"
done
expect_rc 0 $admitctl replay --help
contains "$out" "without comparing"

# A small ledger: two ClusterQueues in a cohort; b borrows, a reclaims (preemption), a request
# that can never fit is rejected, a finish lets the preempted workload back in.
cat >"$work/setup.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-a}
spec:
  cohortName: c
  namespaceSelector: {}
  preemption: {reclaimWithinCohort: Any}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-b}
spec:
  cohortName: c
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: a}
spec: {clusterQueue: cq-a}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: b}
spec: {clusterQueue: cq-b}
YAML
workload() {  # NS NAME CPU
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $2, namespace: $1, uid: uid-$1-$2}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - {name: c, image: busybox, resources: {requests: {cpu: "$3"}}}
YAML
}
workload b big 8 >"$work/big.yaml"
workload a small 2 >"$work/small.yaml"
workload a huge 100 >"$work/huge.yaml"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:00:00Z apply -f "$work/setup.yaml"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:01:00Z submit -f "$work/big.yaml"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:02:00Z submit -f "$work/small.yaml"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:03:00Z submit -f "$work/huge.yaml"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:04:00Z finish a/small
expect_rc 0 $admitctl --ledger "$D" log
log_text=$out
head_seq=$(tail -1 <<<"$log_text" | awk '{print $1}')
# The sequence of b/big's submission, and of the last event of its append.
big_seq=$(grep -E 'key=by/[^/]+/submit/b/big/' <<<"$log_text" | awk '{print $1}')
small_seq=$(grep -E 'key=by/[^/]+/submit/a/small/' <<<"$log_text" | awk '{print $1}')
big_end=$((small_seq - 1))
[ -n "$big_seq" ] && [ "$big_end" -gt "$big_seq" ] || fail "no decisions after b/big's submission: $log_text"

# replay --verify: every decision reproduced; quiet on stderr in a pipe.
expect_rc 0 $admitctl --ledger "$D" replay --verify
contains "$out" "events/s"
contains "$out" "decisions compared:"
contains "$out" "decision-stream sha256:"
contains "$out" "OK: every recorded decision was reproduced"
[ -z "$err" ] || fail "replay wrote to stderr in a pipe: $err"
expect_rc 0 $admitctl --ledger "$D" replay --verify -o json
contains "$out" '"ok": true'
hash1=$(grep decisionStreamSha256 <<<"$out")
expect_rc 0 $admitctl --ledger "$D" replay --verify -o json
[ "$hash1" = "$(grep decisionStreamSha256 <<<"$out")" ] || fail "hash differs between runs"
expect_rc 0 $admitctl --ledger "$D" replay --verify --from "$small_seq" --to "$((head_seq - 1))" -o json
contains "$out" "\"compareFrom\": $small_seq"
contains "$out" "\"last\": $((head_seq - 1))"
expect_rc 1 $admitctl --ledger "$D" replay --verify --to 100000
contains "$err" "beyond the ledger's head"
expect_rc 0 $admitctl --ledger "$D" replay
contains "$out" "not compared"

# get --at (a subcommand option, distinct from the global --at logical time).
expect_rc 0 $admitctl --ledger "$D" get workloads --at "$big_end"
contains "$out" "big"
lacks "$out" "small"
contains "$out" "Admitted"
expect_rc 0 $admitctl --ledger "$D" get workloads --at "$big_seq"
contains "$err" "as of sequence $big_end, the end of the append holding sequence $big_seq"
contains "$out" "Admitted"
expect_rc 0 $admitctl --ledger "$D" get cq --at "$big_end" -o json
contains "$out" '"kind": "ClusterQueue"'
expect_rc 1 $admitctl --ledger "$D" get workloads --at 100000
contains "$err" "beyond the ledger's head"

# explain: history, now, --at, json, html.
expect_rc 0 $admitctl --ledger "$D" explain b/big
contains "$out" "workloadSubmitted"
contains "$out" "quota reserved in ClusterQueue cq-b"
contains "$out" "(borrowing from the cohort)"
contains "$out" "preempted by a/small"
contains "$out" "quota version"
contains "$out" "phase:        "
expect_rc 0 $admitctl --ledger "$D" explain b/big --at "$small_seq"
contains "$out" "(the end of the append holding sequence $small_seq)"
contains "$out" "blocked by:   "
contains "$out" "in ClusterQueue cq-b"
expect_rc 0 $admitctl --ledger "$D" explain a/small -o json
contains "$out" '"checkVersions"'
contains "$out" '"blockedBy"'
contains "$out" '"role": "preemptor"'
expect_rc 0 $admitctl --ledger "$D" explain b/big -o html --out "$work/page.html"
contains "$out" "$work/page.html"
page=$(cat "$work/page.html")
contains "$page" "<!DOCTYPE html>"
contains "$page" "class=\"bar\""
lacks "$page" "http://"
lacks "$page" "https://"
lacks "$page" "<script"
(cd "$work" && "$admitctl" --ledger "$D" explain a/huge -o html >/dev/null) \
  || fail "explain -o html without --out"
[ -s "$work/explain-a-huge.html" ] || fail "no explain-a-huge.html"
expect_rc 0 $admitctl --ledger "$D" explain a/huge -o html --out -
contains "$out" "rejected"
expect_rc 1 $admitctl --ledger "$D" explain a/no-such-job
contains "$err" "no workload a/no-such-job"
expect_rc 1 $admitctl --ledger "$D" explain not-a-name
contains "$err" "NAMESPACE/NAME"

# A decision of another engine version: replay refuses, naming both versions.
E="$work/engine-versions"
expect_rc 0 $admitctl --ledger "$E" --at 2026-11-29T10:00:00Z dev append \
  --json '{"body":{"rejected":{"workload":{"namespace":"ns","name":"a","uid":"u"},"reason":"X"}},"engineVersion":99,"actor":"engine"}'
expect_rc 1 $admitctl --ledger "$E" replay --verify
contains "$err" "engine v99"
contains "$err" "this build runs engine v"

# The demo writes into --ledger when no --dir is given, and that ledger replays and verifies.
M="$work/demo-in-ledger"
expect_rc 0 $admitctl --ledger "$M" demo
contains "$out" "Replay --verify"
[ -f "$M/CURRENT" ] || fail "the demo did not write its ledger into --ledger $M"
expect_rc 0 $admitctl --ledger "$M" replay --verify
expect_rc 0 $admitctl --ledger "$M" verify

finish replay_cli_test
