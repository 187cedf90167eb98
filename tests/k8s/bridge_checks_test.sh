#!/usr/bin/env bash
# admit-k8s forwards admission checks written inside the cluster, and tells the ledger when Jobs
# finish and when they are deleted (docs/k8s.md, "Checks from inside the cluster", "Job
# completion and deletion"), on a real API server with admitd on TLS and the bridge's
# certificate given the `bridge` role alone:
# - a ClusterQueue requiring the AdmissionCheck `scan` (controllerName example.com/scan); a Job
#   gets its reservation and its Workload shows the check Pending;
# - `kubectl patch workload --subresource=status --field-manager=example.com/scan` setting it
#   Ready: the ledger records the report with the bridge as actor and viaFieldManager
#   example.com/scan (the weaker proof), admits, and the Job is released; its admission revoked,
#   it is reserved again with the check Pending, and the earlier Ready is not taken for the new
#   reservation; the controller then changes only the check's message: the ledger records it
#   once (also across a bridge restart) and the Workload shows it; it changes only
#   requeueAfterSeconds: no report, reverted with a Warning Event (the ledger, as Kueue, reads it
#   with state Retry only); then it sets Ready again, with podSetUpdates (a label and a
#   nodeSelector for podSet main): forwarded with the report, in the ledger's Admitted decision,
#   and on the released Job's pod template and its pods; a later change of those podSetUpdates
#   alone is refused by the ledger (a Ready check's are immutable, as in Kueue's webhook) and
#   reverted with a Warning Event;
# - a second Job whose check is set Ready by the field manager `intruder`: reverted to Pending
#   with a Warning Event naming the manager and the controllerName, nothing in the ledger, the
#   Job stays suspended; the same for a change of the message alone;
# - the first Job's pods marked Succeeded by hand (there is no kubelet): the Job controller
#   marks the Job Complete, the bridge reports `finished`, the ledger finishes the workload and
#   releases its quota;
# - the second Job deleted while the bridge is SIGKILLed: its finalizer holds it; the restarted
#   bridge has the ledger record the workload's deletion (by the bridge), its quota is released,
#   and only then is the Job gone;
# - a third Job whose pod template has label example.com/pool=pool-b, its check set Ready with
#   podSetUpdates label example.com/pool=pool-a: the bridge is stopped once it is admitted, the
#   test records `pods released` (a bridge that died after its write-ahead record), the
#   restarted bridge finds the conflict and reports `pods failedToStart` with Kueue's message;
#   the ledger finishes the workload (FailedToStart) and releases its quota, the Workload shows
#   it, the Job has a Warning Event FailedToStart and stays suspended, its template unchanged.
#   tests/k8s/bridge_checks_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-checks-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=default
readonly CONTROLLER=example.com/scan

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "a control plane, and the bridge serving the Job webhook"
# No nodes: this test plays the kubelet itself (pods stay Pending unless it says otherwise).
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
start_bridge

step "a ClusterQueue that requires the AdmissionCheck scan ($CONTROLLER)"
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: scan}
spec: {controllerName: $CONTROLLER}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  admissionChecksStrategy:
    admissionChecks:
    - name: scan
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 1}
      - {name: memory, nominalQuota: 9Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $NAMESPACE, name: user-queue}
spec: {clusterQueue: cluster-queue}
EOF
setup_forwarded() {
  local log
  log="$(ledger log)"
  grep -q "admissionCheckDefined  actor=$PRINCIPAL" <<< "$log" &&
    grep -q "clusterQueueDefined  actor=$PRINCIPAL" <<< "$log" &&
    grep -q "localQueueDefined  actor=$PRINCIPAL" <<< "$log"
}
wait_until "the setup is not in the ledger" setup_forwarded

