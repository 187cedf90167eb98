#!/usr/bin/env bash
# Runs a test binary against a fresh Kafka broker of its own:
#   tests/kafka/run_with_broker.sh TEST_BINARY [ARGS...]
# starts a broker in a temp folder with ops/kafka/kafka.sh, exports its address as
# KAFKA_BOOTSTRAP (and its folder as KAFKA_BROKER_DIR), runs the test, always stops the broker,
# and exits with the test's status.
# KAFKA_KEEP_BROKER_DIR=1 keeps the broker's folder (config, data, broker.log) for a look.
set -euo pipefail

(($# >= 1)) || { echo "usage: $0 TEST_BINARY [ARGS...]" >&2; exit 2; }

# How often the watchdog checks whether this script is still alive.
readonly WATCHDOG_POLL_SECONDS=1
readonly BROKER_LOG_TAIL_LINES=60

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly kafka_sh="$script_dir/../../ops/kafka/kafka.sh"
keep_dir="${KAFKA_KEEP_BROKER_DIR:-0}"
broker_dir="$(mktemp -d "${TMPDIR:-/tmp}/kafka-test.XXXXXX")"
test_pid=""

# shellcheck disable=SC2317  # run by the EXIT trap, which shellcheck does not follow
cleanup() {
  local status=$?
  # The watchdog is only needed if this script dies without running this trap.
  if [[ -s "$broker_dir/watchdog.pid" ]]; then
    kill -TERM "$(<"$broker_dir/watchdog.pid")" 2>/dev/null || true
  fi
  # A signal may arrive while the test still runs; it must not outlive the broker.
  if [[ -n "$test_pid" ]] && kill -0 "$test_pid" 2>/dev/null; then
    kill -TERM "$test_pid" 2>/dev/null || true
    wait "$test_pid" 2>/dev/null || true
  fi
  "$kafka_sh" stop "$broker_dir" || true
  if [[ "$keep_dir" == 1 ]]; then
    echo "run_with_broker: kept the broker's folder $broker_dir" >&2
  else
    rm -rf "$broker_dir"
  fi
  exit "$status"
}
trap cleanup EXIT
# Turn signals into an exit so the EXIT trap stops the broker.
trap 'exit 130' INT
trap 'exit 143' TERM

# The broker is not a child of this script (kafka.sh detaches it), so when ctest kills a timed-out
# test with SIGKILL, which no trap sees, the broker would run on. A watchdog in its own session,
# outside the process tree that ctest kills, stops it once this script is gone. Its output goes
# to /dev/null: ctest waits for every holder of the test's stdout to close it.
# shellcheck disable=SC2016  # the watchdog's own arguments, expanded by its shell
setsid --fork bash -c '
  echo "$$" > "$4/watchdog.pid"
  while kill -0 "$1" 2>/dev/null; do sleep "$2"; done
  "$3" stop "$4"
  [[ "$5" == 1 ]] || rm -rf "$4"
' run_with_broker_watchdog "$$" "$WATCHDOG_POLL_SECONDS" "$kafka_sh" "$broker_dir" "$keep_dir" \
  < /dev/null > /dev/null 2>&1

KAFKA_BOOTSTRAP="$("$kafka_sh" start "$broker_dir")"
export KAFKA_BOOTSTRAP
# For fault drills that crash and restart the broker (ops/kafka/kafka.sh kill / restart).
export KAFKA_BROKER_DIR="$broker_dir"
echo "run_with_broker: Kafka broker at $KAFKA_BOOTSTRAP (folder $broker_dir)" >&2

# In the background so that `wait` returns as soon as a signal comes; a foreground child would
# hold off the traps until it exits.
"$@" &
test_pid=$!
test_status=0
wait "$test_pid" || test_status=$?
test_pid=""

if ((test_status != 0)); then
  echo "run_with_broker: the test failed ($test_status); last lines of the broker's log:" >&2
  tail -n "$BROKER_LOG_TAIL_LINES" "$broker_dir/broker.log" >&2 || true
fi
exit "$test_status"
