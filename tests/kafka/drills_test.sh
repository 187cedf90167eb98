#!/usr/bin/env bash
# Fault drills of the Kafka ledger (docs/kafka.md, "Drills"), each on a topic of its own on the
# broker run_with_broker.sh started (KAFKA_BOOTSTRAP, KAFKA_BROKER_DIR), with admitd as the
# writer and calls through admitctl --connect, each with a request id:
#   produced   kill -9 of the writer between produce and commit
#   committing kill -9 of the writer during its commit
#   zombie     SIGSTOP of the writer (mid-transaction) past the session timeout: the standby
#              takes over; after SIGCONT the old writer is fenced, exits 3, and nothing it
#              wrote is visible to read_committed readers
#   broker     kill -9 of the broker and restart, under load
#   stall      the writer stalled past transaction.timeout.ms
#   partition  admitd cut from the broker (iptables drops its port in both directions) for
#              longer than the session timeout, under load, then healed; only in a network
#              namespace of the test's own (ops/scripts/drill_partition.sh runs it so), since
#              it changes the namespace's packet filter
# After each: every answered call is in the ledger and its retry writes nothing, the chain
# verifies (admitctl and the independent Python reader, which also refuses any repeated or
# skipped sequence), replay --verify matches, and no fencing token was issued twice.
# Usage: drills_test.sh ADMITCTL ADMITD VENV [DRILL...]   (default: every drill)
set -euo pipefail
admitctl=$1 admitd=$2 venv=$3
shift 3
drills=("$@")
((${#drills[@]})) || drills=(produced committing zombie broker stall)
: "${KAFKA_BOOTSTRAP:?run through tests/kafka/run_with_broker.sh}"
: "${KAFKA_BROKER_DIR:?run through tests/kafka/run_with_broker.sh}"
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
python=$("$here/python_env.sh" "$venv")
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-kafka-drills.XXXXXX")
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]+"${pids[@]}"}"; do
    kill -CONT "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  done
  # The broker must be up for run_with_broker to stop it cleanly.
  "$top/ops/kafka/kafka.sh" restart "$KAFKA_BROKER_DIR" > /dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL [$drill]: $*" >&2
  local f
  for f in "$work"/*.log; do [ -e "$f" ] && { echo "--- $f" >&2; tail -15 "$f" >&2; }; done
  exit 1
}
note() { echo "[$drill] $*"; }

# Bounds (seconds). The session timeout is the broker's minimum; a takeover takes about that.
readonly SESSION_TIMEOUT_MS=6000
readonly WAIT_READY_S=60
readonly WAIT_WRITER_S=60
readonly CALL_TIMEOUT_S=90

cat > "$work/defs.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
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
      resources:
      - {name: nvidia.com/gpu, nominalQuota: 100000}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: ml, name: main}
spec: {clusterQueue: gpu}
YAML
job() {  # job NAME: a one-GPU Job, admitted at once (no checks, ample quota)
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: ml
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

# start NAME [ENV=VALUE...]: admitd NAME on the drill's ledger (its state in $work/NAME.state).
start() {
  local name=$1
  shift
  rm -f "$work/$name.ready"
  env "$@" "$admitd" --ledger "$ledger" --state "$work/$name.state" --create-topic \
    --listen "unix:$work/$name.sock" --ready-file "$work/$name.ready" \
    --session-timeout-ms "$SESSION_TIMEOUT_MS" --kafka-timeout-ms 15000 \
    --transaction-timeout-ms "${TXN_TIMEOUT_MS:-60000}" --log-level info \
    >> "$work/$name.log" 2>&1 &
  eval "pid_$name=$!"
  pids+=("$!")
  local i
  for ((i = 0; i < WAIT_READY_S * 10; i++)); do
    [ -s "$work/$name.ready" ] && return 0
    kill -0 "$!" 2>/dev/null || fail "admitd $name exited before it was ready"
    sleep 0.1
  done
  fail "admitd $name was not ready within ${WAIT_READY_S}s"
}
pid_of() { eval "echo \$pid_$1"; }
# wait_writer NAME: until NAME says it is the writer (the Nth time, N = $2, default 1).
wait_writer() {
  local name=$1 times=${2:-1} i
  for ((i = 0; i < WAIT_WRITER_S * 10; i++)); do
    (($(grep -c "it is the writer now" "$work/$name.log" || true) >= times)) && return 0
    sleep 0.1
  done
  fail "admitd $name did not become the writer within ${WAIT_WRITER_S}s"
}
# call NAME ID: submit the Job ID through admitd NAME with request id ID; an answered call is
# added to $work/acked (ID, sequence).
call() {
  local name=$1 id=$2 out
  job "$id" > "$work/job-$id.yaml"
  if out=$(timeout "$CALL_TIMEOUT_S" "$admitctl" --connect "unix:$work/$name.sock" \
             --request-id "$id" submit -f "$work/job-$id.yaml" -o json 2>&1); then
    echo "$id $(echo "$out" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["inputs"][0]["sequence"])')" >> "$work/acked"
    return 0
  fi
  echo "$id refused: $out" >> "$work/refused"
  return 1
}
# load NAME PREFIX N: N calls one after the other, answered or not.
load() {
  local name=$1 prefix=$2 n=$3 k
  for ((k = 1; k <= n; k++)); do call "$name" "$prefix-$k" || true; done
}

# The invariants, checked through a fresh reader of the topic and the writer NAME.
check() {
  local writer=$1 out head_a head_b
  out=$("$admitctl" --ledger "$ledger" verify -o json 2>&1) || fail "verify: $out"
  head_a=$(echo "$out" | "$python" -c 'import json,sys; d=json.load(sys.stdin); print(d["headHash"])')
  out=$("$python" "$here/independent_reader.py" "$KAFKA_BOOTSTRAP" "$topic" 2>&1) ||
    fail "the independent reader: $out"
  head_b=$(echo "$out" | sed -n 's/^head_hash: //p')
  [ "$head_a" = "$head_b" ] || fail "admitctl's head $head_a, the independent reader's $head_b"
  out=$("$admitctl" --ledger "$ledger" replay --verify 2>&1) || fail "replay --verify: $out"
  "$admitctl" --ledger "$ledger" --state "$work/check.state" log -o json > "$work/log.json" ||
    fail "log"
  "$python" - "$work/log.json" "$work/acked" <<'PY' || fail "acknowledged calls or tokens"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
seqs = [e["sequence"] for e in events]
assert seqs == list(range(1, len(seqs) + 1)), "sequences are not dense"
tokens = [e["event"]["body"]["admitted"]["fencingToken"] for e in events
          if "admitted" in e["event"]["body"]]
assert len(tokens) == len(set(tokens)), f"a fencing token was issued twice: {sorted(tokens)}"
by_seq = {e["sequence"]: e["event"] for e in events}
for line in open(sys.argv[2]):
    call_id, seq = line.split()
    ev = by_seq.get(int(seq))
    assert ev is not None, f"answered call {call_id} (sequence {seq}) is not in the ledger"
    wl = ev["body"]["workloadSubmitted"]["workload"]
    assert wl["name"] == "job-" + call_id, f"sequence {seq} is not call {call_id}: {ev}"
print(f"{len(events)} events, {len(tokens)} tokens, every answered call present")
PY
  # Every answered call again, with its request id: answered, nothing written.
  local before after id seq
  before=$("$admitctl" --connect "unix:$work/$writer.sock" log | tail -1 | cut -d' ' -f1)
  while read -r id seq; do
    out=$(timeout "$CALL_TIMEOUT_S" "$admitctl" --connect "unix:$work/$writer.sock" \
            --request-id "$id" submit -f "$work/job-$id.yaml" -o json 2>&1) ||
      fail "the retry of $id was refused: $out"
  done < "$work/acked"
  after=$("$admitctl" --connect "unix:$work/$writer.sock" log | tail -1 | cut -d' ' -f1)
  [ "$before" = "$after" ] || fail "retries wrote events: head $before -> $after"
  note "ok: $(wc -l < "$work/acked") answered calls present, retries wrote nothing, chain and replay verified"
}

new_drill() {
  drill=$1
  topic="drill-$drill-$$-$RANDOM"
  ledger="kafka://$KAFKA_BOOTSTRAP/$topic"
  rm -f "$work/acked" "$work/refused" "$work"/*.log
  rm -rf "$work"/*.state
}

# kill -9 of the writer at POINT (produced / committing:MS) of its 4th transaction, then a
# restart on the same state.
drill_kill() {
  local point=$1
  start a
  wait_writer a
  "$admitctl" --connect "unix:$work/a.sock" apply -f "$work/defs.yaml" > /dev/null || fail "defs"
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
  start a "ADMITD_KAFKA_DRILL=$point"
  wait_writer a 2
  load a k 6
  wait "$(pid_of a)" 2>/dev/null && fail "admitd a survived its drill"
  grep -q "fault drill: kill" "$work/a.log" || fail "the drill did not fire"
  start a
  wait_writer a 3
  load a after 3
  check a
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
}

drill_zombie() {
  start a
  wait_writer a
  "$admitctl" --connect "unix:$work/a.sock" apply -f "$work/defs.yaml" > /dev/null || fail "defs"
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
  start a "ADMITD_KAFKA_DRILL=produced:2:stop"
  wait_writer a 2
  start b
  # The standby answers reads and refuses writes, naming the writer.
  out=$("$admitctl" --connect "unix:$work/b.sock" apply -f "$work/defs.yaml" 2>&1) &&
    fail "the standby accepted a write"
  echo "$out" | grep -q "standby.*the active writer at unix:$work/a.sock" ||
    fail "the standby's refusal does not name the writer: $out"
  "$admitctl" --connect "unix:$work/b.sock" get clusterqueues > /dev/null ||
    fail "the standby does not answer reads"
  load a k 1
  # The second call's transaction stops the writer after its records are on the broker.
  (call a k-hung || true) &
  local hung=$!
  local i
  for ((i = 0; i < 300; i++)); do
    [ "$(ps -o stat= -p "$(pid_of a)" | cut -c1)" = T ] && break
    sleep 0.1
  done
  [ "$(ps -o stat= -p "$(pid_of a)" | cut -c1)" = T ] || fail "the writer did not stop"
  wait_writer b
  load b b 3
  kill -CONT "$(pid_of a)"
  local rc=0
  wait "$(pid_of a)" || rc=$?
  [ "$rc" = 3 ] || fail "the zombie exited $rc, not 3"
  grep -q "writer stopped" "$work/a.log" || fail "the zombie did not say why it stopped"
  note "the zombie: $(grep -m1 -o "writer stopped: .*" "$work/a.log" | cut -c1-160)"
  wait "$hung" || true
  grep -q "^k-hung " "$work/acked" 2>/dev/null && fail "the zombie's call was answered as written"
  grep -q '"job-k-hung"' <<< "$("$admitctl" --ledger "$ledger" get workloads -o json)" &&
    fail "what the zombie wrote is visible"
  check b
  kill -TERM "$(pid_of b)"
  wait "$(pid_of b)" || fail "admitd b did not stop cleanly"
}

drill_broker() {
  start a
  wait_writer a
  "$admitctl" --connect "unix:$work/a.sock" apply -f "$work/defs.yaml" > /dev/null || fail "defs"
  load a before 3
  (load a during 12) &
  local loader=$!
  sleep 1
  "$top/ops/kafka/kafka.sh" kill "$KAFKA_BROKER_DIR" 2> "$work/broker-kill.log"
  sleep 2
  "$top/ops/kafka/kafka.sh" restart "$KAFKA_BROKER_DIR" > /dev/null 2> "$work/broker-restart.log" ||
    fail "the broker did not restart"
  wait "$loader"
  # The writer rebuilt its decider once the broker answered again, or was never in doubt.
  local i
  for ((i = 0; i < 300; i++)); do
    call a after-1 && break
    sleep 0.2
  done
  grep -q "^after-1 " "$work/acked" || fail "no call was answered after the broker came back"
  note "$(wc -l < "$work/acked") calls answered, $(wc -l < "$work/refused" 2>/dev/null || echo 0) refused during the outage"
  check a
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
}

drill_stall() {
  TXN_TIMEOUT_MS=3000 start a
  wait_writer a
  "$admitctl" --connect "unix:$work/a.sock" apply -f "$work/defs.yaml" > /dev/null || fail "defs"
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
  TXN_TIMEOUT_MS=3000 start a "ADMITD_KAFKA_DRILL=produced:3:stall:7000"
  wait_writer a 2
  load a k 4
  grep -q "fault drill: stall" "$work/a.log" || fail "the drill did not fire"
  sleep 1  # a writer that was fenced stops within its role loop's period
  if kill -0 "$(pid_of a)" 2>/dev/null; then
    note "the writer carried on after the broker aborted its transaction: $(grep -c . "$work/refused" 2>/dev/null || echo 0) call(s) refused"
  else
    local rc=0
    wait "$(pid_of a)" || rc=$?
    [ "$rc" = 3 ] || fail "the stalled writer exited $rc, not 3"
    note "the stalled writer stopped ($(grep -m1 -o "writer stopped: .*" "$work/a.log" | cut -c1-120)) and exited 3; restarting it"
    TXN_TIMEOUT_MS=3000 start a
    wait_writer a 3
  fi
  load a after 2
  check a
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
}

# The cut: packets to and from the broker's port are dropped, silently, as on a partition.
partition_rules() {  # partition_rules -I|-D
  local port=${KAFKA_BOOTSTRAP##*:}
  iptables "$1" INPUT -p tcp --dport "$port" -j DROP
  iptables "$1" INPUT -p tcp --sport "$port" -j DROP
}
readonly PARTITION_S=15         # longer than the session timeout (6 s): the group loses admitd
readonly PARTITION_CALL_S=10    # a call during the cut gives up after this
readonly PARTITION_RESUME_S=120 # service must resume within this after the cut heals

drill_partition() {
  [ -n "${ADMISSION_IN_TEST_NETNS:-}" ] ||
    fail "the partition drill changes the packet filter: run it in a network namespace of its own (ops/scripts/drill_partition.sh)"
  start a
  wait_writer a
  "$admitctl" --connect "unix:$work/a.sock" apply -f "$work/defs.yaml" > /dev/null || fail "defs"
  load a before 4
  partition_rules -I
  note "cut: packets to and from the broker's port ${KAFKA_BOOTSTRAP##*:} dropped"
  local cut_started=$SECONDS k out
  # Calls during the cut: none may be answered unless its events are durable in the topic
  # (check, below, finds every answered call there after the cut heals).
  for ((k = 1; SECONDS - cut_started < PARTITION_S; k++)); do
    job "cut-$k" > "$work/job-cut-$k.yaml"
    if out=$(timeout "$PARTITION_CALL_S" "$admitctl" --connect "unix:$work/a.sock"                --request-id "cut-$k" submit -f "$work/job-cut-$k.yaml" -o json 2>&1); then
      echo "cut-$k $(echo "$out" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["inputs"][0]["sequence"])')" >> "$work/acked"
      note "cut-$k answered during the cut (it must be durable)"
    else
      echo "cut-$k unanswered during the cut: $(echo "$out" | tail -1 | cut -c1-160)" >> "$work/refused"
    fi
  done
  local during=$k
  if timeout "$PARTITION_CALL_S" "$admitctl" --connect "unix:$work/a.sock" get clusterqueues \
       > /dev/null 2>&1; then
    note "reads during the cut: answered"
  else
    note "reads during the cut: not answered within ${PARTITION_CALL_S}s"
  fi
  partition_rules -D
  note "healed after $((SECONDS - cut_started)) s; $((during - 1)) calls tried during the cut, $(grep -c '^cut-' "$work/acked" 2>/dev/null || true) answered"
  kill -0 "$(pid_of a)" 2>/dev/null || fail "admitd exited during the cut ($(tail -3 "$work/a.log" | tr '\n' ' '))"
  # Service resumes: the calls of the cut, retried with their request ids, are answered (once).
  local healed=$SECONDS
  until call a "cut-1"; do
    ((SECONDS - healed < PARTITION_RESUME_S)) || fail "no call answered ${PARTITION_RESUME_S}s after the cut healed"
    sleep 0.5
  done
  note "service resumed $((SECONDS - healed)) s after the cut healed"
  for ((k = 2; k < during; k++)); do call a "cut-$k" || fail "cut-$k was refused after the heal"; done
  load a after 3
  check a
  kill -TERM "$(pid_of a)"
  wait "$(pid_of a)" || fail "admitd a did not stop cleanly"
}

for drill in "${drills[@]}"; do
  new_drill "$drill"
  case "$drill" in
    produced) drill_kill produced:4:kill ;;
    committing) drill_kill committing:4:kill:2 ;;
    zombie) drill_zombie ;;
    broker) drill_broker ;;
    stall) drill_stall ;;
    partition) drill_partition ;;
    *) echo "unknown drill $drill" >&2; exit 2 ;;
  esac
done
echo "drills passed: ${drills[*]}"
