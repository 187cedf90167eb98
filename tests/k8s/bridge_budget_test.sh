#!/usr/bin/env bash
# Budgets in a cluster (docs/budgets.md, docs/k8s.md "Budgets"): the ledger's own check, decided
# at quota reservation, through admitd and the bridge on a real API server, admitd on TLS and the
# bridge's certificate given the `bridge` role alone:
# - a BudgetPolicy (admission-ledger.io/v1alpha1, namespace team-a, 2 cpu-hours a month) applied
#   with kubectl reaches the ledger with the bridge as actor and shows Recorded=True; so do the
#   AdmissionCheck `budget` (controllerName admission-ledger.io/budget, spec.parameters naming
#   the policy), a ClusterQueue requiring it and a LocalQueue;
# - a Job of 500m cpu expected to run 1h (annotation admission-ledger.io/expected-runtime): its
#   Workload shows check budget Ready with the ledger's arithmetic ("... needs 0.5: fits"), and
#   the Job is unsuspended;
# - a Job of 2 x 1 cpu for 2h (4 cpu-hours, more than the whole month's 2): check budget
#   Rejected ("more than any period holds"), the Workload deactivated (spec.active false, the
#   conditions Evicted and Deactivated, reason AdmissionCheckRejected), the Job suspended;
# - a Job of 800m for 2h (1.6 cpu-hours: fits the month, not beside the 0.5 committed): Retry,
#   its quota released and the Workload requeued at the next month's start (requeueState, and
#   the arithmetic in its Evicted condition: as Kueue, a released reservation's checks are gone
#   from status.admissionChecks), the Job suspended;
# - a state written into the budget check by field manager admission-ledger.io/budget is not
#   forwarded (the ledger decides it) but reverted, with a Warning Event CheckReverted; no
#   checkStateReported anywhere in the ledger;
# - a budget check naming a BudgetPolicy not defined yet, beside a check of another controller:
#   the Workload shows both Pending; the policy applied, the ledger's budgetDecided (its only
#   event about the workload) reaches the Workload through the bridge's ledger watch: Ready;
# - a policy the ledger refuses (a time zone the tz database lacks) shows Recorded=False with the
#   ledger's message; a policy changed is forwarded again, one deleted is deleted in the ledger;
# - `admitctl replay --verify` of the ledger passes.
#   tests/k8s/bridge_budget_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-budget-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=team-a
readonly CONTROLLER=admission-ledger.io/budget

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "a control plane with our CRDs (BudgetPolicy's too), and the bridge"
# No nodes: nothing needs to run; a released Job's pods stay Pending.
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
start_bridge

# policy_condition NAME: status, reason and message of BudgetPolicy NAME's condition Recorded.
policy_condition() {
  local recorded='{range .status.conditions[?(@.type=="Recorded")]}'
  kubectl get budgetpolicy "$1" -o jsonpath="$recorded{.status} {.reason} {.message}{end}"
}
# policy_is NAME TEXT: policy_condition NAME matches the pattern TEXT.
# shellcheck disable=SC2053  # TEXT is a pattern
policy_is() { [[ "$(policy_condition "$1")" == $2 ]]; }
# by_bridge KIND: how many events of KIND the bridge recorded.
by_bridge() { ledger log | grep -c "$1  actor=$PRINCIPAL" || true; }

step "a BudgetPolicy, its budget check, a ClusterQueue requiring it and a LocalQueue, by kubectl"
kubectl create namespace "$NAMESPACE" > /dev/null
kubectl apply -f - > /dev/null <<EOF
apiVersion: admission-ledger.io/v1alpha1
kind: BudgetPolicy
metadata: {name: team-a-month}
spec:
  scope: {namespace: $NAMESPACE}
  limits: {cpu: "2"}
  period: {calendar: Month}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget}
spec:
  controllerName: $CONTROLLER
  parameters: {apiGroup: admission-ledger.io, kind: BudgetPolicy, name: team-a-month}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks:
    - name: budget
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $NAMESPACE, name: user-queue}
spec: {clusterQueue: team-a}
EOF
setup_forwarded() {
  [[ "$(by_bridge budgetPolicyDefined) $(by_bridge admissionCheckDefined)" == "1 1" &&
     "$(by_bridge clusterQueueDefined) $(by_bridge localQueueDefined)" == "1 1" ]]
}
wait_until "the setup is not in the ledger, by $PRINCIPAL: $(ledger log)" setup_forwarded
wait_until "BudgetPolicy team-a-month is not Recorded=True: $(policy_condition team-a-month)" \
  policy_is team-a-month "True Recorded *"