# job_yaml NAME [PODS [TEMPLATE_LABELS]]: a labelled Job of PODS (2) pods of 200m cpu, its pod
# template labelled TEMPLATE_LABELS (a YAML flow mapping) when given.
job_yaml() {
  local pods=${2:-2} template_metadata=""
  [[ -n "${3:-}" ]] && template_metadata=$'\n    metadata:\n      labels: '"$3"
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NAMESPACE
  labels: {kueue.x-k8s.io/queue-name: user-queue}
spec:
  parallelism: $pods
  completions: $pods
  template:$template_metadata
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: 200m, memory: 100Mi}
      restartPolicy: Never
EOF
}
# check_state WORKLOAD: the state of check scan in the Workload's status.
check_state() {
  kubectl get workload "$1" -n "$NAMESPACE" \
    -o jsonpath='{.status.admissionChecks[?(@.name=="scan")].state}' 2>/dev/null
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
# reserved_cpu: the cpu the ledger's cluster-queue has reserved, in millicores.
reserved_cpu() {
  ledger get clusterqueues -o json | python3 -c '
import json, sys
for q in json.load(sys.stdin)["items"]:
    if q["metadata"]["name"] != "cluster-queue":
        continue
    total = 0
    for f in q.get("status", {}).get("flavorsReservation", []):
        for r in f.get("resources", []):
            if r["name"] == "cpu":
                v = str(r.get("total", "0"))
                total += int(v[:-1]) if v.endswith("m") else int(float(v) * 1000)
    print(total)
'
}
# check_message WORKLOAD: the message of check scan in the Workload's status.
check_message() {
  kubectl get workload "$1" -n "$NAMESPACE" \
    -o jsonpath='{.status.admissionChecks[?(@.name=="scan")].message}' 2>/dev/null
}
# events_of WORKLOAD REASON: the messages of the Workload's Events of REASON.
events_of() {
  kubectl get events -n "$NAMESPACE" --field-selector "involvedObject.name=$1,reason=$2" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}

step "a Job gets its reservation; its Workload shows the check Pending"
job_yaml checked | kubectl create -f - > /dev/null
check_pending() { [[ "$(check_state "$1")" == Pending ]]; }
wait_until "the Workload job-checked does not show check scan Pending" check_pending job-checked
[[ "$(suspended checked)" == true ]] || fail "Job checked runs before its check is Ready"
[[ "$(ledger_field job-checked 'w["status"]["phase"]')" == QuotaReserved ]] \
  || fail "the ledger's job-checked is not QuotaReserved: $(ledger get workloads)"
finalizers="$(kubectl get job checked -n "$NAMESPACE" -o jsonpath='{.metadata.finalizers}')"
[[ "$finalizers" == *admission-ledger.io/workload* ]] \
  || fail "Job checked carries no finalizer admission-ledger.io/workload: '$finalizers'"

step "the check's controller, as field manager $CONTROLLER, sets it Ready: forwarded, admitted, released"
kubectl patch workload job-checked -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/state","value":"Ready"},
       {"op":"replace","path":"/status/admissionChecks/0/message","value":"scanned: clean"}]' > /dev/null
released() { [[ "$(suspended "$1")" == false ]]; }
wait_until "Job checked was not released after its check was set Ready" released checked
ledger log -o json > "$dir/ledger.json"
# The report: actor the bridge, marked as forwarded from field manager $CONTROLLER.
python3 - "$dir/ledger.json" "$PRINCIPAL" "$CONTROLLER" <<'EOF' || fail "the ledger holds no forwarded report of check scan for job-checked before its admission: $(ledger log)"
import json, sys
path, principal, controller = sys.argv[1:4]
report = admitted = None
for line in open(path):
    e = json.loads(line)["event"]
    body = e.get("body", {})
    r = body.get("checkStateReported")
    if r and r["workload"]["name"] == "job-checked":
        assert e["actor"] == principal, e
        assert r.get("viaFieldManager") == controller, r
        assert r.get("state") == "ready", r
        assert r.get("message") == "scanned: clean", r
        report = e["sequence"]
    a = body.get("admitted")
    if a and a["workload"]["name"] == "job-checked" and admitted is None:
        admitted = e["sequence"]
