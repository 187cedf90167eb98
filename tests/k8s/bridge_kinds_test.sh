#!/usr/bin/env bash
# The kinds the ledger governs beside batch/v1 Jobs (docs/k8s.md, "Jobs"), on the whole local
# cluster of `ops/k8s/cluster.sh start` (control plane, kube-scheduler, the JobSet controller,
# KWOK nodes of ops/k8s/nodes/default.yaml, admitd, the bridge):
# - the example JobSet (ops/k8s/examples/gpu-jobset.yaml: a leader of 1 CPU pod, 2 workers of 8
#   GPUs) is held suspended by the webhook, submitted as one workload jobset-NAME with two pod
#   sets (leader 1, workers 2), admitted, released with each pod set's flavor on its pod template
#   and the ledger's token on the JobSet and every pod; its pods run only on nodes of the
#   admitted flavors, it completes, the ledger records released, ready and finished with that
#   token, and `billing report` counts the workers' GPU-seconds (both pod sets' pods billed) as
#   the pods' run time within the scheduling slack;
# - priority within a ClusterQueue of 16 H100 GPUs (withinClusterQueue LowerPriority): a
#   low-priority JobSet of 16 GPUs runs; a second one stays suspended with the ledger's pending
#   reason on its Workload; a high-priority one preempts the first: it is suspended, its pods go,
#   the ledger records `pods terminated` before the quota's release, and the high-priority
#   JobSet runs;
# - no partial admission: a JobSet whose Job template carries kueue.x-k8s.io/job-min-parallelism
#   is refused by the ledger (a LedgerRefused Event on it; the JobSet controller keeps replicated
#   jobs' pod counts immutable, so fewer pods could never run) and stays suspended;
# - a Workload object created with `kubectl create -f` (no owner: Kueue's contract for workload
#   owners, the test playing the owner) is submitted and admitted, its status shows the
#   admission (after `pods released` is in the ledger); preempted by a higher-priority one, it
#   shows Evicted, and the ledger releases its quota only after the owner cleared its
#   reservation (`pods terminated`); the owner's Finished condition finishes the other in the
#   ledger;
# - `replay --verify` of the ledger passes.
#   tests/k8s/bridge_kinds_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-bridge-kinds-test "$@"

readonly NAMESPACE=default
readonly examples_dir="$top/ops/k8s/examples"
readonly cluster="$dir/cluster"
readonly H100=NVIDIA-H100-80GB-HBM3
readonly JOBSET_UID_LABEL=jobset.sigs.k8s.io/jobset-uid
readonly TOKEN_ANNOTATION=admission-ledger.io/fencing-token
# How far billing's used time may exceed the pods' own run time, per pod (as pods_e2e_test.sh).
readonly BILLING_SLACK_SECONDS_PER_POD=20

step "cluster.sh start: control plane, scheduler, JobSet controller, KWOK nodes, admitd, bridge"
kubeconfig="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
ledger() { "$admitctl" --connect "unix:$cluster/admitd.sock" "$@"; }
applied() { kubectl apply -f "$1" > "$dir/apply.out" 2>&1 || { cat "$dir/apply.out" >&2; false; }; }
wait_until "kubectl apply of the GPU flavors" applied "$examples_dir/gpu-flavors.yaml"
governs_jobsets() { grep -q '"msg":"governing","kind":"jobset.x-k8s.io/v1alpha2, Kind=JobSet"' \
  "$cluster/admit-k8s.log"; }
wait_until "the bridge governs JobSets" governs_jobsets

