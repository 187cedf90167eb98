#!/usr/bin/env bash
# admit-k8s makes the ledger the admission authority of batch/v1 Jobs on a real API server
# (docs/k8s.md, "Jobs"): with Kueue's quick-start setup applied by kubectl, its sample Job is
# created suspended (the bridge's mutating webhook), gets a Workload object, is submitted to the
# ledger with the bridge as actor, is admitted, and is released write-ahead (`pods released` in
# the ledger, then the flavor's node selector, the fencing token annotation, then unsuspended);
# `kubectl get workloads` shows it Admitted; the Job controller creates its pods. A Job without
# the queue label is created as written and never reaches the ledger. A Job beyond quota stays
# suspended with the ledger's pending reason in its Workload; a higher-priority Job preempts a
# running one, which is suspended, loses its pods, is reported `terminated` by the bridge, and
# only then has its quota released in the ledger and taken by the preemptor. `admitctl revoke`
# of a running Job's admission has the bridge suspend it and report `terminated`; readmitted, it
# runs again under the new token only. In both eviction flows the bridge is SIGKILLed at named
# points (it stops there: ADMIT_K8S_TEST_PAUSE_AT, test only), 9 times: evicted but not yet
# suspended; suspended with the pods terminating (held by a finalizer of the test's, and no
# `terminated` may be reported meanwhile); pods gone but `terminated` not yet reported; the
# preemptor (or the revoked Job, readmitted) admitted but `pods released` not yet reported; that
# reported but the Job not yet unsuspended. Then it is SIGKILLed $KILLS times at points of Jobs'
# submission and release, and $KILLS times at points of JobSets' (the job framework's other
# kind). Over the whole test: one submission per workload, one `pods released`
# per admission's token, no Job running without the ledger's admission; and
# `admitctl replay --verify` of the ledger passes. The test prints the time from `kubectl create`
# to unsuspended of 5 Jobs and how many read models (`get`) admitd served to the bridge (its
# metrics less the test's own calls).
#   tests/k8s/bridge_jobs_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-jobs-test "$@"

readonly PRINCIPAL=admit-k8s
# How many times the bridge is SIGKILLed during Jobs' flows (issue #18: at least 10 per CI run).
readonly KILLS=10
readonly NAMESPACE=default
# A node label for the quick-start's flavor (it has none): the released Job must select it.
readonly FLAVOR_LABEL_KEY=cloud.example.com/pool FLAVOR_LABEL_VALUE=quick-start
readonly examples_dir="$top/../shared/kueue-examples"

step "admitd on TLS; the bridge's certificate has the bridge role (definitions, Jobs, pod reports)"
"$top/ops/scripts/test_pki.sh" "$dir/pki" "$PRINCIPAL" > /dev/null
printf 'principals:\n- name: %s\n  roles: [bridge]\n' "$PRINCIPAL" > "$dir/policy.yaml"
# start_admitd TLS_ADDRESS METRICS_ADDRESS (HOST:PORT each; port 0: any free one)
start_admitd() {
  rm -f "$dir/ready"
  "$admitd" --ledger "$dir/ledger" --listen "unix:$dir/admitd.sock" --listen "tls:$1" \
    --tls-cert "$dir/pki/server.pem" --tls-key "$dir/pki/server.key" --client-ca "$dir/pki/ca.pem" \
    --policy "$dir/policy.yaml" --ready-file "$dir/ready" --metrics-listen "$2" --log-level warn \
    >> "$dir/admitd.out" 2>> "$dir/admitd.err" &
  admitd_pid=$!
}
start_admitd 127.0.0.1:0 127.0.0.1:0
admitd_ready() { [[ -s "$dir/ready" ]] && grep -q '^tls:' "$dir/ready" && grep -q '^http://' "$dir/ready"; }
wait_until "admitd did not start" admitd_ready
readonly admitd_tls="$(grep '^tls:' "$dir/ready")"
readonly metrics_url="$(grep '^http://' "$dir/ready")"
# The test's own `get` calls are counted, so that admitd's count of them tells the bridge's.
ledger() {
  if [[ "$1" == get ]]; then echo >> "$dir/test-get-calls"; fi
  "$admitctl" --connect "unix:$dir/admitd.sock" "$@"
}
# get_calls_served: admitd_rpc_calls_total{method="get"}, plus what earlier runs of admitd served.
served_before_restart=0
get_calls_served() {
  local served
  served="$(curl -s --max-time 5 "$metrics_url/metrics" |
    awk '$1 == "admitd_rpc_calls_total{method=\"get\"}" {print $2}')"
  echo $(( ${served%.*} + served_before_restart ))
}
# bridge_get_calls: how many `get` calls (read models: workloads, queues) admitd served to the
# bridge so far: get_calls_served less the test's own.
bridge_get_calls() {
  local own=0
  [[ -f "$dir/test-get-calls" ]] && own="$(wc -l < "$dir/test-get-calls")"
  echo $(( $(get_calls_served) - own ))
}

step "a control plane with our CRDs and the Job webhook's configuration"
# No nodes: this test plays the kubelet itself (pods stay Pending unless it says otherwise).
kubeconfig="$("$cluster_sh" start --control-plane-only --no-nodes "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
[[ -s "$dir/cluster/webhook.address" ]] || fail "cluster.sh start wrote no webhook.address"
readonly webhook_address="$(<"$dir/cluster/webhook.address")"