assert report is not None and admitted is not None and report < admitted, (report, admitted)
print("report", report, "admitted", admitted, file=sys.stderr)
EOF
# explain shows the weaker proof, in the history and on the check's current state.
ledger explain "$NAMESPACE/job-checked" -o json > "$dir/explain.json"
python3 - "$dir/explain.json" "$PRINCIPAL" "$CONTROLLER" <<'EOF' || fail "explain does not show the report as forwarded from field manager $CONTROLLER: $(cat "$dir/explain.json")"
import json, sys
path, principal, controller = sys.argv[1:4]
x = json.load(open(path))
reports = [h for h in x["history"] if h.get("type") == "checkStateReported"]
assert reports and reports[-1]["check"].get("viaFieldManager") == controller, reports
now = [c for c in x["now"]["checks"] if c["name"] == "scan"]
assert now and now[0]["viaFieldManager"] == controller and now[0]["reportedBy"] == principal, x["now"]
EOF
grep -q "written by field manager $CONTROLLER (the weaker proof)" <<< "$(ledger explain "$NAMESPACE/job-checked")" \
  || fail "explain's text does not name field manager $CONTROLLER: $(ledger explain "$NAMESPACE/job-checked")"
events_of job-checked CheckForwarded | grep -q "field manager \"$CONTROLLER\"" \
  || fail "no CheckForwarded Event on Workload job-checked: $(kubectl get events -n "$NAMESPACE")"
[[ "$(check_state job-checked)" == Ready ]] || fail "the Workload's check scan is '$(check_state job-checked)', not Ready"
[[ "$(ledger_field job-checked 'w["status"]["admissionChecks"][0]["state"]')" == Ready ]] \
  || fail "the ledger's check scan of job-checked is not Ready"

step "its admission revoked: reserved again, the check Pending again and the earlier Ready not forwarded for the new reservation"
ledger revoke "$NAMESPACE/job-checked" --reason "bridge checks test: revoked" > /dev/null
reserved_again() {
  [[ "$(ledger_field job-checked 'w["status"]["phase"], w["status"].get("admissionGeneration")')" == "('QuotaReserved', 2)" ]]
}
wait_until "job-checked was not reserved again (generation 2) after the revocation: $(ledger_field job-checked 'w["status"]')" reserved_again
wait_until "the Workload job-checked does not show check scan Pending for the new reservation" check_pending job-checked
sleep 3  # time for a stale report to be forwarded
[[ "$(suspended checked)" == true ]] || fail "Job checked runs again without a new Ready"
reports="$(ledger log | grep -c checkStateReported || true)"
[[ "$reports" == 1 ]] || fail "$reports check reports in the ledger after the revocation, not 1: $(ledger log)"
[[ "$(ledger_field job-checked 'w["status"]["phase"]')" == QuotaReserved ]] \
  || fail "the ledger's job-checked is not QuotaReserved after the revocation"

step "the check's controller changes only the message of the Pending check: recorded once, shown on the Workload"
readonly PROGRESS="scanning: 40% of layers done"
kubectl patch workload job-checked -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p "[{\"op\":\"add\",\"path\":\"/status/admissionChecks/0/message\",\"value\":\"$PROGRESS\"}]" > /dev/null
# message_reports: the check reports of job-checked in the ledger carrying the new message,
# each checked to be the forwarded Pending of generation 2 (exits 1 on a wrong one).
message_reports() {
  ledger log -o json | python3 -c '
import json, sys
principal, controller, message = sys.argv[1:4]
n = 0
for line in sys.stdin:
    e = json.loads(line)["event"]
    r = e.get("body", {}).get("checkStateReported")
    if r and r["workload"]["name"] == "job-checked" and r.get("message") == message:
        assert e["actor"] == principal and r.get("viaFieldManager") == controller, e
        assert r.get("state", "pending") == "pending" and int(r.get("generation")) == 2, r
        n += 1
print(n)
' "$PRINCIPAL" "$CONTROLLER" "$PROGRESS"
}
message_recorded() { [[ "$(message_reports)" == 1 ]]; }
wait_until "the ledger holds no report of job-checked's new message '$PROGRESS': $(ledger log)" message_recorded
[[ "$(ledger log | grep -c checkStateReported)" == 2 ]] \
  || fail "not 2 check reports after the message's change: $(ledger log)"
