#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time on a copy of its seed corpora (docs/faults.md,
# "Fuzzing and sanitizers"). Exit status: libFuzzer's, nonzero on a crash, a sanitizer report,
# a failed check, a timeout of one input or a leak; the input that did it is kept in the
# artifacts folder printed at the end.
# Usage: run_fuzz.sh FUZZER SECONDS SEED_DIR...
set -euo pipefail
fuzzer=$1
seconds=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/fuzz.XXXXXX")
mkdir -p "$work/corpus" "$work/artifacts"
for seeds in "$@"; do
  if [ -d "$seeds" ]; then cp -r "$seeds"/. "$work/corpus/"; fi
done
echo "run_fuzz: $(basename "$fuzzer") for ${seconds}s on $(ls "$work/corpus" | wc -l) seeds in $work"
# -timeout: one input taking longer is a finding (a loop without a bound); -rss_limit_mb: the
# sanitizers' shadow memory included; -print_final_stats: executions and coverage for the log.
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=3072 -print_final_stats=1 \
  -artifact_prefix="$work/artifacts/" "$work/corpus" || status=$?
if [ "$status" -ne 0 ]; then
  echo "run_fuzz: $(basename "$fuzzer") failed (exit $status); inputs kept in $work/artifacts:" >&2
  ls -l "$work/artifacts" >&2
  exit "$status"
fi
rm -rf "$work"
