#!/usr/bin/env bash
# Importing from a live Kueue keeps Kueue's record (engine v22): the QuotaReserved and Admitted
# times, PodsReady, the admission checks and the requeue count come from each Workload's status;
# `get workloads -o yaml` of the ledger imported into a fresh ledger gives the same read models,
# times included; what the ledger cannot honour (an eviction in progress) is refused, naming
# it, or dropped and listed with --lenient.
#   tests/cli/import_record_test.sh ADMITCTL
admitctl=$1
# shellcheck source=tests/cli/lib.sh
source "$(dirname "$0")/lib.sh"

cat > "$work/defs.yaml" <<'YAML'
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
kind: ClusterQueue
metadata: {name: gpu}
spec:
  namespaceSelector: {}
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

# What cannot be honoured: an eviction in progress is refused, naming it; --lenient drops it.
admitted d 2026-12-06T11:50:02Z \
  '- {type: Evicted, status: "True", reason: Preempted, message: x, lastTransitionTime: "2026-12-06T11:59:00Z"}' \
  > "$work/evicting.yaml"
expect_rc 1 $admitctl --ledger "$A" import -f "$work/evicting.yaml"
contains "$err" "status.conditions[3]: an eviction in progress (reason Preempted) cannot be imported"
contains "$err" "--lenient"
expect_rc 0 $admitctl --ledger "$A" get workloads -n ml
lacks "$out" " d "
expect_rc 0 $admitctl --ledger "$A" import -f "$work/evicting.yaml" --lenient
contains "$err" "Warning: Workload d: "
contains "$err" "dropped: an eviction in progress"
finish
