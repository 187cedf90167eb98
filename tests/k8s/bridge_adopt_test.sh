#!/usr/bin/env bash
# admit-k8s adopts a cluster where Kueue ran (docs/k8s.md, "Adopting a Kueue cluster"), on the
# local cluster's KWOK nodes with admitd on TLS and the bridge's certificate given the `bridge`
# role alone. Before the bridge starts, the test creates through the API what a stopped Kueue
# leaves behind (its Job webhook gone, ours not yet installed): ResourceFlavor default-flavor,
# ClusterQueues cluster-queue (4 cpu, preemption withinClusterQueue LowerPriority) and
# other-queue (2 cpu), their LocalQueues; Jobs with the queue label and their Workloads named as
# Kueue names them (job-NAME-HASH), owned by the Jobs, status written through the status
# subresource:
# - a and b: admitted (2 cpu each, cluster-queue full), QuotaReserved and Admitted at distinct
#   times (a's older), PodsReady; their Jobs unsuspended, their pods Running on KWOK nodes;
# - p: pending (2 cpu, created first); r: pending after a Retry of a check, with Kueue's
#   requeueState (count 3); e: admitted in other-queue and being evicted (Evicted, Preempted),
#   its Job still running with the node selector Kueue's admission set.
# Then admitd and the bridge start, and:
# - the ledger holds the five as workloadImported (by the bridge), under Kueue's names, with
#   Kueue's QuotaReserved/Admitted times (`get workloads -o json`), r's requeue count;
# - a and b are neither suspended nor released again: their Jobs' generation and spec, and
#   their pods' uids, are unchanged; no `pods released` of theirs is recorded and no fencing token
#   is written on them;
# - e is suspended, its pods go, `pods terminated` is reported with its imported token, and it
#   is readmitted and released by the bridge with the ledger's new token, from its own pod set
#   (its Workload's: without Kueue's node selector);
# - a restarted bridge imports nothing: the ledger's head does not move by any import;
# - a higher-priority Job (2 cpu) submitted afterwards preempts b, the workload Kueue reserved
#   most recently (Kueue's victim order), not a; b is suspended, its pods go, terminated, and the
#   preemptor runs;
# - p, then r are admitted in Kueue's order as capacity frees (a's, then p's Job deleted), each
#   released with the ledger's token;
# - `admitctl replay --verify` of the ledger passes.
#   tests/k8s/bridge_adopt_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries, KWOK or admit-k8s are not
# built. K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-adopt-test "$@"

readonly PRINCIPAL=admit-k8s
readonly NAMESPACE=default
# Kueue's times of the admitted workloads, in the past (the ledger takes none after its own
# clock): a reserved before b.
ago() { date -u -d "-$1 minutes" +%Y-%m-%dT%H:%M:%SZ; }
A_RESERVED="$(ago 50)" A_ADMITTED="$(ago 49)" B_RESERVED="$(ago 40)" B_ADMITTED="$(ago 38)"
E_RESERVED="$(ago 35)" E_EVICTED="$(ago 30)" PENDING_SINCE="$(ago 20)"
readonly A_RESERVED A_ADMITTED B_RESERVED B_ADMITTED E_RESERVED E_EVICTED PENDING_SINCE

step "admitd on TLS; the bridge's certificate has the bridge role alone"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }

step "the cluster with its KWOK nodes; Kueue's Job webhook gone, ours not installed yet"
kubeconfig="$("$cluster_sh" start --control-plane-only "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
kubectl get mutatingwebhookconfiguration admit-k8s -o json > "$dir/webhook.json"
kubectl delete mutatingwebhookconfiguration admit-k8s > /dev/null

step "what Kueue left: its definitions, Jobs and their Workloads with Kueue's status"
kubectl apply -f - > /dev/null <<'EOF'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 4}
      - {name: memory, nominalQuota: 36Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: other-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 2}
      - {name: memory, nominalQuota: 36Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: user-queue}
