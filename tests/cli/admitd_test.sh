#!/usr/bin/env bash
# admitd end to end: a real daemon on a Unix socket and on TLS (loopback), a test PKI made by
# ops/scripts/test_pki.sh, the policy's role matrix, retries by request id, watch streams cut
# and resumed, 64 clients at once, SIGKILL at random moments under load, SIGTERM under load.
# Usage: admitd_test.sh ADMITCTL ADMITD [KILLS]
set -uo pipefail
admitctl=$1
admitd=$2
kills=${3:-30}
source "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
chmod 755 "$work"
L="$work/ledger"
S="$work/admitd.sock"
pki="$work/pki"
"$top/ops/scripts/test_pki.sh" "$pki" platform-ops ml-team security.example.com/scanner \
  node-runtime compliance stranger admin uid:0 || { echo "PKI failed"; exit 1; }

cat > "$work/policy.yaml" <<'YAML'
principals:
- name: platform-ops
  roles: [operator]
- name: ml-team
  roles: [tenant]
  namespaces: [ml]
- name: security.example.com/scanner
  roles: [check-controller]
- name: node-runtime
  roles: [runtime]
- name: compliance
  roles: [auditor]
YAML

daemon_pid=
start_daemon() {
  rm -f "$work/ready"
  "$admitd" --ledger "$L" --listen "unix:$S" --listen tls:127.0.0.1:0 \
    --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" --client-ca "$pki/ca.pem" \
    --policy "$work/policy.yaml" --ready-file "$work/ready" --log-level info \
    >>"$work/admitd.out" 2>>"$work/admitd.err" &
  daemon_pid=$!
  for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
  [ -s "$work/ready" ] || { fail "admitd did not start: $(tail -5 "$work/admitd.err")"; finish admitd; }
  T=$(grep '^tls:' "$work/ready")
}
stop_daemon() {
  kill -TERM "$daemon_pid" 2>/dev/null
  wait "$daemon_pid"
  last_daemon_rc=$?
}
trap 'kill -9 $daemon_pid 2>/dev/null; rm -rf "$work"' EXIT

as() {  # as NAME admitctl-args...: through TLS with NAME's certificate
  local who=$1; shift
  "$admitctl" --connect "$T" --cert "$pki/${who//\//_}.pem" --key "$pki/${who//\//_}.key" \
    --ca "$pki/ca.pem" "$@"
}
admin() { "$admitctl" --connect "unix:$S" "$@"; }
# head_now: the ledger's head sequence, read from the last head seen on (the whole log grows with
# every kill round; reading it all each time made the test quadratic).
head_now() {
  local seen h
  seen=$(cat "$work/head-seen" 2>/dev/null || echo 0)
  h=$(admin log --from "$((seen > 0 ? seen : 1))" | tail -1 | cut -d' ' -f1)
  [ -n "$h" ] || h=$seen
  echo "$h" > "$work/head-seen"
  echo "$h"
}

start_daemon

# --help on the daemon and the new commands.
expect_rc 0 "$admitd" --help
contains "$out" "--listen"
expect_rc 0 "$admitctl" watch --help
contains "$out" "--from"

cat > "$work/defs.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: image-scan}
spec: {controllerName: security.example.com/scanner}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec: {controllerName: finance.example.com/budget}
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
  admissionChecks: [image-scan]
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 1000}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ml, name: main}
spec: {clusterQueue: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: vision, name: main}
spec: {clusterQueue: gpu}
YAML
job() {  # job NS NAME
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $2
  namespace: $1
  labels: {kueue.x-k8s.io/queue-name: main}
spec:
  parallelism: 1
  template:
    spec:
      containers:
      - name: main
        image: registry.example/ml:1
        resources:
          requests: {nvidia.com/gpu: "1"}
YAML
}
job ml train > "$work/ml-train.yaml"
job vision detect > "$work/vision-detect.yaml"

# ---- The role matrix. A refusal names the principal, writes nothing (head unchanged).
refused() {  # refused WHO WANT-IN-ERR admitctl-args...
  local who=$1 want=$2; shift 2
  local before; before=$(head_now)
  expect_rc 1 as "$who" "$@"
  contains "$err" "PermissionDenied"
  contains "$err" "$want"
  [ "$(head_now)" = "$before" ] || fail "$who $*: refused but the head moved"
}
allowed() {  # allowed WHO admitctl-args...
  local who=$1; shift
  expect_rc 0 as "$who" "$@"
}

