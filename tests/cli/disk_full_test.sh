#!/usr/bin/env bash
# A disk that fills up (docs/operations.md, "A full disk"), on a 96 MiB tmpfs this test mounts
# itself in a private mount namespace (unshare -m as root, unshare -rm otherwise), so nothing
# outlives it:
# - the default free-space floor lets this small disk take writes (an eighth of it, not 64 MiB);
# - below the free-space floor, and on a completely full disk, every write is refused with a
#   clear error (NoSpace, the free bytes, the floor), the process does not abort, the head does
#   not move;
# - read-only commands (log, verify, get, explain, replay --verify) work on the full disk;
# - writes resume once space returns, and nothing acknowledged is lost;
# - admitd on the same disk keeps serving reads, refuses writes, reports not ready and
#   admitd_ledger_writes_refused 1, and resumes writes by itself when space returns, without
#   a restart (below its floor; with no floor, see the unit test named at the end).
# Usage: disk_full_test.sh ADMITCTL ADMITD
set -uo pipefail
admitctl=$1 admitd=$2
if [ -z "${DISK_FULL_IN_NAMESPACE:-}" ]; then
  flags=-m
  [ "$(id -u)" = 0 ] || flags=-rm
  if ! unshare "$flags" true 2> /dev/null; then
    echo "SKIP: this machine lets this user make no mount namespace (unshare $flags), so the" \
         "test cannot mount the small filesystem it fills" >&2
    exit 77
  fi
  DISK_FULL_IN_NAMESPACE=1 exec unshare "$flags" "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
daemon_pid=
trap '[ -n "$daemon_pid" ] && kill -9 $daemon_pid 2>/dev/null; umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
[ -n "${KEEP_WORK:-}" ] && trap '[ -n "$daemon_pid" ] && kill -9 $daemon_pid 2>/dev/null; cp "$work/admitd.err" /tmp/disk_full_admitd.err; umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT

mnt="$work/disk"
mkdir -p "$mnt"
mount -t tmpfs -o size=96m tmpfs "$mnt" || { fail "mount a tmpfs at $mnt"; finish disk_full; }
L="$mnt/ledger"
# The default floor throughout, except where a step sets one: on this 96 MiB disk it is an
# eighth of the disk (12 MiB), below the ~22 MiB left once RocksDB has preallocated its
# write-ahead log (~70 MiB); 64 MiB, the floor of larger disks, would refuse every write here.
ac() { "$admitctl" --ledger "$L" "$@"; }
avail() { df -B1 --output=avail "$mnt" | tail -1 | tr -d ' '; }
# Leaves about $1 bytes free (a filler file takes the rest); `fill_up` fills the disk whole.
leave_free() {
  rm -f "$mnt/filler"
  local bytes=$(($(avail) - $1))
  [ "$bytes" -gt 0 ] && fallocate -l "$bytes" "$mnt/filler" 2> /dev/null ||
    head -c "$bytes" /dev/zero > "$mnt/filler"
}
fill_up() { dd if=/dev/zero of="$mnt/filler2" bs=64k 2> /dev/null; sync; }
make_room() { rm -f "$mnt/filler" "$mnt/filler2"; }
head_of() { ac verify -o json 2> /dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["head"])'; }

gpu_setup "$work/setup.yaml" nlp jobs
pad=$(head -c 1500 /dev/urandom | od -An -tx1 | tr -d ' \n')
job() {
  cat > "$work/job.yaml" <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: j$1, namespace: nlp, labels: {kueue.x-k8s.io/queue-name: jobs}}
spec:
  template:
    spec:
      containers:
      - {name: c, image: "trainer-$pad", resources: {requests: {nvidia.com/gpu: "1"}}}
      restartPolicy: Never