# create_jobset FILE RUNTIME [JSONPATH]: creates the JobSet of FILE with that simulated runtime;
# prints JSONPATH of the object as created (default: its name).
create_jobset() {
  local path="${3:-}"
  [[ -n "$path" ]] || path='{.metadata.name}'
  sed "s/simulated-runtime: 60s/simulated-runtime: $2/" "$1" | kubectl create -f - -o jsonpath="$path"
}
# jobset_field NAME JSONPATH
jobset_field() { kubectl get jobset "$1" -n "$NAMESPACE" -o jsonpath="$2"; }
completed() {
  [[ "$(jobset_field "$1" '{.status.conditions[?(@.type=="Completed")].status}')" == True ]]
}
# pods_of NAME: "POD REPLICATED-JOB NODE PHASE TOKEN STARTED FINISHED" per pod of the JobSet.
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "$JOBSET_UID_LABEL=$(jobset_field "$1" '{.metadata.uid}')" \
    -o json | python3 -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    t = (p["status"].get("containerStatuses") or [{}])[0].get("state", {}).get("terminated", {})
    print(p["metadata"]["name"], p["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"],
          p["spec"].get("nodeName", "-"), p["status"]["phase"],
          p["metadata"].get("annotations", {}).get(sys.argv[1], "-"),
          t.get("startedAt", "-"), t.get("finishedAt", "-"))' "$TOKEN_ANNOTATION"
}
# events TYPE: the bodies of the ledger's events of TYPE, one JSON object per line.
events() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    if e["type"] == sys.argv[1]:
        print(json.dumps(e["event"]["body"][sys.argv[1]]))' "$1"
}
# reports WORKLOAD: the ledger's pod reports of WORKLOAD, "REPORT TOKEN" in order.
reports() {
  events podsReported | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["workload"]["name"] == sys.argv[1]:
        print(r.get("report", "released"), r.get("fencingToken", ""))' "$1"
}
# token_of WORKLOAD: the workload's fencing token in the ledger ("" when not admitted).
token_of() {
  ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["metadata"]["name"] == sys.argv[1]:
        print(w.get("status", {}).get("fencingToken", ""))' "$1"
}
phase_of() {
  ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if w["metadata"]["name"] == sys.argv[1]:
        print(w.get("status", {}).get("phase", ""))' "$1"
}
has_phase() { [[ "$(phase_of "$1")" == "$2" ]]; }

step "the example JobSet: held, admitted as one workload of two pod sets, released, completed"
# The API server may call the bridge's JobSet webhook only a moment after cluster.sh saw the
# bridge ready (its webhook configuration reaches the API server's informer late under load): a
# server-side dry run, which runs the mutating webhooks and stores nothing, shows when it does.
for _ in $(seq 60); do
  dry="$(kubectl create --dry-run=server -f "$examples_dir/gpu-jobset.yaml" \
    -o jsonpath='{.spec.suspend}' 2>/dev/null || true)"
  [[ "$dry" == true ]] && break
  sleep 0.5
done
[[ "$dry" == true ]] || fail "the bridge's JobSet webhook did not suspend a dry-run JobSet in 30 s"
# The object as created (after the webhooks): the ledger may admit and the bridge release it
# before a later read.
read -r name created_suspended <<< "$(create_jobset "$examples_dir/gpu-jobset.yaml" 20s \
  '{.metadata.name} {.spec.suspend}')"
workload="jobset-$name"
[[ "$created_suspended" == true ]] || fail "JobSet $name was not created suspended"
wait_until "the ledger admits $workload" has_phase "$workload" Admitted
podsets="$(kubectl get workload "$workload" -n "$NAMESPACE" \
  -o jsonpath='{range .spec.podSets[*]}{.name}={.count} {end}')"
[[ "$podsets" == "leader=1 workers=2 " ]] || fail "Workload $workload has pod sets '$podsets'"
wait_until "JobSet $name completes" completed "$name"
token="$(jobset_field "$name" "{.metadata.annotations['admission-ledger\\.io/fencing-token']}")"
[[ -n "$token" ]] || fail "JobSet $name carries no fencing token"
pods_of "$name" > "$dir/example-pods.txt"
cat "$dir/example-pods.txt" >&2
python3 - "$dir/example-pods.txt" "$token" <<'PY' || fail "the example's pods"
import sys
lines = [l.split() for l in open(sys.argv[1])]
roles = sorted(l[1] for l in lines)
assert roles == ["leader", "workers", "workers"], roles
for pod, role, node, phase, token, start, end in lines:
    assert phase == "Succeeded", (pod, phase)
    assert token == sys.argv[2], (pod, token)
    if role == "workers":
        assert node.startswith("h100-"), (pod, node)
PY
wait_until "the ledger records the finished report" has_phase "$workload" Finished
[[ "$(reports "$workload")" == "released $token"$'\n'"ready $token"$'\n'"finished $token" ]] \
  || fail "the ledger's reports of $workload: $(reports "$workload")"
# Both workers' GPU-seconds: billing against the pods' own run time.
run="$(python3 - "$dir/example-pods.txt" <<'PY'
import sys
from datetime import datetime
f = lambda s: datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
print(int(sum(8 * (f(l.split()[6]) - f(l.split()[5])).total_seconds()
              for l in open(sys.argv[1]) if l.split()[1] == "workers")))
PY
)"
billed="$(ledger billing report --by namespace --by flavor -o json | python3 -c '
import json, sys
print(int(sum(float(r["used"]) for r in json.load(sys.stdin)["rows"]
              if r.get("flavor") == "h100" and r.get("resource") == "nvidia.com/gpu")))')"
