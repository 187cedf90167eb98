#!/usr/bin/env bash
# admit-k8s forwards Kueue definitions from a real API server to admitd over TLS with its own
# client certificate (docs/k8s.md): what kubectl applies (v1beta2, and v1beta1 spellings) shows
# up in the ledger with the bridge as actor; the bridge's conversion webhook serves v1beta1
# objects as v1beta2 and back (spec.cohort as spec.cohortName, spec.parent as spec.parentName);
# a change is forwarded; what the ledger refuses is reported as a Kubernetes Event and as the
# condition Recorded=False (reason LedgerRefused) on the object, which turns True once a fixed
# object is recorded; a bridge killed with SIGKILL and restarted writes nothing for what it
# forwarded before; with admission fair sharing configured, a LocalQueue's usage that Kueue
# persisted in its status is forwarded as the ledger's seed and the ledger's usage is written
# back to the LocalQueues' status (read as v1beta2 and v1beta1); deletions are forwarded once,
# an in-use flavor or check only after the ClusterQueue that names it is gone; and it refuses to
# start while Kueue's controller manager holds its lease.
#   tests/k8s/bridge_definitions_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-bridge-test "$@"

readonly PRINCIPAL=admit-k8s
readonly cases_dir="$script_dir/crd_cases"

step "admitd on TLS, with a policy that gives the bridge's certificate the bridge role"
start_test_admitd "$admitd" "$top" "$PRINCIPAL"
readonly admitd_tls
ledger() { "$admitctl" --connect "unix:$dir/admitd.sock" "$@"; }
head_sequence() { ledger log | tail -n 1 | awk '{print $1}'; }

step "a control plane with our CRDs"
kubeconfig="$("$cluster_sh" start --control-plane-only "$dir/cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }

# field VERSION PLURAL NAME JSONPATH: a field of the object as VERSION serves it.
field() {
  kubectl get "$2.$1.kueue.x-k8s.io" "$3" -o "jsonpath=$4"
}
# recorded_condition PLURAL [-n NAMESPACE] NAME: status, reason and message of its Recorded
# condition.
recorded_condition() {
  kubectl get "$@" \
    -o jsonpath='{range .status.conditions[?(@.type=="Recorded")]}{.status} {.reason} {.message}{end}'
}

step "definitions applied with kubectl reach the ledger, with the bridge as actor"
kubectl apply -f "$cases_dir/accept-v1beta2-definitions.yaml" > /dev/null
start_bridge
kubectl apply -f "$cases_dir/accept-v1beta1-definitions.yaml" > /dev/null
# 6 objects in v1beta2, 4 in v1beta1 (ClusterQueue team-b keeps its v1beta1 spec.cohort).
readonly expected_definitions=10
definitions_by_bridge() { ledger log | grep -c "Defined  actor=$PRINCIPAL" || true; }
all_forwarded() { [[ "$(definitions_by_bridge)" == "$expected_definitions" ]]; }
wait_until "the ledger holds $(definitions_by_bridge) of the $expected_definitions definitions" all_forwarded
grep -q "\"msg\":\"connected to admitd\".*\"principal\":\"$PRINCIPAL\"" "$dir/bridge-1.log" \
  || fail "the bridge did not log its principal $PRINCIPAL"
queues="$(ledger get clusterqueues -o json)"
[[ "$queues" == *'"name": "team-a"'* && "$queues" == *'"name": "team-b"'* ]] \
  || fail "the ledger's ClusterQueues are not team-a and team-b: $queues"
# team-b was written in v1beta1 (spec.cohort) and must keep its cohort.
team_b="$(ledger get clusterqueues -o json | tr -d ' \n')"
[[ "$team_b" == *'"name":"team-b"},"spec":{"cohortName":"research"'* ]] \
  || fail "team-b lost its v1beta1 cohort on the way: $team_b"

step "the conversion webhook: v1beta1 objects read as v1beta2 and back"
# ClusterQueue team-b, written in v1beta1 with spec.cohort: v1beta2 says cohortName.
[[ "$(field v1beta2 clusterqueues team-b '{.spec.cohortName}|{.spec.cohort}')" == "research|" ]] \
  || fail "v1beta2 team-b is not spec.cohortName research: $(kubectl get clusterqueues.v1beta2.kueue.x-k8s.io team-b -o json)"
[[ "$(field v1beta1 clusterqueues team-b '{.spec.cohort}|{.spec.cohortName}')" == "research|" ]] \
  || fail "v1beta1 team-b is not spec.cohort research: $(kubectl get clusterqueues.v1beta1.kueue.x-k8s.io team-b -o json)"