YAML
}
acked=()
submit_ok() {  # submit job $1 with the remaining arguments as global options; must be acknowledged
  local n=$1; shift
  job "$n"
  expect_rc 0 "$admitctl" "$@" submit -f "$work/job.yaml"
  [ "$rc" = 0 ] && acked+=("nlp/job-j$n")
}
try_submit() {  # submit job $1 with the options after it; rc, out, err set
  local n=$1; shift
  job "$n"
  out=$("$admitctl" "$@" submit -f "$work/job.yaml" 2> "$work/stderr"); rc=$?
  err=$(cat "$work/stderr")
}
refused() {  # submit job $1 (options after it) must be refused for lack of space, cleanly
  try_submit "$@"
  [ "$rc" = 1 ] || fail "a submit on a full disk exited $rc (want 1; 134 is an abort): $err"
  contains "$err" "NoSpace"
  contains "$err" "bytes free"
  lacks "$err" "Assertion"
}
# On a disk just filled, the last partly written pages of the ledger's files may still take an
# append or two: submit until the first refusal (each one that succeeds is acknowledged).
until_refused() {  # $1: first job number; options after it
  local n=$1; shift
  for _ in $(seq 40); do
    try_submit "$n" "$@"
    [ "$rc" = 0 ] || break
    acked+=("nlp/job-j$n")
    n=$((n + 1))
  done
  [ "$rc" = 1 ] || fail "submits on a full disk: exit $rc (want 1; 134 is an abort): $err"
  contains "$err" "NoSpace"
  lacks "$err" "Assertion"
}
floor=$((8 << 20))

expect_rc 0 ac apply -f "$work/setup.yaml"
for i in $(seq 1 12); do submit_ok "$i" --ledger "$L"; done
head=$(head_of)
[ -n "$head" ] || fail "no head before the disk fills"

# 1. Below the floor: refused before anything is written.
leave_free $((4 << 20))
refused 100 --ledger "$L" --min-free-bytes "$floor"
contains "$err" "below the free-space floor of $floor bytes"
[ "$(head_of)" = "$head" ] || fail "a refused submit moved the head"

# 2. A full disk and no floor: RocksDB's own error, as a clear one, three times, no abort.
fill_up
until_refused 101 --ledger "$L" --min-free-bytes 0
head=$(head_of)
for n in 151 152; do refused "$n" --ledger "$L" --min-free-bytes 0; done
[ "$(avail)" -lt 65536 ] || fail "the disk is not full: $(avail) bytes free"

# 3. Reads work on the full disk.
expect_rc 0 ac log
expect_rc 0 ac verify
contains "$out" "verified $head events"
expect_rc 0 ac get workloads -o json
[ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))' <<< "$out")" = "${#acked[@]}" ] ||
  fail "get workloads on a full disk: not the ${#acked[@]} acknowledged: $out"
expect_rc 0 ac explain nlp/job-j1
contains "$out" "nlp/job-j1"
expect_rc 0 ac replay --verify
[ "$(head_of)" = "$head" ] || fail "the head moved on a full disk"

# 4. Space returns: writes resume, nothing acknowledged is lost.
make_room
for i in $(seq 13 16); do submit_ok "$i" --ledger "$L"; done
expect_rc 0 ac verify
expect_rc 0 ac get workloads -o json
for w in "${acked[@]}"; do contains "$out" "\"name\": \"${w#nlp/}\","; done

