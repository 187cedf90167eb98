#!/usr/bin/env bash
# Metrics (docs/metrics.md): the ledger's metrics projection under Kueue's names.
# - exact values for a small scenario (a reservation waiting for a check, then admitted);
#   `metrics --at N` gives what the ledger showed at N, byte for byte; promtool accepts it;
# - the demo's counters equal an independent count of its log (Python, from `log -o json`);
# - admitd --metrics-listen: /healthz, /readyz, 404s; /metrics is the same projection plus the
#   daemon's own counters; a real Prometheus (Debian's) scrapes it, and PromQL sees an
#   admission move kueue_admitted_workloads_total and a pending check in the pending gauge;
#   after a restart the projection is the same; `metrics --at N` equals what was served at N.
# Usage: metrics_test.sh ADMITCTL ADMITD
admitctl=$1 admitd=$2
. "$(dirname "$0")/lib.sh"
command -v promtool > /dev/null && command -v prometheus > /dev/null ||
  { echo "FAIL: promtool and prometheus are needed (Debian's prometheus package; ops/scripts/setup.sh installs it)"; exit 1; }
daemon_pid= prom_pid=
trap 'kill -9 $daemon_pid $prom_pid 2>/dev/null; rm -rf "$work"' EXIT

L="$work/ledger"
cat > "$work/setup.yaml" <<'YAML'
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
job() {  # job NAME GPUS
  cat <<YAML
---
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: ml, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  template:
    spec:
      containers:
      - {name: c, image: trainer, resources: {requests: {nvidia.com/gpu: "$2"}}}
      restartPolicy: Never
YAML
}
{ job train 8; job waits 4; } > "$work/jobs.yaml"
job late 8 > "$work/late.yaml"
A() { "$admitctl" --ledger "$L" "$@"; }
metric() {  # metric TEXT SERIES: the value of one series line, or "absent"
  local v
  v=$(grep -F "$2 " <<< "$1" | grep -v '^#' | awk '{print $NF}' | head -1)
  echo "${v:-absent}"
}
want() {  # want TEXT SERIES VALUE
  local got; got=$(metric "$1" "$2")
  [ "$got" = "$3" ] || fail "$2 = $got, want $3"
}

expect_rc 0 A --at 2026-11-29T10:00:00Z apply -f "$work/setup.yaml"
expect_rc 0 A --at 2026-11-29T10:01:00Z submit -f "$work/jobs.yaml"
contains "$out" "quota reserved for ml/job-train"
n1=$(A log | tail -1 | cut -d' ' -f1)
expect_rc 0 A metrics
m1=$out
want "$m1" 'kueue_quota_reserved_workloads_total{cluster_queue="gpu",priority_class=""}' 1
want "$m1" 'kueue_quota_reserved_wait_time_seconds_sum{cluster_queue="gpu",priority_class=""}' 0
want "$m1" 'kueue_admitted_workloads_total{cluster_queue="gpu",priority_class=""}' absent
want "$m1" 'admission_checks_pending{admission_check="scan"}' 1
want "$m1" 'kueue_reserving_active_workloads{cluster_queue="gpu"}' 1
want "$m1" 'kueue_admitted_active_workloads{cluster_queue="gpu"}' 0
want "$m1" 'kueue_cluster_queue_resource_reservation{cohort="",cluster_queue="gpu",flavor="h100",resource="nvidia.com/gpu"}' 8
want "$m1" 'kueue_cluster_queue_resource_usage{cohort="",cluster_queue="gpu",flavor="h100",resource="nvidia.com/gpu"}' 0
want "$m1" 'kueue_cluster_queue_nominal_quota{cohort="",cluster_queue="gpu",flavor="h100",resource="nvidia.com/gpu"}' 8
want "$m1" 'admission_idle_gpus{cluster_queue="gpu",flavor="h100"}' 8
pending_total=$(( $(metric "$m1" 'kueue_pending_workloads{cluster_queue="gpu",status="active"}') + \
                  $(metric "$m1" 'kueue_pending_workloads{cluster_queue="gpu",status="inadmissible"}') ))