step "a labelled Job is refused while no bridge serves the webhook (failurePolicy Fail)"
# job_yaml NAME [LABELLED [CPU_PER_POD [PODS [PRIORITY_CLASS]]]]: a Job of PODS pods (default 2)
# of CPU_PER_POD (default 100m) each, in the LocalQueue $QUEUE (default user-queue) when LABELLED
# is "labelled".
job_yaml() {
  local name="$1" labelled="${2:-}" cpu="${3:-100m}" pods="${4:-2}" priority="${5:-}"
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  namespace: $NAMESPACE
  labels:
    app: bridge-jobs-test
$([[ "$labelled" == labelled ]] && echo "    kueue.x-k8s.io/queue-name: ${QUEUE:-user-queue}")
$([[ -n "$priority" ]] && echo "    kueue.x-k8s.io/priority-class: $priority")
spec:
  parallelism: $pods
  completions: $pods
  template:
    spec:
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: "$cpu", memory: 100Mi}
      restartPolicy: Never
EOF
}
if job_yaml early labelled | kubectl create -f - > "$dir/early.out" 2>&1; then
  fail "a labelled Job was created with nobody to suspend it"
fi
grep -q "mjob.admission-ledger.io" "$dir/early.out" \
  || fail "the refusal does not name the webhook: $(cat "$dir/early.out")"

step "the bridge, serving the webhook at $webhook_address"
start_bridge

step "Kueue's quick-start setup, applied with kubectl, reaches the ledger"
# shellcheck source=tests/k8s/quick_start_lib.sh
source "$script_dir/quick_start_lib.sh"
if apply_quick_start_setup "$NAMESPACE" "$examples_dir"; then
  readonly sample_job="$examples_dir/getting-started-quick-start-job.yaml"
else
  job_yaml sample-job labelled 1 3 > "$dir/sample-job.yaml"  # as the quick-start's: 3 pods of 1 cpu
  readonly sample_job="$dir/sample-job.yaml"
fi
kubectl patch resourceflavor default-flavor --type=merge \
  -p "{\"spec\":{\"nodeLabels\":{\"$FLAVOR_LABEL_KEY\":\"$FLAVOR_LABEL_VALUE\"}}}" > /dev/null
# The flavor as applied, then with its node label; the ClusterQueue; the LocalQueue.
setup_forwarded() {
  local log
  log="$(ledger log)"
  [[ "$(grep -c "flavorDefined  actor=$PRINCIPAL" <<< "$log")" == 2 ]] &&
    grep -q "localQueueDefined  actor=$PRINCIPAL" <<< "$log" &&
    grep -q "clusterQueueDefined  actor=$PRINCIPAL" <<< "$log"
}
wait_until "the setup and the flavor's node label are not in the ledger" setup_forwarded

step "the quick-start's sample Job is created suspended"
created="$(kubectl create -f "$sample_job" -o jsonpath='{.metadata.name} {.spec.suspend}')"
readonly job_name="${created% *}"
[[ "${created#* }" == true ]] || fail "the sample Job was created with suspend '${created#* }', not true"
readonly workload="job-$job_name"