# 5. admitd on the same disk.
S="$work/admitd.sock"
start_daemon() {  # $1: the floor (empty: the default)
  rm -f "$work/ready"
  "$admitd" --ledger "$L" --listen "unix:$S" --metrics-listen 127.0.0.1:0 ${1:+--min-free-bytes "$1"} \
    --ready-file "$work/ready" --log-level warn >> "$work/admitd.out" 2>> "$work/admitd.err" &
  daemon_pid=$!
  for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
  [ -s "$work/ready" ] || { fail "admitd did not start: $(tail -5 "$work/admitd.err")"; finish disk_full; }
  url=$(grep '^http://' "$work/ready")
}
http() { curl -s -o "$work/body" -w '%{http_code}' "$url$1"; }
metric() { curl -s "$url/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
daemon_round() {  # $1: the floor, $2: how the disk is filled (leave_free N | fill_up)
  start_daemon "$1"
  local pid=$daemon_pid n=$((200 + ${#acked[@]}))
  submit_ok "$n" --connect "unix:$S"
  [ "$(http /readyz)" = 200 ] || fail "admitd not ready before the disk fills"
  eval "$2"
  until_refused $((n + 1)) --connect "unix:$S"
  refused $((n + 50)) --connect "unix:$S"
  kill -0 "$pid" 2> /dev/null || { fail "admitd died when its disk filled: $(tail -5 "$work/admitd.err")"; finish disk_full; }
  expect_rc 0 "$admitctl" --connect "unix:$S" get workloads
  contains "$out" "job-j1 "
  [ "$(http /readyz)" = 503 ] || fail "admitd reports ready while it refuses writes ($2)"
  [ "$(metric admitd_ledger_writes_refused)" = 1 ] || fail "admitd_ledger_writes_refused is not 1 ($2)"
  [ "$(metric admitd_ledger_no_space_refusals_total)" -ge 1 ] 2> /dev/null ||
    fail "admitd_ledger_no_space_refusals_total: $(metric admitd_ledger_no_space_refusals_total)"
  make_room
  local ready=
    # Below the floor nothing reached RocksDB; a RocksDB no-space error clears once a write
  # buffer's worth (64 MiB) is free, checked every 5 s by RocksDB (docs/operations.md).
  for _ in $(seq 150); do [ "$(http /readyz)" = 200 ] && { ready=1; break; }; sleep 0.1; done
  [ -n "$ready" ] || fail "admitd not ready again within 15 s of space returning ($2)"
  submit_ok $((n + 51)) --connect "unix:$S"
  [ "$daemon_pid" = "$pid" ] && kill -0 "$pid" 2> /dev/null || fail "admitd restarted"
  [ "$(metric admitd_ledger_writes_refused)" = 0 ] || fail "admitd_ledger_writes_refused stays 1"
  kill -TERM "$daemon_pid"
  wait "$daemon_pid" || fail "admitd did not stop cleanly: $(tail -5 "$work/admitd.err")"
  daemon_pid=
}
daemon_round "$floor" "leave_free $((4 << 20))"
# admitd with the default floor takes one write after another on this disk (its first append
# preallocates the write-ahead log, which leaves ~22 MiB: above an eighth of the disk, below
# 64 MiB) and reports that floor.
start_daemon ""
for k in 1 2 3 4; do submit_ok $((300 + k)) --connect "unix:$S"; done
[ "$(metric admitd_ledger_disk_min_free_bytes)" = $((96 << 20 >> 3)) ] ||
  fail "admitd's default floor on a 96 MiB disk: $(metric admitd_ledger_disk_min_free_bytes) (want 12 MiB)"
[ "$(http /readyz)" = 200 ] || fail "admitd with the default floor is not ready on a 96 MiB disk"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "admitd did not stop cleanly: $(tail -5 "$work/admitd.err")"
daemon_pid=
# admitd with no floor (RocksDB's own no-space error, then RocksDB's recovery and the service's
# fold again) is tested with a file system that fails on demand:
# RocksDbLedger.ANoSpaceWriteIsRefusedCleanlyAndWritesResume (tests/unit/ledger_test.cc). Here
# its WAL is preallocated (~70 MiB), which a test cannot fill through submissions in reasonable
# time.
grep -q "Assertion" "$work/admitd.err" && fail "admitd: $(grep Assertion "$work/admitd.err")"

expect_rc 0 ac verify
expect_rc 0 ac replay --verify
expect_rc 0 ac get workloads -o json
for w in "${acked[@]}"; do contains "$out" "\"name\": \"${w#nlp/}\","; done
echo "disk_full: ${#acked[@]} acknowledged submissions all present; head $(head_of)"
finish disk_full
