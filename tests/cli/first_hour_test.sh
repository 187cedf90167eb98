#!/usr/bin/env bash
# What a Kueue user meets in the first hour with admitctl (embedded ledger): each defect found by
# trying it as a new user would is a check here that failed before its fix.
#   tests/cli/first_hour_test.sh ADMITCTL
admitctl=$1
# shellcheck source=tests/cli/lib.sh
source "$(dirname "$0")/lib.sh"

# ---- Kueue's plain AdmissionCheck: Retry requeues, as often as asked (no limit by default).
L="$work/checks"
cat > "$work/checks.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: scan}
spec: {controllerName: scanner}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu}
spec:
  namespaceSelector: {}
  cohortName: org
  admissionChecks: [scan]
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: gpu}
YAML
# workload NAME COUNT GPUS [LABELS]: a Workload in LocalQueue ml/lq, COUNT pods of GPUS each.
workload() {
  cat <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: ml, labels: {${4:-}}}
spec:
  queueName: lq
  podSets:
  - {name: main, count: $2, template: {spec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: "$3"}}}]}}}
YAML
}
workload train 2 2 > "$work/job.yaml"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:00:00Z apply -f "$work/checks.yaml"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:01:00Z submit -f "$work/job.yaml"
contains "$out" "quota reserved for ml/train"
for attempt in 1 2 3; do
  expect_rc 0 $admitctl --ledger "$L" --at "2026-11-29T10:0$((attempt + 1)):00Z" --as scanner \
    report-check ml/train scan Retry --generation "$attempt" --requeue-after 30s
  contains "$out" "requeued ml/train (attempt $attempt"
  lacks "$out" "deactivated"
  expect_rc 0 $admitctl --ledger "$L" tick --to "2026-11-29T10:0$((attempt + 1)):30Z"
  contains "$out" "quota reserved for ml/train"
done

# ---- A misspelt field is refused, naming its path and the nearest known field, nothing
# written (kubectl's strict field validation); --validate=warn and =false accept it.
cat > "$work/misspelt.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-bad3}
spec:
  namespaceSelector: {}
  resourceGroup:
  - coveredResources: [cpu]
    flavors:
    - name: h100
      resources: [{name: cpu, nominalQuota: 4}]
YAML
head_before=$($admitctl --ledger "$L" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])')
expect_rc 1 $admitctl --ledger "$L" --at 2026-11-29T10:04:40Z apply -f "$work/misspelt.yaml"
contains "$err" 'line 6'
contains "$err" "spec.resourceGroup: unknown field 'resourceGroup'; did you mean 'resourceGroups'?"
head_after=$($admitctl --ledger "$L" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])')
[ "$head_before" = "$head_after" ] || fail "a refused file wrote: head $head_before -> $head_after"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:04:41Z apply -f "$work/misspelt.yaml" \
  --validate=warn
contains "$err" "Warning: ClusterQueue cq-bad3: unknown field 'spec.resourceGroup'"
contains "$out" "clusterqueue.kueue.x-k8s.io/cq-bad3 created"  # kubectl's confirmations
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:04:43Z apply -f "$work/misspelt.yaml" \
  --validate=false
lacks "$err" "unknown field"
contains "$out" "clusterqueue.kueue.x-k8s.io/cq-bad3 unchanged"
sed 's/  namespaceSelector: {}/  namespaceSelector: {}\n  queueingStrategy: StrictFIFO/' "$work/misspelt.yaml" \
  > "$work/changed.yaml"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:04:44Z apply -f "$work/changed.yaml" \
  --validate=ignore
contains "$out" "clusterqueue.kueue.x-k8s.io/cq-bad3 configured"

# ---- get workloads: REASON is Kueue's reason for every state (never a message), ADMISSION
# reads pod set:count@flavor.
{ workload huge 1 64 "team: vision"; echo ---; workload waits 1 8; } > "$work/more.yaml"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:05:00Z submit -f "$work/more.yaml"
expect_rc 0 $admitctl --ledger "$L" get workloads
row() { grep -E "^ml +$1 " <<< "$out"; }
contains "$(row train)" "main:2@h100"
contains "$(row train)" "WaitingForAdmissionChecks"
contains "$(row huge)" "ExceedsMaxQuota"
lacks "$(row huge)" "exceeds"
contains "$(row waits)" "WaitingForQuota"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:06:00Z --as scanner \
  report-check ml/train scan Ready --generation 4
token=$($admitctl --ledger "$L" get workloads -o json | python3 -c 'import json,sys; print([w for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="train"][0]["status"]["fencingToken"])')
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:06:30Z pods released ml/train --token "$token"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:07:00Z --as security \
  revoke ml/train --reason policy --drain --drain-deadline 30m
