#!/usr/bin/env bash
# End-to-end tests of snapshots through admitctl: `snapshot`, startup from the newest valid
# snapshot, periodic snapshots (--snapshot-every), `verify` of snapshot hashes, `replay --verify`
# comparing snapshots with the fold, `replay --from-snapshot`, and an edited snapshot byte.
# Usage: snapshot_cli_test.sh ADMITCTL
set -uo pipefail
admitctl=$1
source "$(dirname "$0")/lib.sh"
L="$work/ledger"
json() { python3 -c "import json,sys; r=json.load(sys.stdin); print($1)"; }

expect_rc 0 $admitctl snapshot --help
contains "$out" "Usage"
contains "$out" "snapshot of the projection state"
expect_rc 0 $admitctl --help
contains "$out" "--snapshot-every"
expect_rc 0 $admitctl replay --help
contains "$out" "--from-snapshot"
expect_rc 1 $admitctl --ledger "$work/none" snapshot
contains "$err" "no ledger at"

cat >"$work/setup.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: a}
spec: {clusterQueue: cq}
YAML
workload() {  # NAME CPU PRIORITY
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: a, uid: uid-$1}
spec:
  queueName: lq
  priority: $3
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - {name: c, image: busybox, resources: {requests: {cpu: "$2"}}}
YAML
}
t=0
at() { t=$((t + 1)); printf '2026-11-29T10:%02d:00Z' "$t"; }
ctl() { $admitctl --ledger "$L" --snapshot-every 0 "$@"; }
expect_rc 0 ctl --at "$(at)" apply -f "$work/setup.yaml"
for i in 1 2 3; do
  workload "w$i" 2 $i >"$work/w$i.yaml"
  expect_rc 0 ctl --at "$(at)" submit -f "$work/w$i.yaml"
done
[ ! -e "$L/snapshots" ] || fail "--snapshot-every 0 took a snapshot: $(ls "$L/snapshots")"

# admitctl snapshot: sequence, size, hash; quiet on stderr in a pipe.
head1=$($admitctl --ledger "$L" verify -o json | json 'r["head"]')
expect_rc 0 ctl snapshot
contains "$out" "folded $head1 events from the genesis"
contains "$out" "snapshot at sequence $head1: "
contains "$out" " bytes, sha256 "
[ -z "$err" ] || fail "snapshot wrote to stderr in a pipe: $err"
[ -f "$L/snapshots/$(printf '%020d' "$head1").snap" ] || fail "no snapshot file: $(ls "$L/snapshots")"
expect_rc 0 ctl snapshot -o json
[ "$(json 'r["sequence"]' <<<"$out")" = "$head1" ] || fail "snapshot -o json sequence: $out"
[ "$(json 'r["loadedSnapshot"]' <<<"$out")" = "$head1" ] || fail "second snapshot did not start from the first: $out"
[ "$(json 'r["eventsFolded"]' <<<"$out")" = "0" ] || fail "eventsFolded: $out"
[ "$(json 'len(r["sha256"])' <<<"$out")" = "64" ] || fail "sha256: $out"
hash1=$(json 'r["sha256"]' <<<"$out")

# More events; a restart starts from the snapshot and folds only what follows it.
for i in 4 5; do
  workload "w$i" 3 $((i + 2)) >"$work/w$i.yaml"
  expect_rc 0 ctl --at "$(at)" submit -f "$work/w$i.yaml"
done
expect_rc 0 ctl --at "$(at)" finish a/w1
head2=$($admitctl --ledger "$L" verify -o json | json 'r["head"]')
[ "$head2" -gt "$head1" ] || fail "no events after the snapshot"
expect_rc 0 ctl --log-level info get workloads -o json
contains "$err" "loaded snapshot at $head1, folded $((head2 - head1)) events after it"
from_snapshot=$out
cp -r "$L" "$work/copy" && rm -rf "$work/copy/snapshots"
expect_rc 0 $admitctl --ledger "$work/copy" --log-level info get workloads -o json
contains "$err" "no snapshot loaded, folded $head2 events from the genesis"
[ "$out" = "$from_snapshot" ] || fail "state from the snapshot differs from the state from the genesis"
expect_rc 0 ctl get cq -o json
cq_from_snapshot=$out
expect_rc 0 $admitctl --ledger "$work/copy" get cq -o json
[ "$out" = "$cq_from_snapshot" ] || fail "clusterqueues from the snapshot differ"

# get --at starts from the snapshot at or before its sequence: the same as from the genesis.
expect_rc 0 ctl get workloads --at "$((head2 - 1))" -o json
at_from_snapshot=$out
expect_rc 0 $admitctl --ledger "$work/copy" get workloads --at "$((head2 - 1))" -o json
[ "$out" = "$at_from_snapshot" ] || fail "get --at from the snapshot differs"

