#!/usr/bin/env bash
# The main job: sets up the machine, builds admitctl, and runs `admitctl demo` on a fresh
# embedded RocksDB ledger (build/demo-ledger, replaced on every run).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/ops/scripts/setup.sh"
"$top/ops/scripts/build.sh" admitctl
ledger="${1:-$top/build/demo-ledger}"
rm -rf "$ledger"
exec "$top/build/ops/admitctl" demo --dir "$ledger"