[ "$pending_total" = 1 ] || fail "pending workloads in gpu: $pending_total, want 1 (ml/job-waits)"
want "$m1" 'kueue_cluster_queue_resource_pending{cohort="",cluster_queue="gpu",resource="nvidia.com/gpu"}' 4
want "$m1" 'kueue_cluster_queue_status{cluster_queue="gpu",status="active"}' 1
want "$m1" 'kueue_cluster_queue_status{cluster_queue="gpu",status="pending"}' 0
promtool check metrics <<< "$m1" || fail "promtool rejects the metrics"
lacks "$m1" "kueue_local_queue_"
# Kueue's LocalQueue twins, behind a flag as in Kueue.
expect_rc 0 A metrics --local-queue-metrics
lq=$out
want "$lq" 'kueue_local_queue_quota_reserved_workloads_total{name="lq",namespace="ml"}' 1
want "$lq" 'kueue_local_queue_reserving_active_workloads{name="lq",namespace="ml"}' 1
want "$lq" 'kueue_local_queue_resource_reservation{name="lq",namespace="ml",flavor="h100",resource="nvidia.com/gpu"}' 8
want "$lq" 'kueue_local_queue_resource_usage{name="lq",namespace="ml",flavor="h100",resource="nvidia.com/gpu"}' 0
lq_pending=$(( $(metric "$lq" 'kueue_local_queue_pending_workloads{name="lq",namespace="ml",status="active"}') + \
               $(metric "$lq" 'kueue_local_queue_pending_workloads{name="lq",namespace="ml",status="inadmissible"}') ))
[ "$lq_pending" = 1 ] || fail "pending workloads in ml/lq: $lq_pending, want 1"
promtool check metrics <<< "$lq" || fail "promtool rejects the LocalQueue metrics"

expect_rc 0 A --at 2026-11-29T10:03:00Z --as scanner report-check ml/job-train scan Ready --generation 1
contains "$out" "admitted ml/job-train"
expect_rc 0 A metrics
m2=$out
want "$m2" 'kueue_admitted_workloads_total{cluster_queue="gpu",priority_class=""}' 1
want "$m2" 'kueue_admission_wait_time_seconds_sum{cluster_queue="gpu",priority_class=""}' 120
want "$m2" 'kueue_admission_checks_wait_time_seconds_sum{cluster_queue="gpu",priority_class=""}' 120
want "$m2" 'kueue_admission_checks_wait_time_seconds_bucket{cluster_queue="gpu",priority_class="",le="80"}' 0
want "$m2" 'kueue_admission_checks_wait_time_seconds_bucket{cluster_queue="gpu",priority_class="",le="160"}' 1
want "$m2" 'admission_check_wait_time_seconds_count{cluster_queue="gpu",admission_check="scan",result="Ready"}' 1
want "$m2" 'admission_checks_pending{admission_check="scan"}' 0
want "$m2" 'kueue_admitted_active_workloads{cluster_queue="gpu"}' 1
want "$m2" 'kueue_cluster_queue_resource_usage{cohort="",cluster_queue="gpu",flavor="h100",resource="nvidia.com/gpu"}' 8
expect_rc 0 A metrics --local-queue-metrics
want "$out" 'kueue_local_queue_admitted_workloads_total{name="lq",namespace="ml"}' 1
want "$out" 'kueue_local_queue_admission_checks_wait_time_seconds_sum{name="lq",namespace="ml"}' 120
promtool check metrics <<< "$m2" || fail "promtool rejects the metrics"
# The past, byte for byte.
expect_rc 0 A metrics --at "$n1"
[ "$out" = "$m1" ] || fail "metrics --at $n1 differs from what the ledger showed then: $(diff <(echo "$m1") <(echo "$out") | head -5)"

# The demo: counters against an independent count of its log.
expect_rc 0 "$admitctl" demo --dir "$work/demo"
"$admitctl" --ledger "$work/demo" metrics > "$work/demo.prom" || fail "metrics of the demo"
promtool check metrics < "$work/demo.prom" || fail "promtool rejects the demo's metrics"
"$admitctl" --ledger "$work/demo" log -o json > "$work/demo.log" || fail "log of the demo"
python3 - "$work/demo.log" "$work/demo.prom" <<'PY' || fail "the demo's counters differ from its log"
import json, re, sys
from collections import Counter
events = [json.loads(l) for l in open(sys.argv[1])]
pc, cq = {}, {}
want = Counter()
for e in events:
    b = e["event"]["body"]; kind = e["type"]
    if kind in ("workloadSubmitted", "workloadImported"):
        w = b[kind]["workload"]; pc[w["uid"]] = w.get("priorityClassName", "")
    elif kind == "quotaReserved":
        uid = b[kind]["workload"]["uid"]; cq[uid] = b[kind]["admission"]["clusterQueue"]
        want[("kueue_quota_reserved_workloads_total", cq[uid], pc.get(uid, ""))] += 1
    elif kind == "admitted":
        uid = b[kind]["workload"]["uid"]
        want[("kueue_admitted_workloads_total", cq[uid], pc.get(uid, ""))] += 1
        want[("kueue_admission_wait_time_seconds_count", cq[uid], pc.get(uid, ""))] += 1
