#!/usr/bin/env bash
# The demo through admitd on the Kafka ledger (broker at $KAFKA_BOOTSTRAP, see
# run_with_broker.sh) makes the same decisions as the embedded demo, and the topic read back by
# admitctl --ledger kafka://... (a fresh local copy, every record verified) is byte for byte the
# embedded ledger: same head hash, verify and replay --verify pass, explain and get --at answer.
# An independent reader (tests/kafka/independent_reader.py, confluent-kafka from PyPI in VENV)
# recomputes the chain from the documented record format alone and reaches the same head hash,
# and names the offset of a record appended behind the writer's back.
# Usage: demo_kafka_test.sh ADMITCTL ADMITD VENV
set -euo pipefail
admitctl=$1 admitd=$2 venv=$3
: "${KAFKA_BOOTSTRAP:?run through tests/kafka/run_with_broker.sh}"
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-demo-kafka-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
ledger="kafka://$KAFKA_BOOTSTRAP/demo-$$-$RANDOM"

"$admitctl" demo --dir "$work/embedded" > "$work/embedded.txt" 2>&1 ||
  fail "embedded demo: $(tail -5 "$work/embedded.txt")"
DEMO_STATE="$work/state" "$top/ops/scripts/demo_daemon.sh" "$admitctl" "$admitd" "$ledger" "$work/page" \
  > "$work/daemon.txt" 2>&1 || fail "demo through admitd on Kafka: $(tail -5 "$work/daemon.txt")"

decisions() { grep -E '^   #[0-9]+ ' "$1"; }
[ "$(decisions "$work/embedded.txt" | wc -l)" -ge 40 ] || fail "the embedded demo made too few decisions"
diff <(decisions "$work/embedded.txt") <(decisions "$work/daemon.txt") > "$work/diff" ||
  fail "the decisions differ: $(head -20 "$work/diff")"

# The topic, read directly: a fresh copy each time, or a kept one with --state.
head_of() { "$admitctl" --ledger "$1" verify -o json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["headHash"] if d["ok"] else "FAILED")'; }
a=$(head_of "$work/embedded") b=$(head_of "$ledger")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "the ledgers differ: head $a embedded, $b on Kafka"
"$admitctl" --ledger "$ledger" replay --verify > "$work/replay.txt" 2>&1 ||
  fail "replay --verify of the Kafka ledger: $(tail -5 "$work/replay.txt")"
diff <("$admitctl" --ledger "$work/embedded" log -o json) <("$admitctl" --ledger "$ledger" --state "$work/copy" log -o json) > "$work/logdiff" ||
  fail "admitctl log differs: $(head -5 "$work/logdiff")"
# The kept copy is used again: only new records are read (none here).
"$admitctl" --ledger "$ledger" --state "$work/copy" get workloads -o json > "$work/get.json" ||
  fail "get on the kept copy"
"$admitctl" --ledger "$work/embedded" get workloads -o json > "$work/get-embedded.json"
cmp -s "$work/get.json" "$work/get-embedded.json" || fail "get workloads differs"
"$admitctl" --ledger "$ledger" get workloads --at 20 > "$work/get-at.txt" || fail "get --at"
wl=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["items"][0]["metadata"]; print(m["namespace"]+"/"+m["name"])' "$work/get-embedded.json")
diff <("$admitctl" --ledger "$work/embedded" explain "$wl") <("$admitctl" --ledger "$ledger" explain "$wl") > "$work/explaindiff" ||
  fail "explain $wl differs: $(head -5 "$work/explaindiff")"
