#!/usr/bin/env bash
# admitd against hostile and careless clients (docs/admitd.md, "Limits"), with bounded counts and
# times: connection floods per principal, by principals the policy does not name and past the
# global limit; TLS handshakes that never finish; peers that stall in the middle of a message
# (slowloris); oversized manifests before authorization and in parallel; file descriptors
# exhausted; a principal removed by SIGHUP while it watches; refused certificates; a stopped
# daemon and admitctl --timeout. Throughout, admin's and an operator's calls are answered, and
# the daemon's resident memory (VmRSS, VmHWM from /proc) is printed and bounded.
# Usage: hostile_test.sh ADMITCTL ADMITD HOSTILE_CLIENT
set -uo pipefail
admitctl=$1
admitd=$2
hostile=$3
source "$(dirname "$0")/lib.sh"
top=$(cd "$(dirname "$0")/../.." && pwd)
chmod 755 "$work"
L="$work/ledger"
S="$work/admitd.sock"
pki="$work/pki"
"$top/ops/scripts/test_pki.sh" "$pki" platform-ops ml-team tenant-b tenant-c compliance stranger \
  admin > /dev/null || { echo "PKI failed"; exit 1; }

write_policy() {  # write_policy [without-ml-team]
  {
    echo "principals:"
    echo "- {name: platform-ops, roles: [operator]}"
    [ "${1:-}" = without-ml-team ] || echo "- {name: ml-team, roles: [tenant], namespaces: [ml]}"
    echo "- {name: tenant-b, roles: [tenant], namespaces: [b]}"
    echo "- {name: tenant-c, roles: [tenant], namespaces: [c]}"
    echo "- {name: compliance, roles: [auditor]}"
  } > "$work/policy.yaml"
}
write_policy

daemon_pid=
start_daemon() {  # start_daemon [LEDGER]: admitd on the Unix socket, TLS and HTTP
  rm -f "$work/ready"
  "$admitd" --ledger "${1:-$L}" --listen "unix:$S" --listen tls:127.0.0.1:0 \
    --metrics-listen 127.0.0.1:0 --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" \
    --client-ca "$pki/ca.pem" --policy "$work/policy.yaml" --ready-file "$work/ready" \
    --log-level info >>"$work/admitd.out" 2>>"$work/admitd.err" &
  daemon_pid=$!
  for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
  [ -s "$work/ready" ] || { fail "admitd did not start: $(tail -5 "$work/admitd.err")"; finish hostile; }
  T=$(grep '^tls:' "$work/ready")
  url=$(grep '^http://' "$work/ready")
}
stop_daemon() {
  kill -CONT "$daemon_pid" 2>/dev/null
  kill -TERM "$daemon_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null
  daemon_pid=
}
trap 'kill -9 $daemon_pid 2>/dev/null; rm -rf "$work"' EXIT

cert() { echo --cert "$pki/${1//\//_}.pem" --key "$pki/${1//\//_}.key" --ca "$pki/ca.pem"; }
# Every client call here is bounded: admitctl by --timeout, hostile_client by `timeout`.
as() { local who=$1; shift; "$admitctl" --timeout 20s --connect "$T" $(cert "$who") "$@"; }
admin() { "$admitctl" --timeout 20s --connect "unix:$S" "$@"; }
hostile_as() {  # hostile_as NAME|unix SECONDS hostile_client-args...
  local who=$1 seconds=$2; shift 2
  if [ "$who" = unix ]; then
    timeout -s KILL "$seconds" "$hostile" --connect "unix:$S" "$@"
  else
    timeout -s KILL "$seconds" "$hostile" --connect "$T" $(cert "$who") "$@"
  fi
}
http() {  # http PATH [SECONDS]: the status code (000: no answer within SECONDS, default 5), the body
  python3 -c '
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=float(sys.argv[2])); print(r.status); sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code); sys.stdout.write(e.read().decode())
except Exception as e:
    print("000"); print(e)' "$url$1" "${2:-5}" 2>/dev/null; }