# The check's parameters reached the ledger: the check decides by team-a-month.
ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)["event"].get("body", {}).get("admissionCheckDefined")
    if d:
        assert d.get("parameters") == "team-a-month", d
        sys.exit(0)
sys.exit(1)
' || fail "the ledger's AdmissionCheck budget does not name BudgetPolicy team-a-month:" \
  "$(ledger log -o json | grep admissionCheckDefined)"
finalizers="$(kubectl get budgetpolicy team-a-month -o jsonpath='{.metadata.finalizers}')"
[[ "$finalizers" == *admission-ledger.io/ledger* ]] \
  || fail "BudgetPolicy team-a-month carries no finalizer admission-ledger.io/ledger: $finalizers"

# job_yaml NAME PODS CPU RUNTIME [QUEUE]: a Job for LocalQueue QUEUE (user-queue) of PODS pods
# of CPU each, expected to run RUNTIME.
job_yaml() {
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NAMESPACE
  labels: {kueue.x-k8s.io/queue-name: ${5:-user-queue}}
  annotations: {admission-ledger.io/expected-runtime: $4}
spec:
  parallelism: $2
  completions: $2
  template:
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: $3, memory: 100Mi}
      restartPolicy: Never
EOF
}
# workload WORKLOAD JSONPATH: JSONPATH of the Workload object.
workload() {
  kubectl get workload "$1" -n "$NAMESPACE" -o jsonpath="$2" 2>/dev/null
}
# check_field WORKLOAD FIELD [CHECK]: FIELD (state, message) of CHECK (budget) in its status.
check_field() {
  workload "$1" "{.status.admissionChecks[?(@.name==\"${3:-budget}\")].$2}"
}
# condition WORKLOAD TYPE: status, reason and message of the Workload's condition TYPE.
condition() {
  workload "$1" "{range .status.conditions[?(@.type==\"$2\")]}{.status} {.reason} {.message}{end}"
}
suspended() { kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}'; }
# ledger_field WORKLOAD EXPRESSION: EXPRESSION of the ledger's workload w (python), "" if none.
ledger_field() {
  ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if (w["metadata"]["namespace"], w["metadata"]["name"]) == (sys.argv[1], sys.argv[2]):
        print(eval(sys.argv[3]))
' "$NAMESPACE" "$1" "$2"
}
# shows WORKLOAD STATE TEXT: the Workload shows check budget in STATE, its message containing TEXT.
shows() {
  [[ "$(check_field "$1" state)" == "$2" && "$(check_field "$1" message)" == *"$3"* ]]
}
# budget_check WORKLOAD: what the Workload shows of check budget.
budget_check() { echo "$(check_field "$1" state) '$(check_field "$1" message)'"; }
# budget_decisions WORKLOAD: the ledger's budgetDecided decisions about WORKLOAD, "STATE: MESSAGE".
budget_decisions() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    d = json.loads(line)["event"].get("body", {}).get("budgetDecided")
    if d and d["workload"]["name"] == sys.argv[1]:
        print(d.get("state", "pending") + ": " + d.get("message", ""))
' "$1"
}
released() { [[ "$(suspended "$1")" == false ]]; }

step "a Job that fits: check budget Ready with the arithmetic, the Job released"
job_yaml small 1 500m 1h | kubectl create -f - > /dev/null
readonly FITS="2 cpu-hours in $(date -u +%Y-%m) (UTC) for namespace $NAMESPACE: 0 used,\
 0 committed, this workload needs 0.5: fits"
wait_until "job-small does not show check budget Ready '$FITS': $(budget_check job-small)" \
  shows job-small Ready "$FITS"
wait_until "Job small was not released after its budget check was Ready" released small
[[ "$(ledger_field job-small 'w["status"]["phase"]')" == Admitted ]] \
  || fail "the ledger's job-small is not Admitted: $(ledger_field job-small 'w["status"]')"
[[ "$(budget_decisions job-small)" == "ready: $FITS" ]] \
  || fail "the ledger's budget decisions of job-small: $(budget_decisions job-small)"
echo "job-small: $(budget_check job-small)" >&2

step "a Job larger than the whole month: check budget Rejected, the Workload deactivated"
job_yaml huge 2 1 2h | kubectl create -f - > /dev/null
readonly TOO_LARGE="this workload needs 4: more than any period holds"
wait_until "job-huge does not show check budget Rejected: $(budget_check job-huge)" \
  shows job-huge Rejected "$TOO_LARGE"