step "it is admitted and released: the token annotation, the flavor's node selector, unsuspended"
job_released() {
  [[ "$(kubectl get job "$job_name" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == false ]]
}
wait_until "Job $job_name was not unsuspended" job_released
# ledger_token WORKLOAD: the fencing token of the ledger's current admission of it.
ledger_token() {
  ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if (w["metadata"]["namespace"], w["metadata"]["name"]) == (sys.argv[1], sys.argv[2]):
        print(w["status"].get("fencingToken", ""))
' "$NAMESPACE" "$1"
}
token="$(ledger_token "$workload")"
[[ -n "$token" ]] || fail "the ledger holds no fencing token for $NAMESPACE/$workload: $(ledger get workloads)"
job_json="$(kubectl get job "$job_name" -n "$NAMESPACE" -o json)"
jq_get() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1" <<< "$job_json"; }
[[ "$(jq_get "d['metadata']['annotations'].get('admission-ledger.io/fencing-token')")" == "$token" ]] \
  || fail "the Job's fencing-token annotation is not the ledger's $token"
[[ "$(jq_get "d['spec']['template']['metadata']['annotations'].get('admission-ledger.io/fencing-token')")" == "$token" ]] \
  || fail "the pod template's fencing-token annotation is not the ledger's $token"
[[ "$(jq_get "d['spec']['template']['spec'].get('nodeSelector',{}).get('$FLAVOR_LABEL_KEY')")" == "$FLAVOR_LABEL_VALUE" ]] \
  || fail "the pod template does not select the flavor's node label $FLAVOR_LABEL_KEY=$FLAVOR_LABEL_VALUE"
# What the Job asked for itself, kept so that a later admission starts from it, not from this one.
original="$(jq_get "d['metadata']['annotations'].get('admission-ledger.io/original-pod-set')")"
# Its parallelism, and the template's own labels (the Job controller's; no admission check here
# adds any), which a later release restores before it applies podSetUpdates again.
python3 -c '
import json, sys
original, job = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert set(original) <= {"parallelism", "template"} and original.get("parallelism") == 3, original
labels = job["spec"]["template"]["metadata"].get("labels", {})
assert original.get("template", {}).get("labels", {}) == labels, (original, labels)
' "$original" "$job_json" || fail "the Job's original pod set is recorded as '$original'"

step "the ledger holds the submission and, after the admission, 'pods released', both by the bridge"
ledger log -o json > "$dir/ledger.json"
# sequence_of KIND [ACTOR [REPORT [WORKLOAD]]]: the first event of KIND about
# $NAMESPACE/WORKLOAD (default $workload), by ACTOR if not empty.
sequence_of() {
  python3 -c '
import json, sys
kind, actor, report, ns, name = sys.argv[1:6]
for line in open(sys.argv[6]):
    e = json.loads(line)["event"]
    body = e.get("body", {}).get(kind)
    if body is None or body.get("workload", {}).get("name") is None:
        continue
    w = body["workload"]
    if (w.get("namespace"), w["name"]) != (ns, name):
        continue
    if actor and e.get("actor") != actor:
        continue
    # JSON leaves out a default: the first value of the enum, released.
    if report and body.get("report", "released") != report:
        continue
    print(e["sequence"])
    break
' "$1" "${2:-}" "${3:-}" "$NAMESPACE" "${4:-$workload}" "$dir/ledger.json"
}
submitted_at="$(sequence_of workloadSubmitted "$PRINCIPAL")"
admitted_at="$(sequence_of admitted)"
released_at="$(sequence_of podsReported "$PRINCIPAL" released)"
[[ -n "$submitted_at" && -n "$admitted_at" && -n "$released_at" ]] \
  || fail "not all of: a submission and a 'pods released' by $PRINCIPAL, an admission of $NAMESPACE/$workload ($submitted_at, $released_at, $admitted_at): $(ledger log)"
((submitted_at < admitted_at && admitted_at < released_at)) \
  || fail "out of order: submitted $submitted_at, admitted $admitted_at, released $released_at"

step "kubectl get workloads shows it Admitted, owned by the Job"
workload_admitted() {
  kubectl get workloads -n "$NAMESPACE" "$workload" --no-headers 2>/dev/null | grep -q 'cluster-queue *True'
}
wait_until "kubectl get workloads does not show $workload Admitted in cluster-queue" workload_admitted
owner="$(kubectl get workload "$workload" -n "$NAMESPACE" -o jsonpath='{.metadata.ownerReferences[0].kind}/{.metadata.ownerReferences[0].name}/{.metadata.ownerReferences[0].controller}')"
[[ "$owner" == "Job/$job_name/true" ]] || fail "Workload $workload is owned by '$owner', not Job/$job_name"
status_token="$(kubectl get workload "$workload" -n "$NAMESPACE" -o jsonpath='{.status.fencingToken}')"
[[ "$status_token" == "$token" ]] || fail "the Workload's status.fencingToken is '$status_token', not $token"

step "kubectl get clusterqueues and localqueues show the ledger's counts and usage"
queues_counted() {
  [[ "$(kubectl get clusterqueue cluster-queue -o jsonpath='{.status.admittedWorkloads}/{.status.pendingWorkloads}')" == 1/0 ]] &&
    [[ "$(kubectl get localqueue user-queue -n "$NAMESPACE" -o jsonpath='{.status.admittedWorkloads}')" == 1 ]]
}
wait_until "cluster-queue and user-queue do not count the admitted workload" queues_counted
usage="$(kubectl get clusterqueue cluster-queue -o json | python3 -c '
import json, sys
for f in json.load(sys.stdin)["status"]["flavorsUsage"]:
    for r in f["resources"]:
        if r["name"] == "cpu":
            print(f["name"], r["total"])
')"
[[ "$usage" == "default-flavor 3" ]] || fail "cluster-queue's cpu usage is '$usage', not 3 in default-flavor"

step "the Job controller creates its pods, each carrying the token"
pods_with_token() {
  local n
  n="$(kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$job_name" \
    -o jsonpath='{range .items[*]}{.metadata.annotations.admission-ledger\.io/fencing-token}{"\n"}{end}' |
    grep -c -x -F "$token" || true)"
  ((n >= 1))
}
wait_until "no pod of $job_name carries the token" pods_with_token

step "time from kubectl create to unsuspended, and the ledger's read models the bridge asked for"
# A ClusterQueue of its own (also the SIGKILL drill's, below), with room for every Job put there.
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: drill-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 100}
      - {name: memory, nominalQuota: 100Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $NAMESPACE, name: drill}
spec: {clusterQueue: drill-queue}
EOF
drill_queue_forwarded() {
  [[ "$(ledger log | grep -c "localQueueDefined  actor=$PRINCIPAL")" == 2 ]]
}
wait_until "the drill's queues are not in the ledger" drill_queue_forwarded
# Each Job's time from `kubectl create` to `spec.suspend: false` (kubectl wait watches the Job).
timings=""
for i in 1 2 3 4 5; do
  start_ns="$(date +%s%N)"
  QUEUE=drill job_yaml "timed-$i" labelled 100m 1 | kubectl create -f - > /dev/null
  kubectl wait --for=jsonpath='{.spec.suspend}'=false "job/timed-$i" -n "$NAMESPACE" --timeout="${WAIT_SECONDS}s" > /dev/null \
    || fail "Job timed-$i was not unsuspended within ${WAIT_SECONDS}s"
  timings+=" $(( ($(date +%s%N) - start_ns) / 1000000 ))"
done
echo "create to unsuspended (ms):$timings" >&2
gets_so_far="$(bridge_get_calls)"
echo "get calls admitd served to the bridge so far (${SECONDS}s into the test): $gets_so_far" >&2
sleep 5  # the bridge left alone with 6 running Jobs
echo "get calls admitd served to the bridge in 5 s left alone with 6 running Jobs: $(($(bridge_get_calls) - gets_so_far))" >&2

step "a Job without the queue label runs untouched"
before_count="$(ledger log | wc -l)"
created="$(job_yaml plain | kubectl create -f - -o jsonpath='{.spec.suspend}')"
[[ "$created" == false ]] || fail "the unlabelled Job was created with suspend '$created'"
plain_pods() {
  [[ "$(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=plain -o name | wc -l)" == 2 ]]
}
wait_until "the unlabelled Job did not get its 2 pods" plain_pods
sleep 3  # time for the bridge to act on it, were it to
! kubectl get workload job-plain -n "$NAMESPACE" > /dev/null 2>&1 \
  || fail "the bridge made a Workload for the unlabelled Job"
