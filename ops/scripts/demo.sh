#!/usr/bin/env bash
# The main job: sets up the machine, builds admitctl, and runs the demo on a fresh embedded
# RocksDB ledger. (Until the decider lands, the demo records a small GPU platform's inputs,
# prints the ledger and verifies its hash chain.)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/ops/scripts/setup.sh"
"$top/ops/scripts/build.sh" admitctl
exec "$top/ops/scripts/demo_run.sh" "$top/build/ops/admitctl" "${1:-$top/build/demo-ledger}"