deactivated() { [[ "$(workload job-huge '{.spec.active}')" == false ]]; }
wait_until "the Workload job-huge is not deactivated: $(workload job-huge '{.spec}')" deactivated
[[ "$(condition job-huge Evicted)" == "True AdmissionCheck "* &&
   "$(condition job-huge Deactivated)" == "True AdmissionCheckRejected "*"$TOO_LARGE" ]] \
  || fail "the Workload job-huge is not Evicted (AdmissionCheck) and Deactivated" \
    "(AdmissionCheckRejected): $(workload job-huge '{.status.conditions}')"
[[ "$(ledger_field job-huge 'w["status"]["phase"]')" == Deactivated ]] \
  || fail "the ledger's job-huge is not Deactivated: $(ledger_field job-huge 'w["status"]')"
[[ "$(suspended huge)" == true ]] || fail "Job huge runs although its budget check rejected it"
echo "job-huge: $(budget_check job-huge)" >&2

step "a Job that fits the month but not beside what job-small committed: Retry, requeued"
job_yaml medium 1 800m 2h | kubectl create -f - > /dev/null
next_month="$(date -u -d "$(date -u +%Y-%m-01) +1 month" +%Y-%m-%dT00:00:00Z)"
readonly RETRIED="this workload needs 1.6: does not fit; retried at $next_month"
retried() { [[ "$(budget_decisions job-medium)" == "retry: "*"$RETRIED" ]]; }
wait_until "job-medium's budget check is not Retry: $(budget_decisions job-medium)" retried
requeued() {
  local phase_and_time
  phase_and_time="$(ledger_field job-medium \
    'w["status"]["phase"], w["status"].get("requeueState", {}).get("requeueAt")')"
  [[ "$phase_and_time" == "('Pending', '$next_month')" ]]
}
wait_until "the ledger's job-medium is not Pending until $next_month: $(ledger_field job-medium \
  'w["status"]')" requeued
shows_requeue() {
  [[ "$(workload job-medium '{.status.requeueState.requeueAt}')" == "$next_month" ]]
}
wait_until "the Workload job-medium is not requeued at $next_month: $(workload job-medium \
  '{.status}')" shows_requeue
# As in Kueue, the released reservation's checks are gone from the status; the check's answer is
# in the conditions (QuotaReserved False, Evicted, Requeued).
readonly ASKED="True AdmissionCheck check budget asked to retry: "
[[ "$(condition job-medium Evicted)" == "$ASKED"*"$RETRIED" ]] \
  || fail "the Workload job-medium's Evicted condition does not say '...$RETRIED':" \
    "$(condition job-medium Evicted)"
[[ "$(suspended medium)" == true ]] || fail "Job medium runs although its budget check said Retry"
echo "job-medium: $(condition job-medium Evicted)" >&2

step "a state written into the budget check by field manager $CONTROLLER: not forwarded, reverted"
before="$(check_field job-small message)"
kubectl patch workload job-small -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/state","value":"Retry"},
       {"op":"replace","path":"/status/admissionChecks/0/message","value":"over"}]' > /dev/null
# events_of WORKLOAD REASON: the messages of the Workload's Events of REASON.
events_of() {
  kubectl get events -n "$NAMESPACE" --field-selector "involvedObject.name=$1,reason=$2" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}
reverted() {
  shows job-small Ready "$before" && events_of job-small CheckReverted |
    grep -q "^Warning .*is a budget check .*decided by the ledger itself"
}
wait_until "job-small's budget check was not reverted to Ready with a Warning Event:
  $(budget_check job-small) $(events_of job-small CheckReverted)" reverted
[[ "$(ledger log | grep -c checkStateReported || true)" == 0 ]] \
  || fail "no controller reports a budget check: $(ledger log | grep checkStateReported)"
[[ "$(suspended small)" == false ]] || fail "Job small was suspended by a write into its check"
echo "reverted: $(events_of job-small CheckReverted | head -n 1)" >&2

step "a check naming a policy not defined yet: Pending, decided once the policy is applied"
# A ClusterQueue requiring it and a check of another controller, which stays Pending: the budget
# decision is then the ledger's only event about the workload, and the Workload shows it (the
# bridge's watch follows budgetDecided).
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: budget-later}
spec:
  controllerName: $CONTROLLER
  parameters: {apiGroup: admission-ledger.io, kind: BudgetPolicy, name: later}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: scan}