# ClusterQueue team-a, written in v1beta2: v1beta1 says cohort.
[[ "$(field v1beta1 clusterqueues team-a '{.spec.cohort}|{.spec.cohortName}')" == "research|" ]] \
  || fail "v1beta1 team-a is not spec.cohort research: $(kubectl get clusterqueues.v1beta1.kueue.x-k8s.io team-a -o json)"
# Cohort research-b, written in v1beta1 with the early spec.parent: v1beta2 says parentName,
# v1beta1 gives back what was written (spec.parent).
[[ "$(field v1beta2 cohorts research-b '{.spec.parentName}|{.spec.parent}')" == "company|" ]] \
  || fail "v1beta2 research-b is not spec.parentName company: $(kubectl get cohorts.v1beta2.kueue.x-k8s.io research-b -o json)"
[[ "$(field v1beta1 cohorts research-b '{.spec.parent}|{.spec.parentName}')" == "company|" ]] \
  || fail "v1beta1 research-b is not spec.parent company as written: $(kubectl get cohorts.v1beta1.kueue.x-k8s.io research-b -o json)"
cohorts="$(ledger get cohorts -o json | tr -d ' \n')"
[[ "$cohorts" == *'"name":"research-b"},"spec":{"parentName":"company"'* ]] \
  || fail "research-b lost its parent on the way: $cohorts"
# The v1beta1 round trip is lossless: what v1beta1 serves is what was applied (no diff).
kubectl diff -f "$cases_dir/accept-v1beta1-definitions.yaml" > "$dir/v1beta1.diff" 2>&1 \
  || { cat "$dir/v1beta1.diff" >&2; fail "v1beta1 serves the v1beta1 definitions otherwise than applied"; }

step "a change is forwarded"
kubectl patch clusterqueue team-a --type=merge -p '{"spec":{"queueingStrategy":"BestEffortFIFO"}}' > /dev/null
strategy_changed() {
  ledger get clusterqueues -o json | tr -d ' \n' | grep -q '"name":"team-a"},"spec":{"cohortName":"research","queueingStrategy":"BestEffortFIFO"'
}
wait_until "team-a's new queueingStrategy is not in the ledger" strategy_changed

step "what the ledger has is Recorded=True on the object"
recorded_true() { [[ "$(recorded_condition "$@")" == "True Recorded "* ]]; }
for object in "clusterqueues team-a" "clusterqueues team-b" "cohorts research-b" \
    "localqueues -n default team-b-queue"; do
  # shellcheck disable=SC2086  # plural, (namespace) and name
  wait_until "no Recorded=True condition on $object: $(recorded_condition $object)" recorded_true $object
done

step "what the ledger refuses is reported on the object: an Event and Recorded=False"
kubectl apply -f "$cases_dir/ledger-only-lending-limit-above-nominal.yaml" > /dev/null
refusal_reported() {
  kubectl get events --field-selector involvedObject.name=lends-too-much,reason=LedgerRefused \
    -o jsonpath='{.items[*].message}' | grep -q "lendingLimit"
}
wait_until "no LedgerRefused event on ClusterQueue lends-too-much" refusal_reported
# Every ledger-only case: what a CRD cannot check, the ledger refuses, the object says so.
refused_condition() { [[ "$(recorded_condition "$1" "$2")" == "False LedgerRefused "*"$3"* ]]; }
kubectl apply -f "$cases_dir/ledger-only-flavor-in-two-groups.yaml" \
  -f "$cases_dir/ledger-only-admissioncheck-annotation.yaml" > /dev/null
wait_until "no Recorded=False LedgerRefused (lendingLimit) on ClusterQueue lends-too-much: $(recorded_condition clusterqueues lends-too-much)" \
  refused_condition clusterqueues lends-too-much lendingLimit
wait_until "no Recorded=False LedgerRefused on ClusterQueue flavor-twice: $(recorded_condition clusterqueues flavor-twice)" \
  refused_condition clusterqueues flavor-twice default-flavor
wait_until "no Recorded=False LedgerRefused on AdmissionCheck odd-timeout: $(recorded_condition admissionchecks odd-timeout)" \
  refused_condition admissionchecks odd-timeout on-timeout
# Fixed, it is recorded, and the condition says so with the sequence.
kubectl patch clusterqueue lends-too-much --type=json \
  -p '[{"op":"replace","path":"/spec/resourceGroups/0/flavors/0/resources/0/lendingLimit","value":"1Gi"}]' > /dev/null