metric() {  # metric NAME-WITH-LABELS: its value on /metrics (0 when absent)
  local v; v=$(http /metrics | awk -v n="$1 " 'index($0, n) == 1 {print $2; exit}')
  echo "${v:-0}"
}
# Waits until admitd has seen a finished flood's connections close: the flooder's exit does
# not mean admitd has read every end of stream yet (on a busy machine it may lag seconds), and
# the next flood would be refused against connections that are already gone.
released() {
  for _ in $(seq 300); do
    [ "$(metric admitd_connections)" -eq 0 ] && return 0
    sleep 0.1
  done
  fail "admitd still counts $(metric admitd_connections) connections 30 s after a flood ($1)"
}
status_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$daemon_pid/status"; }
rss() { echo "admitd VmRSS $(( $(status_kb VmRSS) / 1024 )) MiB, VmHWM $(( $(status_kb VmHWM) / 1024 )) MiB ($1)"; }
# REQUIRES: the resident memory stays under $1 MiB.
rss_below() {
  local now; now=$(( $(status_kb VmRSS) / 1024 ))
  [ "$now" -lt "$1" ] || fail "admitd holds $now MiB resident ($2), more than $1 MiB"
}
field() { sed -n "s/.*\b$1=\([-0-9]*\).*/\1/p" <<< "$2" | head -1; }
# The calls that must be answered whatever the hostile client does: admin on the Unix socket
# and an operator on TLS, each within 5 s.
answered() {  # answered WHEN
  local started ended
  started=$(date +%s%N)
  expect_rc 0 admin get clusterqueues
  expect_rc 0 as platform-ops get clusterqueues
  ended=$(date +%s%N)
  local ms=$(( (ended - started) / 1000000 ))
  echo "admin and platform-ops answered in $ms ms ($1)"
  [ "$ms" -lt 5000 ] || fail "admin and platform-ops took $ms ms ($1)"
}

start_daemon
cat > "$work/defs.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: cpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: main}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: cpu
      resources: [{name: cpu, nominalQuota: 1000}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ml, name: main}
spec: {clusterQueue: main}
YAML
expect_rc 0 as platform-ops apply -f "$work/defs.yaml"
answered "at the start"
rss "at the start"

# ---- hostile_client's own usage: `record` sends events as given.
expect_rc 0 "$hostile" record --help
contains "$out" "--request-id"
echo '{"body": {"workloadFinished": {"workload": {"namespace": "ml", "name": "nothing-here", "uid": "u-1"}}}}' > "$work/finish.json"
expect_rc 1 hostile_as compliance 20 record "$work/finish.json"
contains "$out" "PermissionDenied: principal 'compliance' may not record workloadFinished"

# ---- Principals the policy does not name share kUnknownPeerConnectionsMax (16) connections:
# the rest are closed at once, with the reason, and nobody else is crowded out.
hostile_as stranger 30 flood 200 --hold-ms 3000 > "$work/flood-stranger" 2>&1 &
flooder=$!
sleep 1.5
answered "200 connections of a principal not in the policy"
expect_rc 0 as ml-team get workloads
wait "$flooder"
out=$(cat "$work/flood-stranger")
echo "$out"
[ "$(field open "$out")" = 16 ] || fail "a stranger kept $(field open "$out") connections, not 16: $out"
[ "$(field closed "$out")" = 184 ] || fail "not 184 of a stranger's connections closed: $out"
contains "$out" "is not in the policy, and principals it does not name have 16 connections open"
[ "$(metric 'admitd_connections_closed_total{reason="unknown_peers_limit"}')" -ge 184 ] ||
  fail "the refusals of unknown peers are not counted"
released "a stranger's flood"