refused ml-team "'ml-team'" apply -f "$work/defs.yaml"
refused compliance "needs the operator role" apply -f "$work/defs.yaml"
allowed platform-ops apply -f "$work/defs.yaml"
contains "$out" "clusterqueue.kueue.x-k8s.io/gpu created"
expect_rc 0 admin log
contains "$out" "actor=platform-ops"

refused platform-ops "needs the tenant role" submit -f "$work/ml-train.yaml"
refused ml-team "namespace vision" submit -f "$work/vision-detect.yaml"
allowed ml-team submit -f "$work/ml-train.yaml"
contains "$out" "quota reserved for ml/job-train"
expect_rc 0 admin submit -f "$work/vision-detect.yaml"

# Reads: a tenant sees its namespaces only, and may not read the raw log.
allowed ml-team get workloads
contains "$out" "job-train"
lacks "$out" "job-detect"
refused ml-team "namespace vision" explain vision/job-detect
allowed ml-team explain ml/job-train
refused ml-team "needs the auditor or operator role" log
allowed compliance log
allowed compliance verify
contains "$out" "verified"
allowed compliance replay --verify
contains "$out" "OK: every recorded decision was reproduced"
allowed compliance get workloads
contains "$out" "job-detect"
refused compliance "needs the operator role" snapshot
refused compliance "needs the operator role" tick
allowed platform-ops snapshot
contains "$out" "snapshot at sequence"

