#!/usr/bin/env bash
# End-to-end tests of admitctl's foundation commands on a real embedded ledger.
# Usage: cli_test.sh ADMITCTL
set -uo pipefail
admitctl=$1
source "$(dirname "$0")/lib.sh"
L="$work/ledger"

# --help everywhere.
for cmd in "" "log" "verify" "dev" "dev append"; do
  expect_rc 0 $admitctl $cmd --help
  contains "$out" "Usage"
done

# Reading a ledger that does not exist is an error, and creates nothing.
expect_rc 1 $admitctl --ledger "$L" log
contains "$err" "no ledger at"
[ ! -e "$L" ] || fail "log created a ledger"

# Append two events at a fixed logical time; sequences are printed.
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:00:00Z --as ops dev append \
  --json '{"idempotencyKey":"flavor-h100","body":{"flavorDefined":{"name":"h100","nodeLabels":[{"key":"gpu","value":"H100"}]}}}' \
  --json '{"body":{"clockAdvanced":{"toNs":"1"}}}'
[ "$out" = $'1\n2' ] || fail "sequences: $out"

# The same key and payload again: a no-op that says so.
expect_rc 0 $admitctl --ledger "$L" --at 2026-11-29T10:00:05Z --as ops dev append \
  --json '{"idempotencyKey":"flavor-h100","body":{"flavorDefined":{"name":"h100","nodeLabels":[{"key":"gpu","value":"H100"}]}}}'
contains "$out" "1 duplicate"

# Same key, different payload: refused naming the field, nothing written.
expect_rc 1 $admitctl --ledger "$L" --at 2026-11-29T10:00:05Z --as ops dev append \
  --json '{"idempotencyKey":"flavor-h100","body":{"flavorDefined":{"name":"h100","nodeLabels":[{"key":"gpu","value":"A100"}]}}}'
contains "$err" "body.flavorDefined.nodeLabels[0].value"

# An --at earlier than the ledger's last event is refused.
expect_rc 1 $admitctl --ledger "$L" --at 2026-11-29T09:59:59Z dev append \
  --json '{"body":{"clockAdvanced":{"toNs":"2"}}}'
contains "$err" "earlier than the ledger's last event"

# A malformed time and an unknown field are refused with where and why.
expect_rc 1 $admitctl --ledger "$L" --at 2026-11-29 dev append --json '{"body":{"clockAdvanced":{}}}'
contains "$err" "character 11"
expect_rc 1 $admitctl --ledger "$L" dev append --json '{"body":{"clockAdvanced":{"toNz":"1"}}}'
contains "$err" "unknown field body.clockAdvanced.toNz"

# Without --at, intake stamps the wall clock (never earlier than the head).
expect_rc 0 $admitctl --ledger "$L" dev append --json '{"body":{"clockAdvanced":{"toNs":"3"}}}'
[ "$out" = "3" ] || fail "third sequence: $out"

# log: text and JSON lines.
expect_rc 0 $admitctl --ledger "$L" log
[ "$(echo "$out" | wc -l)" = 3 ] || fail "log lines: $out"
contains "$out" "1  2026-11-29T10:00:00Z  flavorDefined  actor=ops  key=flavor-h100"
expect_rc 0 $admitctl --ledger "$L" log --from 2 -o json
[ "$(echo "$out" | wc -l)" = 2 ] || fail "json lines: $out"
echo "$out" | head -1 | python3 -c 'import json,sys; e=json.load(sys.stdin); assert e["sequence"]==2 and e["type"]=="clockAdvanced", e' \
  || fail "log -o json not parseable: $out"

# verify: OK, then an edit found and named.
expect_rc 0 $admitctl --ledger "$L" verify
contains "$out" "verified 3 events"
expect_rc 0 $admitctl --ledger "$L" verify -o json
echo "$out" | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["ok"] and r["head"]==3, r' \
  || fail "verify -o json: $out"

# Progress goes to a terminal only: piped verify prints nothing on stderr.
[ -z "$err" ] || fail "verify wrote to stderr in a pipe: $err"

