#!/usr/bin/env bash
# The what-if report's HTML page (docs/whatif.md) in headless Chromium: admitctl whatif -o html
# on the history of tests/cli/whatif_history.sh under a change of quota, opened from file:// by
# tests/ui/whatif_report_test.mjs (playwright-core, installed into NODE_DIR on the first run, as
# tests/ui/ui_test.sh does). The screenshot goes to SHOTS/whatif-report.png.
# Usage: whatif_report_test.sh ADMITCTL NODE_DIR SHOTS
set -euo pipefail
admitctl=$1 node_dir=$2 shots=$3
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] ||
  fail "$chromium is needed (Debian's chromium; ops/scripts/setup.sh installs it)"
command -v node > /dev/null ||
  fail "node is needed (Debian's nodejs; ops/scripts/setup.sh installs it)"
mkdir -p "$node_dir" "$shots"
node_dir=$(cd "$node_dir" && pwd) shots=$(cd "$shots" && pwd)
(
  flock 9
  if [ ! -d "$node_dir/node_modules/playwright-core" ]; then
    (cd "$node_dir" && npm install --no-audit --no-fund --silent playwright-core@1.65.1) ||
      fail "npm install playwright-core"
  fi
) 9> "$node_dir/.lock"
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-whatif-ui.XXXXXX")
trap 'rm -rf "$work"' EXIT

source "$here/../cli/whatif_history.sh"
whatif_history "$admitctl" "$work/ledger" "$work" || fail "recording the history"
"$admitctl" --ledger "$work/ledger" whatif --change "$work/bigger-quota.yaml" -o html \
  --out "$work/report.html" 2> "$work/whatif.err" || fail "whatif: $(cat "$work/whatif.err")"
REPORT="$work/report.html" SHOTS=$shots CHROMIUM=$chromium NODE_DIR="$node_dir" \
  node "$here/whatif_report_test.mjs"
