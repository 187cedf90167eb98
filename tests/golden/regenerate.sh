#!/usr/bin/env bash
# Regenerates the golden corpus from the scenario files, for a deliberate behaviour change of
# the decider, which must also bump kEngineVersion (projections/engine_version.h). See README.md.
#   tests/golden/regenerate.sh [BUILD_DIR]        (default: build)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$top/build}
ninja -C "$build" -j2 golden_tool
tool=$build/tests/golden/golden_tool
# name: scenario file (tests/scenarios/). Add a line to add a ledger to the corpus.
corpus=(
  "cohort-borrowing:04-cohort-borrowing.yaml"
  "preemption-within-clusterqueue:07-preemption-within-clusterqueue.yaml"
  "partial-admission:11-partial-admission.yaml"
  "import-and-quota-versions:13-import-and-quota-versions.yaml"
  "admission-checks:15-admission-checks.yaml"
  "pods-and-revocation:17-pods-and-revocation.yaml"
)
rm -f "$top"/tests/golden/*.ledger "$top"/tests/golden/*.sha256
for entry in "${corpus[@]}"; do
  name=${entry%%:*}
  scenario=${entry#*:}
  "$tool" generate "$top/tests/scenarios/$scenario" "$top/tests/golden/$name"
done
"$tool" check "$top/tests/golden"