spec: {controllerName: example.com/scan}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-later}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks:
    - name: budget-later
    - name: scan
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 8}
      - {name: memory, nominalQuota: 16Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $NAMESPACE, name: later-queue}
spec: {clusterQueue: team-later}
EOF
later_forwarded() { [[ "$(by_bridge localQueueDefined)" == 2 ]]; }
wait_until "LocalQueue later-queue is not in the ledger" later_forwarded
job_yaml waiting 1 250m 1h later-queue | kubectl create -f - > /dev/null
both_pending() {
  local states
  states="$(check_field job-waiting state budget-later) $(check_field job-waiting state scan)"
  [[ "$states" == "Pending Pending" ]]
}
waiting_checks() { workload job-waiting '{.status.admissionChecks}'; }
wait_until "job-waiting does not show checks budget-later and scan Pending: $(waiting_checks)" \
  both_pending
# Until the Job settles (the Job controller's status writes reconcile it too): from then on only
# the ledger's watch makes the bridge look at job-waiting again.
sleep 3
kubectl apply -f - > /dev/null <<EOF
apiVersion: admission-ledger.io/v1alpha1
kind: BudgetPolicy
metadata: {name: later}
spec:
  scope: {namespace: $NAMESPACE, localQueue: later-queue}
  limits: {cpu: 1}
  period: {calendar: Week}
EOF
later_message() { check_field job-waiting message budget-later; }
later_decided() {
  [[ "$(check_field job-waiting state budget-later)" == Ready &&
     "$(later_message)" == *"for LocalQueue $NAMESPACE/later-queue: "*": fits" ]]
}
wait_until "job-waiting's check budget-later is not Ready once BudgetPolicy later came:
  $(waiting_checks)" later_decided
[[ "$(check_field job-waiting state scan)" == Pending && "$(suspended waiting)" == true ]] \
  || fail "job-waiting's check scan is not Pending, or Job waiting runs: $(waiting_checks)" \
    "$(suspended waiting)"
echo "job-waiting: $(later_message)" >&2

step "policies refused, changed and deleted"
kubectl apply -f "$script_dir/crd_cases/ledger-only-budgetpolicy-unknown-time-zone.yaml" > /dev/null
wait_until "BudgetPolicy martian-month is not Recorded=False: $(policy_condition martian-month)" \
  policy_is martian-month "False LedgerRefused *Mars/Olympus_Mons*"
policies_before="$(by_bridge budgetPolicyDefined)"
kubectl patch budgetpolicy team-a-month --type=merge -p '{"spec":{"limits":{"cpu":"3"}}}' \
  > /dev/null
changed() { [[ "$(by_bridge budgetPolicyDefined)" == $((policies_before + 1)) ]]; }
wait_until "the changed BudgetPolicy team-a-month is not in the ledger: $(ledger log |
  grep budgetPolicyDefined)" changed
kubectl apply -f - > /dev/null <<EOF
apiVersion: admission-ledger.io/v1alpha1
kind: BudgetPolicy
metadata: {name: spare}
spec:
  scope: {cohort: nobody}
  limits: {nvidia.com/gpu: 10}
  period: {rolling: 24h}
EOF
wait_until "BudgetPolicy spare is not Recorded=True: $(policy_condition spare)" \
  policy_is spare "True Recorded *"
kubectl delete budgetpolicy spare martian-month --wait=false > /dev/null
gone() { [[ -z "$(kubectl get budgetpolicies spare martian-month -o name --ignore-not-found)" ]]; }
wait_until "BudgetPolicies spare and martian-month were not deleted" gone
# The ledger never held martian-month: only spare's deletion is recorded.
ledger log -o json | python3 -c '
import json, sys
deleted = []
for line in sys.stdin:
    e = json.loads(line)["event"]
    d = e.get("body", {}).get("objectDeleted")
    if d:
        deleted.append((d.get("kind"), d.get("name"), e["actor"]))
assert deleted == [("BudgetPolicy", "spare", sys.argv[1])], deleted
' "$PRINCIPAL" || fail "the ledger does not hold the deletion of BudgetPolicy spare alone," \
  "by $PRINCIPAL: $(ledger log | grep objectDeleted)"

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: BudgetPolicies forwarded (recorded, refused, changed, deleted); check budget Ready" \
  "('fits') with the Job released, Rejected with the Workload deactivated, Retry requeued at" \
  "$next_month, Pending until its policy came; a write into a budget check reverted, never" \
  "reported; replay --verify passes"
