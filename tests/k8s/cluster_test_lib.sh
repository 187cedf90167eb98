# shellcheck shell=bash
# The harness of the tests that start clusters of ops/k8s/cluster.sh: cluster_test.sh,
# pods_test.sh, jobset_test.sh and, through bridge_test_lib.sh, the bridge's tests. Each sources
# it after `set -euo pipefail`, having set WAIT_SECONDS and POLL_INTERVAL_SECONDS (wait_until's
# bound and poll interval, in seconds):
#   source "$script_dir/cluster_test_lib.sh"
# Sets the constants SKIP_STATUS (77, ctest's SKIP_RETURN_CODE) and WATCHDOG_POLL_SECONDS, top
# (the repository, absolute) and cluster_sh; defines fail, step and wait_until, and:
#   skip_unless_cluster_built [WHAT]
# Exits SKIP_STATUS, saying "SKIP: WHAT are not all built; run ops/k8s/cluster.sh build (...)",
# unless `cluster.sh bin-dir` finds them (WHAT: "the Kubernetes binaries and KWOK" unless
# given); sets bin_dir and kubectl_bin.
#   make_test_dir NAME [--cluster SUBDIR]... [--log GLOB]... [--tail LINES]
#                      [--before-stop FUNCTION]
# Makes the test's folder, dir ($TMPDIR/NAME.XXXXXX), and on exit: runs FUNCTION, stops the
# cluster in each SUBDIR of dir (cluster unless given; `.` is dir itself), prints the last LINES
# (20 unless given) of each log matching a GLOB (relative to dir; each SUBDIR's *.log unless
# given) if the test failed, and removes dir unless K8S_TEST_KEEP_DIR=1 (then it says it kept
# "the cluster's folder" when dir is the cluster's, "the test's folder" otherwise). A watchdog
# stops the clusters and removes dir also if ctest SIGKILLs the test.

readonly SKIP_STATUS=77
readonly WATCHDOG_POLL_SECONDS=1
top="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
readonly top
readonly cluster_sh="$top/ops/k8s/cluster.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*" >&2; }

# wait_until DESCRIPTION COMMAND...: polls COMMAND until it succeeds, or fails the test.
# shellcheck disable=SC2154  # WAIT_SECONDS and POLL_INTERVAL_SECONDS: set by the test
wait_until() {
  local h_description="$1" h_deadline=$((SECONDS + WAIT_SECONDS))
  shift
  until "$@"; do
    ((SECONDS < h_deadline)) || fail "after ${WAIT_SECONDS}s: $h_description"
    sleep "$POLL_INTERVAL_SECONDS"
  done
}

# shellcheck disable=SC2120  # WHAT is optional
skip_unless_cluster_built() {
  local h_what="${1:-the Kubernetes binaries and KWOK}"
  if ! bin_dir="$("$cluster_sh" bin-dir 2>/dev/null)"; then
    echo "SKIP: $h_what are not all built; run ops/k8s/cluster.sh build (once per machine; it" \
      "builds only what is missing)"
    exit "$SKIP_STATUS"
  fi
  # shellcheck disable=SC2034  # the tests' kubectl
  readonly kubectl_bin="$bin_dir/kubectl"
}

# What cleanup does, set by make_test_dir: the cluster folders it stops (absolute), the globs of
# the logs it prints on failure (relative to dir) and how many lines of each, the function it
# runs first, and whose the folder is.
harness_clusters=()
harness_logs=()
harness_log_lines=20
harness_before_stop=""
harness_folder_owner="test's"

make_test_dir() {
  local h_name="$1" h_subdir
  local h_subdirs=()
  shift
  while (($#)); do
    (($# >= 2)) || fail "make_test_dir: $1 takes a value"
    case "$1" in
      --cluster) h_subdirs+=("$2") ;;
      --log) harness_logs+=("$2") ;;
      --tail) harness_log_lines="$2" ;;
      --before-stop) harness_before_stop="$2" ;;
      *) fail "make_test_dir: unknown option $1" ;;
    esac
    shift 2
  done
  ((${#h_subdirs[@]} > 0)) || h_subdirs=(cluster)
  [[ "${h_subdirs[*]}" != . ]] || harness_folder_owner="cluster's"
  local h_default_logs=()

  dir="$(mktemp -d "${TMPDIR:-/tmp}/$h_name.XXXXXX")"
  readonly dir
  for h_subdir in "${h_subdirs[@]}"; do
    if [[ "$h_subdir" == . ]]; then
      harness_clusters+=("$dir")
      h_default_logs+=('*.log')
    else
      harness_clusters+=("$dir/$h_subdir")
      h_default_logs+=("$h_subdir/*.log")
    fi
  done
  ((${#harness_logs[@]} > 0)) || harness_logs=("${h_default_logs[@]}")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  # The clusters are not children of the test (cluster.sh detaches them), so when ctest kills a
  # timed-out test with SIGKILL, which no trap sees, they would run on. A watchdog in its own
  # session stops them once the test is gone; its output goes to /dev/null, because ctest waits
  # for every holder of the test's stdout to close it.
  # shellcheck disable=SC2016  # the watchdog's own arguments, expanded by its shell
  setsid --fork bash -c '
    echo "$$" > "$4/watchdog.pid"
    while kill -0 "$1" 2>/dev/null; do sleep "$2"; done
    for cluster in "${@:5}"; do "$3" stop "$cluster"; done
    rm -rf "$4"
  ' "$h_name-watchdog" "$$" "$WATCHDOG_POLL_SECONDS" "$cluster_sh" "$dir" "${harness_clusters[@]}" \
    < /dev/null > /dev/null 2>&1
}

# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local h_status=$?
  if [[ -s "$dir/watchdog.pid" ]]; then
    kill -TERM "$(<"$dir/watchdog.pid")" 2>/dev/null || true
  fi
  if [[ -n "$harness_before_stop" ]]; then
    "$harness_before_stop" || true
  fi
  local h_cluster
  for h_cluster in "${harness_clusters[@]}"; do
    "$cluster_sh" stop "$h_cluster" || true
  done
  if ((h_status != 0)); then
    local h_glob h_log
    for h_glob in "${harness_logs[@]}"; do
      # shellcheck disable=SC2231  # the glob expands here, dir is quoted
      for h_log in "$dir"/$h_glob; do
        [[ -f "$h_log" ]] || continue
        echo "--- last lines of $h_log" >&2
        tail -n "$harness_log_lines" "$h_log" >&2
      done
    done
  fi
  if [[ "${K8S_TEST_KEEP_DIR:-0}" == 1 ]]; then
    echo "kept the $harness_folder_owner folder $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$h_status"
}