ledger_message() { [[ "$(ledger_field job-checked 'w["status"]["admissionChecks"][0]["message"]')" == "$PROGRESS" ]]; }
ledger_message || fail "the ledger's check scan of job-checked does not hold the message '$PROGRESS'"
shows_progress() { [[ "$(check_message job-checked)" == "$PROGRESS" ]]; }
sleep 3  # time for the mirror to overwrite it, or for a second report
shows_progress || fail "the Workload job-checked shows message '$(check_message job-checked)', not '$PROGRESS'"
[[ "$(check_state job-checked)" == Pending ]] || fail "the Workload's check scan is '$(check_state job-checked)', not Pending"
[[ "$(suspended checked)" == true ]] || fail "Job checked runs on a Pending check's new message"
# Exactly once, also across a bridge restart (which reconciles every Workload again).
kill -KILL "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
start_bridge
sleep 5  # time for a restarted bridge to forward it again
[[ "$(message_reports)" == 1 ]] \
  || fail "$(message_reports) reports of job-checked's message '$PROGRESS' after the bridge's restart, not 1: $(ledger log)"
[[ "$(ledger log | grep -c checkStateReported)" == 2 ]] \
  || fail "not 2 check reports after the bridge's restart: $(ledger log)"
shows_progress || fail "after the bridge's restart the Workload job-checked shows message '$(check_message job-checked)'"
echo "message forwarded once: $(kubectl get workload job-checked -n "$NAMESPACE" \
  -o jsonpath='{.status.admissionChecks[0].state} {.status.admissionChecks[0].message}')" >&2

step "the check's controller changes only requeueAfterSeconds of the Pending check: no report, reverted with a Warning Event"
kubectl patch workload job-checked -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"add","path":"/status/admissionChecks/0/requeueAfterSeconds","value":30}]' > /dev/null
requeue_after() {
  kubectl get workload job-checked -n "$NAMESPACE" -o jsonpath='{.status.admissionChecks[0].requeueAfterSeconds}'
}
requeue_reverted() {
  [[ -z "$(requeue_after)" ]] &&
    events_of job-checked CheckReverted | grep -q '^Warning .*requeueAfterSeconds 30 .*only with state Retry'
}
wait_until "requeueAfterSeconds alone not reverted with a Warning Event on job-checked ($(requeue_after)): $(events_of job-checked CheckReverted)" \
  requeue_reverted
[[ "$(ledger log | grep -c checkStateReported)" == 2 ]] \
  || fail "requeueAfterSeconds alone made a check report: $(ledger log)"
shows_progress || fail "the revert lost the message: '$(check_message job-checked)'"
[[ "$(check_state job-checked)" == Pending ]] || fail "the revert changed the state to '$(check_state job-checked)'"
echo "reverted: $(events_of job-checked CheckReverted | head -n 1)" >&2

kubectl patch workload job-checked -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/state","value":"Ready"},
       {"op":"add","path":"/status/admissionChecks/0/podSetUpdates","value":[{"name":"main",
         "labels":{"example.com/pool":"pool-a"},"nodeSelector":{"example.com/zone":"z1"}}]}]' > /dev/null
wait_until "Job checked was not released again after its check was set Ready again" released checked
[[ "$(ledger log | grep -c checkStateReported)" == 3 ]] || fail "not 3 check reports: $(ledger log)"
# The check's podSetUpdates: in the forwarded report, in the Admitted decision, on the Job.
ledger log -o json | python3 -c '
import json, sys
want = [{"podSet": "main", "labels": [{"key": "example.com/pool", "value": "pool-a"}],
         "nodeSelector": [{"key": "example.com/zone", "value": "z1"}]}]
