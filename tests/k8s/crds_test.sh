#!/usr/bin/env bash
# Our kueue.x-k8s.io CRDs and the ledger's BudgetPolicy (ops/k8s/crds/) on a real API server:
# `cluster.sh start` installs them, Kueue's own quick-start manifests apply and list, and every
# case of tests/k8s/crd_cases/ gets the same answer from the API server as from the ledger's
# parser (`admitctl apply`, or `submit` for a Workload, on a throwaway ledger): accept-*.yaml both
# take; refuse-*.yaml both refuse, the API server with the reason its `# expect:` line names;
# ledger-only-*.yaml, what a CRD cannot check, only the ledger refuses. The cluster runs admitd
# and the bridge (a full `cluster.sh start`): the bridge serves the CRDs' conversion webhook,
# without which the API server cannot store or serve a v1beta1 ClusterQueue, Cohort, LocalQueue
# or Workload.
#   tests/k8s/crds_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the cluster's folder.
set -euo pipefail

(($# == 3)) || { echo "usage: $0 ADMITCTL ADMITD ADMIT_K8S" >&2; exit 2; }
readonly admitctl="$1" admitd="$2" admit_k8s="$3"

readonly SKIP_STATUS=77
readonly WATCHDOG_POLL_SECONDS=1
# The kinds and plural names that ops/k8s/crds/ must define.
readonly KINDS=(resourceflavors cohorts clusterqueues localqueues admissionchecks
  workloadpriorityclasses workloads)
# The ledger's own kind (docs/budgets.md), one version.
readonly BUDGET_CRD=budgetpolicies.admission-ledger.io

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
readonly cluster_sh="$script_dir/../../ops/k8s/cluster.sh"
readonly cases_dir="$script_dir/crd_cases"
# The shared folder beside the repository, with Kueue's own example manifests.
readonly examples_dir="$script_dir/../../../shared/kueue-examples"

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "--- $*" >&2; }

if ! bin_dir="$("$cluster_sh" bin-dir 2>/dev/null)"; then
  echo "SKIP: the Kubernetes binaries and KWOK are not all built; run ops/k8s/cluster.sh build (once per machine; it builds only what is missing)"
  exit "$SKIP_STATUS"
fi
if [[ ! -x "$admit_k8s" ]]; then
  echo "SKIP: admit-k8s is not built at $admit_k8s; run ops/k8s/bridge/build.sh"
  exit "$SKIP_STATUS"
fi
[[ -x "$admitctl" && -x "$admitd" ]] || fail "admitctl or admitd missing: $admitctl $admitd"
readonly kubectl_bin="$bin_dir/kubectl"

dir="$(mktemp -d "${TMPDIR:-/tmp}/k8s-crds-test.XXXXXX")"
readonly dir
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  local status=$?
  if [[ -s "$dir/watchdog.pid" ]]; then
    kill -TERM "$(<"$dir/watchdog.pid")" 2>/dev/null || true
  fi
  "$cluster_sh" stop "$dir" || true
  if ((status != 0)) && [[ -f "$dir/kube-apiserver.log" ]]; then
    echo "--- last lines of $dir/kube-apiserver.log" >&2
    tail -n 20 "$dir/kube-apiserver.log" >&2
  fi
  if [[ "${K8S_TEST_KEEP_DIR:-0}" == 1 ]]; then
    echo "kept the cluster's folder $dir" >&2
  else
    rm -rf "$dir"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# As in cluster_test_lib.sh: stops the control plane if ctest SIGKILLs this script.
# shellcheck disable=SC2016  # the watchdog's own arguments, expanded by its shell
setsid --fork bash -c '
  echo "$$" > "$4/watchdog.pid"
  while kill -0 "$1" 2>/dev/null; do sleep "$2"; done
  "$3" stop "$4"
  rm -rf "$4"
' crds_test_watchdog "$$" "$WATCHDOG_POLL_SECONDS" "$cluster_sh" "$dir" \
  < /dev/null > /dev/null 2>&1

step "start installs the CRDs (and admitd and the bridge, which converts them)"
kubeconfig="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$dir")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
for plural in "${KINDS[@]}"; do
  crd="$plural.kueue.x-k8s.io"
  versions="$(kubectl get crd "$crd" -o jsonpath='{range .spec.versions[*]}{.name}:{.served}:{.storage} {end}')" \
    || fail "CRD $crd is not installed"
  [[ "$versions" == "v1beta2:true:true v1beta1:true:false " ]] \
    || fail "CRD $crd serves '$versions', not v1beta2 (stored) and v1beta1"
  established="$(kubectl get crd "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')"
  [[ "$established" == True ]] || fail "CRD $crd is not Established"
  # Both versions answer a list.
  for version in v1beta1 v1beta2; do
    kubectl get "$plural.$version.kueue.x-k8s.io" -A -o name > /dev/null 2> "$dir/list.err" \
      || { cat "$dir/list.err" >&2; fail "$version $plural does not list"; }
  done