echo "  workers ran $run GPU-seconds; billing counts $billed" >&2
(( billed >= run && billed <= run + 2 * 8 * BILLING_SLACK_SECONDS_PER_POD )) \
  || fail "billing's $billed GPU-seconds against the pods' $run"

step "priority: a low-priority JobSet runs, a second waits, a high-priority one preempts the first"
kubectl create namespace prio > /dev/null
cat > "$dir/prio.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: low}
value: 100
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: prio}
spec:
  namespaceSelector: {}
  preemption: {withinClusterQueue: LowerPriority}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 400}
      - {name: memory, nominalQuota: 3600Gi}
      - {name: nvidia.com/gpu, nominalQuota: 16}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: prio, name: prio}
spec: {clusterQueue: prio}
YAML
wait_until "kubectl apply of the priority setup" applied "$dir/prio.yaml"
# in_prio PRIORITY RUNTIME: the example JobSet on stdin, moved to LocalQueue prio of namespace
# prio with that WorkloadPriorityClass and simulated runtime.
in_prio() {
  sed -e "s/simulated-runtime: 60s/simulated-runtime: $2/" \
      -e "s/namespace: default/namespace: prio/" \
      -e "s|kueue.x-k8s.io/queue-name: gpu-queue|kueue.x-k8s.io/queue-name: prio\n\
    kueue.x-k8s.io/priority-class: $1|"
}
# prio_jobset PRIORITY RUNTIME: a JobSet in namespace prio of 2 workers of 8 H100 GPUs.
prio_jobset() {
  in_prio "$1" "$2" < "$examples_dir/gpu-jobset.yaml" \
    | kubectl create -f - -o jsonpath='{.metadata.name}'
}
pkubectl() { kubectl -n prio "$@"; }
low="$(prio_jobset low 600s)"
wait_until "the ledger admits jobset-$low" has_phase "jobset-$low" Admitted
uid_of() { pkubectl get jobset "$1" -o jsonpath='{.metadata.uid}'; }
running() {
  [[ "$(pkubectl get pods -l "$JOBSET_UID_LABEL=$(uid_of "$1")" \
    --field-selector=status.phase=Running -o name | wc -l)" == "$2" ]]
}
wait_until "jobset-$low runs its 3 pods" running "$low" 3
waiting="$(prio_jobset low 600s)"
wait_until "jobset-$waiting is pending in the ledger" has_phase "jobset-$waiting" Pending
pending_reason() { pkubectl get workload "jobset-$waiting" \
  -o jsonpath='{.status.conditions[?(@.type=="QuotaReserved")].message}' | grep -q "insufficient"; }