recorded_at_sequence() {
  [[ "$(recorded_condition clusterqueues lends-too-much)" == "True Recorded recorded in the admission ledger at sequence "[0-9]* ]]
}
wait_until "the fixed lends-too-much is not Recorded=True with its sequence: $(recorded_condition clusterqueues lends-too-much)" \
  recorded_at_sequence

step "admission fair sharing: Kueue's persisted usage is forwarded, the ledger's written back"
ledger configure --admission-fair-sharing-half-life 1h > /dev/null
# Kueue's LocalQueue status, persisted before the ledger took over: the bridge reads it when it
# forwards the LocalQueue (here at its start).
kill -TERM "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: afs-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: afs-cq}
spec:
  namespaceSelector: {}
  admissionScope: {admissionMode: UsageBasedAdmissionFairSharing}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: afs-flavor
      resources:
      - {name: cpu, nominalQuota: 4}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: default, name: afs-seeded}
spec: {clusterQueue: afs-cq}
EOF
kubectl patch localqueue afs-seeded -n default --subresource=status --type=merge --field-manager=kueue \
  -p '{"status":{"fairSharing":{"weightedShare":0,"admissionFairSharingStatus":{"consumedResources":{"cpu":"2500m"},"lastUpdate":"2026-01-01T00:00:00Z"}}}}' \
  > /dev/null
start_bridge
# A LocalQueue without a persisted usage, in v1beta1 (the bridge converts it).
kubectl apply -f - > /dev/null <<EOF
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {namespace: default, name: afs-fresh}
spec: {clusterQueue: afs-cq}
EOF
# afs_status NAME: "consumedResources lastUpdate" of LocalQueue default/NAME in the JSON on stdin
# (a List, or the object), lastUpdate to the second (the API server keeps no fraction).
afs_status() {
  python3 -c '
import json, sys
doc = json.load(sys.stdin)
for item in doc.get("items", [doc]):
    if item["metadata"]["name"] == sys.argv[1]:
        afs = item.get("status", {}).get("fairSharing", {}).get("admissionFairSharingStatus")
        if afs:
            print(json.dumps(afs.get("consumedResources"), sort_keys=True), afs["lastUpdate"][:19])' "$1"
}
ledger_afs() { ledger get localqueues -o json | afs_status "$1"; }
cluster_afs() { kubectl get "localqueues.$1.kueue.x-k8s.io" -n default "$2" -o json | afs_status "$2"; }
seed_in_ledger() { [[ "$(ledger_afs afs-seeded)" == '{"cpu": "2500m"} '* ]]; }
wait_until "the ledger did not start afs-seeded from Kueue's usage: $(ledger_afs afs-seeded)" seed_in_ledger
written_back() {
  local want
  want="$(ledger_afs "$1")"
  [[ -n "$want" && "$(cluster_afs v1beta2 "$1")" == "$want" && "$(cluster_afs v1beta1 "$1")" == "$want" ]]
}
for name in afs-seeded afs-fresh; do
  wait_until "LocalQueue $name's status.fairSharing is not the ledger's ($(ledger_afs $name)): v1beta2 $(cluster_afs v1beta2 $name), v1beta1 $(cluster_afs v1beta1 $name)" \
    written_back "$name"
done
[[ "$(ledger_afs afs-fresh)" == '{} '* ]] || fail "afs-fresh has usage it was never given: $(ledger_afs afs-fresh)"

step "a bridge killed with SIGKILL and restarted writes nothing it wrote before"
kill -KILL "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
before="$(head_sequence)"
start_bridge
bridge_synced() { grep -q '"worker count"' "$dir/bridge-$bridge_runs.log"; }
wait_until "the restarted bridge did not start its controllers" bridge_synced
# A change made after the restart: once it is in the ledger, the resync of every object the
# bridge had already forwarded is behind us too (the same informers, listed first).
kubectl patch resourceflavor h100-eu --type=merge -p '{"spec":{"nodeLabels":{"cloud.example.com/gpu":"h100","topology.kubernetes.io/region":"eu-north"}}}' > /dev/null
flavor_changed() { ledger log | tail -n 3 | grep -q "flavorDefined  actor=$PRINCIPAL"; }
wait_until "the changed ResourceFlavor is not in the ledger" flavor_changed
sleep 2
after="$(head_sequence)"
((after == before + 1)) \
  || fail "the restarted bridge wrote $((after - before)) events, not 1: $(ledger log --from "$((before + 1))")"

