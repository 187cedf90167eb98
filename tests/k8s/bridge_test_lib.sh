# shellcheck shell=bash
# The shared set-up of the bridge's tests (bridge_adopt_test.sh, bridge_budget_test.sh,
# bridge_checks_test.sh, bridge_definitions_test.sh, bridge_jobs_test.sh, bridge_kinds_test.sh,
# bridge_nodes_test.sh, bridge_pods_test.sh, deploy_test.sh, pods_e2e_test.sh, pods_load_test.sh,
# storage_migration_test.sh), each of which
# takes the arguments ADMITCTL ADMITD ADMIT_K8S and sources this first, after `set -euo pipefail`
# and setting script_dir to its own folder:
#   source bridge_test_lib.sh NAME "$@"     (NAME: the test folder's prefix in $TMPDIR)
# Checks the arguments (exit 2 with a usage line) and sets admitctl, admitd, admit_k8s, and the
# constants WAIT_SECONDS and POLL_INTERVAL_SECONDS. Sources cluster_test_lib.sh, the harness it
# shares with the tests without the bridge, which sets SKIP_STATUS, WATCHDOG_POLL_SECONDS, top
# (the repository, absolute) and cluster_sh and defines fail, step and wait_until. Skips (exit
# SKIP_STATUS) when the Kubernetes binaries or admit-k8s are not built; sets bin_dir, kubectl_bin
# and dir; stops admitd ($admitd_pid), the bridge ($bridge_pid) and the control plane (in
# $dir/cluster) on exit, printing the logs of admitd and the bridge on failure, and also stops
# the control plane if ctest SIGKILLs the test.
(($# == 4)) || { echo "usage: $0 ADMITCTL ADMITD ADMIT_K8S" >&2; exit 2; }
readonly test_name="$1" admitctl="$2" admitd="$3" admit_k8s="$4"

readonly WAIT_SECONDS=90
readonly POLL_INTERVAL_SECONDS=0.5
# shellcheck source=tests/k8s/cluster_test_lib.sh disable=SC2154  # script_dir: the test's
source "$script_dir/cluster_test_lib.sh"

skip_unless_cluster_built
if [[ ! -x "$admit_k8s" ]]; then
  echo "SKIP: admit-k8s is not built at $admit_k8s; run ops/k8s/bridge/build.sh"
  exit "$SKIP_STATUS"
fi
[[ -x "$admitctl" && -x "$admitd" ]] || fail "admitctl or admitd missing: $admitctl $admitd"

admitd_pid=""
bridge_pid=""
# Run on exit before the control plane stops. If ctest SIGKILLs the test, admitd and the bridge,
# its children, die with the test's process group.
# shellcheck disable=SC2317  # run by cleanup
stop_admitd_and_bridge() {
  [[ -n "$bridge_pid" ]] && kill -TERM "$bridge_pid" 2>/dev/null && wait "$bridge_pid" 2>/dev/null
  [[ -n "$admitd_pid" ]] && kill -TERM "$admitd_pid" 2>/dev/null && wait "$admitd_pid" 2>/dev/null
}
# The last two logs: the admitd and bridge of a full `cluster.sh start` (deploy_test.sh, others).
make_test_dir "$test_name" --before-stop stop_admitd_and_bridge --tail 30 --log 'bridge*.log' \
  --log admitd.err --log cluster/admitd.log --log cluster/admit-k8s.log

# start_test_admitd ADMITD TOP PRINCIPAL: a test PKI in $dir/pki, a policy giving PRINCIPAL's
# certificate the bridge role alone, and admitd on a fresh ledger in $dir/ledger, on
# unix:$dir/admitd.sock and TLS; waits until it is ready, sets admitd_pid and admitd_tls.
# K8S_ADMITD_ARGS: more flags (e.g. --metrics-listen, to count its calls).
# shellcheck disable=SC2086  # K8S_ADMITD_ARGS split
start_test_admitd() {
  local admitd_bin="$1" top_dir="$2" principal="$3"
  "$top_dir/ops/scripts/test_pki.sh" "$dir/pki" "$principal" > /dev/null
  printf 'principals:\n- name: %s\n  roles: [bridge]\n' "$principal" > "$dir/policy.yaml"
  "$admitd_bin" --ledger "$dir/ledger" --listen "unix:$dir/admitd.sock" --listen tls:127.0.0.1:0 \
    --tls-cert "$dir/pki/server.pem" --tls-key "$dir/pki/server.key" --client-ca "$dir/pki/ca.pem" \
    --policy "$dir/policy.yaml" --ready-file "$dir/ready" --log-level warn ${K8S_ADMITD_ARGS:-} \
    > "$dir/admitd.out" 2> "$dir/admitd.err" &
  admitd_pid=$!
  # shellcheck disable=SC2317  # run by wait_until
  admitd_ready() { [[ -s "$dir/ready" ]] && grep -q '^tls:' "$dir/ready"; }
  wait_until "admitd did not start" admitd_ready
  admitd_tls="$(grep '^tls:' "$dir/ready")"
}

# The bridge, serving the webhooks (the Job webhook and the CRDs' conversion) where
# `cluster.sh start --control-plane-only "$dir/cluster"` pointed the API server, with the test's
# PKI of start_test_admitd.
#   start_bridge [STEP:NAMESPACE/WORKLOAD]
# With an argument, the bridge stops there (ADMIT_K8S_TEST_PAUSE_AT, test only). Its log is
# $dir/bridge-$bridge_runs.log. K8S_BRIDGE_ARGS: more flags (e.g. --pprof-bind-address, to profile
# it). Waits until the webhook answers; sets bridge_pid.
# REQUIRES: kubeconfig, admitd_tls and PRINCIPAL set.
bridge_runs=0
# shellcheck disable=SC2086,SC2120,SC2153,SC2154  # K8S_BRIDGE_ARGS split; optional argument; PRINCIPAL, kubeconfig: the test's
start_bridge() {
  local address
  address="$(<"$dir/cluster/webhook.address")"
  bridge_runs=$((bridge_runs + 1))
  ADMIT_K8S_TEST_PAUSE_AT="${1:-}" "$admit_k8s" --kubeconfig "$kubeconfig" --admitd "$admitd_tls" \
    --admitd-cert "$dir/pki/$PRINCIPAL.pem" --admitd-key "$dir/pki/$PRINCIPAL.key" \
    --admitd-ca "$dir/pki/ca.pem" --leader-elect=false \
    --webhook-bind-address "$address" \
    --webhook-cert "$dir/cluster/pki/webhook.pem" --webhook-key "$dir/cluster/pki/webhook.key" \
    ${K8S_BRIDGE_ARGS:-} > "$dir/bridge-$bridge_runs.log" 2>&1 &
  bridge_pid=$!
  # Any HTTP answer (404 for /) over TLS checked against the cluster's CA will do.
  # shellcheck disable=SC2317  # run by wait_until
  webhook_serves() {
    curl -s -o /dev/null --max-time 2 --cacert "$dir/cluster/pki/ca.pem" "https://$address/" \
      2>/dev/null
  }
  wait_until "the bridge's webhook does not answer at $address" webhook_serves
}
