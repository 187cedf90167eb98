#!/usr/bin/env bash
# Configures and builds (Ninja, -j2) into build/. Optional arguments are build targets.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
cmake --preset default >/dev/null
cmake --build --preset default ${1:+--target "$@"}
