#!/usr/bin/env bash
# What one tenant can send another's way through admitd over TLS, with its own certificate, by a
# client of ours that sends what admitctl never sends (tests/rpc/hostile_client.cc `record`):
# a uid-only reference to another namespace's workload, another namespace's idempotency key,
# another workload's uid; and a name used again after its workload was deleted (issue 31,
# items 1, 6, 7, 8, 11). Each refusal writes nothing (the head does not move).
# Usage: tenant_rpc_test.sh ADMITCTL ADMITD HOSTILE_CLIENT
set -uo pipefail
admitctl=$1
admitd=$2
hostile=$3
source "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
L="$work/ledger"
S="$work/admitd.sock"
pki="$work/pki"
"$top/ops/scripts/test_pki.sh" "$pki" platform-ops ml-team vision-team || { echo "PKI failed"; exit 1; }
cat > "$work/policy.yaml" <<'YAML'
principals:
- {name: platform-ops, roles: [operator]}
- {name: ml-team, roles: [tenant], namespaces: [ml]}
- {name: vision-team, roles: [tenant], namespaces: [vision]}
YAML
"$admitd" --ledger "$L" --listen "unix:$S" --listen tls:127.0.0.1:0 \
  --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" --client-ca "$pki/ca.pem" \
  --policy "$work/policy.yaml" --ready-file "$work/ready" >"$work/admitd.out" 2>&1 &
daemon_pid=$!
trap 'kill -9 $daemon_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
[ -s "$work/ready" ] || { fail "admitd did not start: $(tail -5 "$work/admitd.out")"; finish tenant_rpc; }
T=$(grep '^tls:' "$work/ready")
tls() { local who=$1; echo --connect "$T" --cert "$pki/$who.pem" --key "$pki/$who.key" --ca "$pki/ca.pem"; }
as() { local who=$1; shift; "$admitctl" $(tls "$who") "$@"; }
raw() { local who=$1; shift; "$hostile" $(tls "$who") record "$@"; }
head_now() { "$admitctl" --connect "unix:$S" log | tail -1 | cut -d' ' -f1; }
uid_of() {
  "$admitctl" --connect "unix:$S" get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if "%s/%s" % (w["metadata"]["namespace"], w["metadata"]["name"]) == sys.argv[1]:
        print(w["metadata"]["uid"])' "$1"
}
phase_of() {
  "$admitctl" --connect "unix:$S" get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if "%s/%s" % (w["metadata"]["namespace"], w["metadata"]["name"]) == sys.argv[1]:
        print(w.get("status", {}).get("phase", ""))' "$1"
}
job() {
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $2, namespace: $1, labels: {kueue.x-k8s.io/queue-name: main}}
spec:
  template:
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
      restartPolicy: Never
YAML
}
cat > "$work/defs.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: shared}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources: [{name: cpu, nominalQuota: 50}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: ml}
spec: {clusterQueue: shared}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: vision}
spec: {clusterQueue: shared}
YAML
expect_rc 0 as platform-ops apply -f "$work/defs.yaml"
job vision detect-1 > "$work/detect-1.yaml"
expect_rc 0 as vision-team submit -f "$work/detect-1.yaml"
victim=$(uid_of vision/job-detect-1)
[ -n "$victim" ] || fail "vision/job-detect-1 was not submitted"

# 1. A uid-only reference from ml-team to vision's workload: finish and delete refused.
for kind in workloadFinished workloadDeleted; do
  before=$(head_now)
  echo "{\"body\": {\"$kind\": {\"workload\": {\"namespace\": \"ml\", \"name\": \"\", \"uid\": \"$victim\"}}}}" > "$work/ref.json"
  expect_rc 1 raw ml-team --request-id "ref-$kind" "$work/ref.json"
  contains "$out" "no workload ml/(uid $victim)"
  lacks "$out" "vision"
  [ "$(head_now)" = "$before" ] || fail "$kind by uid as ml-team wrote events"
  [ "$(phase_of vision/job-detect-1)" = "Admitted" ] || fail "vision/job-detect-1 is $(phase_of vision/job-detect-1) after ml-team's $kind"
done

# 8. ml-team's submission carrying vision's uid: refused naming both; the token stays one.
# (hostile_client reads one event per line.)
echo '{"body": {"workloadSubmitted": {"workload": {"namespace": "ml", "name": "mine", "uid": "'"$victim"'", "queueName": "main", "podSets": [{"name": "main", "count": 1, "requests": [{"name": "cpu", "milli": "1000"}]}]}}}}' > "$work/steal.json"
before=$(head_now)
expect_rc 1 raw ml-team --request-id steal "$work/steal.json"
contains "$out" "Conflict"
contains "$out" "ml/mine"
contains "$out" "vision/job-detect-1"
[ "$(head_now)" = "$before" ] || fail "a submission with another workload's uid wrote events"