got = Counter()
pat = re.compile(r'^(kueue_quota_reserved_workloads_total|kueue_admitted_workloads_total|kueue_admission_wait_time_seconds_count)\{cluster_queue="([^"]*)",priority_class="([^"]*)"\} (\d+)$')
for line in open(sys.argv[2]):
    m = pat.match(line.strip())
    if m: got[(m[1], m[2], m[3])] = int(m[4])
if not want or got != want:
    sys.exit(f"metrics {dict(got)} != log {dict(want)}")
print(f"demo: {sum(want.values())} counted events agree")
PY

# admitd: the same projection over HTTP, scraped by a real Prometheus.
S="$work/admitd.sock"
pki="$work/pki"
"$(dirname "$0")/../../ops/scripts/test_pki.sh" "$pki" scanner > /dev/null 2>&1 || fail "PKI"
printf 'principals:\n- name: scanner\n  roles: [check-controller]\n' > "$work/policy.yaml"
start_daemon() {
  rm -f "$work/ready"
  "$admitd" --ledger "$L" --listen "unix:$S" --listen tls:127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
    --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" --client-ca "$pki/ca.pem" \
    --policy "$work/policy.yaml" \
    --ready-file "$work/ready" --log-level warn >> "$work/admitd.out" 2>> "$work/admitd.err" &
  daemon_pid=$!
  for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
  [ -s "$work/ready" ] || { fail "admitd did not start: $(tail -5 "$work/admitd.err")"; finish metrics; }
  url=$(grep '^http://' "$work/ready")
  T=$(grep '^tls:' "$work/ready")
}
scanner() { "$admitctl" --connect "$T" --cert "$pki/scanner.pem" --key "$pki/scanner.key" --ca "$pki/ca.pem" "$@"; }
stop_daemon() { kill -TERM "$daemon_pid"; wait "$daemon_pid"; daemon_pid=; }
get() { python3 -c '
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=10); print(r.status); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); sys.stdout.write(e.read().decode())' "$1"; }
projection() { grep -v '^admitd_\|^# HELP admitd_\|^# TYPE admitd_' <<< "$1"; }
start_daemon
C() { "$admitctl" --connect "unix:$S" "$@"; }
out=$(get "$url/healthz"); [ "$(head -1 <<< "$out")" = 200 ] || fail "/healthz: $out"
out=$(get "$url/readyz"); [ "$(head -1 <<< "$out")" = 200 ] || fail "/readyz: $out"
out=$(get "$url/nothing"); [ "$(head -1 <<< "$out")" = 404 ] || fail "/nothing: $out"
contains "$out" "/metrics"
served=$(get "$url/metrics" | tail -n +2)
contains "$served" "admitd_rpc_record_calls_total"
promtool check metrics <<< "$served" || fail "promtool rejects /metrics"
[ "$(projection "$served")" = "$m2" ] || fail "/metrics differs from admitctl metrics: $(diff <(projection "$served") <(echo "$m2") | head -5)"
[ "$(C metrics)" = "$m2" ] || fail "admitctl --connect metrics differs"
# The Grafana dashboard parses, its queries are valid PromQL (promtool check rules), and it
# names only metrics admitd exports.
grafana="$(dirname "$0")/../../ops/grafana/admission-ledger.json"
echo "$served" > "$work/served.prom"
python3 - "$grafana" "$work/grafana-rules.yml" "$work/served.prom" <<'PY' || fail "the Grafana dashboard"
import json, re, sys
dash = json.load(open(sys.argv[1]))
exported = set(re.findall(r"^# TYPE (\S+) ", open(sys.argv[3]).read(), re.M))
exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
assert exprs, "no queries"
named = set()
for e in exprs:
    bare = re.sub(r"\{[^}]*\}|\b(?:by|without) \([^)]*\)", "", e)  # no label names
    for m in re.findall(r"\b((?:kueue|admission|admitd)_[a-z_]+)", bare):
        base = re.sub(r"_(bucket|sum|count)$", "", m)
        named.add(base if base in exported else m)
missing = sorted(n for n in named if n not in exported)
if missing:
    sys.exit(f"the dashboard names metrics admitd does not export: {missing}")
with open(sys.argv[2], "w") as f:
    f.write("groups:\n- name: dashboard\n  rules:\n")
    for i, e in enumerate(exprs):
        f.write(f"  - record: dashboard:q{i}\n    expr: {json.dumps(e)}\n")
