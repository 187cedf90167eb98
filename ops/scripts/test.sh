#!/usr/bin/env bash
# Sets up the machine, builds everything and runs every test (unit, property, crash, CLI,
# layering, Kafka with a real broker, Kubernetes with a real API server, benchmark smoke runs);
# then the sanitizer build (the `asan` preset: clang-14 with AddressSanitizer and
# UndefinedBehaviorSanitizer) and its unit, property, scenario and fuzz tests (docs/faults.md,
# "Fuzzing and sanitizers").
# Exit status: nonzero when either ctest run failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
# Each phase's wall time, for the suite's budget (docs/operations.md): "phase NAME: N s".
phase_start=$SECONDS
phase() { echo "phase $1: $((SECONDS - phase_start)) s"; phase_start=$SECONDS; }
"$top/ops/scripts/setup.sh"
phase setup
"$top/ops/kafka/kafka.sh" fetch
phase kafka-fetch
# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and KWOK for the k8s tests:
# up to 25 minutes on a fresh machine (only what is missing on one built before), then reused
# from outside the clone (docs/k8s.md).
"$top/ops/k8s/cluster.sh" build
phase k8s-build
"$top/ops/scripts/build.sh"
phase build
# admit-k8s, the Kubernetes bridge (Go; docs/k8s.md), for the k8s tests.
"$top/ops/k8s/bridge/build.sh" "$top/build/admit-k8s"
phase bridge-build
cd "$top"
status=0
ctest --preset default "$@" || status=$?
phase ctest
# CI's fuzz runs are bounded smoke runs: the targets' own coverage guides them (CMakeLists.txt).
cmake --preset asan -DADMISSION_FUZZ_LIBRARY_COVERAGE=OFF >/dev/null
cmake --build --preset asan
phase asan-build
ctest --preset asan || status=$?
phase asan-ctest
exit "$status"