done

versions="$(kubectl get crd "$BUDGET_CRD" \
  -o jsonpath='{range .spec.versions[*]}{.name}:{.served}:{.storage} {end}')" \
  || fail "CRD $BUDGET_CRD is not installed"
[[ "$versions" == "v1alpha1:true:true " ]] \
  || fail "CRD $BUDGET_CRD serves '$versions', not v1alpha1 (stored)"
kubectl get budgetpolicies -o name > /dev/null 2> "$dir/list.err" \
  || { cat "$dir/list.err" >&2; fail "budgetpolicies do not list"; }

step "Kueue's quick-start setup applies, and kubectl get clusterqueues lists it"
if [[ -f "$examples_dir/getting-started-quick-start-setup.yaml" ]]; then
  kubectl apply -f "$examples_dir/getting-started-quick-start-setup.yaml" > /dev/null
  listed="$(kubectl get clusterqueues -o name)"
  [[ "$listed" == *clusterqueue.kueue.x-k8s.io/cluster-queue* ]] \
    || fail "kubectl get clusterqueues lists '$listed', not cluster-queue"
  kubectl get localqueues -n default user-queue -o name > /dev/null || fail "no LocalQueue user-queue"
  kubectl get resourceflavors default-flavor -o name > /dev/null || fail "no ResourceFlavor default-flavor"
  # Every other definition file of the examples applies too (a server-side dry run: they reuse
  # names with other specs). The Job samples are submissions, for the bridge.
  for example in "$examples_dir"/*.yaml; do
    grep -q '^kind: Job$' "$example" && continue
    grep -q '^apiVersion: kueue.x-k8s.io/' "$example" || continue
    kubectl apply --dry-run=server -f "$example" > "$dir/example.out" 2>&1 \
      || { cat "$dir/example.out" >&2; fail "Kueue's example $(basename "$example") was refused"; }
  done
else
  echo "skipped: $examples_dir is absent (the shared folder beside the repository)" >&2
fi

step "each case: the API server and the ledger agree"
cases=0
for case_file in "$cases_dir"/*.yaml; do
  name="$(basename "$case_file" .yaml)"
  ledger="$dir/ledger-$name"
  # Server-side dry run: the full validation, nothing stored, cases may reuse names.
  server_status=0
  kubectl apply --dry-run=server -f "$case_file" > "$dir/server.out" 2>&1 || server_status=$?
  # Definitions are applied to the ledger; Workloads are submitted.
  ledger_command=apply
  if grep -q '^kind: Workload$' "$case_file"; then ledger_command=submit; fi
  ledger_status=0
  "$admitctl" --ledger "$ledger" "$ledger_command" -f "$case_file" > "$dir/ledger.out" 2>&1 \
    || ledger_status=$?
  case "$name" in
    accept-*)
      ((server_status == 0)) || { cat "$dir/server.out" >&2; fail "$name: the API server refused it"; }
      ((ledger_status == 0)) || { cat "$dir/ledger.out" >&2; fail "$name: the ledger refused it"; }
      ;;
    refuse-*)
      ((server_status != 0)) || fail "$name: the API server accepted it"
      ((ledger_status != 0)) || { cat "$dir/ledger.out" >&2; fail "$name: the ledger accepted it"; }
      expect="$(sed -n 's/^# expect: //p' "$case_file")"
      [[ -n "$expect" ]] || fail "$name has no '# expect:' line"
      grep -qF -- "$expect" "$dir/server.out" \
        || { cat "$dir/server.out" >&2; fail "$name: the API server's refusal does not say '$expect'"; }
      ;;
    ledger-only-*)
      # What a CRD cannot check (docs/k8s.md): the API server takes it, the ledger refuses it. A
      # case that the API server starts refusing belongs to refuse-*.
      ((server_status == 0)) || { cat "$dir/server.out" >&2; fail "$name: the API server refused it: make it a refuse-* case"; }
      ((ledger_status != 0)) || { cat "$dir/ledger.out" >&2; fail "$name: the ledger accepted it"; }
      ;;
    *) fail "case $name is neither accept-*, refuse-* nor ledger-only-*" ;;
  esac
  cases=$((cases + 1))
done
((cases > 0)) || fail "no cases in $cases_dir"

step "a Workload's topology assignment: each version takes its own spelling and refuses the other's; the bridge converts it"
# (In the status: a create ignores the status, so the cases above cannot carry one. Controlled
# by a suspended Job without the queue label: the bridge governs the Workload objects their
# creator owns, and would write the ledger's status over this one's; a Job's Workload is the
# Job's, and this Job is not governed. Only the API server's conversion is looked at here.)
owner_uid="$(kubectl create -f - -o jsonpath='{.metadata.uid}' <<EOF
apiVersion: batch/v1
kind: Job
metadata: {namespace: default, name: topology-owner}
spec:
  suspend: true
  template:
    spec:
      containers: [{name: main, image: registry.invalid/trainer:1}]
      restartPolicy: Never
EOF
)"
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  namespace: default
  name: topology
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: topology-owner, uid: $owner_uid, controller: true}
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 4
    template:
      spec:
        containers: [{name: main, image: registry.invalid/trainer:1}]
EOF
# patch_status VERSION TOPOLOGY_ASSIGNMENT: sets the Workload's one podSetAssignment, in VERSION.
patch_status() {
  kubectl patch "workloads.$1.kueue.x-k8s.io" topology -n default --subresource=status --type=merge \
    -p "{\"status\":{\"admission\":{\"clusterQueue\":\"cluster-queue\",\"podSetAssignments\":[
         {\"name\":\"main\",\"count\":4,\"topologyAssignment\":$2}]}}}"
}
# topology_of VERSION: the Workload's topology assignment read in VERSION, as sorted JSON.
topology_of() {
  kubectl get "workloads.$1.kueue.x-k8s.io" topology -n default -o json | python3 -c '
import json, sys
w = json.load(sys.stdin)
print(json.dumps(w["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"], sort_keys=True))'
}
canonical() { python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]), sort_keys=True))' "$1"; }
# Kueue's own example (apis/kueue/v1beta1/workload_conversion_test.go, "multiple slices").
slices='{"levels":["a","b"],"slices":[
  {"domainCount":2,"valuesPerLevel":[{"universal":"a1"},{"individual":{"prefix":"b","roots":["1","2"]}}],"podCounts":{"individual":[10,20]}},
  {"domainCount":2,"valuesPerLevel":[{"universal":"a2"},{"individual":{"roots":["first","second"],"suffix":"-in-a2"}}],"podCounts":{"universal":50}}]}'
domains='{"levels":["a","b"],"domains":[{"values":["a1","b1"],"count":10},{"values":["a1","b2"],"count":20},
  {"values":["a2","first-in-a2"],"count":50},{"values":["a2","second-in-a2"],"count":50}]}'
patch_status v1beta2 "$slices" > /dev/null 2> "$dir/patch.err" \
  || { cat "$dir/patch.err" >&2; fail "v1beta2 refused a topology assignment in slices"; }
[[ "$(topology_of v1beta1)" == "$(canonical "$domains")" ]] \
  || fail "the v1beta2 slices read as v1beta1 are $(topology_of v1beta1), not the domains $(canonical "$domains")"
[[ "$(topology_of v1beta2)" == "$(canonical "$slices")" ]] \
  || fail "the v1beta2 slices read back as $(topology_of v1beta2)"
# Written in v1beta1 (Kueue's first example): v1beta2 holds one slice.
patch_status v1beta1 '{"levels":["a","b"],"domains":[{"values":["a1","b1"],"count":10},{"values":["a1","b2"],"count":20}]}' \
  > /dev/null 2> "$dir/patch.err" || { cat "$dir/patch.err" >&2; fail "v1beta1 refused a topology assignment in domains"; }
one_slice='{"levels":["a","b"],"slices":[{"domainCount":2,"valuesPerLevel":[{"universal":"a1"},
  {"individual":{"prefix":"b","roots":["1","2"]}}],"podCounts":{"individual":[10,20]}}]}'
[[ "$(topology_of v1beta2)" == "$(canonical "$one_slice")" ]] \
  || fail "the v1beta1 domains read as v1beta2 are $(topology_of v1beta2), not $(canonical "$one_slice")"
# refused VERSION TOPOLOGY_ASSIGNMENT EXPECT: the API server refuses it, saying EXPECT.
refused() {
  if patch_status "$1" "$2" > /dev/null 2> "$dir/patch.err"; then
    fail "$1 took the topology assignment $2"
  fi
  grep -qF -- "$3" "$dir/patch.err" || { cat "$dir/patch.err" >&2; fail "$1's refusal of $2 does not say '$3'"; }
}
refused v1beta2 "$domains" "'domains' is the v1beta1 spelling of a topology assignment"
refused v1beta1 "$slices" "'slices' is the v1beta2 spelling of a topology assignment"
refused v1beta2 '{"levels":["a"],"slices":[{"domainCount":2,"valuesPerLevel":[{"universal":"a1"}],"podCounts":{"individual":[1]}}]}' \
  "podCounts.individual must have length equal to domainCount"
refused v1beta2 '{"levels":["a","b"],"slices":[{"domainCount":1,"valuesPerLevel":[{"universal":"a1"}],"podCounts":{"universal":1}}]}' \
  "valuesPerLevel must have the same length as the number of levels"
refused v1beta1 '{"levels":["a"],"domains":[{"values":["a1"],"count":0}]}' "should be greater than or equal to 1"

echo "PASS: CRDs installed and served as v1beta1 and v1beta2; $cases cases agree with the ledger; topology assignments converted"