spec: {clusterQueue: cluster-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: other-lq}
spec: {clusterQueue: other-queue}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
EOF
# job_yaml NAME QUEUE PODS SUSPEND [PRIORITY_CLASS [NODE_SELECTOR]]: a Job of PODS pods of 1 cpu.
job_yaml() {
  cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: $NAMESPACE
  labels:
    kueue.x-k8s.io/queue-name: $2
$([[ -n "${5:-}" ]] && echo "    kueue.x-k8s.io/priority-class: $5")
spec:
  parallelism: $3
  completions: $3
  suspend: $4
  template:
    spec:
$([[ -n "${6:-}" ]] && echo "      nodeSelector: {$6}")
      containers:
      - name: main
        image: registry.k8s.io/pause:3.10
        resources:
          requests: {cpu: "1", memory: 100Mi}
      restartPolicy: Never
EOF
}
# kueue_name JOB UID: Kueue's name of the Job's Workload (GetWorkloadNameForOwnerWithGVK).
kueue_name() {
  echo "job-$1-$(printf 'Job\nbatch\n%s\n%s' "$1" "$2" | sha1sum | cut -c1-5)"
}
# kueue_workload JOB QUEUE PODS: creates the Workload Kueue made for JOB (owned by it, Kueue's
# job-uid label); prints its name.
kueue_workload() {
  local uid name
  uid="$(kubectl get job "$1" -n "$NAMESPACE" -o jsonpath='{.metadata.uid}')"
  name="$(kueue_name "$1" "$uid")"
  kubectl create -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata:
  name: $name
  namespace: $NAMESPACE
  labels: {kueue.x-k8s.io/job-uid: "$uid"}
  ownerReferences:
  - {apiVersion: batch/v1, kind: Job, name: $1, uid: "$uid", controller: true,
     blockOwnerDeletion: true}
spec:
  queueName: $2
  priority: 0
  podSets:
  - name: main
    count: $3
    template:
      spec:
        containers:
        - name: main
          image: registry.k8s.io/pause:3.10
          resources:
            requests: {cpu: "1", memory: 100Mi}
        restartPolicy: Never
EOF
  echo "$name"
}
# status WORKLOAD: Kueue's status write of stdin's YAML ({status: ...}; the status subresource).
status() {
  cat > "$dir/status.yaml"
  kubectl patch "workloads.v1beta2.kueue.x-k8s.io" "$1" -n "$NAMESPACE" --subresource=status \
    --type=merge --patch-file "$dir/status.yaml" > /dev/null
}
# condition TYPE STATUS REASON TIME [MESSAGE]: one of Kueue's conditions, as a YAML list item.
condition() {
  printf '  - {type: %s, status: "%s", reason: %s, message: "%s", lastTransitionTime: "%s"}\n' \
    "$1" "$2" "$3" "${5:-$3}" "$4"
}
# admitted_status CQ PODS RESERVED ADMITTED: Kueue's status of an admission (conditions follow).
admitted_status() {
  cat <<EOF
status:
  admission:
    clusterQueue: $1
    podSetAssignments:
    - name: main
      count: $2
      flavors: {cpu: default-flavor, memory: default-flavor}
      resourceUsage: {cpu: "$2", memory: $(( $2 * 100 ))Mi}
  conditions:
EOF
  condition QuotaReserved True QuotaReserved "$3"
  condition Admitted True Admitted "$4"
}
for j in a b; do job_yaml "$j" user-queue 2 false | kubectl create -f - > /dev/null; done
# e runs with the node selector Kueue's admission set (a flavor's node label; KWOK's nodes have
# it), which its Workload's pod set, its own, has not.
job_yaml e other-lq 1 false "" "kubernetes.io/os: linux" | kubectl create -f - > /dev/null
for j in p r; do job_yaml "$j" user-queue 2 true | kubectl create -f - > /dev/null; done
# Created in queue order: p before r; e's last.
wl_a="$(kueue_workload a user-queue 2)"; wl_b="$(kueue_workload b user-queue 2)"
wl_p="$(kueue_workload p user-queue 2)"; sleep 1.1; wl_r="$(kueue_workload r user-queue 2)"
wl_e="$(kueue_workload e other-lq 1)"
readonly wl_a wl_b wl_p wl_r wl_e
{ admitted_status cluster-queue 2 "$A_RESERVED" "$A_ADMITTED"
  condition PodsReady True Started "$A_ADMITTED"; } | status "$wl_a"
{ admitted_status cluster-queue 2 "$B_RESERVED" "$B_ADMITTED"
  condition PodsReady True Started "$B_ADMITTED"; } | status "$wl_b"
{ admitted_status other-queue 1 "$E_RESERVED" "$E_RESERVED"
  condition Evicted True Preempted "$E_EVICTED" "Preempted to accommodate a workload"; } \
  | status "$wl_e"
{ echo "status:"; echo "  conditions:"
  condition QuotaReserved False Pending "$PENDING_SINCE" "insufficient unused quota"; } \
  | status "$wl_p"
requeue_at="$(date -u -d '+20 seconds' +%Y-%m-%dT%H:%M:%SZ)"
status "$wl_r" <<EOF
status:
  conditions:
$(condition QuotaReserved False Pending "$PENDING_SINCE" "failed admission checks")
$(condition Requeued False Backoff "$PENDING_SINCE")
  admissionChecks:
  - {name: scan, state: Retry, message: "try later", lastTransitionTime: "$PENDING_SINCE"}
  requeueState: {count: 3, requeueAt: "$requeue_at"}
