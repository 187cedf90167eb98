#!/usr/bin/env bash
# The throwaway control plane of ops/k8s/cluster.sh, started without nodes (--no-nodes; pods
# that run are tests/k8s/pods_test.sh's): it starts, answers kubectl as the version it was built
# as, its Job controller creates a Job's pods (none while the Job is suspended, as the bridge
# will rely on), which stay Pending, its garbage collector deletes them with the Job, and stop
# stops every process it started.
#   tests/k8s/cluster_test.sh
# Exits 77 (ctest's SKIP_RETURN_CODE) when the binaries are not built. K8S_TEST_KEEP_DIR=1 keeps
# the cluster's folder (logs, certificates, etcd data) for a look.
set -euo pipefail

# Bounded waits, in seconds.
readonly WAIT_SECONDS=90
readonly SUSPENDED_CHECK_SECONDS=5
readonly POLL_INTERVAL_SECONDS=0.5
readonly NAMESPACE=cluster-test

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/k8s/cluster_test_lib.sh
source "$script_dir/cluster_test_lib.sh"

skip_unless_cluster_built
# The test's folder is the cluster's.
make_test_dir k8s-cluster-test --cluster .

step "usage errors are refused"
"$cluster_sh" --help | grep -q "start \[--control-plane-only\]" \
  || fail "--help does not describe start and --control-plane-only"
if "$cluster_sh" start 2>/dev/null; then fail "start without DIR succeeded"; fi
if "$cluster_sh" frobnicate 2>/dev/null; then fail "an unknown command succeeded"; fi
if "$cluster_sh" start --frobnicate "$dir" 2>/dev/null; then
  fail "start with an unknown option succeeded"
fi
# Without --control-plane-only, start runs admitd and the bridge too: a missing one is named,
# with how to build it, before anything starts.
if missing="$(ADMITD="$dir/no-such-admitd" "$cluster_sh" start "$dir" 2>&1)"; then
  fail "start without admitd succeeded"
fi
[[ "$missing" == *"admitd is not built at $dir/no-such-admitd"*"ops/scripts/build.sh admitd"* ]] \
  || fail "start without admitd says: $missing"
[[ ! -e "$dir/etcd.pid" ]] || fail "start without admitd started etcd"

step "start"
started_at=$SECONDS
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$dir")"
echo "control plane up in $((SECONDS - started_at))s" >&2
[[ "$kubeconfig" == "$dir/admin.kubeconfig" ]] \
  || fail "start printed '$kubeconfig', not $dir/admin.kubeconfig"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }

step "a second start finds it running"
again="$("$cluster_sh" start --control-plane-only --no-nodes "$dir")"
[[ "$again" == "$kubeconfig" ]] || fail "a second start printed '$again'"

step "the server is Kubernetes v1.34.0 and kubectl can parse its version"
server_version="$(kubectl version -o json \
  | sed -n 's/.*"gitVersion": "\(v[^"]*\)".*/\1/p' | tail -n 1)"
[[ "$server_version" == v1.34.0 ]] || fail "server version '$server_version', not v1.34.0"
kubectl get --raw /readyz | grep -qx ok || fail "/readyz is not ok"
# RBAC is on: an unknown user is refused (the admin's group bypasses it).
if kubectl get pods --as nobody -n default > /dev/null 2>&1; then
  fail "RBAC let an unbound user list pods"
fi

kubectl create namespace "$NAMESPACE" > /dev/null
# The namespace's default service account, without which pods are refused, comes from the
# controller manager's service-account controller.
has_default_service_account() {
  kubectl get serviceaccount default -n "$NAMESPACE" -o name > /dev/null 2>&1
}
wait_until "no default service account in $NAMESPACE" has_default_service_account

[[ "$(kubectl get nodes -o name | wc -l)" == 0 ]] || fail "start --no-nodes created nodes"

# apply_job NAME SUSPEND: a Job of 2 pods that nothing will ever run (no node: the scheduler
# finds none for them).
apply_job() {
  kubectl apply -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NAMESPACE
spec:
  suspend: $2
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.invalid/never-pulled:1
        command: ["true"]
EOF
}

# pods_of JOB: the names of the Job's pods, one per line.
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}'
}
pod_count_is() { [[ "$(pods_of "$1" | grep -c .)" == "$2" ]]; }

step "the Job controller creates a Job's pods"
apply_job runs false
wait_until "job 'runs' has not got 2 pods" pod_count_is runs 2
for pod in $(pods_of runs); do
  owner_ref='.metadata.ownerReferences[0]'
  owner="$(kubectl get pod "$pod" -n "$NAMESPACE" \
    -o jsonpath="{$owner_ref.kind}/{$owner_ref.name}/{$owner_ref.controller}")"
  [[ "$owner" == "Job/runs/true" ]] || fail "pod $pod is owned by '$owner', not Job/runs"
  phase="$(kubectl get pod "$pod" -n "$NAMESPACE" -o jsonpath='{.status.phase}')"
  [[ "$phase" == Pending ]] || fail "pod $pod is '$phase': nothing should run it"
  node="$(kubectl get pod "$pod" -n "$NAMESPACE" -o jsonpath='{.spec.nodeName}')"
  [[ -z "$node" ]] || fail "pod $pod was placed on '$node' in a cluster without nodes"
done
active="$(kubectl get job runs -n "$NAMESPACE" -o jsonpath='{.status.active}')"
[[ "$active" == 2 ]] || fail "job 'runs' counts '$active' active pods, not 2"

step "a suspended Job gets no pods until it is resumed"
apply_job held true
job_suspended() {
  [[ "$(kubectl get job held -n "$NAMESPACE" \
    -o jsonpath='{.status.conditions[?(@.type=="Suspended")].status}')" == True ]]
}
# The Job controller marks it Suspended once it has seen it: from then on, no pods is its decision.
wait_until "job 'held' is not marked Suspended" job_suspended
sleep "$SUSPENDED_CHECK_SECONDS"
pod_count_is held 0 || fail "suspended job 'held' has pods: $(pods_of held | tr '\n' ' ')"
kubectl patch job held -n "$NAMESPACE" --type=merge -p '{"spec":{"suspend":false}}' > /dev/null
wait_until "resumed job 'held' has not got 2 pods" pod_count_is held 2

step "suspending a Job again deletes its pods"
kubectl patch job held -n "$NAMESPACE" --type=merge -p '{"spec":{"suspend":true}}' > /dev/null
wait_until "suspended job 'held' still has pods" pod_count_is held 0

step "the garbage collector deletes a deleted Job's pods"
kubectl delete job runs -n "$NAMESPACE" --cascade=background --wait=false > /dev/null
wait_until "deleted job 'runs' still has pods" pod_count_is runs 0

step "stop stops every process, and a second stop is a no-op"
pids=()
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller; do
  [[ -s "$dir/$name.pid" ]] || fail "no pid file for $name"
  pids+=("$(<"$dir/$name.pid")")
done
"$cluster_sh" stop "$dir"
for pid in "${pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status"; then
    fail "process $pid still runs after stop"
  fi
done
[[ ! -e "$dir/admin.kubeconfig" ]] || fail "stop left admin.kubeconfig behind"
"$cluster_sh" stop "$dir" || fail "a second stop failed"

echo "PASS: control plane started, ran the Job controller and the garbage collector, stopped"
