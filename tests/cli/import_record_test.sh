#!/usr/bin/env bash
# Importing from a live Kueue keeps Kueue's record (engine v22): the QuotaReserved and Admitted
# times, PodsReady, the admission checks and the requeue count come from each Workload's status;
# `get workloads -o yaml` of the ledger imported into a fresh ledger gives the same read models,
# times included; an eviction in progress imports as evicting; what the ledger cannot honour (a
# check not Ready) is refused, naming it, or dropped and listed with --lenient. Pending workloads
# keep their creation time (queue order) and requeue backoff; one Kueue evicted and requeued is
# queued by the eviction's time when Kueue orders it so (engine v23); all of them round-trip.
#   tests/cli/import_record_test.sh ADMITCTL
admitctl=$1
# shellcheck source=tests/cli/lib.sh
source "$(dirname "$0")/lib.sh"

gpu_setup "$work/defs.yaml" ml lq
# admitted NAME RESERVED [EXTRA_CONDITION]: a Workload as Kueue leaves it admitted at RESERVED.
admitted() {
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: ml, uid: uid-$1, creationTimestamp: "2026-12-06T11:00:00Z"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "2"}}}]}}}
status:
  conditions:
  - {type: QuotaReserved, status: "True", reason: QuotaReserved, message: x, lastTransitionTime: "$2"}
  - {type: Admitted, status: "True", reason: Admitted, message: x, lastTransitionTime: "$2"}
  - {type: PodsReady, status: "True", reason: Started, message: x, lastTransitionTime: "$2"}
  ${3:-}
  admissionChecks:
  - {name: scan, state: Ready, message: "image signed", lastTransitionTime: "$2"}
  requeueState: {count: 2}
  admission:
    clusterQueue: gpu
    podSetAssignments:
    - {name: main, count: 1, flavors: {nvidia.com/gpu: h100}, resourceUsage: {nvidia.com/gpu: "2"}}
YAML
}
{ admitted a 2026-12-06T11:50:01Z; admitted b 2026-12-06T11:50:04Z; admitted c 2026-12-06T11:50:03Z; } \
  > "$work/kueue.yaml"
A="$work/a"
expect_rc 0 $admitctl --ledger "$A" --at 2026-12-06T11:00:00Z apply -f "$work/defs.yaml"
expect_rc 0 $admitctl --ledger "$A" --at 2026-12-06T12:00:00Z import -f "$work/kueue.yaml"
expect_rc 0 $admitctl --ledger "$A" get workloads -n ml -o json
python3 - "$out" > "$work/check.out" <<'PY' || fail "$(cat "$work/check.out")"
import json, sys
items = {w["metadata"]["name"]: w for w in json.loads(sys.argv[1])["items"]}
def cond(w, t):
    return next(c for c in w["status"]["conditions"] if c["type"] == t)
for name, at in (("a", "2026-12-06T11:50:01Z"), ("b", "2026-12-06T11:50:04Z")):
    w = items[name]
    assert cond(w, "QuotaReserved")["lastTransitionTime"] == at, (name, cond(w, "QuotaReserved"))
    assert cond(w, "Admitted")["lastTransitionTime"] == at, (name, cond(w, "Admitted"))
    check = w["status"]["admissionChecks"][0]
    assert (check["name"], check["state"], check["message"]) == ("scan", "Ready", "image signed"), check
    assert w["status"]["requeueState"]["count"] == 2, w["status"].get("requeueState")
print("ok")
PY
# The ledger's export, imported into a fresh ledger later: the same read models.
expect_rc 0 $admitctl --ledger "$A" get workloads -n ml -o yaml
printf '%s\n' "$out" > "$work/export.yaml"
B="$work/b"
expect_rc 0 $admitctl --ledger "$B" --at 2026-12-06T11:00:00Z apply -f "$work/defs.yaml"
expect_rc 0 $admitctl --ledger "$B" --at 2026-12-07T09:00:00Z import -f "$work/export.yaml"
expect_rc 0 $admitctl --ledger "$A" get workloads -n ml -o json
before="$out"
expect_rc 0 $admitctl --ledger "$B" get workloads -n ml -o json
[[ "$out" == "$before" ]] || fail "the round trip changed the read models: $(diff <(echo "$before") <(echo "$out"))"

# Pending workloads import too: queued by Kueue's creation time, a requeue backoff waited out.
# pending NAME CREATED [REQUEUE_AT]: a pending Workload of 8 GPUs as Kueue leaves it.
pending() {
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: ml, uid: uid-$1, creationTimestamp: "$2"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "8"}}}]}}}
status:
  conditions:
  - {type: QuotaReserved, status: "False", reason: Pending, message: x, lastTransitionTime: "$2"}
  requeueState: {count: 3${3:+, requeueAt: "$3"}}
YAML
}
{ pending p-late 2026-12-06T11:10:00Z; pending p-early 2026-12-06T11:05:00Z
  pending p-backoff 2026-12-06T11:00:00Z 2026-12-06T13:00:00Z; } > "$work/pending.yaml"
