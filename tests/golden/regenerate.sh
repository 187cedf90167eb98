#!/usr/bin/env bash
# Generates the ledgers of the golden corpus that do not exist yet, from their scenario files,
# then checks the whole corpus. A committed ledger is history and is never regenerated: it is
# what the engine version of its day decided, and every later build must still replay it,
# deciding each batch as that version did (docs/semantics.md, "Engine versions and replay").
# A behaviour change bumps kEngineVersion (projections/engine_version.h) and adds ledgers here.
# See README.md.
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
  # engine v6
  "preemption-ring:24-preemption-ring.yaml"
  "preempted-then-reclaims:25-preempted-then-reclaims.yaml"
  # engine v7
  "pods-quota:26-pods-quota.yaml"
  # engine v8
  "borrowing-height:27-borrowing-height.yaml"
  "hierarchical-cohorts:05-hierarchical-cohorts.yaml"
  # engine v9
  "victim-search:28-victim-search.yaml"
  "borrow-within-cohort:09-borrow-within-cohort.yaml"
  # engine v10
  "quantities-in-messages:29-quantities-in-messages.yaml"
  # engine v11
  "hold-capacity:30-hold-capacity.yaml"
  "queueing-strategies:06-queueing-strategies.yaml"
  # engine v12
  "flavor-stickiness:31-flavor-stickiness.yaml"
  # engine v13
  "definition-deletions:33-definition-deletions.yaml"
  # engine v14
  "admission-fair-sharing:40-admission-fair-sharing.yaml"
  # engine v15
  "evicting-victims-first:42-evicting-victims-first.yaml"
  "victim-not-readmitted-at-once:43-victim-not-readmitted-at-once.yaml"
  # engine v16
  "fair-sharing-ported:39-fair-sharing-ported.yaml"
  "fair-sharing-strategies:44-fair-sharing-strategies.yaml"
  # engine v17
  "check-pod-set-updates:45-check-pod-set-updates.yaml"
  # engine v18
  "failed-to-start:46-failed-to-start.yaml"
  # engine v19
  "node-capacity-reclaim:47-node-capacity-reclaim.yaml"
  "node-inventory:48-node-inventory.yaml"
  "node-failure-evicts-its-pods:49-node-failure-evicts-its-pods.yaml"
  # engine v20
  "preemptor-keeps-its-place:50-preemptor-keeps-its-place.yaml"
  # engine v23
  "hierarchical-reclaim:53-hierarchical-reclaim-ported.yaml"
  "flavor-search-oracle:31-flavor-stickiness.yaml"
  # engine v24
  "fair-sharing-tournament:55-schedule-hierarchical-ported.yaml"
  "eviction-queue-order:58-eviction-queue-order.yaml"
  # engine v25
  "budgets:60-budgets.yaml"
  "budget-decay-and-rolling:61-budget-decay-and-rolling.yaml"
  # engine v26
  "topology-aware:62-topology-aware.yaml"
  "tas-node-replacement:69-tas-node-failure.yaml"
  # engine v27
  "pending-reason-shown-once:74-pending-reason-shown-once.yaml"
)
for entry in "${corpus[@]}"; do
  name=${entry%%:*}
  scenario=${entry#*:}
  if [[ -e "$top/tests/golden/$name.ledger" ]]; then
    echo "kept $name.ledger (committed ledgers are never regenerated)"
    continue
  fi
  "$tool" generate "$top/tests/scenarios/$scenario" "$top/tests/golden/$name"
done
"$tool" check "$top/tests/golden"