# 6. ml-team records under the key vision's next submission would have had (unscoped): vision's
# submission is recorded, not taken for a retry; ml-team's probe of vision's key tells nothing.
job vision detect-5 > "$work/detect-5.yaml"
echo '{"idempotencyKey": "submit/vision/job-detect-5", "body": {"workloadSubmitted": {"workload": {"namespace": "ml", "name": "squat", "uid": "uid-squat", "queueName": "main", "podSets": [{"name": "main", "count": 1, "requests": [{"name": "cpu", "milli": "1000"}]}]}}}}' > "$work/squat.json"
expect_rc 0 raw ml-team --request-id squat "$work/squat.json"
expect_rc 0 as vision-team submit -f "$work/detect-5.yaml"
lacks "$out" "unchanged"
[ -n "$(uid_of vision/job-detect-5)" ] || fail "vision's submission of job-detect-5 was not recorded"
key=$("$admitctl" --connect "unix:$S" log | grep -o 'key=by/vision-team/submit/vision/job-detect-5/[^ ]*' | head -1)
[ -n "$key" ] || fail "vision's key is not in vision-team's namespace of keys: $("$admitctl" --connect "unix:$S" log | tail -5)"
probe_key=${key#key=by/vision-team/}
sed "s#submit/vision/job-detect-5#$probe_key#; s/squat/probe/g" "$work/squat.json" > "$work/probe.json"
expect_rc 0 raw ml-team --request-id probe "$work/probe.json"
lacks "$out" "unchanged"
lacks "$out" "Conflict"

# 7. A name used again after its workload was deleted: a new workload (new uid), admitted.
job vision sweep-01 > "$work/sweep.yaml"
expect_rc 0 as vision-team submit -f "$work/sweep.yaml"
first=$(uid_of vision/job-sweep-01)
expect_rc 0 as vision-team delete vision/job-sweep-01
expect_rc 0 as vision-team submit -f "$work/sweep.yaml"
lacks "$out" "unchanged"
contains "$out" "admitted vision/job-sweep-01"
second=$(uid_of vision/job-sweep-01)
[ -n "$second" ] && [ "$second" != "$first" ] || fail "the resubmitted sweep-01 has uid '$second' (first '$first')"

# 11. A finish of a workload that does not exist, and a flavor with an empty name: refused.
before=$(head_now)
echo '{"body": {"workloadFinished": {"workload": {"namespace": "ml", "name": "ghost"}}}}' > "$work/ghost.json"
expect_rc 1 raw ml-team --request-id ghost "$work/ghost.json"
contains "$out" "NotFound"
echo '{"body": {"flavorDefined": {"name": ""}}}' > "$work/empty.json"
expect_rc 1 raw platform-ops --request-id empty "$work/empty.json"
contains "$out" "ResourceFlavor metadata.name: empty"
[ "$(head_now)" = "$before" ] || fail "refused inputs wrote events"

# get as kubectl get, through admitd: a tenant's -A and -n stay in its namespaces, and -w
# prints the row of a workload submitted while it watches.
expect_rc 0 as vision-team get workloads -A -o name
lacks "$out" "ml/"
expect_rc 0 as vision-team get workloads -n ml
[ "$(wc -l <<< "$out")" = 1 ] || fail "vision-team's get -n ml shows rows: $out"
as vision-team get workloads -w > "$work/watch.txt" 2>&1 &
watch_pid=$!
sleep 1
job vision watched-01 > "$work/watched.yaml"
expect_rc 0 as vision-team submit -f "$work/watched.yaml"
for _ in $(seq 100); do grep -q "job-watched-01" "$work/watch.txt" && break; sleep 0.1; done
kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null
grep -q "job-watched-01" "$work/watch.txt" || fail "get -w did not print the new row: $(cat "$work/watch.txt")"
[ "$(grep -c '^NAMESPACE' "$work/watch.txt")" = 1 ] || fail "get -w repeated its header"
expect_rc 1 "$admitctl" --ledger "$work/embedded" get workloads -w
contains "$err" "--connect"

# stop and resume through admitd: the operator's; a tenant is refused, nothing written.
before=$(head_now)
expect_rc 1 as ml-team stop clusterqueue shared
[ "$(head_now)" = "$before" ] || fail "a tenant's stop wrote events"
expect_rc 0 as platform-ops stop clusterqueue shared --keep-already-running
expect_rc 0 as platform-ops get clusterqueues shared
contains "$out" "Stopped"
expect_rc 0 as platform-ops resume clusterqueue shared
expect_rc 0 as platform-ops get clusterqueues shared
lacks "$out" "Stopped"

expect_rc 0 "$admitctl" --connect "unix:$S" replay --verify
finish tenant_rpc