report = admitted = None
for line in sys.stdin:
    e = json.loads(line)["event"]
    body = e.get("body", {})
    r = body.get("checkStateReported")
    if r and r["workload"]["name"] == "job-checked" and r.get("podSetUpdates"):
        report = r["podSetUpdates"]
    a = body.get("admitted")
    if a and a["workload"]["name"] == "job-checked" and a.get("podSetUpdates"):
        admitted = a["podSetUpdates"]
assert report == want, report
assert admitted == want, admitted
' || fail "the ledger does not carry check scan's podSetUpdates of job-checked in its report and its Admitted decision: $(ledger log -o json | grep job-checked)"
template_selector="$(kubectl get job checked -n "$NAMESPACE" -o jsonpath='{.spec.template.spec.nodeSelector.example\.com/zone}')"
template_label="$(kubectl get job checked -n "$NAMESPACE" -o jsonpath='{.spec.template.metadata.labels.example\.com/pool}')"
[[ "$template_selector" == z1 && "$template_label" == pool-a ]] \
  || fail "the released Job's pod template has nodeSelector example.com/zone '$template_selector' and label example.com/pool '$template_label', not z1 and pool-a: $(kubectl get job checked -n "$NAMESPACE" -o jsonpath='{.spec.template}')"
pods_updated() {
  local pods
  pods="$(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=checked,example.com/pool=pool-a \
    -o jsonpath='{range .items[*]}{.spec.nodeSelector.example\.com/zone}{"\n"}{end}')"
  [[ "$(grep -c '^z1$' <<< "$pods")" == 2 ]]
}
wait_until "Job checked's pods do not carry the check's label and nodeSelector: $(kubectl get pods -n "$NAMESPACE" --show-labels)" pods_updated
echo "podSetUpdates applied: nodeSelector example.com/zone=$template_selector, label example.com/pool=$template_label" >&2

step "the check's controller changes the podSetUpdates of its Ready check: refused by the ledger (immutable while Ready, as Kueue's webhook), reverted"
kubectl patch workload job-checked -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/podSetUpdates/0/nodeSelector/example.com~1zone","value":"z2"}]' > /dev/null
zone_of_check() {
  kubectl get workload job-checked -n "$NAMESPACE" \
    -o jsonpath='{.status.admissionChecks[0].podSetUpdates[0].nodeSelector.example\.com/zone}'
}
updates_reverted() {
  [[ "$(zone_of_check)" == z1 ]] &&
    events_of job-checked CheckReverted | grep -q "podSetUpdates cannot change"
}
wait_until "the Ready check's changed podSetUpdates were not reverted (zone '$(zone_of_check)'): $(events_of job-checked CheckReverted)" \
  updates_reverted
[[ "$(ledger log | grep -c checkStateReported)" == 3 ]] \
  || fail "a Ready check's changed podSetUpdates were recorded: $(ledger log)"
echo "reverted: $(events_of job-checked CheckReverted | grep 'podSetUpdates cannot change' | head -n 1)" >&2

step "a second Job's check set Ready by another field manager: reverted, with a Warning Event"
job_yaml intruded | kubectl create -f - > /dev/null
wait_until "the Workload job-intruded does not show check scan Pending" check_pending job-intruded
kubectl patch workload job-intruded -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager=intruder \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/state","value":"Ready"}]' > /dev/null
reverted() { events_of job-intruded CheckReverted | grep -q '^Warning .*"intruder".*"example.com/scan"'; }
wait_until "no Warning Event CheckReverted naming intruder and $CONTROLLER on job-intruded: $(events_of job-intruded CheckReverted)" reverted
wait_until "the check of job-intruded was not reverted to Pending" check_pending job-intruded
sleep 3  # time for a wrong release to show
[[ "$(suspended intruded)" == true ]] || fail "Job intruded was released on a foreign field manager's word"
grep -q '"checkStateReported".*job-intruded' <<< "$(ledger log -o json)" \
  && fail "a report for job-intruded reached the ledger: $(ledger log)"
[[ "$(ledger_field job-intruded 'w["status"]["phase"]')" == QuotaReserved ]] \
  || fail "the ledger's job-intruded is not QuotaReserved"
