#!/usr/bin/env bash
# End-to-end tests of admitctl's foundation commands on a real embedded ledger.
# Usage: cli_test.sh ADMITCTL
set -uo pipefail
admitctl=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
L="$work/ledger"
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
# expect_rc RC CMD...: runs CMD, captures stdout/stderr in $out/$err, checks the exit code.
expect_rc() {
  local want=$1; shift
  out=$("$@" 2>"$work/stderr"); rc=$?
  err=$(cat "$work/stderr")
  [ "$rc" = "$want" ] || fail "exit $rc (want $want): $* :: $err"
}
contains() { [[ "$1" == *"$2"* ]] || fail "expected '$2' in: $1"; }

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

if ((failures)); then echo "$failures failure(s)"; exit 1; fi
echo "cli_test: all passed"