# verify checks the snapshot's hash and chain; replay --verify compares it with the fold.
expect_rc 0 ctl verify
contains "$out" "verified $head2 events"
contains "$out" "snapshot at sequence $head1: ok ("
contains "$out" "sha256 $hash1"
expect_rc 0 ctl verify -o json
[ "$(json 'r["snapshots"][0]["sequence"]' <<<"$out")" = "$head1" ] || fail "verify -o json snapshots: $out"
[ "$(json 'r["ok"]' <<<"$out")" = "True" ] || fail "verify -o json ok: $out"
expect_rc 0 ctl replay --verify
contains "$out" "snapshots compared with the fold: 1"
contains "$out" "OK: every recorded decision"
expect_rc 0 ctl replay --verify -o json
[ "$(json 'r["snapshots"][0]["ok"]' <<<"$out")" = "True" ] || fail "replay snapshots: $out"
full_hash=$(json 'r["decisionStreamSha256"]' <<<"$out")
expect_rc 0 ctl replay --verify --from-snapshot
contains "$out" "started from the snapshot at sequence $head1"
contains "$out" "decisions compared: "
contains "$out" "(sequences $((head1 + 1)).."
expect_rc 0 ctl replay --verify --from-snapshot --from "$((head1 + 1))" -o json
[ "$(json 'r["startedFromSnapshot"]' <<<"$out")" = "$head1" ] || fail "startedFromSnapshot: $out"
expect_rc 0 ctl replay --verify --from "$((head1 + 1))" -o json
[ "$(json 'r["startedFromSnapshot"]' <<<"$out")" = "None" ] || fail "no --from-snapshot: $out"
from_hash=$(json 'r["decisionStreamSha256"]' <<<"$out")
expect_rc 0 ctl replay --verify --from-snapshot --from "$((head1 + 1))" -o json
[ "$(json 'r["decisionStreamSha256"]' <<<"$out")" = "$from_hash" ] \
  || fail "replay from the snapshot hashes differently from replay from the genesis"
[ "$full_hash" != "$from_hash" ] || fail "the two ranges should differ"

# Periodic snapshots: every 5 events, after the append that crosses the boundary.
P="$work/periodic"
expect_rc 0 $admitctl --ledger "$P" --snapshot-every 5 --at 2026-11-29T10:00:00Z apply -f "$work/setup.yaml"
expect_rc 0 $admitctl --ledger "$P" --snapshot-every 5 --at 2026-11-29T10:01:00Z submit -f "$work/w1.yaml"
expect_rc 0 $admitctl --ledger "$P" --snapshot-every 5 --at 2026-11-29T10:02:00Z submit -f "$work/w2.yaml"
n=$(ls "$P/snapshots" 2>/dev/null | grep -c '\.snap$')
[ "$n" -ge 1 ] || fail "no periodic snapshot in $P/snapshots"
expect_rc 0 $admitctl --ledger "$P" verify
contains "$out" ": ok ("

# One edited byte of the snapshot: verify names it and fails, replay --verify reports it,
# startup skips it (saying so) and reaches the same state from the genesis.
snap="$L/snapshots/$(printf '%020d' "$head1").snap"
python3 - "$snap" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[len(b) // 2] ^= 0x01
open(p, 'wb').write(bytes(b))
PY
expect_rc 1 ctl verify
contains "$out" "verified $head2 events"
contains "$out" "FAILED: snapshot at sequence $head1: its bytes do not match the hash stored with them"
expect_rc 1 ctl verify -o json
[ "$(json 'r["badSnapshot"]' <<<"$out")" = "$head1" ] || fail "badSnapshot: $out"
expect_rc 1 ctl replay --verify
contains "$out" "SNAPSHOT MISMATCH at sequence $head1"
expect_rc 0 ctl get workloads -o json
contains "$err" "skipping snapshot at sequence $head1"
[ "$out" = "$from_snapshot" ] || fail "state after skipping the edited snapshot differs"
# (from the genesis: the fold passes the edited snapshot, and reports it)
expect_rc 1 ctl replay --verify --from-snapshot -o json
contains "$err" "skipping snapshot at sequence $head1"
[ "$(json 'r["snapshots"][0]["ok"]' <<<"$out")" = "False" ] || fail "edited snapshot compared ok: $out"
[ "$(json 'r["startedFromSnapshot"]' <<<"$out")" = "None" ] || fail "started from an edited snapshot: $out"

finish snapshot_cli_test