echo "reverted: $(events_of job-intruded CheckReverted | head -n 1)" >&2
held_message="$(ledger_field job-intruded 'w["status"]["admissionChecks"][0]["message"]')"
kubectl patch workload job-intruded -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager=intruder \
  -p '[{"op":"add","path":"/status/admissionChecks/0/message","value":"all clear, trust me"}]' > /dev/null
message_reverted() {
  events_of job-intruded CheckReverted | grep -q '^Warning .*message "all clear, trust me".*"intruder".*"example.com/scan"'
}
wait_until "no Warning Event CheckReverted of the intruder's message on job-intruded: $(events_of job-intruded CheckReverted)" message_reverted
message_back() { [[ "$(check_message job-intruded)" == "$held_message" ]]; }
wait_until "the message of job-intruded's check is '$(check_message job-intruded)', not reverted to the ledger's '$held_message'" message_back
sleep 2
grep -q '"checkStateReported".*job-intruded' <<< "$(ledger log -o json)" \
  && fail "a report for job-intruded reached the ledger: $(ledger log)"
echo "reverted: $(events_of job-intruded CheckReverted | grep 'trust me' | head -n 1)" >&2

step "the first Job's pods marked Succeeded by hand: Complete, finished in the ledger, quota released"
two_pods() {
  [[ "$(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=checked -o name | wc -l)" == 2 ]]
}
wait_until "Job checked has not 2 pods" two_pods
# Both Jobs hold a reservation: 2 pods of 200m each.
[[ "$(reserved_cpu)" == 800 ]] || fail "the ledger's cluster-queue reserves $(reserved_cpu)m cpu, not 800m"
now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
for pod in $(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=checked -o name); do
  kubectl patch "$pod" -n "$NAMESPACE" --subresource=status --type=merge -p "{\"status\":{
    \"phase\":\"Succeeded\",
    \"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"PodCompleted\"}],
    \"containerStatuses\":[{\"name\":\"main\",\"image\":\"registry.k8s.io/pause:3.10\",\"imageID\":\"\",
      \"ready\":false,\"restartCount\":0,
      \"state\":{\"terminated\":{\"exitCode\":0,\"reason\":\"Completed\",\"startedAt\":\"$now\",\"finishedAt\":\"$now\"}}}]}}" > /dev/null
done
complete() {
  [[ "$(kubectl get job checked -n "$NAMESPACE" -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}')" == True ]]
}
wait_until "the Job controller did not mark Job checked Complete" complete
ledger_finished() { [[ "$(ledger_field job-checked 'w["status"]["phase"]')" == Finished ]]; }
wait_until "the ledger did not finish job-checked" ledger_finished
ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)["event"]
    p = e.get("body", {}).get("podsReported")
    if p and p["workload"]["name"] == "job-checked" and p.get("report") == "finished":
        assert e["actor"] == sys.argv[1], e
        sys.exit(0)
sys.exit(1)
' "$PRINCIPAL" || fail "no podsReported finished by $PRINCIPAL for job-checked: $(ledger log)"
[[ "$(reserved_cpu)" == 400 ]] || fail "after job-checked finished the ledger reserves $(reserved_cpu)m cpu, not 400m (job-intruded's)"

step "the second Job deleted while the bridge is down: held by the finalizer; the restarted bridge records the deletion, then lets it go; a Workload object its creator owns (no finalizer, as in Kueue) deleted then too: its deletion recorded by the restarted bridge"
kubectl create -f - > /dev/null <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: owned, namespace: $NAMESPACE}
spec:
  queueName: user-queue
  podSets:
  - name: main
    count: 1
    template:
      spec:
        containers:
        - name: c
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: 100m}}
YAML
owned_in_ledger() { [[ -n "$(ledger_field owned 'w["status"]["phase"]')" ]]; }
wait_until "the Workload owned did not reach the ledger" owned_in_ledger
[[ -z "$(kubectl get workload owned -n "$NAMESPACE" -o jsonpath='{.metadata.finalizers}')" ]] \
  || fail "the owned Workload carries finalizers: $(kubectl get workload owned -n "$NAMESPACE" -o jsonpath='{.metadata.finalizers}')"