ledger log | tail -n +"$((before_count + 1))" | grep -q "plain" \
  && fail "the unlabelled Job reached the ledger"
annotations="$(kubectl get job plain -n "$NAMESPACE" -o jsonpath='{.metadata.annotations}')"
[[ "$annotations" != *fencing-token* ]] || fail "the unlabelled Job got a fencing token: $annotations"

step "a Job beyond quota stays suspended, with the ledger's pending reason in its Workload"
# cluster-queue has 9 cpu: sample-job holds 3, low takes the other 6, waits finds none left.
job_yaml low labelled 3 2 | kubectl create -f - > /dev/null
job_is_running() {
  [[ "$(kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == false ]]
}
wait_until "Job low was not released" job_is_running low
job_yaml waits labelled 2 1 | kubectl create -f - > /dev/null
waits_pending() {
  [[ "$(kubectl get workload job-waits -n "$NAMESPACE" -o jsonpath='{.status.phase}/{.status.pendingReason.message}' 2>/dev/null)" == Pending/?* ]]
}
wait_until "Workload job-waits shows no pending reason" waits_pending
reason="$(kubectl get workload job-waits -n "$NAMESPACE" -o jsonpath='{.status.pendingReason.message}')"
echo "job-waits pending: $reason" >&2
quota_condition="$(kubectl get workload job-waits -n "$NAMESPACE" -o jsonpath='{.status.conditions[?(@.type=="QuotaReserved")].status}')"
[[ "$quota_condition" == False ]] || fail "job-waits has QuotaReserved '$quota_condition', not False"
[[ "$(kubectl get job waits -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "Job waits runs without an admission"
[[ "$(kubectl get pods -n "$NAMESPACE" -l batch.kubernetes.io/job-name=waits -o name | wc -l)" == 0 ]] \
  || fail "Job waits has pods"

# The bridge SIGKILLed at named points of the eviction flows, certainly there: started with a
# pause at the point (ADMIT_K8S_TEST_PAUSE_AT, test only), it stops there and says so; the test
# checks the cluster and the ledger, SIGKILLs it and starts it again.
kills=0
# kill_bridge WHERE: SIGKILL, counted, WHERE printed.
kill_bridge() {
  kill -KILL "$bridge_pid"
  wait "$bridge_pid" 2>/dev/null || true
  kills=$((kills + 1))
  echo "kill $kills: $1" >&2
}
# restart_bridge [PAUSE]: stopped (SIGTERM) and started again, with a pause if given.
restart_bridge() {
  kill -TERM "$bridge_pid"
  wait "$bridge_pid" 2>/dev/null || true
  start_bridge "$@"
}
# paused_at STEP WORKLOAD: the running bridge stopped at STEP for $NAMESPACE/WORKLOAD.
paused_at() { grep -q "test pause at $1 $NAMESPACE/$2\$" "$dir/bridge-$bridge_runs.log"; }
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" -o name | wc -l
}
has_pods() { [[ "$(pods_of "$1")" == "$2" ]]; }
# suspended_and_terminating JOB N: JOB is suspended and its status counts N terminating pods.
suspended_and_terminating() {
  [[ "$(kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}/{.status.terminating}')" == "true/$2" ]]
}
# A deleted pod stays terminating while its node has not confirmed that it stopped: the test
# binds the pods it holds to a Node object of its own, which has no kubelet (the pod garbage
# collector would fail an unscheduled one at once), and lets them go by force-deleting them. The
# bridge must not report `terminated` before.
readonly HOLD_NODE=bridge-test-node
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Node
metadata: {name: $HOLD_NODE}
EOF
hold_pods() {
  local pod
  for pod in $(kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" -o name); do
    kubectl create --raw "/api/v1/namespaces/$NAMESPACE/pods/${pod#pod/}/binding" -f - > /dev/null <<EOF
{"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "${pod#pod/}"},
 "target": {"apiVersion": "v1", "kind": "Node", "name": "$HOLD_NODE"}}
EOF
  done
}
let_pods_go() {
  kubectl delete pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" --grace-period=0 --force \
    > /dev/null 2>&1
}
# reported WORKLOAD REPORT: the ledger holds a pod report REPORT by the bridge for WORKLOAD.
reported() {
  ledger log -o json > "$dir/ledger.json"
  [[ -n "$(sequence_of podsReported "$PRINCIPAL" "$2" "$1")" ]]
}
# no_terminated_while_held JOB: for 2 s, with JOB's pods terminating (held), no `terminated`.
no_terminated_while_held() {
  local deadline=$((SECONDS + 2))
  while ((SECONDS < deadline)); do
    ! reported "job-$1" terminated || fail "the bridge reported $1 terminated while its pods were terminating: $(kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" -o wide)"
    sleep 0.3
  done
  [[ "$(pods_of "$1")" == 2 ]] || fail "the held pods of $1 are gone"
}

step "a higher-priority Job preempts low; the bridge SIGKILLed between low's eviction and terminated, and between that and urgent's release"
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
EOF
kubectl patch clusterqueue cluster-queue --type=merge \
  -p '{"spec":{"preemption":{"withinClusterQueue":"LowerPriority"}}}' > /dev/null
preemption_forwarded() {
  local log
  log="$(ledger log)"
  [[ "$(grep -c "clusterQueueDefined  actor=$PRINCIPAL" <<< "$log")" == 3 ]] &&
    grep -q "priorityClassDefined  actor=$PRINCIPAL" <<< "$log"
}
wait_until "the preemption policy and the priority class are not in the ledger" preemption_forwarded
wait_until "Job low does not have its 2 pods" has_pods low 2
hold_pods low
restart_bridge "evicted-before-suspend:$NAMESPACE/job-low"
job_yaml urgent labelled 3 2 high | kubectl create -f - > /dev/null
wait_until "the bridge did not stop at low's eviction" paused_at evicted-before-suspend job-low
ledger log -o json > "$dir/ledger.json"
[[ -n "$(sequence_of evictionStarted "" "" job-low)" ]] || fail "the bridge stopped at low's eviction, but the ledger has none"
! reported job-low terminated || fail "low reported terminated before it was suspended"
kill_bridge "low evicted in the ledger, its Job not yet suspended"
# Not paused at terminated: a bridge that reported it while pods are left would do it now.
start_bridge "before-pods-released:$NAMESPACE/job-urgent"
wait_until "low was not suspended, or the Job does not count its 2 held pods terminating" \
  suspended_and_terminating low 2
no_terminated_while_held low
kill_bridge "low suspended, its pods terminating (held by a node that does not confirm their end), terminated not reported"
start_bridge "before-terminated:$NAMESPACE/job-low"
no_terminated_while_held low
let_pods_go low
wait_until "the bridge did not stop before low's terminated" paused_at before-terminated job-low
[[ "$(pods_of low)" == 0 ]] || fail "the bridge went on to report low terminated with pods left"
! reported job-low terminated || fail "low reported terminated before the pause before it"
kill_bridge "low's pods gone, terminated not yet reported"
start_bridge "before-pods-released:$NAMESPACE/job-urgent"
wait_until "the bridge did not stop before urgent's 'pods released'" paused_at before-pods-released job-urgent
ledger log -o json > "$dir/ledger.json"
[[ -n "$(sequence_of admitted "" "" job-urgent)" ]] || fail "stopped before urgent's release, but urgent is not admitted"
! reported job-urgent released || fail "urgent's 'pods released' came before the pause before it"
[[ "$(kubectl get job urgent -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "urgent runs before its 'pods released'"
kill_bridge "low terminated and its quota released, urgent admitted; urgent's 'pods released' not yet reported"
start_bridge "before-unsuspend:$NAMESPACE/job-urgent"
wait_until "the bridge did not stop before unsuspending urgent" paused_at before-unsuspend job-urgent
reported job-urgent released || fail "urgent is about to be unsuspended without 'pods released' in the ledger"
[[ "$(kubectl get job urgent -n "$NAMESPACE" -o jsonpath='{.spec.suspend}/{.metadata.annotations.admission-ledger\.io/fencing-token}')" == "true/$(ledger_token job-urgent)" ]] \
  || fail "urgent, about to be unsuspended, is not suspended with the ledger's token"
kill_bridge "urgent's 'pods released' and its admission on the Job, not yet unsuspended"
start_bridge
wait_until "Job urgent was not released" job_is_running urgent
[[ "$(kubectl get job low -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "the preempted Job low was not suspended"
ledger log -o json > "$dir/ledger.json"
evicted_at="$(sequence_of evictionStarted "" "" job-low)"
terminated_at="$(sequence_of podsReported "$PRINCIPAL" terminated job-low)"
quota_released_at="$(sequence_of quotaReleased "" "" job-low)"
urgent_admitted_at="$(sequence_of admitted "" "" job-urgent)"
urgent_released_at="$(sequence_of podsReported "$PRINCIPAL" released job-urgent)"
[[ -n "$evicted_at" && -n "$terminated_at" && -n "$quota_released_at" && -n "$urgent_admitted_at" && -n "$urgent_released_at" ]] \
  || fail "missing: eviction '$evicted_at', terminated '$terminated_at', quota released '$quota_released_at' of job-low; admission '$urgent_admitted_at', released '$urgent_released_at' of job-urgent: $(ledger log)"
((evicted_at < terminated_at && terminated_at <= quota_released_at && quota_released_at < urgent_admitted_at && urgent_admitted_at < urgent_released_at)) \
  || fail "out of order: low evicted $evicted_at, terminated $terminated_at, quota released $quota_released_at; urgent admitted $urgent_admitted_at, released $urgent_released_at"
[[ "$(kubectl get job waits -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "Job waits runs without an admission"

step "admitctl revoke of urgent's admission; the bridge SIGKILLed before the suspension, before terminated and before the readmission's release"
urgent_token="$(ledger_token job-urgent)"
wait_until "Job urgent does not have its 2 pods" has_pods urgent 2
hold_pods urgent
restart_bridge "evicted-before-suspend:$NAMESPACE/job-urgent"
ledger revoke "$NAMESPACE/job-urgent" --reason "bridge test: revoked" > /dev/null
# Nothing in the cluster changes: only the ledger's watch tells the bridge, well before its 45 s
# safety resync.
revoke_seen_within=20
deadline=$((SECONDS + revoke_seen_within))
until paused_at evicted-before-suspend job-urgent; do
  ((SECONDS < deadline)) || fail "the bridge did not act on urgent's revocation within ${revoke_seen_within}s (the ledger's watch did not tell it)"
  sleep "$POLL_INTERVAL_SECONDS"
done
! reported job-urgent terminated || fail "urgent reported terminated before it was suspended"
kill_bridge "urgent revoked in the ledger, its Job not yet suspended"
start_bridge "before-pods-released:$NAMESPACE/job-urgent"
wait_until "urgent was not suspended, or the Job does not count its 2 held pods terminating" \
  suspended_and_terminating urgent 2
no_terminated_while_held urgent
kill_bridge "urgent suspended, its pods terminating (held by a node that does not confirm their end), terminated not reported"
start_bridge "before-terminated:$NAMESPACE/job-urgent"
let_pods_go urgent
wait_until "the bridge did not stop before urgent's terminated" paused_at before-terminated job-urgent
[[ "$(pods_of urgent)" == 0 ]] || fail "the bridge went on to report urgent terminated with pods left"
! reported job-urgent terminated || fail "urgent reported terminated before the pause before it"
kill_bridge "urgent's pods gone, terminated not yet reported"
start_bridge "before-pods-released:$NAMESPACE/job-urgent"
wait_until "the bridge did not stop before urgent's second 'pods released'" paused_at before-pods-released job-urgent
new_token="$(ledger_token job-urgent)"
[[ -n "$new_token" && "$new_token" != "$urgent_token" ]] \
  || fail "urgent is not admitted again under a new token ('$new_token', revoked: $urgent_token)"
[[ "$(kubectl get job urgent -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "urgent runs before its second 'pods released'"
kill_bridge "urgent terminated and readmitted; 'pods released' for the new token not yet reported"
start_bridge
urgent_quota_released() {
  ledger log -o json > "$dir/ledger.json"
  [[ -n "$(sequence_of quotaReleased "" "" job-urgent)" ]]
}
wait_until "the revoked job-urgent's quota was not released" urgent_quota_released
revoked_at="$(sequence_of evictionStarted "" "" job-urgent)"
urgent_terminated_at="$(sequence_of podsReported "$PRINCIPAL" terminated job-urgent)"
urgent_quota_released_at="$(sequence_of quotaReleased "" "" job-urgent)"
[[ -n "$revoked_at" && -n "$urgent_terminated_at" ]] \
  || fail "no eviction '$revoked_at' or no 'terminated' by $PRINCIPAL '$urgent_terminated_at' of job-urgent: $(ledger log)"
((revoked_at < urgent_terminated_at && urgent_terminated_at <= urgent_quota_released_at)) \
  || fail "out of order: urgent evicted $revoked_at, terminated $urgent_terminated_at, quota released $urgent_quota_released_at"
# The ledger admitted urgent again (it is first in line and the quota is free): it runs again,
# under the new token only (its pod template changed while suspended after a run).
urgent_runs_again() {
  [[ "$(kubectl get job urgent -n "$NAMESPACE" -o jsonpath='{.spec.suspend}/{.metadata.annotations.admission-ledger\.io/fencing-token}')" == "false/$new_token" ]]
}
wait_until "Job urgent does not run again under the new token $new_token (revoked: $urgent_token)" urgent_runs_again

step "the bridge SIGKILLed at $KILLS random points of Jobs' flows converges"
# The flow of one Job takes a few hundred milliseconds; the kill points cycle through its steps
# (each kill lands as soon as the step is seen, so at it or a little after), and a random delay.
has_workload() { kubectl get workload "job-$1" -n "$NAMESPACE" > /dev/null 2>&1; }
is_submitted() { ledger log | grep -q "key=by/$PRINCIPAL/submit/$NAMESPACE/job-$1/"; }
has_token() {
  [[ -n "$(kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}')" ]]
}
# poll_briefly COMMAND...: polls COMMAND without sleeping, for at most 5 s.
poll_briefly() {
  local deadline=$((SECONDS + 5))
  until "$@"; do ((SECONDS < deadline)) || return 0; done
}
# sigkill_drill WHAT CREATE HAS_WORKLOAD IS_SUBMITTED HAS_TOKEN IS_RUNNING: creates $KILLS
# objects NAME-1.. with CREATE NAME, SIGKILLs the bridge at a point of each one's flow, cycling
# through the points that the four checks (each given an object's name) tell, prints where each
# kill found it, and starts the bridge again.
sigkill_drill() {
  local what="$1" create="$2" i check state
  shift 2
  for i in $(seq 1 "$KILLS"); do
    "$create" "$what-$i"
    case $((i % 5)) in
      1) ;;  # at once: before the Workload object, most likely
      2) poll_briefly "$1" "$what-$i" ;;
      3) poll_briefly "$2" "$what-$i" ;;
      4) poll_briefly "$3" "$what-$i" ;;
      0) sleep "$(printf '0.%03d' $((RANDOM % 400)))" ;;
    esac
    kill -KILL "$bridge_pid"
    wait "$bridge_pid" 2>/dev/null || true
    kills=$((kills + 1))
    # Where it was, the bridge being dead: Workload object, submission, token, running.
    state=""
    for check in "$@"; do
      if "$check" "$what-$i"; then state+=" $check"; fi
    done
    echo "$what kill $i (point $((i % 5))) found:${state:- nothing done}" >&2
    start_bridge
  done
}
create_drill_job() { QUEUE=drill job_yaml "$1" labelled 100m 1 | kubectl create -f - > /dev/null; }
sigkill_drill drill create_drill_job has_workload is_submitted has_token job_is_running
all_drills_released() {
  local i
  for i in $(seq 1 "$KILLS"); do job_is_running "drill-$i" || return 1; done
}
wait_until "not every drill Job was released after the restarts" all_drills_released
ledger log -o json > "$dir/ledger.json"
# count_of KIND WORKLOAD [REPORT]: how many events of KIND are about $NAMESPACE/WORKLOAD.
count_of() {
  python3 -c '
import json, sys
kind, ns, name, report = sys.argv[1:5]
n = 0
for line in open(sys.argv[5]):
    body = json.loads(line)["event"].get("body", {}).get(kind)
    if not body or body.get("workload", {}).get("name") != name:
        continue
    if body["workload"].get("namespace") == ns and (not report or body.get("report", "released") == report):
        n += 1
print(n)
' "$1" "$NAMESPACE" "$2" "${3:-}" "$dir/ledger.json"
}
# drill_converged RESOURCE WHAT PREFIX: each of the $KILLS objects WHAT-N of RESOURCE (workload
# PREFIX-WHAT-N) has one submission, one admission and one `pods released` in the ledger, and
# carries the ledger's token.
drill_converged() {
  local resource="$1" what="$2" prefix="$3" i kind n annotation
  for i in $(seq 1 "$KILLS"); do
    for kind in workloadSubmitted admitted; do
      n="$(count_of "$kind" "$prefix-$what-$i")"
      ((n == 1)) || fail "$prefix-$what-$i has $n $kind events, not 1"
    done
    n="$(count_of podsReported "$prefix-$what-$i" released)"
    ((n == 1)) || fail "$prefix-$what-$i has $n 'pods released' reports, not 1"
    annotation="$(kubectl get "$resource" "$what-$i" -n "$NAMESPACE" \
      -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}')"
    [[ "$annotation" == "$(ledger_token "$prefix-$what-$i")" ]] \
      || fail "$resource $what-$i runs with token '$annotation', not the ledger's"
  done
}
drill_converged job drill job

step "the bridge SIGKILLed at $KILLS random points of JobSets' flows converges"
# The same drill through the job framework's other kind: JobSets (the cluster's JobSet
# controller runs them) of one replicated job of one pod, in the drill's queue.
jobset_yaml() {
  cat <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: $1
  namespace: $NAMESPACE
  labels: {kueue.x-k8s.io/queue-name: drill}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      spec:
        parallelism: 1
        completions: 1
        template:
          spec:
            containers:
            - name: main
              image: registry.k8s.io/pause:3.10
              resources:
                requests: {cpu: 100m, memory: 100Mi}
            restartPolicy: Never
EOF
}
js_has_workload() { kubectl get workload "jobset-$1" -n "$NAMESPACE" > /dev/null 2>&1; }
js_is_submitted() { ledger log | grep -q "key=by/$PRINCIPAL/submit/$NAMESPACE/jobset-$1/"; }
js_token() {
  kubectl get jobset "$1" -n "$NAMESPACE" \
    -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}'
}
js_has_token() { [[ -n "$(js_token "$1")" ]]; }
js_is_running() {
  [[ "$(kubectl get jobset "$1" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == false ]]
}
create_drill_jobset() { jobset_yaml "$1" | kubectl create -f - > /dev/null; }
sigkill_drill jsdrill create_drill_jobset js_has_workload js_is_submitted js_has_token js_is_running
all_jobsets_released() {
  local i
  for i in $(seq 1 "$KILLS"); do js_is_running "jsdrill-$i" || return 1; done
}
wait_until "not every drill JobSet was released after the restarts" all_jobsets_released
ledger log -o json > "$dir/ledger.json"
drill_converged jobset jsdrill jobset

step "admitd restarted: it ends the bridge's watch, the bridge resumes it, and a revocation after the restart reaches it at once"
served_before_restart="$(get_calls_served)"
kill -TERM "$admitd_pid"
wait "$admitd_pid" 2>/dev/null || true
start_admitd "${admitd_tls#tls:}" "${metrics_url#http://}"
wait_until "admitd did not start again on $admitd_tls" admitd_ready
timed_token="$(ledger_token job-timed-1)"
[[ -n "$timed_token" ]] || fail "job-timed-1 has no token in the ledger"
ledger revoke "$NAMESPACE/job-timed-1" --reason "bridge test: after admitd's restart" > /dev/null
# Revoked, terminated, admitted again (drill-queue has room) and released under a new token: the
# bridge hears of the revocation only through its watch, resumed after admitd's restart.
timed_runs_again() {
  local new
  new="$(ledger_token job-timed-1)"
  [[ -n "$new" && "$new" != "$timed_token" ]] &&
    [[ "$(kubectl get job timed-1 -n "$NAMESPACE" -o jsonpath='{.spec.suspend}/{.metadata.annotations.admission-ledger\.io/fencing-token}')" == "false/$new" ]]
}
deadline=$((SECONDS + revoke_seen_within))
until timed_runs_again; do
  ((SECONDS < deadline)) || fail "Job timed-1 does not run again under a new token ${revoke_seen_within}s after its revocation (the bridge's watch did not resume after admitd's restart)"
  sleep "$POLL_INTERVAL_SECONDS"
done
grep -E -o '"(admitd ended the ledger watch|the ledger watch failed); resuming"[^}]*' "$dir/bridge-$bridge_runs.log" >&2 \
  || fail "the bridge did not log the end of its watch: $(grep ledger-watch "$dir/bridge-$bridge_runs.log")"

step "a Job deleted and created again with its name is a new workload: admitted, released, running"
# Issue 31: the name's submission key made the new Job a retry of the old one, which left it
# suspended for ever behind the old workload's Deleted.
QUEUE=drill job_yaml "again" labelled 100m 1 > "$dir/again.yaml"
kubectl create -f "$dir/again.yaml" > /dev/null
again_runs() {
  [[ "$(kubectl get job again -n "$NAMESPACE" -o jsonpath='{.spec.suspend}' 2>/dev/null)" == "false" ]]
}
wait_until "the first Job 'again' was not released" again_runs
first_again_uid="$(ledger get workloads -o json | python3 -c 'import json,sys; print([w["metadata"]["uid"] for w in json.load(sys.stdin)["items"] if w["metadata"]["name"]=="job-again"][0])')"
kubectl delete job again -n "$NAMESPACE" --wait=true > /dev/null
kubectl create -f "$dir/again.yaml" > /dev/null
again_is_new() {
  again_runs && [[ -n "$(ledger get workloads -o json | python3 -c '
import json, sys
print("".join(w["metadata"]["uid"] for w in json.load(sys.stdin)["items"]
              if w["metadata"]["name"] == "job-again" and w["metadata"]["uid"] != sys.argv[1]
              and w.get("status", {}).get("phase") == "Admitted"))' "$first_again_uid")" ]]
}
wait_until "the second Job 'again' is not admitted and released as a new workload" again_is_new

step "over the whole test ($kills SIGKILLs): one submission per workload, one 'pods released' per admission's token, terminated only for an evicted admission, no Job running without an admission"
ledger log -o json > "$dir/ledger.json"
ledger get workloads -o json > "$dir/workloads.json"
kubectl get jobs -n "$NAMESPACE" -l kueue.x-k8s.io/queue-name -o json > "$dir/jobs.json"
python3 - "$dir/ledger.json" "$dir/workloads.json" "$dir/jobs.json" "$PRINCIPAL" > "$dir/global.out" 2>&1 <<'EOF' \
  || fail "$(cat "$dir/global.out")"
import json, sys
from collections import Counter, defaultdict
ledger_path, workloads_path, jobs_path, principal = sys.argv[1:5]
submitted = Counter()
admitted = defaultdict(list)    # workload -> tokens of its admissions, in order
evicted = defaultdict(int)      # workload -> evictions so far
released = Counter()            # (workload, token) -> 'pods released' reports
problems = []
for line in open(ledger_path):
    e = json.loads(line)["event"]
    (kind, body), = e["body"].items() if e.get("body") else ((None, None),)
    w = (body or {}).get("workload") or {}
    key = "%s/%s" % (w.get("namespace"), w.get("name"))
    if kind == "workloadSubmitted":
        submitted["%s (uid %s)" % (key, w.get("uid"))] += 1
    elif kind == "admitted":
        admitted[key].append(body.get("fencingToken"))
    elif kind == "evictionStarted":
        evicted[key] += 1
    elif kind == "podsReported" and e.get("actor") == principal:
        report, token = body.get("report", "released"), body.get("fencingToken")
        if report == "released":
            released[(key, token)] += 1
            if token not in admitted[key]:
                problems.append("%s: 'pods released' at %s for token %s, which no admission of it had" % (key, e["sequence"], token))
        elif report == "terminated" and evicted[key] == 0:
            problems.append("%s: 'terminated' at %s without an eviction before it" % (key, e["sequence"]))
for key, n in submitted.items():
    if n != 1:
        problems.append("%s: %d submissions" % (key, n))
for (key, token), n in released.items():
    if n != 1:
        problems.append("%s: %d 'pods released' reports for token %s" % (key, n, token))
for key, tokens in admitted.items():
    if len(set(tokens)) != len(tokens):
        problems.append("%s: an admission token given twice: %s" % (key, tokens))
state = {}
for w in json.load(open(workloads_path))["items"]:
    m = w["metadata"]
    state["%s/%s" % (m["namespace"], m["name"])] = w.get("status", {})
running = 0
for job in json.load(open(jobs_path))["items"]:
    if job["spec"].get("suspend", False):
        continue
    running += 1
    m = job["metadata"]
    key = "%s/job-%s" % (m["namespace"], m["name"])
    s = state.get(key, {})
    token = m.get("annotations", {}).get("admission-ledger.io/fencing-token")
    if s.get("phase") != "Admitted" or token != s.get("fencingToken"):
        problems.append("Job %s runs (token %s) while the ledger has it %s with token %s" % (m["name"], token, s.get("phase"), s.get("fencingToken")))
if problems:
    print("\n".join(problems))
    sys.exit(1)
print("%d workloads submitted once each, %d releases each for an admission's token, %d Jobs running, each with the ledger's admission" % (len(submitted), sum(released.values()), running))
EOF
cat "$dir/global.out" >&2
echo "get calls admitd served to the bridge in the whole test (${SECONDS}s): $(bridge_get_calls)" >&2
((kills + KILLS >= 10)) || fail "only $((kills + KILLS)) SIGKILLs of the bridge"

step "the ledger replays: every recorded decision is the one this build makes"
kill -TERM "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
grep -o '"workloadReads":[0-9]*,"answeredFromCache":[0-9]*' "$dir/bridge-$bridge_runs.log" >&2 || true
kill -TERM "$admitd_pid"
wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"

echo "PASS: $job_name created suspended, submitted by $PRINCIPAL at $submitted_at, admitted at $admitted_at, 'pods released' at $released_at, then released with token $token and $FLAVOR_LABEL_KEY=$FLAVOR_LABEL_VALUE; its Workload Admitted; an unlabelled Job untouched; a Job beyond quota pending and suspended; low preempted by urgent (evicted $evicted_at, pods terminated $terminated_at, quota released $quota_released_at, urgent admitted $urgent_admitted_at); urgent revoked ($revoked_at) and terminated ($urgent_terminated_at); $kills SIGKILLs of the bridge (9 at named points of the eviction flows, $KILLS in Jobs' and $KILLS in JobSets' submission and release) converged (one submission, one token, one release each, terminated only once the pods were gone); replay --verify passes"