expect_rc 0 $admitctl --ledger "$L" get workloads
contains "$(row train)" "Evicting"
contains "$(row train)" "Revoked"

# ---- explain -o html: the timeline to scale (each phase placed at its start, as wide as it
# lasted; the axis ends at the time explained), no minimum widths.
expect_rc 0 $admitctl --ledger "$L" explain ml/train -o html --out -
python3 - "$out" <<'PY' || fail "explain -o html's timeline is not to scale"
import re, sys
page = sys.argv[1]
bar = page[page.index('<div class="bar">'):]
bar = bar[:bar.index("</div>\n")]
segs = [(float(l), float(w)) for l, w in re.findall(r'left:([0-9.]+)%;width:([0-9.]+)%', bar)]
assert segs and "flex:" not in page, bar
assert abs(segs[0][0]) < 0.001, segs
for (l1, w1), (l2, _) in zip(segs, segs[1:]):
    assert abs(l1 + w1 - l2) < 0.002, ("not contiguous", segs)
assert abs(segs[-1][0] + segs[-1][1] - 100) < 0.002, ("does not end at the axis' end", segs)
PY

# ---- get as kubectl get: a name, -n, -l, AGE, -o wide, name and jsonpath, -w.
expect_rc 0 $admitctl --ledger "$L" get workloads train -n ml
[ "$(wc -l <<< "$out")" = 2 ] || fail "get workloads train: $out"
contains "$out" "AGE"
expect_rc 1 $admitctl --ledger "$L" get workloads nosuch
contains "$err" 'workload.kueue.x-k8s.io "nosuch" not found'
expect_rc 0 $admitctl --ledger "$L" get workloads -n other
[ "$(wc -l <<< "$out")" = 1 ] || fail "get workloads -n other: $out"
expect_rc 0 $admitctl --ledger "$L" get wl -l team=vision -o name
[ "$out" = "workload.kueue.x-k8s.io/huge" ] || fail "get -l team=vision -o name: $out"
expect_rc 0 $admitctl --ledger "$L" get wl -l '!team' -o name
lacks "$out" "huge"
contains "$out" "workload.kueue.x-k8s.io/train"
expect_rc 1 $admitctl --ledger "$L" get wl -l 'team in vision'
contains "$err" "label selector requirement 'team in vision'"
expect_rc 0 $admitctl --ledger "$L" get wl -o 'jsonpath={range .items[*]}{.metadata.name}={.status.phase}{"\n"}{end}'
contains "$out" "huge=Rejected"
expect_rc 0 $admitctl --ledger "$L" get wl -o wide
contains "$out" "TOKEN"
contains "$out" "MESSAGE"