# A check controller reports only its own checks.
gen=$(admin get workloads -o json | python3 -c 'import json,sys
for w in json.load(sys.stdin)["items"]:
  if w["metadata"]["name"]=="job-train": print(w["status"].get("admissionGeneration", 1))')
refused node-runtime "needs the check-controller role" report-check ml/job-train image-scan Ready --generation "$gen"
refused security.example.com/scanner "controllerName is 'finance.example.com/budget'" report-check ml/job-train budget Ready --generation "$gen"
refused compliance "needs the check-controller role" report-check ml/job-train image-scan Ready --generation "$gen"
# Its report may carry podSetUpdates (engine v17): intake refuses an invalid one over RPC,
# naming the field, and writes nothing; a valid one is recorded, and the admission carries it.
before=$(head_now)
expect_rc 1 as security.example.com/scanner report-check ml/job-train image-scan Ready --generation "$gen" \
  --label 'main:@bad=x'
contains "$err" 'podSetUpdates[0].labels["@bad"]: "@bad" is not a valid key'
expect_rc 1 as security.example.com/scanner report-check ml/job-train image-scan Ready --generation "$gen" \
  --node-selector 'workers:zone=z1'
contains "$err" 'podSetUpdates[0].podSet: "workers" is not a podSet of the workload (its podSets: main)'
expect_rc 1 as security.example.com/scanner report-check ml/job-train image-scan Ready --generation "$gen" \
  --label 'pool=a'
contains "$err" "--label 'pool=a': expected PODSET:KEY=VALUE"
[ "$(head_now)" = "$before" ] || fail "refused podSetUpdates moved the head"
allowed security.example.com/scanner report-check ml/job-train image-scan Ready --generation "$gen" \
  --label main:example.com/pool=a --annotation 'main:example.com/note=from the scanner' \
  --node-selector main:zone=z1 --toleration main:reserved=a:NoSchedule --toleration main:spot -o json
contains "$out" '"type": "admitted"'
contains "$out" "admitted ml/job-train"
contains "$out" "pod template updates from checks: main: labels example.com/pool=a, annotations example.com/note=from the scanner, nodeSelector zone=z1, tolerations reserved=a:NoSchedule spot(Exists)"
admin get workloads -o json | python3 -c 'import json,sys
for w in json.load(sys.stdin)["items"]:
  if w["metadata"]["name"] == "job-train":
    [c] = [c for c in w["status"]["admissionChecks"] if c["name"] == "image-scan"]
    assert c["podSetUpdates"] == [{"name": "main", "labels": {"example.com/pool": "a"},
        "annotations": {"example.com/note": "from the scanner"}, "nodeSelector": {"zone": "z1"},
        "tolerations": [{"key": "reserved", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
                        {"key": "spot", "operator": "Exists"}]}], c
    sys.exit(0)
sys.exit(1)' || fail "get workloads -o json does not show image-scan's podSetUpdates of ml/job-train"
expect_rc 0 admin explain ml/job-train
contains "$out" "podSetUpdates main: labels example.com/pool=a"
contains "$out" "pod template updates from checks: main: labels example.com/pool=a"
expect_rc 0 admin log
contains "$out" "actor=security.example.com/scanner"

# The pod runtime reports pods; nobody else does.
token=$(admin get workloads -o json | python3 -c 'import json,sys
for w in json.load(sys.stdin)["items"]:
  if w["metadata"]["name"]=="job-train": print(w["status"].get("fencingToken",""))')
[ -n "$token" ] || fail "no fencing token for ml/job-train"
refused ml-team "needs the runtime role" pods released ml/job-train --token "$token"
refused platform-ops "needs the runtime role" pods released ml/job-train --token "$token"
refused node-runtime "needs the operator role" revoke ml/job-train --reason test
allowed node-runtime pods released ml/job-train --token "$token"

# A connected admitctl refuses --as (before the subcommand or after it).
expect_rc 1 as node-runtime --as someone pods ready ml/job-train --token "$token"
contains "$err" "no --as"
expect_rc 1 as node-runtime pods ready ml/job-train --token "$token" --as someone
contains "$err" "no --as"

# A principal not in the policy, a foreign CA, an expired certificate, no certificate.
before=$(head_now)
refused stranger "not in the policy" tick
# A refused certificate is a permanent refusal (PermissionDenied), not a retryable Unavailable.
expect_rc 1 "$admitctl" --connect "$T" --cert "$pki/foreign.pem" --key "$pki/foreign.key" --ca "$pki/ca.pem" log
contains "$err" "PermissionDenied: admitd refused this client's certificate"
expect_rc 1 "$admitctl" --connect "$T" --cert "$pki/expired.pem" --key "$pki/expired.key" --ca "$pki/ca.pem" log
contains "$err" "PermissionDenied: admitd refused this client's certificate"
expect_rc 1 "$admitctl" --connect "$T" log
contains "$err" "needs --cert, --key and --ca"
echo | timeout 5 openssl s_client -connect "${T#tls:}" -CAfile "$pki/ca.pem" >/dev/null 2>&1
sleep 0.2
grep -q "refused a TLS connection" "$work/admitd.err" || fail "no refusal logged for a TLS client without a certificate"
# Certificates named as Unix peers are refused: not the built-in admin, not a uid.
expect_rc 1 as admin node capacity evil --flavor h100 --capacity nvidia.com/gpu=1
contains "$err" "named 'admin': that name is reserved for Unix peers"
expect_rc 1 as uid:0 log
contains "$err" "named 'uid:0': that name is reserved for Unix peers"
grep -q "refused the client certificate named 'admin'" "$work/admitd.err" \
  || fail "no refusal logged for a certificate named admin"
grep -q "refused the client certificate named 'uid:0'" "$work/admitd.err" \
  || fail "no refusal logged for a certificate named uid:0"
[ "$(head_now)" = "$before" ] || fail "refused connections moved the head"

# Unix peers: another uid is uid:N and needs a policy entry; SIGHUP reloads the policy, and an
# invalid policy is refused with the field path while the running one stays.
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
  nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$admitctl" --connect "unix:$S" "$@"; }
  out=$(nobody log 2>&1); rc=$?
  [ $rc = 1 ] || fail "uid 65534 without a policy entry: exit $rc"
  contains "$out" "uid:65534"
  cp "$work/policy.yaml" "$work/policy.good"
  printf -- '- name: uid:65534\n  roles: [auditor]\n' >> "$work/policy.yaml"
  kill -HUP "$daemon_pid"; sleep 0.3
  out=$(nobody log 2>&1) || fail "uid:65534 as auditor after SIGHUP: $out"
  printf -- '- name: broken\n  roles: [superuser]\n' >> "$work/policy.yaml"
  kill -HUP "$daemon_pid"; sleep 0.3
  grep -q "principals\[6\].roles\[0\]" "$work/admitd.err" || fail "an invalid policy was not refused naming the field"
  out=$(nobody log 2>&1) || fail "the running policy did not stay after an invalid reload: $out"
  cp "$work/policy.good" "$work/policy.yaml"
  kill -HUP "$daemon_pid"; sleep 0.3
else
  echo "admitd_test: skipping the uid:N checks (needs root and setpriv)"
fi

# ---- Retries by request id: the first outcome, nothing written; another request: refused.
expect_rc 0 admin --request-id node-a node capacity n1 --flavor h100 --capacity nvidia.com/gpu=8
first=$out
before=$(head_now)
expect_rc 0 admin --request-id node-a node capacity n1 --flavor h100 --capacity nvidia.com/gpu=8
contains "$out" "a retry"
contains "$out" "$(echo "$first" | head -1 | sed 's/ recorded/ unchanged/')"
[ "$(head_now)" = "$before" ] || fail "a retry wrote events"
expect_rc 1 admin --request-id node-a node capacity n1 --flavor h100 --capacity nvidia.com/gpu=4
contains "$err" "Conflict"
contains "$err" "first differing field"

# ---- The nodes' read model (the bridge plans its node reports from it: docs/k8s.md, "Node
# inventory").
expect_rc 0 admin get nodes -o json
contains "$out" '"name": "n1"'
contains "$out" '"flavor": "h100"'
contains "$out" '"nvidia.com/gpu": "8"'
contains "$out" '"failed": false'
contains "$out" '"inventoryComplete": false'
expect_rc 0 admin get nodes
contains "$out" "inventory complete: no"

# ---- 64 clients at once: submits, then check reports and pod reports.
pids=()
for i in $(seq 64); do
  job ml "load-$i" > "$work/load-$i.yaml"
  ( as ml-team submit -f "$work/load-$i.yaml" > "$work/load-$i.out" 2>&1; echo $? > "$work/load-$i.rc" ) &
  pids+=($!)
done
wait "${pids[@]}"
for i in $(seq 64); do
  [ "$(cat "$work/load-$i.rc")" = 0 ] || fail "client $i: $(cat "$work/load-$i.out")"
done
# Kueue admits one workload per ClusterQueue per cycle: report on those holding a reservation
# now, and let operators' calls (each one more cycle) fill the rest of the 64.
reserved=$(admin get workloads -o json | python3 -c 'import json,sys
for w in json.load(sys.stdin)["items"]:
  st=w.get("status",{})
  if w["metadata"]["name"].startswith("job-load-") and "admission" in st and "fencingToken" not in st:
    print(w["metadata"]["name"], st.get("admissionGeneration",1))' | head -32)
pids=()
n=0
while read -r name g; do
  [ -n "$name" ] || continue
  n=$((n + 1))
  state=Pending; ((n % 2)) && state=Ready
  ( as security.example.com/scanner report-check "ml/$name" image-scan $state --generation "$g" > "$work/r-$n.out" 2>&1; echo $? > "$work/r-$n.rc" ) &
  pids+=($!)
done <<< "$reserved"
for i in $(seq $((n + 1)) 64); do
  ( as platform-ops node capacity "load-$i" --flavor h100 --capacity nvidia.com/gpu=8 > "$work/r-$i.out" 2>&1; echo $? > "$work/r-$i.rc" ) &
  pids+=($!)
done
wait "${pids[@]}"
[ "$n" -ge 1 ] || fail "no workload held a reservation to report on"
for i in $(seq 64); do
  [ "$(cat "$work/r-$i.rc")" = 0 ] || fail "client $i of the second 64: $(cat "$work/r-$i.out")"
done
expect_rc 0 as compliance verify
contains "$out" "verified"
expect_rc 0 as compliance replay --verify
contains "$out" "OK: every recorded decision was reproduced"
grep -q "groups" "$work/admitd.err" || true

# ---- Watch: cut at random points and resumed from the next sequence, it sees every event
# exactly once, in order, as log prints them. Appends go on meanwhile.
( for i in $(seq 40); do admin --request-id "w-$i" node capacity "w$i" --flavor h100 --capacity nvidia.com/gpu=1 >/dev/null 2>&1; done ) &
appender=$!
next=1
: > "$work/watched"
for round in $(seq 12); do
  if ((round % 2)); then
    # (bounded: past the last append a watch waits for more)
    timeout -s KILL 3 "$admitctl" --connect "unix:$S" watch --from "$next" --limit $((RANDOM % 30 + 1)) >> "$work/watched" 2>/dev/null
  else
    ( timeout -s KILL 0.$((RANDOM % 4 + 1)) "$admitctl" --connect "unix:$S" watch --from "$next" >> "$work/watched" 2>/dev/null ) 2>/dev/null
  fi
  last=$(tail -1 "$work/watched" | cut -d' ' -f1)
  [ -n "$last" ] && next=$((last + 1))
done
wait $appender
remaining=$(( $(head_now) - next + 1 ))
if ((remaining > 0)); then
  timeout 10 "$admitctl" --connect "unix:$S" watch --from "$next" --limit "$remaining" >> "$work/watched" 2>/dev/null
fi
admin log > "$work/logged"
diff <(cut -d' ' -f1 "$work/watched") <(cut -d' ' -f1 "$work/logged") >/dev/null \
  || fail "watch cut and resumed does not match log: $(diff <(cut -d' ' -f1 "$work/watched") <(cut -d' ' -f1 "$work/logged") | head -5)"
diff "$work/watched" "$work/logged" >/dev/null || fail "watched lines differ from log's"
# A filtered watch: only admissions.
expect_rc 0 timeout 10 "$admitctl" --connect "unix:$S" watch --kind admitted --limit 2
[ "$(echo "$out" | grep -c admitted)" = 2 ] || fail "watch --kind admitted: $out"

# ---- SIGTERM under load: exit 0, every answered call durable.
load() {  # load TAG N: N node capacity calls with request ids TAG-k; answered ids to TAG.acked
  local tag=$1 n=$2
  for k in $(seq "$n"); do
    if admin --request-id "$tag-$k" node capacity "$tag-$k" --flavor h100 --capacity nvidia.com/gpu=2 >/dev/null 2>&1; then
      echo "$tag-$k" >> "$work/$tag.acked"
    fi
  done
}
retry_all() {  # retry_all TAG: every answered call is in the ledger; its retry writes nothing
  local tag=$1 before; before=$(head_now)
  [ -f "$work/$tag.acked" ] || return 0
  while read -r id; do
    out=$(admin --request-id "$id" node capacity "$id" --flavor h100 --capacity nvidia.com/gpu=2 2>&1) \
      || fail "retry of answered $id: $out"
    [[ "$out" == *"a retry"* ]] || fail "answered call $id is not in the ledger: $out"
  done < "$work/$tag.acked"
  [ "$(head_now)" = "$before" ] || fail "$tag: retries of answered calls wrote events"
}
for c in $(seq 8); do load "term$c" 200 & done
sleep 0.5
stop_daemon
[ "$last_daemon_rc" = 0 ] || fail "admitd exited $last_daemon_rc on SIGTERM"
wait
start_daemon
for c in $(seq 8); do retry_all "term$c"; done

# ---- SIGKILL at random moments under load.
for round in $(seq "$kills"); do
  for c in $(seq 6); do load "kill$round-$c" 200 & done
  sleep 0.$((RANDOM % 5 + 1))
  kill -9 "$daemon_pid"; wait "$daemon_pid" 2>/dev/null
  wait
  start_daemon
  for c in $(seq 6); do retry_all "kill$round-$c"; done
done
admin log > "$work/final-log"
dups=$(grep -o 'key=req/[^ ]*' "$work/final-log" | sort | uniq -d | head -3)
[ -z "$dups" ] || fail "request keys recorded twice: $dups"
expect_rc 0 as compliance verify
contains "$out" "verified"
expect_rc 0 as compliance replay --verify
contains "$out" "OK: every recorded decision was reproduced"
stop_daemon
[ "$last_daemon_rc" = 0 ] || fail "admitd exited $last_daemon_rc on the last SIGTERM"
# And embedded mode agrees with what the daemon served.
expect_rc 0 "$admitctl" --ledger "$L" verify
expect_rc 0 "$admitctl" --ledger "$L" replay --verify
finish admitd