EOF
# pods_of JOB: the uids of its pods that are Running, sorted.
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" \
    -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.uid}{"\n"}{end}' | sort
}
running_pods() { [[ "$(pods_of "$1" | wc -l)" == "$2" ]]; }
for j in a b; do wait_until "Job $j does not run its 2 pods" running_pods "$j" 2; done
wait_until "Job e does not run its pod" running_pods e 1
# job_fingerprint JOB: what adoption must not change: generation, spec, annotations.
job_fingerprint() {
  kubectl get job "$1" -n "$NAMESPACE" -o json | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["metadata"]["generation"], json.dumps(j["spec"], sort_keys=True),
      json.dumps(j["metadata"].get("annotations", {}), sort_keys=True))'
}
for j in a b; do
  job_fingerprint "$j" > "$dir/job-$j.before"
  pods_of "$j" > "$dir/pods-$j.before"
done

step "admitd and the bridge start; our webhook installed (the switch-over)"
kubectl create -f "$dir/webhook.json" > /dev/null
start_bridge
# ledger_log: the ledger's events into ledger.json; events_of KIND [REPORT]: SEQUENCE WORKLOAD
# TOKEN ACTOR of each event of KIND (a pod report: of REPORT), "-" for none.
ledger_log() { ledger log -o json > "$dir/ledger.json"; }
events_of() {
  python3 - "$dir/ledger.json" "$@" <<'PY'
import json, sys
path, kind = sys.argv[1], sys.argv[2]
report = sys.argv[3] if len(sys.argv) > 3 else ""
for line in open(path):
    e = json.loads(line)["event"]
    body = e.get("body", {}).get(kind)
    if body is None:
        continue
    w = body.get("workload", {})
    if report and body.get("report", "released") != report:
        continue
    print(e["sequence"], w.get("name", ""), body.get("fencingToken") or "-", e.get("actor") or "-")
PY
}
all_imported() { ledger_log; [[ "$(events_of workloadImported | wc -l)" == 5 ]]; }
ledger_log
wait_until "the ledger did not import Kueue's 5 Workloads: $(events_of workloadImported)" \
  all_imported
[[ "$(events_of workloadImported | awk '{print $4}' | sort -u)" == "$PRINCIPAL" ]] \
  || fail "the imports are not the bridge's: $(events_of workloadImported)"
for w in "$wl_a" "$wl_b" "$wl_p" "$wl_r" "$wl_e"; do
  grep -q " $w " <<< "$(events_of workloadImported)" || fail "$w is not imported under Kueue's name"
done
[[ -z "$(events_of workloadSubmitted)" ]] \
  || fail "an adopted job was submitted anew: $(events_of workloadSubmitted)"

step "the ledger shows Kueue's times, and r's requeue state"
ledger get workloads -n "$NAMESPACE" -o json > "$dir/workloads.json"
python3 - "$dir/workloads.json" "$wl_a" "$A_RESERVED" "$A_ADMITTED" "$wl_b" "$B_RESERVED" \
  "$B_ADMITTED" "$wl_r" "$wl_p" > "$dir/times.out" 2>&1 <<'PY' || fail "$(cat "$dir/times.out")"
import json, sys
path, a, ar, aa, b, br, ba, r, p = sys.argv[1:]
items = {w["metadata"]["name"]: w for w in json.load(open(path))["items"]}
def cond(w, t):
    return next(c for c in w["status"]["conditions"] if c["type"] == t)
for name, reserved, admitted in ((a, ar, aa), (b, br, ba)):
    w = items[name]
    got = cond(w, "QuotaReserved")
    assert got["lastTransitionTime"] == reserved, (name, got)
    assert cond(w, "Admitted")["lastTransitionTime"] == admitted, (name, cond(w, "Admitted"))
assert items[r]["status"]["requeueState"]["count"] == 3, items[r]["status"]
assert items[p]["status"]["phase"] == "Pending", items[p]["status"]
PY

step "e, being evicted by Kueue: suspended, its pods gone, terminated (imported token), readmitted"
e_uid="$(kubectl get job e -n "$NAMESPACE" -o jsonpath='{.metadata.uid}')"
# terminated WORKLOAD UID: `pods terminated` of the imported admission (token UID/1), by the bridge.
terminated() {
  ledger_log
  grep -q " $1 $2/1 $PRINCIPAL" <<< "$(events_of podsReported terminated)"
}
wait_until "e's pods terminated with token $e_uid/1 not reported: $(events_of podsReported)" \
  terminated "$wl_e" "$e_uid"