# ---- A principal the policy names: kConnectionsPerPrincipalMax (256), past it closed at once.
hostile_as ml-team 40 flood 300 --hold-ms 3000 > "$work/flood-ml" 2>&1 &
flooder=$!
sleep 2
answered "300 connections of a tenant"
expect_rc 1 as ml-team get workloads
contains "$err" "Overloaded"
contains "$err" "principal 'ml-team' has 256 connections open"
wait "$flooder"
out=$(cat "$work/flood-ml")
echo "$out"
[ "$(field open "$out")" = 256 ] || fail "ml-team kept $(field open "$out") connections, not 256: $out"
[ "$(field closed "$out")" = 44 ] || fail "not 44 of ml-team's connections closed: $out"
[ "$(metric 'admitd_connections_closed_total{reason="principal_limit"}')" -ge 44 ] ||
  fail "the refusals past a principal's limit are not counted"
released "ml-team's flood"

# ---- kConnectionsMax (1024) for all but admin: four principals hold 256 each; a fifth is
# refused, admin gets in on its reserve. The floods start one after another, each when the
# last one's connections are all open: four at once put up to 256 TLS handshakes in admitd's
# queue, and on a busy machine the oldest pass kTlsHandshakeEvictAfterMs and are dropped (as
# designed for a handshake flood, but not what this part tests).
floods=()
held=0
for who in ml-team tenant-b tenant-c compliance; do
  hostile_as "$who" 90 flood 256 --hold-ms 15000 > "$work/flood-$who" 2>&1 &
  floods+=($!)
  held=$((held + 256))
  for _ in $(seq 300); do
    [ "$(metric admitd_connections)" -ge "$held" ] && break
    sleep 0.1
  done
done
[ "$(metric admitd_connections)" -ge 1024 ] || fail "the four floods did not reach 1024 \
connections ($(metric admitd_connections) open; TLS handshakes dropped: \
$(metric 'admitd_connections_closed_total{reason="handshake_evicted"}') evicted, \
$(metric 'admitd_connections_closed_total{reason="handshake_timeout"}') timed out)"
expect_rc 0 admin get clusterqueues
expect_rc 1 as platform-ops get clusterqueues
contains "$err" "Overloaded"
contains "$err" "1024 connections are open (the limit is 1024)"
rss "1024 connections held"
rss_below 700 "1024 connections held"
wait "${floods[@]}"
for who in ml-team tenant-b tenant-c compliance; do
  [ "$(field open "$(cat "$work/flood-$who")")" = 256 ] || fail "$who: $(cat "$work/flood-$who")"
done
answered "after the connection floods"

# ---- TLS handshakes that never finish: at most kTlsHandshakesMax (256) in progress; past it
# new connections wait until the oldest has taken kTlsHandshakeEvictAfterMs (2 s) and drop it;
# each is dropped after kTlsAcceptTimeoutMs (5 s): the last of the 400 about 7 s in.
hostile_as stranger 30 handshake-flood 400 --bytes 5 --hold-ms 10000 > "$work/handshakes" 2>&1 &
flooder=$!
sleep 1
answered "400 stalled TLS handshakes"
wait "$flooder"
out=$(cat "$work/handshakes")
echo "$out"
[ "$(field open "$out")" = 0 ] || fail "stalled handshakes are still open after 10 s: $out"
last=$(field last_close_ms "$out")
[ "${last:-0}" -ge 5000 ] && [ "${last:-0}" -le 8500 ] || fail "the last stalled handshake closed after $last ms, not about 7000: $out"
[ "$(metric 'admitd_connections_closed_total{reason="handshake_evicted"}')" -ge 144 ] ||
  fail "evicted handshakes are not counted"
[ "$(metric 'admitd_connections_closed_total{reason="handshake_timeout"}')" -ge 1 ] ||
  fail "timed out handshakes are not counted"