"$admitctl" --ledger "$ledger" kafka check > "$work/check.txt" || fail "kafka check: $(cat "$work/check.txt")"
grep -q "retention.ms     -1" "$work/check.txt" || fail "kafka check output: $(cat "$work/check.txt")"
# admitctl never writes a Kafka ledger.
out=$("$admitctl" --ledger "$ledger" dev append --json '{"body":{"workloadDeleted":{"workload":{"namespace":"a","name":"b","uid":"c"}}}}' 2>&1) && fail "admitctl wrote the Kafka ledger"
echo "$out" | grep -q "one writer, admitd" || fail "unclear refusal: $out"
# The independent reader.
here=$(cd "$(dirname "$0")" && pwd)
python=$("$here/python_env.sh" "$venv")
topic=${ledger##*/}
"$python" "$here/independent_reader.py" "$KAFKA_BOOTSTRAP" "$topic" > "$work/independent.txt" ||
  fail "the independent reader refused the topic: $(cat "$work/independent.txt")"
grep -qx "head_hash: $b" "$work/independent.txt" ||
  fail "the independent reader reached another head: $(cat "$work/independent.txt"), admitctl: $b"
# Billing from the topic: the streaming consumer publishes each usage record once, also when it
# is SIGKILLed between producing a transaction's records and committing them (at least 30
# times), and the output topic's totals equal billing report on the ledger (checked in Python).
"$admitctl" --ledger "$ledger" billing report --closed-only --bucket hour -o json > "$work/report.json" ||
  fail "billing report"
out=$("$admitctl" --ledger "$ledger" billing run --output-topic "$topic-usage" --until-end 2>&1) ||
  fail "billing run: $out"
# Every event of the ledger folded once (the count from verify, not written here).
events=$("$admitctl" --ledger "$work/embedded" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["eventsChecked"])')
echo "$out" | grep -q " $events folded, " || fail "billing run: $out (the ledger holds $events events)"
out=$("$admitctl" --ledger "$ledger" billing run --output-topic "$topic-usage" --until-end 2>&1) ||
  fail "billing run again: $out"
echo "$out" | grep -q " 0 usage records published" || fail "billing run published again: $out"
"$python" "$here/billing_output_check.py" "$KAFKA_BOOTSTRAP" "$topic-usage" "$work/report.json" ||
  fail "the billing output topic"
kills=0 completed=0
while ((kills < 30)); do
  # A fresh consumer (output topic and group) killed at its Nth transaction, restarted until it
  # completes; 3 ledger events per transaction: about 27 transactions per completion.
  run_topic="$topic-usage-drill-$completed"
  for ((attempt = 0; attempt < 200; attempt++)); do
    rc=0
    ADMITCTL_BILLING_DRILL_KILL_AT=$((RANDOM % 4 + 1)) "$admitctl" --ledger "$ledger" billing run \
      --output-topic "$run_topic" --group "drill-$run_topic" --events-per-transaction 3 \
      --until-end > "$work/run.txt" 2>&1 || rc=$?
    if [ "$rc" = 0 ]; then break; fi
    [ "$rc" = 137 ] || fail "billing run exited $rc: $(cat "$work/run.txt")"
    kills=$((kills + 1))
  done
  [ "$rc" = 0 ] || fail "billing run did not complete in 200 runs"
  "$python" "$here/billing_output_check.py" "$KAFKA_BOOTSTRAP" "$run_topic" "$work/report.json" ||
    fail "the billing output topic after $kills kills"
  completed=$((completed + 1))
done
echo "billing: exactly once through $kills kills in $completed drills"

# A record appended behind the writer's back (another producer, sequence 2 again): both readers
# stop at it and name its offset.
"$python" - "$KAFKA_BOOTSTRAP" "$topic" <<'PY'
import sys
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1]})
p.produce(sys.argv[2], value=b"\0" * 64, partition=0,
          headers=[("adm-format", b"1"), ("adm-seq", b"2"), ("adm-hash", b"0" * 64)])
assert p.flush(30) == 0
PY
out=$("$python" "$here/independent_reader.py" "$KAFKA_BOOTSTRAP" "$topic" 2>&1) && fail "the independent reader accepted an edited topic"
echo "$out" | grep -q "record at offset" || fail "the independent reader did not name the record: $out"
out=$("$admitctl" --ledger "$ledger" verify 2>&1) && fail "admitctl accepted an edited topic"
echo "$out" | grep -q "offset" || fail "admitctl did not name the record: $out"
echo "demo through admitd on Kafka: $(decisions "$work/daemon.txt" | wc -l) decisions as embedded, head $b"