# token_of JOB: SUSPEND/TOKEN of the Job.
token_of() {
  kubectl get job "$1" -n "$NAMESPACE" \
    -o jsonpath='{.spec.suspend}/{.metadata.annotations.admission-ledger\.io/fencing-token}'
}
released_e() { [[ "$(token_of e)" == "false/$e_uid/2" ]]; }
wait_until "e was not released again with token $e_uid/2: $(token_of e)" released_e
# Released from its own pod set (its Workload's), not on top of Kueue's admission.
selector_e() { kubectl get job e -n "$NAMESPACE" -o jsonpath='{.spec.template.spec.nodeSelector}'; }
[[ -z "$(selector_e)" ]] || fail "e was released with Kueue's node selector kept: $(selector_e)"

step "a and b: neither suspended nor released again, their pods untouched"
sleep 5
check_untouched() {
  local j
  for j in "$@"; do
    [[ "$(job_fingerprint "$j")" == "$(cat "$dir/job-$j.before")" ]] \
      || fail "Job $j changed: $(job_fingerprint "$j") (was $(cat "$dir/job-$j.before"))"
    [[ "$(pods_of "$j")" == "$(cat "$dir/pods-$j.before")" ]] || fail "Job $j's pods changed"
  done
  ledger_log
  ! grep -qE " ($wl_a|$wl_b) " <<< "$(events_of podsReported released)" \
    || fail "a release of an adopted Job was recorded: $(events_of podsReported released)"
}
check_untouched a b
ledger get workloads -n "$NAMESPACE" -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["metadata"]["name"] in sys.argv[1:]:
        assert w["status"]["phase"] == "Admitted", w["status"]' "$wl_a" "$wl_b" \
  || fail "a or b is not admitted in the ledger"
kubectl get "workloads.v1beta2.kueue.x-k8s.io" "$wl_a" -n "$NAMESPACE" \
  -o jsonpath='{.status.conditions[?(@.type=="Admitted")].status}' | grep -qx True \
  || fail "the Workload of a does not show Admitted"

step "the bridge restarted: it imports nothing again"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
ledger_log
imports_before="$(events_of workloadImported | wc -l)"
start_bridge
sleep 8
ledger_log
[[ "$(events_of workloadImported | wc -l)" == "$imports_before" ]] \
  || fail "a restarted bridge imported again: $(events_of workloadImported)"
check_untouched a b

step "a higher-priority Job preempts b, the newest reservation of Kueue's, not a"
job_yaml h user-queue 2 false high | kubectl create -f - > /dev/null
b_uid="$(kubectl get job b -n "$NAMESPACE" -o jsonpath='{.metadata.uid}')"
wait_until "b was not preempted and reported terminated: $(events_of evictionStarted)" \
  terminated "$wl_b" "$b_uid"
[[ "$(kubectl get job b -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "b is not suspended"
[[ -z "$(pods_of b)" ]] || fail "b's pods are still running"
running_h() { [[ "$(token_of h)" == false/* ]] && running_pods h 2; }
wait_until "h does not run: $(token_of h)" running_h
! grep -q " $wl_a " <<< "$(events_of evictionStarted)" \
  || fail "a was evicted: $(events_of evictionStarted)"
check_untouched a
# b waits now; out of the way of the order check.
kubectl delete job b -n "$NAMESPACE" --wait=false > /dev/null

step "as capacity frees, p then r are admitted (Kueue's order) and released"
kubectl delete job a -n "$NAMESPACE" --wait=false > /dev/null
released() { [[ "$(token_of "$1")" == false/* ]]; }
wait_until "p was not released after a's deletion: $(token_of p)" released p
[[ "$(token_of r)" == true/ ]] || fail "r was released before p's quota freed: $(token_of r)"
kubectl delete job p -n "$NAMESPACE" --wait=false > /dev/null
wait_until "r was not released after p's deletion: $(token_of r)" released r
ledger_log
p_admitted="$(events_of admitted | awk -v w="$wl_p" '$2 == w {print $1; exit}')"
r_admitted="$(events_of admitted | awk -v w="$wl_r" '$2 == w {print $1; exit}')"
(( p_admitted < r_admitted )) || fail "r admitted ($r_admitted) before p ($p_admitted)"

step "admitd stopped; replay --verify of its ledger passes"
kill -TERM "$bridge_pid" && wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kill -TERM "$admitd_pid" && wait "$admitd_pid" 2>/dev/null || true
admitd_pid=""
"$admitctl" --ledger "$dir/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || fail "replay --verify failed: $(cat "$dir/replay.out")"
echo "PASS: Kueue's 5 Workloads imported once under Kueue's names with Kueue's times; a and b" \
  "kept running untouched (no suspension, no release, pods unchanged); e's eviction completed" \
  "and e readmitted; a restart imported nothing; h preempted b (Kueue's newest reservation)," \
  "not a; p then r admitted as capacity freed; replay --verify passes" >&2