# ---- Slowloris: 8 connections each send 16 MiB of a message and stall; each is closed
# kPartialMessageTimeoutMs (10 s) after its last byte, and the memory comes back.
hostile_as ml-team 60 slowloris 8 16777216 --hold-ms 16000 > "$work/slowloris" 2>&1 &
flooder=$!
sleep 4
rss "8 peers stalled with 16 MiB each"
answered "8 stalled peers"
wait "$flooder"
out=$(cat "$work/slowloris")
echo "$out"
[ "$(field closed "$out")" = 8 ] || fail "stalled peers were not closed: $out"
last=$(field last_close_ms "$out")
[ "$last" -ge 8000 ] && [ "$last" -le 12500 ] || fail "stalled peers closed after $last ms, not about 10000: $out"
[ "$(metric 'admitd_connections_closed_total{reason="stalled"}')" = 8 ] || fail "stalled closes not counted"
[ "$(metric admitd_partial_message_bytes)" = 0 ] || fail "partial message bytes still held"
rss "after the stalled peers were closed"
grep -q "in the middle of a message" "$work/admitd.err" || fail "stalled closes are not logged"

# ---- recordManifest authorizes before it parses: a 4 MiB manifest from principals that may
# record no manifest is refused at once and costs no parsing; an allowed one past
# kManifestBytesMax (2 MiB) is refused by size; allowed ones are parsed off the event loop.
hwm_before=$(( $(status_kb VmHWM) / 1024 ))
for who in stranger compliance; do
  # 4 MiB (past kManifestBytesMax too) and 2 MB (the parser's worst case, within it).
  for bytes in 4194304 2000000; do
    expect_rc 1 hostile_as "$who" 30 manifest "$bytes" --mode submit --shape dense
    contains "$out" "PermissionDenied"
    ms=$(sed -n 's/.*answered in \([0-9]*\) ms.*/\1/p' <<< "$out" | head -1)
    [ "${ms:-99999}" -lt 1500 ] || fail "$who's $bytes-byte manifest took $ms ms to refuse: $out"
  done
done
expect_rc 1 hostile_as platform-ops 30 manifest 4194304 --mode submit
contains "$out" "PermissionDenied: principal 'platform-ops' may not recordManifest"
expect_rc 1 hostile_as ml-team 30 manifest 3000000 --mode submit
contains "$out" "InvalidArgument: recordManifest: the manifest is"
contains "$out" "at most 2097152 are allowed"
hwm_after=$(( $(status_kb VmHWM) / 1024 ))
echo "peak resident before the refused manifests $hwm_before MiB, after $hwm_after MiB"
[ "$hwm_after" -le $((hwm_before + 64)) ] || fail "refused manifests raised the peak from $hwm_before to $hwm_after MiB"
# The parser's worst case (a dense flow sequence of 2 MiB) four at a time, as admin: the loop
# answers meanwhile, and the memory stays bounded.
hostile_as unix 120 manifest 2000000 --mode submit --shape dense --parallel 4 > "$work/dense" 2>&1 &
parser=$!
sleep 0.5
answered "four 2 MiB manifests being parsed"
wait "$parser"
cat "$work/dense"
contains "$(cat "$work/dense")" "answered in"
rss "after four parsed 2 MiB manifests"
peak=$(( $(status_kb VmHWM) / 1024 ))
echo "peak resident so far: $peak MiB"
# One parse at a time (~230 times a dense manifest's bytes), and given back after it.
[ "$peak" -lt 1024 ] || fail "admitd peaked at $peak MiB resident"
rss_below 300 "after the manifests were parsed"
expect_rc 0 hostile_as ml-team 30 manifest 20000 --mode submit
contains "$out" "recorded"

# ---- SIGHUP removes ml-team: its open watch ends, and its calls are refused from then on
# (the policy is checked per call).
as ml-team watch > "$work/watch.out" 2> "$work/watch.err" &
watcher=$!
sleep 1
write_policy without-ml-team
kill -HUP "$daemon_pid"
for _ in $(seq 50); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$watcher" 2>/dev/null; then
  fail "ml-team's watch goes on after the policy removed ml-team"
  kill "$watcher"
