#!/usr/bin/env bash
# Sets up the machine, builds everything and runs every test (unit, property, crash, CLI,
# layering, Kafka with a real broker, benchmark smoke runs). Exit status: ctest's.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/ops/scripts/setup.sh"
"$top/ops/kafka/kafka.sh" fetch
"$top/ops/scripts/build.sh"
cd "$top"
ctest --preset default "$@"
