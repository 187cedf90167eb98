#!/usr/bin/env bash
# The billing consumer on admitd's watch (docs/billing.md, "From admitd's watch"): the demo's
# ledger served by admitd, the consumer keeping its cursor, fold, aggregates and outbox in its
# own RocksDB state and relaying the outbox to an output topic on the broker at
# $KAFKA_BOOTSTRAP (run_with_broker.sh).
# - a run publishes every closed interval's records; a second publishes none; its aggregates
#   (billing state) and the output topic (Python, confluent-kafka) equal billing report;
# - it follows the ledger live: workloads finished while it runs are published, and SIGTERM
#   stops it cleanly;
# - kill drills: at least 30 SIGKILLs at the drill points (after a state batch, between
#   producing and committing a transaction, between the commit and the outbox's cleanup), some
#   restarts with the state deleted (rebuilt from the ledger): every record once in the output.
# Usage: billing_watch_test.sh ADMITCTL ADMITD VENV
set -euo pipefail
admitctl=$1 admitd=$2 venv=$3
: "${KAFKA_BOOTSTRAP:?run through tests/kafka/run_with_broker.sh}"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-billing-watch-test.XXXXXX")
daemon_pid= consumer_pid=
trap 'kill -9 $daemon_pid $consumer_pid 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
python=$("$here/python_env.sh" "$venv")
prefix="billing-watch-$$-$RANDOM"

"$admitctl" demo --dir "$work/ledger" > "$work/demo.txt" 2>&1 || fail "demo: $(tail -5 "$work/demo.txt")"
S="$work/admitd.sock"
"$admitd" --ledger "$work/ledger" --listen "unix:$S" --ready-file "$work/ready" --log-level warn \
  > "$work/admitd.out" 2> "$work/admitd.err" &
daemon_pid=$!
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
[ -s "$work/ready" ] || fail "admitd did not start: $(tail -5 "$work/admitd.err")"
ctl() { "$admitctl" --connect "unix:$S" "$@"; }
report() { ctl billing report --closed-only --bucket hour -o json > "$work/report.json" || fail "billing report"; }
run() {  # run STATE TOPIC [args]: to the ledger's end
  local state=$1 topic=$2; shift 2
  ctl billing run --consumer-state "$state" --output-bootstrap "$KAFKA_BOOTSTRAP" \
    --output-topic "$topic" --until-end "$@"
}
# The consumer's aggregates summed per resource, kind and bucket equal the report's rows.
state_equals_report() {
  "$admitctl" billing state --consumer-state "$1" -o json > "$work/state.json" || fail "billing state"
  python3 - "$work/state.json" "$work/report.json" <<'PY' || fail "the consumer's aggregates differ from billing report"
import json, sys
from collections import defaultdict
from decimal import Decimal
state, report = (json.load(open(p)) for p in sys.argv[1:3])
got, want = defaultdict(Decimal), defaultdict(Decimal)
for r in state["rows"]:
    got[(r["resource"], r["kind"], r["bucket"])] += Decimal(r["resourceSeconds"])
for r in report["rows"]:
    for kind in ("used", "idle"):
        want[(r["resource"], kind, r["bucket"])] += Decimal(r[kind])
got = {k: v for k, v in got.items() if v}
want = {k: v for k, v in want.items() if v}
if got != want:
    sys.exit(f"state {got} != report {want}")
if state["outbox"] != 0:
    sys.exit(f"outbox holds {state['outbox']} records after a run to the end")
PY
}

# A run to the end, then another that publishes nothing.
report
out=$(run "$work/state" "$prefix-usage" 2>&1) || fail "billing run: $out"
echo "$out" | grep -q "resumed after sequence 0, " || fail "first run: $out"
echo "$out" | grep -Eq " [1-9][0-9]* usage records published" || fail "first run published nothing: $out"
out=$(run "$work/state" "$prefix-usage" 2>&1) || fail "billing run again: $out"
echo "$out" | grep -q " 0 folded, .* 0 usage records published" || fail "the second run published: $out"
"$python" "$here/billing_output_check.py" "$KAFKA_BOOTSTRAP" "$prefix-usage" "$work/report.json" ||
  fail "the output topic"
state_equals_report "$work/state"
out=$("$admitctl" billing state --consumer-state "$work/state") || fail "billing state: $out"
echo "$out" | grep -q "outbox: 0 records" || fail "billing state: $out"

# Live: the consumer follows while workloads finish; SIGTERM stops it after it has published.
"$admitctl" --connect "unix:$S" billing run --consumer-state "$work/state" \
  --output-bootstrap "$KAFKA_BOOTSTRAP" --output-topic "$prefix-usage" > "$work/live.txt" 2>&1 &
consumer_pid=$!
ctl get workloads -o json > "$work/workloads.json"
admitted=$(python3 -c '
import json, sys
for w in json.load(open(sys.argv[1]))["items"]:
    conds = {c["type"]: c["status"] for c in w.get("status", {}).get("conditions", [])}
    if conds.get("QuotaReserved") == "True" and conds.get("Finished") != "True":
        print(w["metadata"]["namespace"] + "/" + w["metadata"]["name"])
' "$work/workloads.json")
[ -n "$admitted" ] || fail "the demo left no workload holding quota to finish"
for wl in $admitted; do ctl finish "$wl" > /dev/null || fail "finish $wl"; done
report
for _ in $(seq 60); do
  "$python" "$here/billing_output_check.py" "$KAFKA_BOOTSTRAP" "$prefix-usage" "$work/report.json" \
    > "$work/check.txt" 2>&1 && break
  sleep 0.5
done
grep -q "each once" "$work/check.txt" || fail "the live consumer did not publish the finished workloads: $(cat "$work/check.txt")"
kill -TERM "$consumer_pid"
rc=0; wait "$consumer_pid" || rc=$?
consumer_pid=
[ "$rc" = 0 ] || fail "the live consumer exited $rc on SIGTERM: $(cat "$work/live.txt")"
state_equals_report "$work/state"

# Kill drills: fresh output topics and states, killed at a random drill point, restarted (now
# and then with the state deleted) until a run completes; every record once.
kills=0 completed=0 rebuilt=0
while ((kills < 30)); do
  topic="$prefix-drill-$completed" state="$work/drill-state-$completed"
  for ((attempt = 0; attempt < 200; attempt++)); do
    points=(ingested:1 produced:$((RANDOM % 4 + 1)) committed:$((RANDOM % 4 + 1)))
    if ((RANDOM % 5 == 0)) && [ -d "$state" ]; then rm -rf "$state"; rebuilt=$((rebuilt + 1)); fi
    rc=0
    ADMITCTL_BILLING_DRILL=${points[RANDOM % 3]} run "$state" "$topic" --events-per-transaction 3 \
      > "$work/run.txt" 2>&1 || rc=$?
    if [ "$rc" = 0 ]; then break; fi
    [ "$rc" = 137 ] || fail "billing run exited $rc: $(cat "$work/run.txt")"
    kills=$((kills + 1))
  done
  [ "$rc" = 0 ] || fail "billing run did not complete in 200 runs"
  "$python" "$here/billing_output_check.py" "$KAFKA_BOOTSTRAP" "$topic" "$work/report.json" ||
    fail "the output topic after $kills kills"
  state_equals_report "$state"
  completed=$((completed + 1))
done
((rebuilt > 0)) || fail "no drill restarted from a deleted state"
echo "billing from admitd: exactly once through $kills kills ($rebuilt with the state deleted) in $completed drills"