wait_until "Workload jobset-$waiting shows the ledger's pending reason" pending_reason
[[ "$(pkubectl get jobset "$waiting" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "JobSet $waiting runs without an admission"
high="$(prio_jobset high 20s)"
wait_until "jobset-$high is admitted" has_phase "jobset-$high" Admitted
[[ "$(pkubectl get jobset "$low" -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "the preempted JobSet $low is not suspended"
no_pods() { [[ -z "$(pkubectl get pods -l "$JOBSET_UID_LABEL=$(uid_of "$1")" -o name)" ]]; }
wait_until "the preempted JobSet's pods are gone" no_pods "$low"
# The ledger's order: low's `pods terminated` before its quota's release, before high's admission.
ledger log -o json > "$dir/ledger.json"
python3 - "$dir/ledger.json" "jobset-$low" "jobset-$high" <<'PY' || fail "the ledger's order"
import json, sys
events = [json.loads(l) for l in open(sys.argv[1])]
def first(kind, name, report=None):
    for e in events:
        body = e["event"]["body"].get(kind)
        if body is not None and body["workload"]["name"] == name and \
           (report is None or body.get("report", "released") == report):
            return e["sequence"]
    sys.exit("no %s of %s" % (kind, name))
preempted = first("preempted", sys.argv[2])
terminated = first("podsReported", sys.argv[2], "terminated")
released = [e["sequence"] for e in events if "quotaReleased" in e["event"]["body"]
            and e["event"]["body"]["quotaReleased"]["workload"]["name"] == sys.argv[2]]
admitted = first("admitted", sys.argv[3])
assert preempted < terminated < min(r for r in released if r > preempted) <= admitted, \
    (preempted, terminated, released, admitted)
PY
# The two low-priority JobSets go (their workloads deleted in the ledger).
pkubectl delete jobset "$low" "$waiting" --wait=false > /dev/null
completed_in_prio() { [[ "$(pkubectl get jobset "$1" \
  -o jsonpath='{.status.conditions[?(@.type=="Completed")].status}')" == True ]]; }
wait_until "the high-priority JobSet completes" completed_in_prio "$high"

step "no partial admission: a JobSet that asks for one is refused by the ledger and stays held"
# (The JobSet controller's webhook keeps replicated jobs' pod counts immutable: fewer pods could
# never run, so the ledger's parser refuses kueue.x-k8s.io/job-min-parallelism on a JobSet.)
cat > "$dir/partial.yaml" <<'YAML'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: partial
  namespace: prio
  labels: {kueue.x-k8s.io/queue-name: prio, kueue.x-k8s.io/priority-class: high}
spec:
  replicatedJobs:
  - name: workers
    replicas: 1
    template:
      metadata:
        annotations: {kueue.x-k8s.io/job-min-parallelism: "1"}
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            containers:
            - name: trainer
              image: registry.k8s.io/pause:3.10
              resources:
                requests: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "8"}
                limits: {nvidia.com/gpu: "8"}
            restartPolicy: Never
YAML
pkubectl create -f "$dir/partial.yaml" > /dev/null
refused() {
  pkubectl get events --field-selector involvedObject.name=partial,reason=LedgerRefused \
    -o jsonpath='{.items[*].message}' | grep -q "a JobSet cannot be admitted partially"
}
wait_until "the ledger's refusal shown on JobSet partial" refused
[[ "$(pkubectl get jobset partial -o jsonpath='{.spec.suspend}')" == true ]] \
  || fail "the refused JobSet runs"
[[ -z "$(phase_of jobset-partial)" ]] || fail "the refused JobSet reached the ledger"

step "Workload objects their creator owns: admitted, evicted on the owner's word, finished"
# owned_workload NAME PRIORITY: a Workload of 8 H100 GPUs in LocalQueue prio, without an owner.
owned_workload() {
  cat <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: prio}
spec:
  queueName: prio
  priorityClassRef: {group: kueue.x-k8s.io, kind: WorkloadPriorityClass, name: $2}
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - name: c
          image: registry.k8s.io/pause:3.10
          resources: {requests: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "8"}}
YAML
}
# The queue to the owned Workloads alone.
pkubectl delete jobset --all --wait=false > /dev/null
# (Their finalizer holds each until its deletion is in the ledger.)
drained() { [[ -z "$(pkubectl get jobsets -o name)" ]]; }
wait_until "the JobSets of namespace prio gone" drained
owned_workload owned-low low | pkubectl create -f - > /dev/null
wait_until "owned-low is admitted" has_phase owned-low Admitted
shows_admitted() {
  [[ "$(pkubectl get workload "$1" \
    -o jsonpath='{.status.conditions[?(@.type=="Admitted")].status}')" == True ]] &&
    [[ -n "$(pkubectl get workload "$1" -o jsonpath='{.status.admission}')" ]]
}
wait_until "Workload owned-low shows its admission" shows_admitted owned-low
[[ "$(reports owned-low)" == "released $(token_of owned-low)" ]] \
  || fail "owned-low's reports before its admission was shown: $(reports owned-low)"
owned_workload owned-high high | pkubectl create -f - > /dev/null
shows_evicted() {
  [[ "$(pkubectl get workload owned-low \
    -o jsonpath='{.status.conditions[?(@.type=="Evicted")].status}')" == True ]]
}
wait_until "Workload owned-low shows Evicted" shows_evicted
sleep 2
has_phase owned-low Evicting \
  || fail "owned-low's quota released before its owner cleared it: $(phase_of owned-low)"
# The owner stops its pods and clears the reservation, as Kueue's job controllers do.
pkubectl patch workload owned-low --subresource=status --type=json \
  -p '[{"op":"remove","path":"/status/admission"}]' > /dev/null
wait_until "owned-high is admitted once owned-low's reservation is cleared" \
  has_phase owned-high Admitted
[[ "$(reports owned-low | tail -n 1)" == "terminated "* ]] \
  || fail "owned-low's reports: $(reports owned-low)"
wait_until "Workload owned-high shows its admission" shows_admitted owned-high
pkubectl patch workload owned-high --subresource=status --type=json -p '[{"op":"add",
  "path":"/status/conditions/-","value":{"type":"Finished","status":"True","reason":"ByOwner",
  "message":"the owner finished it","lastTransitionTime":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'"}}]' \
  > /dev/null
wait_until "the ledger finishes owned-high" has_phase owned-high Finished

step "replay --verify"
"$cluster_sh" stop "$cluster"
"$admitctl" --ledger "$cluster/ledger" replay --verify > "$dir/replay.out" 2>&1 \
  || { cat "$dir/replay.out" >&2; fail "replay --verify"; }
echo "PASS"
