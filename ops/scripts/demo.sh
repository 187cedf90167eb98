#!/usr/bin/env bash
# The main job: sets up the machine, builds admitctl, and runs `admitctl demo` on a fresh
# embedded RocksDB ledger (build/demo-ledger, replaced on every run).
# With --daemon: builds admitd too and runs the same demo through it (one TLS client
# certificate per actor, ops/scripts/demo_daemon.sh), on build/demo-daemon-ledger.
# Usage: demo.sh [--daemon] [LEDGER]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
daemon=false
if [ "${1:-}" = "--daemon" ]; then daemon=true; shift; fi
"$top/ops/scripts/setup.sh"
if $daemon; then
  "$top/ops/scripts/build.sh" admitctl admitd
  ledger="${1:-$top/build/demo-daemon-ledger}"
  rm -rf "$ledger"
  exec "$top/ops/scripts/demo_daemon.sh" "$top/build/ops/admitctl" "$top/build/ops/admitd" "$ledger"
fi
"$top/ops/scripts/build.sh" admitctl
ledger="${1:-$top/build/demo-ledger}"
rm -rf "$ledger"
exec "$top/build/ops/admitctl" demo --dir "$ledger"
