#!/usr/bin/env bash
# The demo through admitd (ops/scripts/demo_daemon.sh: one TLS certificate per actor, the
# policy's roles) makes the same decisions as the embedded demo: the same decision lines, and
# ledgers that are byte for byte the same (same head hash), each verifying and replaying.
# Usage: demo_daemon_test.sh ADMITCTL ADMITD
set -euo pipefail
admitctl=$1 admitd=$2
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-demo-daemon-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$admitctl" demo --dir "$work/embedded" > "$work/embedded.txt" 2>&1 ||
  fail "embedded demo: $(tail -5 "$work/embedded.txt")"
"$top/ops/scripts/demo_daemon.sh" "$admitctl" "$admitd" "$work/daemon" > "$work/daemon.txt" 2>&1 ||
  fail "demo through admitd: $(tail -5 "$work/daemon.txt")"

decisions() { grep -E '^   #[0-9]+ ' "$1"; }
[ "$(decisions "$work/embedded.txt" | wc -l)" -ge 40 ] || fail "the embedded demo made too few decisions"
diff <(decisions "$work/embedded.txt") <(decisions "$work/daemon.txt") > "$work/diff" ||
  fail "the decisions differ: $(head -20 "$work/diff")"
grep -q '^== Replay --verify: ' "$work/daemon.txt" || fail "the demo through admitd did not replay"
head_of() { "$admitctl" --ledger "$1" verify -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["headHash"])'; }
a=$(head_of "$work/embedded") b=$(head_of "$work/daemon")
[ -n "$a" ] && [ "$a" = "$b" ] || fail "the ledgers differ: head $a embedded, $b through admitd"
# The daemon's ledger names each actor as the principal of its connection.
"$admitctl" --ledger "$work/daemon" log -o json > "$work/log.json"
python3 - "$work/log.json" <<'PY' || fail "actors in the daemon's ledger"
import json, sys
actors = {json.loads(l)["event"]["actor"] for l in open(sys.argv[1]) if l.strip()}
want = {"platform-ops", "tenant", "pod-runtime", "security.example.com/scanner",
        "security.example.com/revoker", "finance.example.com/budget", "engine"}
sys.exit(0 if actors == want else f"actors {sorted(actors)}, expected {sorted(want)}")
PY
# Refused on a ledger that is not fresh, and without --certs over a Unix socket.
out=$("$top/ops/scripts/demo_daemon.sh" "$admitctl" "$admitd" "$work/daemon" 2>&1) && fail "a second demo on the same ledger ran"
echo "$out" | grep -q "not empty" || fail "no reason given for a used ledger: $out"
out=$("$admitctl" --connect "unix:$work/none.sock" demo 2>&1) && fail "demo over a Unix socket ran"
echo "$out" | grep -q "needs a tls: address and --certs" || fail "unclear refusal: $out"
echo "demo through admitd: $(decisions "$work/daemon.txt" | wc -l) decisions as embedded, head $b"