# ---- The decider through the CLI: apply, submit, get, finish, import; bad input writes nothing.
D="$work/decider"
cat > "$work/setup.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
spec:
  nodeLabels: {nvidia.com/gpu.product: H100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu}
spec:
  namespaceSelector: {}
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
cat > "$work/jobs.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  parallelism: 2
  template:
    spec:
      containers:
      - name: c
        image: trainer
        resources: {requests: {nvidia.com/gpu: "4"}}
      restartPolicy: Never
---
apiVersion: batch/v1
kind: Job
metadata:
  name: waits
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  template:
    spec:
      containers:
      - name: c
        image: trainer
        resources: {requests: {nvidia.com/gpu: "2"}}
      restartPolicy: Never
YAML
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:00:00Z apply -f "$work/setup.yaml"
contains "$out" "clusterqueue.kueue.x-k8s.io/gpu created"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:00:01Z apply -f "$work/setup.yaml"
contains "$out" "clusterqueue.kueue.x-k8s.io/gpu unchanged"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:01:00Z submit -f "$work/jobs.yaml"
contains "$out" "admitted ml/job-train"
contains "$out" "pending ml/job-waits: WaitingForQuota"
# Resubmitting the same file while its workloads live is Kubernetes' AlreadyExists: nothing
# written. A retry of one request (the same --request-id) is answered from its record.
expect_rc 1 $admitctl --ledger "$D" --at 2026-11-29T10:02:00Z submit -f "$work/jobs.yaml"
contains "$err" "Conflict"
contains "$err" "workload ml/job-train already exists"
cat > "$work/retry.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
metadata:
  name: retried
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  template:
    spec:
      containers:
      - name: c
        image: trainer
        resources: {requests: {cpu: "1"}}
      restartPolicy: Never
YAML
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:02:00Z --request-id r-retry submit -f "$work/retry.yaml"
lacks "$out" "unchanged"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:02:00Z --request-id r-retry submit -f "$work/retry.yaml"
contains "$out" "job.batch/retried unchanged"
expect_rc 0 $admitctl --ledger "$D" get workloads -o json
echo "$out" | python3 -c '
import json, sys
items = {w["metadata"]["name"]: w for w in json.load(sys.stdin)["items"]}
t = items["job-train"]["status"]
assert t["admission"]["clusterQueue"] == "gpu", t
assert t["admission"]["podSetAssignments"][0]["flavors"]["nvidia.com/gpu"] == "h100", t
assert t["admission"]["podSetAssignments"][0]["count"] == 2, t
assert [c["type"] for c in t["conditions"]][:2] == ["QuotaReserved", "Admitted"], t
w = items["job-waits"]["status"]
assert w["phase"] == "Pending" and w["pendingReason"]["reason"] == "WaitingForQuota", w
' || fail "get workloads -o json: $out"
expect_rc 0 $admitctl --ledger "$D" get clusterqueues -o yaml
contains "$out" "flavorsReservation"
contains "$out" "pendingWorkloads: 1"
expect_rc 0 $admitctl --ledger "$D" get cq
contains "$out" "h100/nvidia.com/gpu=8"
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:03:00Z finish ml/job-train
contains "$out" "admitted ml/job-waits"
expect_rc 1 $admitctl --ledger "$D" finish ml/nope
contains "$err" "no workload ml/nope"
expect_rc 1 $admitctl --ledger "$D" finish nonamespace
contains "$err" "expected NAMESPACE/NAME"

# An invalid file is refused with document, field and reason, and nothing is written.
head_before=$($admitctl --ledger "$D" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])')
cat > "$work/bad.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: fine}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: broken}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: fine
      resources: [{name: cpu, nominalQuota: 9Qi}]
YAML
expect_rc 1 $admitctl --ledger "$D" apply -f "$work/bad.yaml"
contains "$err" "document 2"
contains "$err" "nominalQuota"
head_after=$($admitctl --ledger "$D" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])')
[ "$head_before" = "$head_after" ] || fail "a refused file wrote events ($head_before -> $head_after)"