# ---- Pending workloads with their positions, as Kueue's visibility API.
workload later 1 8 > "$work/later.yaml"
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:08:00Z submit -f "$work/later.yaml"
expect_rc 0 $admitctl --ledger "$L" get pendingworkloads --cluster-queue gpu -o json
python3 - "$out" <<'PY' || fail "pendingworkloads of gpu: $out"
import json, sys
s = json.loads(sys.argv[1])
assert s["kind"] == "PendingWorkloadsSummary" and s["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2", s
got = [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"], i["localQueueName"]) for i in s["items"]]
assert got == [("waits", 0, 0, "lq"), ("later", 1, 1, "lq")], got
PY
expect_rc 0 $admitctl --ledger "$L" get pendingworkloads --local-queue ml/lq --offset 1 --limit 1
contains "$out" "later"
lacks "$out" "waits"
expect_rc 1 $admitctl --ledger "$L" get pendingworkloads --cluster-queue nosuch
contains "$err" 'clusterqueue "nosuch" not found'
expect_rc 1 $admitctl --ledger "$L" get pendingworkloads
contains "$err" "name one queue"

# ---- stop and resume, kueuectl's verbs: a stopped ClusterQueue admits nothing new (Hold keeps
# what runs), resumed it admits again; a LocalQueue likewise; an unknown queue is named.
S="$work/stop"
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:00:00Z apply -f "$work/checks.yaml"
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:00:01Z stop clusterqueue gpu \
  --keep-already-running
expect_rc 0 $admitctl --ledger "$S" get clusterqueues gpu -o json
contains "$out" '"status": "False"'
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:01:00Z submit -f "$work/job.yaml"
lacks "$out" "quota reserved"
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:02:00Z resume clusterqueue gpu
contains "$out" "clusterqueue.kueue.x-k8s.io/gpu resumed"
contains "$out" "quota reserved for ml/train"
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:03:00Z stop localqueue ml/lq
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:04:00Z resume lq ml/lq
expect_rc 1 $admitctl --ledger "$S" stop clusterqueue nosuch
contains "$err" "ClusterQueue nosuch is not defined in the ledger"
# A workload: stopped (spec.active false) it is evicted and deactivated; again, unchanged;
# resumed, it is queued and admitted again; explain shows both.
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:05:00Z stop workload ml/train \
  --reason "paused for the weekend"
contains "$out" "workload.kueue.x-k8s.io/train stopped"
contains "$out" "deactivated ml/train: Deactivated: The workload is deactivated: paused for the weekend"
expect_rc 0 $admitctl --ledger "$S" get workloads -n ml -o json
contains "$out" '"active": false'
expect_rc 0 $admitctl --ledger "$S" stop wl ml/train
contains "$out" "unchanged"
expect_rc 0 $admitctl --ledger "$S" --at 2026-11-29T10:06:00Z resume workload ml/train
contains "$out" "workload.kueue.x-k8s.io/train resumed"
contains "$out" "requeued ml/train (attempt 0"
contains "$out" "quota reserved for ml/train"
expect_rc 0 $admitctl --ledger "$S" explain ml/train
contains "$out" "stopped (spec.active false): paused for the weekend"
contains "$out" "resumed (spec.active true)"
expect_rc 1 $admitctl --ledger "$S" stop workload ml/train --keep-already-running
contains "$err" "--keep-already-running is a queue's"
expect_rc 1 $admitctl --ledger "$S" stop workload ml/nosuch

# ---- get nodes: each node's capacity and state, and what holds its flavor's room (the ledger
# bounds admissions by a flavor's healthy nodes together): usage over capacity, and who holds it.
expect_rc 0 $admitctl --ledger "$S" node capacity n1 --flavor h100 --capacity nvidia.com/gpu=8,memory=64Gi
expect_rc 0 $admitctl --ledger "$S" node capacity n2 --flavor h100 --capacity nvidia.com/gpu=8,memory=64Gi
expect_rc 0 $admitctl --ledger "$S" node fail n2
expect_rc 0 $admitctl --ledger "$S" get nodes
contains "$out" "FLAVOR USAGE / CAPACITY"
contains "$out" "HELD BY"
contains "$out" "nvidia.com/gpu=4/8,memory=0/64Gi"
contains "$out" "ml/train"
contains "$out" "Failed"
expect_rc 0 $admitctl --ledger "$S" get nodes n1 -o jsonpath='{.flavorRoom.heldBy[0]}'
[[ "$out" == "ml/train" ]] || fail "jsonpath heldBy: $out"

# ---- get cohorts: the header names what the values are (usage / quota).
expect_rc 0 $admitctl --ledger "$L" get cohorts
contains "$out" "USAGE / QUOTA"
contains "$out" "h100/nvidia.com/gpu=4/8"

# ---- Billing for people: GPU-hours by default, exact seconds on request and in JSON; the
# default period starts at the ledger's start (not 1970); a resource without a price is
# unpriced, not free.
expect_rc 0 $admitctl --ledger "$L" billing report --to 2026-11-29T11:00:00Z
contains "$out" "Usage from the ledger's start"
lacks "$out" "1970"
contains "$out" "GPU-hours"
lacks "$out" "resource-s"
expect_rc 0 $admitctl --ledger "$L" billing report --to 2026-11-29T11:00:00Z --units seconds
contains "$out" "resource-seconds"
printf 'currency: EUR\nprices:\n- {flavor: a100, resource: nvidia.com/gpu, perHourMicro: 1}\n' \
  > "$work/prices.yaml"
expect_rc 0 $admitctl --ledger "$L" billing report --to 2026-11-29T11:00:00Z --by flavor \
  --prices "$work/prices.yaml"
contains "$out" "unpriced"

# ---- Timestamps as Kubernetes writes them: whole seconds (intake stamps the wall clock in
# nanoseconds).
W="$work/wallclock"
expect_rc 0 $admitctl --ledger "$W" apply -f "$work/checks.yaml"
expect_rc 0 $admitctl --ledger "$W" submit -f "$work/job.yaml"
expect_rc 0 $admitctl --ledger "$W" get workloads -o json
python3 - "$out" <<'PY' || fail "timestamps with a fraction of a second: $out"
import json, re, sys
w = json.loads(sys.argv[1])["items"][0]
times = [w["metadata"]["creationTimestamp"]] + [c["lastTransitionTime"] for c in w["status"]["conditions"]]
assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", t) for t in times), times
PY

# ---- An unknown command is named.
expect_rc 2 $admitctl --ledger "$L" bogus
contains "$err" "bogus"


finish first_hour