kill -KILL "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kubectl delete job intruded -n "$NAMESPACE" --wait=false > /dev/null
kubectl delete workload owned -n "$NAMESPACE" > /dev/null
sleep 2
deleting="$(kubectl get job intruded -n "$NAMESPACE" -o jsonpath='{.metadata.deletionTimestamp}' 2>&1 || true)"
[[ "$deleting" == 20* ]] \
  || fail "Job intruded is not held by a finalizer while no bridge runs (deletionTimestamp: '$deleting')"
grep -q '"workloadDeleted"' <<< "$(ledger log -o json)" && fail "a deletion reached the ledger with no bridge running"
start_bridge
job_gone() { ! kubectl get job intruded -n "$NAMESPACE" > /dev/null 2>&1; }
wait_until "Job intruded was not deleted after the bridge restarted (finalizer not removed?)" job_gone
ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)["event"]
    d = e.get("body", {}).get("workloadDeleted")
    if d and d["workload"]["name"] == "job-intruded":
        assert e["actor"] == sys.argv[1], e
        sys.exit(0)
sys.exit(1)
' "$PRINCIPAL" || fail "no workloadDeleted of job-intruded by $PRINCIPAL before the Job was gone: $(ledger log)"
[[ "$(ledger_field job-intruded 'w["status"]["phase"]')" == Deleted ]] \
  || fail "the ledger's job-intruded is '$(ledger_field job-intruded 'w["status"]["phase"]')', not Deleted"
owned_deleted() { [[ "$(ledger_field owned 'w["status"]["phase"]')" == Deleted ]]; }
wait_until "the restarted bridge did not record the deletion of the Workload owned" owned_deleted
[[ "$(reserved_cpu)" == 0 ]] || fail "after the deletion the ledger reserves $(reserved_cpu)m cpu, not 0"
kubectl delete job checked -n "$NAMESPACE" --wait=false > /dev/null
checked_gone() { ! kubectl get job checked -n "$NAMESPACE" > /dev/null 2>&1; }
wait_until "the finished Job checked was not deleted" checked_gone

step "a Job whose check's podSetUpdates label conflicts with its pod template's own: pods failedToStart (also after a restart that finds 'pods released' recorded), Finished (FailedToStart) in the ledger, quota released, the Job still suspended"
# The bridge stops once job-clashing is admitted, before it reports anything for it; the test
# then records 'pods released' itself, as a bridge would have that died after its write-ahead
# record (the bridge of today reports failedToStart instead: it checks for a conflict first),
# and starts the bridge again.
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
start_bridge "before-pods-released:$NAMESPACE/job-clashing"
job_yaml clashing 1 '{example.com/pool: pool-b}' | kubectl create -f - > /dev/null
wait_until "the Workload job-clashing does not show check scan Pending" check_pending job-clashing
kubectl patch workload job-clashing -n "$NAMESPACE" --subresource=status --type=json \
  --field-manager="$CONTROLLER" \
  -p '[{"op":"replace","path":"/status/admissionChecks/0/state","value":"Ready"},
       {"op":"add","path":"/status/admissionChecks/0/podSetUpdates","value":[{"name":"main",
         "labels":{"example.com/pool":"pool-a"}}]}]' > /dev/null
paused_clashing() { grep -q "test pause at before-pods-released $NAMESPACE/job-clashing\$" "$dir/bridge-$bridge_runs.log"; }
wait_until "the bridge did not stop at job-clashing's admission: $(ledger_field job-clashing 'w["status"]')" paused_clashing
kill -KILL "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
clashing_token="$(ledger_field job-clashing 'w["status"]["fencingToken"]')"
[[ -n "$clashing_token" && "$(ledger_field job-clashing 'w["status"]["phase"]')" == Admitted ]] \
  || fail "job-clashing is not Admitted with a token in the ledger: $(ledger_field job-clashing 'w["status"]')"