# Import adopts an admitted workload.
cat > "$work/import.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: legacy, namespace: ml, uid: 11111111-2222-4333-8444-555555555555}
spec:
  queueName: lq
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          image: old
          resources: {requests: {nvidia.com/gpu: "2"}}
status:
  admission:
    clusterQueue: gpu
    podSetAssignments:
    - name: main
      count: 1
      flavors: {nvidia.com/gpu: h100}
      resourceUsage: {nvidia.com/gpu: "2"}
YAML
expect_rc 0 $admitctl --ledger "$D" --at 2026-11-29T10:04:00Z import -f "$work/import.yaml" -o json
echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert any(x["type"]=="admitted" for x in d["decisions"]), d' \
  || fail "import -o json: $out"
expect_rc 0 $admitctl --ledger "$D" verify

# ---- Lifecycle: checks, tokens, revocation, ticks.
L2="$work/lifecycle"
cat > "$work/checks.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata:
  name: scan
  annotations: {admission-ledger.io/pending-ttl: 10m, admission-ledger.io/on-timeout: Reject}
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
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:00:00Z apply -f "$work/checks.yaml"
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:01:00Z submit -f "$work/jobs.yaml"
contains "$out" "quota reserved for ml/job-train"
gen=$($admitctl --ledger "$L2" get workloads -o json | python3 -c 'import json,sys; print([w for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="job-train"][0]["status"]["admissionGeneration"])')
[ "$gen" = 1 ] || fail "admissionGeneration: $gen"
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:02:00Z --as mallory report-check ml/job-train scan Ready --generation 1
contains "$err" "does not own check scan"
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:02:00Z --as scanner report-check ml/job-train scan Ready --generation 9
contains "$err" "generation 9, which was never issued"
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:02:00Z --as scanner report-check ml/job-train scan Ready --generation 1 --message clean
contains "$out" "admitted ml/job-train"
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:03:00Z --as scanner report-check ml/job-train scan Ready --generation 1 --message clean
contains "$out" "unchanged"
contains "$out" "no-op: check scan is already Ready"
token=$($admitctl --ledger "$L2" get workloads -o json | python3 -c 'import json,sys; print([w for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="job-train"][0]["status"]["fencingToken"])')
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:04:00Z pods released ml/job-train --token bogus/1
contains "$err" "names another workload than ml/job-train"
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:04:00Z pods released ml/job-train --token bogus
contains "$err" "malformed fencing token 'bogus'"
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:04:00Z pods released ml/job-train --token "${token%/*}/5"
contains "$err" "names generation 5 of ml/job-train, which was never issued"
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:04:00Z pods released ml/job-train --token "$token"
expect_rc 0 $admitctl --ledger "$L2" --at 2026-11-29T10:05:00Z --as security revoke ml/job-train --reason "policy" --drain --drain-deadline 30m
contains "$out" "evicting ml/job-train: Revoked"
expect_rc 1 $admitctl --ledger "$L2" --at 2026-11-29T10:06:00Z pods ready ml/job-train --token "$token"
contains "$err" "stale fencing token"
# The drain deadline passes at 10:35: the quota is released with an alert, and job-train is
# reserved again as generation 2 (its scan must pass again).
expect_rc 0 $admitctl --ledger "$L2" tick --to 2026-11-29T10:40:00Z
contains "$out" "drain deadline passed for ml/job-train"
expect_rc 0 $admitctl --ledger "$L2" get workloads -o json
echo "$out" | python3 -c '
import json, sys
items = {w["metadata"]["name"]: w["status"] for w in json.load(sys.stdin)["items"]}
w = items["job-waits"]
assert w["phase"] == "Pending" and w["pendingReason"]["reason"] == "WaitingForQuota", w
t = items["job-train"]
assert t["admissionGeneration"] == 2 and t["admissionChecks"][0]["state"] == "Pending", t
' || fail "lifecycle state: $out"
expect_rc 0 $admitctl --ledger "$L2" verify
# Billing: job-train (2 pods x 4 GPUs) held quota from 10:01, its pods ran from their release at
# 10:04 until the drain's quota release at the 10:40 tick: 3 min idle, 36 min used.
expect_rc 0 $admitctl --ledger "$L2" billing report --by localqueue --by flavor -o json
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["sequences"][0] == 1 and r["sequences"][1] > 10, r
rows = [x for x in r["rows"] if x["resource"] == "nvidia.com/gpu"]
assert len(rows) == 1 and rows[0]["localQueue"] == "lq" and rows[0]["flavor"] == "h100", rows
assert rows[0]["used"] == str(8 * 36 * 60) and rows[0]["idle"] == str(8 * 3 * 60), rows
# ClusterQueue gpu: 8 GPUs nominal from 10:00 to the ledger end at 10:40; 39 min x 8 reserved.
q = [x for x in r["quota"] if x["resource"] == "nvidia.com/gpu"]
assert q == [{"clusterQueue": "gpu", "flavor": "h100", "resource": "nvidia.com/gpu",
              "nominal": str(8 * 40 * 60), "reserved": str(8 * 39 * 60),
              "unused": str(8 * 60)}], q