fi
wait "$watcher"
contains "$(cat "$work/watch.err")" "the watch ended: the reloaded policy refuses this watch"
expect_rc 1 as ml-team get workloads
contains "$err" "PermissionDenied: principal 'ml-team' may not get: the principal is not in the policy"
write_policy
kill -HUP "$daemon_pid"
sleep 0.5

# ---- Refused certificates are a permanent PermissionDenied, not a retryable Unavailable.
for who in foreign expired admin; do
  expect_rc 1 "$admitctl" --timeout 20s --connect "$T" --cert "$pki/$who.pem" --key "$pki/$who.key" \
    --ca "$pki/ca.pem" get clusterqueues
  contains "$err" "PermissionDenied: admitd refused"
  lacks "$err" "Unavailable"
done
contains "$err" "reserved for Unix peers"

# ---- A stopped daemon: admitctl gives up after --timeout, exit 3, saying so.
kill -STOP "$daemon_pid"
for who in admin platform-ops; do
  started=$(date +%s%N)
  # (`timeout` keeps this part bounded should --timeout not work.)
  if [ "$who" = admin ]; then
    expect_rc 3 timeout -s KILL 15 "$admitctl" --timeout 1s --connect "unix:$S" get clusterqueues
  else
    expect_rc 3 timeout -s KILL 15 "$admitctl" --timeout 1s --connect "$T" $(cert platform-ops) \
      get clusterqueues
  fi
  ms=$(( ($(date +%s%N) - started) / 1000000 ))
  contains "$err" "DeadlineExceeded: timed out: admitd at"
  contains "$err" "did not answer within 1s"
  [ "$ms" -lt 4000 ] || fail "$who: --timeout 1s took $ms ms"
done
kill -CONT "$daemon_pid"
expect_rc 0 "$admitctl" --help
contains "$out" "3 timed out"
expect_rc 2 "$admitctl" --timeout soon --connect "unix:$S" get clusterqueues
answered "after SIGCONT"
rss "at the end"
stop_daemon

# ---- File descriptors exhausted: accepts fail, are retried with a backoff, counted and
# logged; the daemon is not ready meanwhile, and accepts again once descriptors are free.
: > "$work/admitd.err"
rm -f "$work/ready"
( ulimit -n 96; exec "$admitd" --ledger "$L" --listen "unix:$S" --metrics-listen 127.0.0.1:0 \
    --policy "$work/policy.yaml" --ready-file "$work/ready" --log-level info \
    >>"$work/admitd.out" 2>>"$work/admitd.err" ) &
daemon_pid=$!
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
url=$(grep '^http://' "$work/ready")
[ "$(http /readyz | head -1)" = 200 ] || fail "the fd-limited admitd is not ready at the start"
hostile_as unix 30 flood 150 --hold-ms 3000 > "$work/fd-flood" 2>&1 &
flooder=$!
sleep 1.5
# While descriptors are exhausted even /readyz may go unanswered (its listener cannot accept
# either): no answer or 503, never 200. (The readiness flag itself: accept_errors_test.)
probe=$(http /readyz 1 | head -1)
[ "$probe" != 200 ] || fail "admitd answers ready while it cannot accept connections"
wait "$flooder"
cat "$work/fd-flood"
ready=0
for _ in $(seq 50); do
  [ "$(http /readyz | head -1)" = 200 ] && { ready=1; break; }
  sleep 0.1
done
[ "$ready" = 1 ] || fail "admitd is not ready again once descriptors are free"
expect_rc 0 admin get clusterqueues
[ "$(metric admitd_accept_errors_total)" -ge 1 ] || fail "failed accepts are not counted"
[ "$(metric admitd_accepting)" = 1 ] || fail "admitd_accepting is not 1 again"
grep -q "accepting a Unix connection failed" "$work/admitd.err" || fail "failed accepts are not logged at warn"
grep -q "Too many open files" "$work/admitd.err" || fail "the accept error is not named"
stop_daemon

finish hostile