P="$work/p"
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T11:00:00Z apply -f "$work/defs.yaml"
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T12:00:00Z import -f "$work/kueue.yaml"
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T12:01:00Z import -f "$work/pending.yaml"
expect_rc 0 $admitctl --ledger "$P" get workloads -n ml -o json
python3 - "$out" > "$work/check.out" <<'PY' || fail "$(cat "$work/check.out")"
import json, sys
items = {w["metadata"]["name"]: w for w in json.loads(sys.argv[1])["items"]}
assert items["p-early"]["metadata"]["creationTimestamp"] == "2026-12-06T11:05:00Z", items["p-early"]["metadata"]
assert items["p-backoff"]["status"]["requeueState"]["requeueAt"] == "2026-12-06T13:00:00Z", items["p-backoff"]["status"]
print("ok")
PY
expect_rc 0 $admitctl --ledger "$P" get pendingworkloads --cluster-queue gpu -o json
python3 - "$out" > "$work/check.out" <<'PY' || fail "pending order: $(cat "$work/check.out")"
import json, sys
names = [i["metadata"]["name"] for i in json.loads(sys.argv[1])["items"]]
assert names == ["p-early", "p-late"], names  # p-backoff waits out its backoff, outside the queue
print("ok")
PY
# The admitted ones finish: the earliest created takes the room, not the first imported.
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T12:30:00Z finish ml/a
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T12:30:01Z finish ml/b
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T12:30:02Z finish ml/c
contains "$out" "quota reserved for ml/p-early"
lacks "$out" "p-backoff"
expect_rc 0 $admitctl --ledger "$P" --at 2026-12-06T13:00:01Z tick
expect_rc 0 $admitctl --ledger "$P" get pendingworkloads --cluster-queue gpu
contains "$out" "p-backoff"

# An eviction in progress is Kueue's record too: imported evicting, requeued once its pods are
# reported gone. A check not Ready cannot be honoured: refused, naming it; --lenient drops it.
admitted d 2026-12-06T11:50:02Z \
  '- {type: Evicted, status: "True", reason: Preempted, message: x, lastTransitionTime: "2026-12-06T11:59:00Z"}' \
  > "$work/evicting.yaml"
expect_rc 0 $admitctl --ledger "$A" --at 2026-12-06T12:00:00Z import -f "$work/evicting.yaml"
contains "$out" "evicting ml/d: Preempted"
expect_rc 0 $admitctl --ledger "$A" get workloads -n ml
contains "$out" "Evicting"
# A workload Kueue evicted and requeued keeps Evicted True while it waits (Kueue resets it at
# the next reservation): imported pending, queued by the eviction's time when Kueue orders it so
# (PodsReadyTimeout, AdmissionCheck), else by its creation.
requeued() {
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: ml, uid: uid-$1, creationTimestamp: "$2"}
spec:
  queueName: lq
  podSets:
  - {name: main, count: 1, template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "8"}}}]}}}
status:
  conditions:
  - {type: QuotaReserved, status: "False", reason: Pending, message: x, lastTransitionTime: "$3"}
  - {type: Evicted, status: "True", reason: $4, message: x, lastTransitionTime: "$3"}
  requeueState: {count: 1}
YAML
}
{ requeued r-timeout 2026-12-06T10:00:00Z 2026-12-06T11:58:00Z PodsReadyTimeout
  requeued r-preempted 2026-12-06T10:30:00Z 2026-12-06T11:58:00Z Preempted
  requeued r-check 2026-12-06T10:00:00Z 2026-12-06T11:40:00Z AdmissionCheck; } > "$work/requeued.yaml"
# Every state at once (admitted, evicting, pending, requeued after an eviction) imported in one
# batch, exported, and imported into a fresh ledger at the same instant (a pending workload's
# message is the decider's own, of that instant): the same read models and the same queue.
cat "$work/kueue.yaml" "$work/evicting.yaml" "$work/pending.yaml" "$work/requeued.yaml" \
  > "$work/all.yaml"
R="$work/r"
S="$work/s"
for ledger in "$R" "$S"; do
  expect_rc 0 $admitctl --ledger "$ledger" --at 2026-12-06T11:00:00Z apply -f "$work/defs.yaml"
done
expect_rc 0 $admitctl --ledger "$R" --at 2026-12-06T12:03:00Z import -f "$work/all.yaml"
expect_rc 0 $admitctl --ledger "$R" get pendingworkloads --cluster-queue gpu -o json
python3 - "$out" > "$work/check.out" <<'PY' || fail "requeued order: $(cat "$work/check.out")"
import json, sys
names = [i["metadata"]["name"] for i in json.loads(sys.argv[1])["items"]]
assert names == ["r-preempted", "p-early", "p-late", "r-check", "r-timeout"], names
print("ok")
PY
expect_rc 0 $admitctl --ledger "$R" get workloads -n ml -o yaml
printf '%s\n' "$out" > "$work/export-all.yaml"
expect_rc 0 $admitctl --ledger "$S" --at 2026-12-06T12:03:00Z import -f "$work/export-all.yaml"
for ledger in "$R" "$S"; do
  # reportSequence points into each ledger's own record (the import's sequence there).
  expect_rc 0 $admitctl --ledger "$ledger" get workloads -n ml -o json
  printf '%s\n' "$out" | grep -v '"reportSequence"' > "$ledger.json"
  expect_rc 0 $admitctl --ledger "$ledger" get pendingworkloads --cluster-queue gpu -o json
  printf '%s\n' "$out" > "$ledger.pending.json"
done
diff "$R.json" "$S.json" > "$work/diff.out" || fail "the round trip changed the read models: $(cat "$work/diff.out")"
diff "$R.pending.json" "$S.pending.json" > "$work/diff.out" ||
  fail "the round trip changed the queue: $(cat "$work/diff.out")"
admitted a2 2026-12-06T11:50:05Z | sed 's/state: Ready/state: Retry/' > "$work/retry.yaml"
expect_rc 1 $admitctl --ledger "$A" import -f "$work/retry.yaml"
contains "$err" "status.admissionChecks[0]: check 'scan' is 'Retry', not Ready"
contains "$err" "--lenient"
expect_rc 0 $admitctl --ledger "$A" import -f "$work/retry.yaml" --lenient
contains "$err" "Warning: Workload a2: "
contains "$err" "dropped: check 'scan' is 'Retry'"
finish