print(f"grafana: {len(exprs)} queries over {len(named)} exported metrics")
PY
promtool check rules "$work/grafana-rules.yml" > /dev/null || fail "promtool rejects the dashboard's queries"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/prometheus.yml" <<YAML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
- job_name: admitd
  static_configs: [{targets: ["${url#http://}"]}]
YAML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom-data" \
  --web.listen-address="127.0.0.1:$port" > "$work/prometheus.log" 2>&1 &
prom_pid=$!
promql() {  # promql QUERY: the first result's value, or "none"
  python3 -c '
import json, sys, urllib.parse, urllib.request
q = urllib.parse.urlencode({"query": sys.argv[2]})
try:
    r = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?{q}", timeout=5))
    res = r["data"]["result"]; print(res[0]["value"][1] if res else "none")
except Exception as e:
    print("none")' "$port" "$1"
}
await() {  # await QUERY VALUE: within 30 s
  local got
  for _ in $(seq 60); do got=$(promql "$1"); [ "$got" = "$2" ] && return 0; sleep 0.5; done
  fail "Prometheus: $1 = $got, want $2 ($(tail -3 "$work/prometheus.log"))"
}
await 'kueue_admitted_workloads_total{cluster_queue="gpu"}' 1
await 'admission_checks_pending{admission_check="scan"}' 0
# Finishing job-train frees the quota: job-waits gets it and waits for its check; then its
# check is Ready and it is admitted.
expect_rc 0 C finish ml/job-train
contains "$out" "quota reserved for ml/job-waits"
await 'admission_checks_pending{admission_check="scan"}' 1
# Ledger time moves on (another workload, a little later): the wait shows in the oldest gauge.
sleep 1.2
expect_rc 0 C submit -f "$work/late.yaml"
await 'admission_check_oldest_pending_seconds{admission_check="scan"} > bool 0' 1
gen=$(C get workloads -o json | python3 -c 'import json,sys; print([w for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="job-waits"][0]["status"]["admissionGeneration"])')
expect_rc 0 scanner report-check ml/job-waits scan Ready --generation "$gen"
contains "$out" "admitted ml/job-waits"
await 'kueue_admitted_workloads_total{cluster_queue="gpu"}' 2
await 'admission_checks_pending{admission_check="scan"}' 0
await 'admission_check_oldest_pending_seconds{admission_check="scan"}' 0
await 'sum(kueue_pending_workloads{cluster_queue="gpu"})' 1

# The daemon's own counters: appends, their events and durations, refusals by method.
served=$(get "$url/metrics" | tail -n +2)
appends=$(metric "$served" admitd_ledger_appends_total)
[ "$appends" -ge 3 ] 2>/dev/null || fail "admitd_ledger_appends_total = $appends, want >= 3"
want "$served" admitd_ledger_append_duration_seconds_count "$appends"
want "$served" 'admitd_ledger_append_duration_seconds_bucket{le="+Inf"}' "$appends"
events=$(metric "$served" admitd_ledger_appended_events_total)
[ "$events" -ge "$appends" ] 2>/dev/null || fail "admitd_ledger_appended_events_total = $events"
"$admitctl" --connect "$T" --cert "$pki/scanner.pem" --key "$pki/scanner.key" --ca "$pki/ca.pem" \
  submit -f "$work/late.yaml" > /dev/null 2>&1 && fail "a check controller submitted a workload"
served=$(get "$url/metrics" | tail -n +2)
want "$served" 'admitd_rpc_refusals_total{method="record",reason="PermissionDenied"}' 1
records=$(metric "$served" 'admitd_rpc_calls_total{method="record"}')
[ "$records" -ge 4 ] 2>/dev/null || fail "admitd_rpc_calls_total{method=\"record\"} = $records, want >= 4"
want "$served" 'admitd_rpc_call_duration_seconds_count{method="record"}' "$records"
want "$served" 'admitd_rpc_call_duration_seconds_bucket{method="record",le="+Inf"}' "$records"
promtool check metrics <<< "$served" || fail "promtool rejects /metrics"

# Restart: the same projection; and the past as served.
served_n=$(C log | tail -1 | cut -d' ' -f1)
before=$(projection "$(get "$url/metrics" | tail -n +2)")
stop_daemon
start_daemon
after=$(projection "$(get "$url/metrics" | tail -n +2)")
[ "$after" = "$before" ] || fail "metrics after a restart differ: $(diff <(echo "$before") <(echo "$after") | head -5)"
stop_daemon
expect_rc 0 A metrics --at "$served_n"
[ "$out" = "$before" ] || fail "metrics --at $served_n differs from what admitd served at $served_n"
kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; prom_pid=
finish metrics
