#!/usr/bin/env bash
# Sets up the machine, builds everything and runs every test (unit, property, crash, CLI,
# layering, Kafka with a real broker, Kubernetes with a real API server, benchmark smoke runs);
# then the sanitizer build (the `asan` preset: clang-14 with AddressSanitizer and
# UndefinedBehaviorSanitizer) and its unit, property, scenario and fuzz tests (docs/faults.md,
# "Fuzzing and sanitizers").
# Exit status: nonzero when either ctest run failed.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
"$top/ops/scripts/setup.sh"
"$top/ops/kafka/kafka.sh" fetch
# kube-apiserver, kube-controller-manager and kubectl for the k8s tests: 6 to 17 minutes on a
# fresh machine, then reused from outside the clone (docs/k8s.md).
"$top/ops/k8s/cluster.sh" build
"$top/ops/scripts/build.sh"
# admit-k8s, the Kubernetes bridge (Go; docs/k8s.md), for the k8s tests.
"$top/ops/k8s/bridge/build.sh" "$top/build/admit-k8s"
cd "$top"
status=0
ctest --preset default "$@" || status=$?
# CI's fuzz runs are bounded smoke runs: the targets' own coverage guides them (CMakeLists.txt).
cmake --preset asan -DADMISSION_FUZZ_LIBRARY_COVERAGE=OFF >/dev/null
cmake --build --preset asan
ctest --preset asan || status=$?
exit "$status"