step "deletions are forwarded; what a ClusterQueue still names stays until it is deleted"
# The deletions the ledger holds, as KIND/NAMESPACE/NAME lines, and the bridge's finalizers.
deletions() {
  ledger log -o json | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    d = e["event"].get("body", {}).get("objectDeleted")
    if d is not None and e["event"].get("actor") == sys.argv[1]:
        print("%s/%s/%s" % (d.get("kind"), d.get("namespace", ""), d.get("name")))' "$PRINCIPAL"
}
deleted_in_ledger() { deletions | grep -qx "$1"; }
gone() { ! kubectl get "$@" > /dev/null 2>&1; }
[[ "$(kubectl get resourceflavor h100-eu -o jsonpath='{.metadata.finalizers}')" == *admission-ledger.io/ledger* ]] \
  || fail "the bridge put no finalizer on ResourceFlavor h100-eu"
kubectl delete localqueue team-a-queue -n default --wait=false > /dev/null
wait_until "the LocalQueue's deletion is not in the ledger" deleted_in_ledger "LocalQueue/default/team-a-queue"
wait_until "LocalQueue team-a-queue is still in the cluster" gone localqueue team-a-queue -n default
# h100-eu and the check are named by ClusterQueue team-a: the ledger refuses, the objects stay.
kubectl delete resourceflavor h100-eu --wait=false > /dev/null
kubectl delete admissioncheck capacity --wait=false > /dev/null
in_use_reported() {
  kubectl get events --field-selector "involvedObject.name=$1,reason=InUse" \
    -o jsonpath='{.items[*].message}' | grep -q "in use by ClusterQueue team-a"
}
wait_until "no InUse event on ResourceFlavor h100-eu" in_use_reported h100-eu
wait_until "no InUse event on AdmissionCheck capacity" in_use_reported capacity
kubectl get resourceflavor h100-eu > /dev/null || fail "ResourceFlavor h100-eu went while team-a names it"
! deleted_in_ledger "ResourceFlavor//h100-eu" || fail "the ledger deleted h100-eu while team-a names it"
kubectl delete clusterqueue team-a --wait=false > /dev/null
wait_until "ClusterQueue team-a's deletion is not in the ledger" deleted_in_ledger "ClusterQueue//team-a"
wait_until "ClusterQueue team-a is still in the cluster" gone clusterqueue team-a
wait_until "h100-eu's deletion is not in the ledger after team-a's" deleted_in_ledger "ResourceFlavor//h100-eu"
wait_until "the check's deletion is not in the ledger after team-a's" deleted_in_ledger "AdmissionCheck//capacity"
wait_until "ResourceFlavor h100-eu is still in the cluster" gone resourceflavor h100-eu
wait_until "AdmissionCheck capacity is still in the cluster" gone admissioncheck capacity
[[ "$(ledger get clusterqueues -o json)" != *'"name": "team-a"'* ]] || fail "the ledger still lists team-a"
# Each deletion once, though the in-use ones were tried every 10 s.
(($(deletions | wc -l) == 4)) || fail "the ledger holds $(deletions | wc -l) deletions, not 4: $(deletions)"

step "the bridge refuses to start while Kueue's controller manager holds its lease"
kill -TERM "$bridge_pid"
wait "$bridge_pid" 2>/dev/null || true
bridge_pid=""
kubectl create namespace kueue-system > /dev/null
kubectl apply -f - > /dev/null <<EOF
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: c1f6bfd2.kueue.x-k8s.io
  namespace: kueue-system
spec:
  holderIdentity: kueue-controller-manager-0
  leaseDurationSeconds: 15
  renewTime: "$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)"
EOF
status=0
timeout 60 "$admit_k8s" --kubeconfig "$kubeconfig" --admitd "$admitd_tls" \
  --admitd-cert "$dir/pki/$PRINCIPAL.pem" --admitd-key "$dir/pki/$PRINCIPAL.key" \
  --admitd-ca "$dir/pki/ca.pem" --leader-elect=false > "$dir/bridge-kueue.log" 2>&1 || status=$?
((status == 1)) || fail "with Kueue's lease held, the bridge exited $status, not 1"
grep -q "Kueue's controller manager runs in this cluster" "$dir/bridge-kueue.log" \
  || fail "the bridge did not say why it refused: $(cat "$dir/bridge-kueue.log")"

echo "PASS: $expected_definitions definitions forwarded by $PRINCIPAL, v1beta1 converted to v1beta2 and back, a change, refusals reported (Event, Recorded=False) and a fix recorded (Recorded=True), admission fair sharing's usage seeded and written back, a restart that wrote nothing twice, 4 deletions (2 held while in use), Kueue's lease respected"