' || fail "billing report: $out"
expect_rc 0 $admitctl --ledger "$L2" billing report --from 2026-11-29T10:30:00Z --to 2026-11-29T11:00:00Z --bucket hour -o csv --units seconds
contains "$out" "bucket,resource,unit,used,idle"
contains "$out" "2026-11-29T10:00:00Z,nvidia.com/gpu,resource-seconds,4800,0"
expect_rc 0 $admitctl --ledger "$L2" billing report --units seconds
contains "$out" "nvidia.com/gpu: used 17280 resource-seconds, idle 1440 resource-seconds"
# A price book: 1.00 per GPU-hour of h100; 8 GPUs held 39 minutes cost 5.2.
printf 'currency: EUR\nprices:\n- {flavor: h100, resource: nvidia.com/gpu, perHourMicro: 1000000}\n' > "$work/prices.yaml"
expect_rc 0 $admitctl --ledger "$L2" billing report --by flavor --prices "$work/prices.yaml" -o json
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["currency"] == "EUR" and r["unpriced"] == [], r
assert [x["cost"] for x in r["rows"]] == ["5.2"], r
' || fail "billing cost: $out"
printf 'currency: EUR\nprices:\n- {flavor: h100, resource: nvidia.com/gpu, perHourMicro: 1.5}\n' > "$work/bad-prices.yaml"
expect_rc 1 $admitctl --ledger "$L2" billing report --prices "$work/bad-prices.yaml"
contains "$err" "prices[0].perHourMicro: '1.5' is not a non-negative integer"
expect_rc 2 $admitctl --ledger "$L2" billing report --by tenant
expect_rc 1 $admitctl --ledger "$L2" billing report --from 2026-11-29T11:00:00Z --to 2026-11-29T10:00:00Z
contains "$err" "--from must be before --to"
# ---- pods failedToStart (engine v18): the runtime cannot start an admitted workload's pods;
# the workload is finished (FailedToStart, the runtime's message) and its quota released.
F="$work/failed-to-start"
expect_rc 0 $admitctl --ledger "$F" --at 2026-11-29T10:00:00Z apply -f "$work/checks.yaml"
expect_rc 0 $admitctl --ledger "$F" --at 2026-11-29T10:01:00Z submit -f "$work/jobs.yaml"
expect_rc 0 $admitctl --ledger "$F" --at 2026-11-29T10:02:00Z --as scanner report-check ml/job-train scan Ready --generation 1
contains "$out" "admitted ml/job-train"
token=$($admitctl --ledger "$F" get workloads -o json | python3 -c 'import json,sys; print([w for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="job-train"][0]["status"]["fencingToken"])')
expect_rc 1 $admitctl --ledger "$F" --at 2026-11-29T10:03:00Z pods failedToStart ml/job-train --token "$token"
contains "$err" "pods failedToStart for ml/job-train: message: empty"
expect_rc 1 $admitctl --ledger "$F" --at 2026-11-29T10:03:00Z pods released ml/job-train --token "$token" --message "why"
contains "$err" "only a failedToStart report carries a message"
expect_rc 1 $admitctl --ledger "$F" --at 2026-11-29T10:03:00Z pods failedToStart ml/job-train --token bogus/1 --message "label conflict"
contains "$err" "fencing token 'bogus/1' names another workload"
expect_rc 0 $admitctl --ledger "$F" --at 2026-11-29T10:03:00Z pods failedToStart ml/job-train --token "$token" --message "label conflict"
contains "$out" "quota released by ml/job-train (FailedToStart)"
contains "$out" "rejected ml/job-train: FailedToStart: label conflict"
expect_rc 0 $admitctl --ledger "$F" explain ml/job-train
contains "$out" "pods failedToStart (token $token): label conflict"
expect_rc 0 $admitctl --ledger "$F" log -o json
contains "$out" '"report":"failedToStart"'
expect_rc 0 $admitctl --ledger "$F" verify
expect_rc 0 $admitctl --ledger "$F" replay --verify
# ---- Deleting definitions (delete -f, as kubectl delete -f): refused while the ledger does not
# define the object or a ClusterQueue names it, writing nothing; a deleted ClusterQueue with an
# admitted workload is listed as terminating until the workload finishes.
X="$work/deletions"
expect_rc 0 $admitctl --ledger "$X" --at 2026-11-29T10:00:00Z apply -f "$work/setup.yaml"
expect_rc 0 $admitctl --ledger "$X" --at 2026-11-29T10:01:00Z submit -f "$work/jobs.yaml"
head_of() { $admitctl --ledger "$X" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])'; }
head_before=$(head_of)
# bad.yaml's ClusterQueue has an invalid quota, which a deletion does not read; its flavor 'fine'
# was never defined.
expect_rc 1 $admitctl --ledger "$X" delete -f "$work/bad.yaml"
contains "$err" "cannot delete ResourceFlavor 'fine': the ledger does not define it; nothing recorded"
contains "$err" "admitctl: InvalidArgument: "
printf 'apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: h100}\n' > "$work/del-flavor.yaml"
expect_rc 1 $admitctl --ledger "$X" delete -f "$work/del-flavor.yaml"
# Still in use: its own code (FailedPrecondition), which the Kubernetes bridge retries on.
contains "$err" "FailedPrecondition: input 0 refused: cannot delete ResourceFlavor 'h100': in use by ClusterQueue gpu"
[ "$(head_of)" = "$head_before" ] || fail "a refused deletion wrote events"
expect_rc 1 $admitctl --ledger "$X" delete
contains "$err" "name a workload (NAMESPACE/NAME) or a file of definitions (-f)"
expect_rc 2 $admitctl --ledger "$X" delete ml/job-train -f "$work/del-flavor.yaml"
contains "$err" "excludes"
printf 'apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: gpu}\n' > "$work/del-cq.yaml"
expect_rc 0 $admitctl --ledger "$X" --at 2026-11-29T10:02:00Z delete -f "$work/del-cq.yaml" -o json
echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert "clusterqueue.kueue.x-k8s.io/gpu" in json.dumps(r), r
' || fail "delete -f -o json: $out"
expect_rc 0 $admitctl --ledger "$X" get cq
contains "$out" "Terminating"
expect_rc 0 $admitctl --ledger "$X" get clusterqueues -o json
contains "$out" "clusterQueue is terminating"
expect_rc 0 $admitctl --ledger "$X" get workloads -o json
contains "$out" "ClusterQueue gpu doesn't exist"
expect_rc 0 $admitctl --ledger "$X" --at 2026-11-29T10:03:00Z finish ml/job-train
expect_rc 0 $admitctl --ledger "$X" get cq
lacks "$out" "gpu"
expect_rc 0 $admitctl --ledger "$X" --at 2026-11-29T10:04:00Z delete -f "$work/del-flavor.yaml"
contains "$out" "resourceflavor.kueue.x-k8s.io/h100 deleted"
expect_rc 0 $admitctl --ledger "$X" replay --verify
for cmd in apply submit import finish delete get demo report-check tick pods revoke node maintenance configure billing "billing report"; do
  expect_rc 0 $admitctl $cmd --help
done

finish cli_test