[[ "$(reserved_cpu)" == 200 ]] || fail "the ledger reserves $(reserved_cpu)m cpu for job-clashing, not 200m"
ledger pods released "$NAMESPACE/job-clashing" --token "$clashing_token" > /dev/null
start_bridge
clashing_finished() { [[ "$(ledger_field job-clashing 'w["status"]["phase"]')" == Finished ]]; }
wait_until "the ledger did not finish job-clashing: $(ledger_field job-clashing 'w["status"]')" clashing_finished
readonly CLASH='in admission check "scan": invalid admission check PodSetUpdate: conflict for labels: conflict for key=example.com/pool, value1=pool-b, value2=pool-a'
ledger log -o json | python3 -c '
import json, sys
principal, token, clash = sys.argv[1:4]
reports, rejected = [], None
for line in sys.stdin:
    e = json.loads(line)["event"]
    body = e.get("body", {})
    p = body.get("podsReported")
    if p and p["workload"]["name"] == "job-clashing":
        reports.append((p.get("report", "released"), e["actor"], p.get("fencingToken"), p.get("message")))
    r = body.get("rejected")
    if r and r["workload"]["name"] == "job-clashing":
        rejected = (r.get("reason"), r.get("message"))
assert len(reports) == 2 and reports[0][0] == "released", reports
assert reports[1] == ("failedToStart", principal, token, clash), reports
assert rejected == ("FailedToStart", clash), rejected
' "$PRINCIPAL" "$clashing_token" "$CLASH" \
  || fail "the ledger does not hold 'released', then failedToStart by $PRINCIPAL with token $clashing_token and the conflict, then a Rejected FailedToStart for job-clashing: $(ledger log -o json | grep job-clashing)"
[[ "$(ledger_field job-clashing '[c["reason"] for c in w["status"]["conditions"] if c["type"] == "Finished"]')" == "['FailedToStart']" ]] \
  || fail "the ledger's job-clashing is not Finished with reason FailedToStart: $(ledger_field job-clashing 'w["status"]["conditions"]')"
[[ "$(reserved_cpu)" == 0 ]] || fail "after job-clashing failed to start the ledger reserves $(reserved_cpu)m cpu, not 0"
workload_failed() {
  [[ "$(kubectl get workload job-clashing -n "$NAMESPACE" \
    -o jsonpath='{.status.conditions[?(@.type=="Finished")].reason}')" == FailedToStart ]]
}
wait_until "the Workload job-clashing does not show Finished with reason FailedToStart" workload_failed
job_events() {
  kubectl get events -n "$NAMESPACE" --field-selector "involvedObject.kind=Job,involvedObject.name=$1,reason=$2" \
    -o jsonpath='{range .items[*]}{.type} {.message}{"\n"}{end}'
}
clash_event() { grep -qF "Warning $CLASH" <<< "$(job_events clashing FailedToStart)"; }
wait_until "no Warning Event FailedToStart with the conflict on Job clashing: $(job_events clashing FailedToStart)" clash_event
sleep 3  # time for a wrong release to show
[[ "$(suspended clashing)" == true ]] || fail "Job clashing runs although its podSetUpdates conflict"
[[ "$(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=clashing -o name | wc -l)" == 0 ]] \
  || fail "Job clashing has pods: $(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=clashing)"
[[ "$(kubectl get job clashing -n "$NAMESPACE" -o jsonpath='{.spec.template.metadata.labels.example\.com/pool}')" == pool-b ]] \
  || fail "Job clashing's pod template was changed: $(kubectl get job clashing -n "$NAMESPACE" -o jsonpath='{.spec.template.metadata}')"
echo "failed to start: $(ledger explain "$NAMESPACE/job-clashing" | grep -m1 failedToStart)" >&2

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: check forwarded (viaFieldManager $CONTROLLER) and admitted; a message alone forwarded once; requeueAfterSeconds alone reverted; foreign state and message reverted; finished; deleted; a conflicting podSetUpdate failed to start"
