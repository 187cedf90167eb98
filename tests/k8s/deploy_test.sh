#!/usr/bin/env bash
# The deployment (ops/deploy/, docs/k8s.md "Deployment") and the whole local cluster of
# `ops/k8s/cluster.sh start` (control plane, admitd and the bridge), against a real API server:
# - `cluster.sh start` brings up etcd, the API server, the controller manager, admitd and the
#   bridge, the latter as ops/deploy's service account (its token, its RBAC and nothing more);
# - `kubectl apply --dry-run=server -k ops/deploy` passes for every object, and creates nothing;
#   the objects as the server would store them say what the bridge and admitd need (webhook on
#   labelled Job CREATE only, failurePolicy Fail, sideEffects None, the Services and ports the
#   other objects name, the ledger on the volume claim); admitd accepts the ConfigMap's policy;
# - broken copies of the manifests are refused by the server, naming the field, and by the
#   test's own checks;
# - RBAC: `kubectl auth can-i --as` the bridge's service account: it may do what the bridge does
#   and not, for instance, read secrets or delete pods;
# - Kueue's quick-start setup and sample Job, with nothing started by the test itself: the Job is
#   created suspended, then unsuspended with the ledger's token; admitctl over TLS with the
#   cluster's admitctl certificate shows the submission by admit-k8s; the bridge was never
#   refused by RBAC;
# - Kueue's visibility API through the API server (kubectl get --raw): pending workloads of a
#   ClusterQueue and a LocalQueue as the ledger orders them, in Kueue's shape, paged; NotFound and
#   Forbidden as the API server words them, and a Role that grants one LocalQueue's; spec.active
#   patched by kubectl deactivates a workload in the ledger, and admitctl resume shows in it;
# - stop stops every process (bridge and admitd first) and the ledger left verifies.
#   tests/k8s/deploy_test.sh ADMITCTL ADMITD ADMIT_K8S
# Exits 77 (ctest's SKIP_RETURN_CODE) when the Kubernetes binaries or admit-k8s are not built.
# K8S_TEST_KEEP_DIR=1 keeps the test's folder.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-deploy-test "$@"

readonly NAMESPACE=default
readonly BRIDGE_NAMESPACE=admission-ledger
readonly BRIDGE_USER=system:serviceaccount:$BRIDGE_NAMESPACE:admit-k8s
readonly deploy_dir="$top/ops/deploy"
readonly examples_dir="$top/../shared/kueue-examples"
readonly cluster="$dir/cluster"

step "cluster.sh start: the control plane, admitd and the bridge"
started_at=$SECONDS
kubeconfig="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
start_seconds=$((SECONDS - started_at))
echo "started in ${start_seconds}s" >&2
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
[[ "$kubeconfig" == "$cluster/admin.kubeconfig" ]] || fail "start printed '$kubeconfig'"
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller \
    admitd admit-k8s; do
  [[ -s "$cluster/$name.pid" ]] && kill -0 "$(<"$cluster/$name.pid")" \
    || fail "$name does not run after start"
done
[[ -s "$cluster/admitd.address" ]] || fail "start wrote no admitd.address"
readonly admitd_address="$(<"$cluster/admitd.address")"
[[ "$admitd_address" == tls:127.0.0.1:* ]] || fail "admitd.address is '$admitd_address'"
# admitctl as the cluster's admitctl principal, over TLS, as cluster.sh --help documents.
ledger() {
  "$admitctl" --connect "$admitd_address" --cert "$cluster/pki/admitctl.pem" \
    --key "$cluster/pki/admitctl.key" --ca "$cluster/pki/ca.pem" "$@"
}
ledger verify > "$dir/verify-tls.out" 2>&1 \
  || fail "admitctl over TLS with the cluster's admitctl certificate: $(cat "$dir/verify-tls.out")"
bridge_user="$("$kubectl_bin" --kubeconfig "$cluster/admit-k8s.kubeconfig" auth whoami \
  -o jsonpath='{.status.userInfo.username}')"
[[ "$bridge_user" == "$BRIDGE_USER" ]] || fail "the bridge acts as '$bridge_user', not $BRIDGE_USER"
holder="$(kubectl get lease admit-k8s.admission-ledger.io -n "$BRIDGE_NAMESPACE" -o jsonpath='{.spec.holderIdentity}')"
[[ -n "$holder" ]] || fail "the bridge holds no Lease"

step "a second start finds it running; one with other components is refused"
again="$("$cluster_sh" start --admitd "$admitd" --admit-k8s "$admit_k8s" "$cluster")"
[[ "$again" == "$kubeconfig" ]] || fail "a second start printed '$again'"
if other="$("$cluster_sh" start --control-plane-only "$cluster" 2>&1)"; then
  fail "a --control-plane-only start over a full cluster succeeded"
fi
[[ "$other" == *"stop it first"* ]] || fail "the refused start says: $other"

step "kubectl apply --dry-run=server -k ops/deploy: every object passes, nothing is created"
readonly expected_objects=(
  namespace/admission-ledger
  serviceaccount/admit-k8s
  clusterrole.rbac.authorization.k8s.io/admit-k8s
  clusterrolebinding.rbac.authorization.k8s.io/admit-k8s
  role.rbac.authorization.k8s.io/admit-k8s-leader-election
  rolebinding.rbac.authorization.k8s.io/admit-k8s-leader-election
  clusterrolebinding.rbac.authorization.k8s.io/admit-k8s-auth-delegator
  rolebinding.rbac.authorization.k8s.io/admit-k8s-authentication-reader
  configmap/admitd-policy
  service/admitd
  service/admit-k8s-webhook
  service/admit-k8s-visibility
  statefulset.apps/admitd
  deployment.apps/admit-k8s
  mutatingwebhookconfiguration.admissionregistration.k8s.io/admit-k8s
  apiservice.apiregistration.k8s.io/v1beta2.visibility.kueue.x-k8s.io
)
documents="$(kubectl kustomize "$deploy_dir" | grep -c '^kind:')"
((documents == ${#expected_objects[@]})) \
  || fail "ops/deploy has $documents objects; the test checks ${#expected_objects[@]}: add the new ones to expected_objects"
kubectl apply --dry-run=server -k "$deploy_dir" > "$dir/dry-run.out" 2> "$dir/dry-run.err" \
  || fail "the server-side dry run of ops/deploy failed: $(cat "$dir/dry-run.err")"
for object in "${expected_objects[@]}"; do
  line="$(grep -F "$object " "$dir/dry-run.out" || true)"
  [[ "$line" == *"(server dry run)" ]] || fail "the dry run did not pass $object: $(cat "$dir/dry-run.out")"
  echo "  passed: $line" >&2
done
! kubectl get statefulset admitd -n "$BRIDGE_NAMESPACE" > /dev/null 2>&1 \
  || fail "the dry run created the StatefulSet"

step "the objects as the server would store them fit together"
kubectl apply --dry-run=server -k "$deploy_dir" -o json > "$dir/served.json"
# check_served FILE: what a deployment needs beyond the schema; prints each fact checked, exits
# 1 naming the first that fails. Also writes the policy of the ConfigMap to FILE.policy.yaml.
check_served() {
  python3 - "$1" <<'EOF'
import json, sys
items = json.load(open(sys.argv[1]))["items"]
objs = {(o["kind"], o["metadata"]["name"]): o for o in items}
def need(fact, ok):
    if not ok:
        print("the objects do not fit: " + fact)
        sys.exit(1)
    print("  ok: " + fact, file=sys.stderr)
def args(container):
    return dict(a[2:].split("=", 1) for a in container.get("args", []) if a.startswith("--") and "=" in a)
def port_of(service, name):
    return next(p for p in service["spec"]["ports"] if p["name"] == name)

hook_cfg = objs[("MutatingWebhookConfiguration", "admit-k8s")]["webhooks"]
need("two webhooks: Jobs and JobSets", len(hook_cfg) == 2)
for hook, rule, path in ((hook_cfg[0], (["batch"], ["v1"], ["CREATE"], ["jobs"]),
                          "/mutate-batch-v1-job"),
                         (hook_cfg[1], (["jobset.x-k8s.io"], ["v1alpha2"], ["CREATE"], ["jobsets"]),
                          "/mutate-jobset-x-k8s-io-v1alpha2-jobset")):
    need("failurePolicy Fail", hook.get("failurePolicy") == "Fail")
    need("sideEffects None", hook.get("sideEffects") == "None")
    need("rules: %s/%s %s, CREATE only" % (rule[0][0], rule[1][0], rule[3][0]),
         [(r["apiGroups"], r["apiVersions"], r["operations"], r["resources"])
          for r in hook["rules"]] == [rule])
    need("objectSelector: the label kueue.x-k8s.io/queue-name exists",
         hook.get("objectSelector") == {"matchExpressions": [
             {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]})
    need("caBundle set (a placeholder to replace)", bool(hook["clientConfig"].get("caBundle")))
    need("the webhook calls %s (the bridge's path)" % path,
         hook["clientConfig"]["service"].get("path") == path)
svc_ref = hook_cfg[0]["clientConfig"]["service"]
need("both webhooks call the same Service", hook_cfg[1]["clientConfig"]["service"]["name"]
     == svc_ref["name"])
hook_svc = objs.get(("Service", svc_ref["name"]))
need("the webhook's Service %s exists in %s" % (svc_ref["name"], svc_ref["namespace"]),
     hook_svc is not None and hook_svc["metadata"]["namespace"] == svc_ref["namespace"])
need("the webhook's port is the Service's", svc_ref.get("port", 443) == port_of(hook_svc, "webhook")["port"])

bridge = objs[("Deployment", "admit-k8s")]
need("the bridge has 2 replicas (leader election)", bridge["spec"]["replicas"] == 2)
bpod = bridge["spec"]["template"]["spec"]
need("the bridge runs as ServiceAccount admit-k8s", bpod.get("serviceAccountName") == "admit-k8s")
need("the bridge's ServiceAccount exists", ("ServiceAccount", "admit-k8s") in objs)
need("the webhook Service selects the bridge's pods",
     all(bridge["spec"]["template"]["metadata"]["labels"].get(k) == v
         for k, v in hook_svc["spec"]["selector"].items()))
bargs = args(bpod["containers"][0])
webhook_port = int(bargs["webhook-bind-address"].rsplit(":", 1)[1])
bports = {p["name"]: p["containerPort"] for p in bpod["containers"][0]["ports"]}
need("the bridge serves the webhook on the port the Service targets",
     bports.get(port_of(hook_svc, "webhook")["targetPort"]) == webhook_port)

api = objs[("APIService", "v1beta2.visibility.kueue.x-k8s.io")]["spec"]
need("the APIService is Kueue's group and version",
     (api["group"], api["version"]) == ("visibility.kueue.x-k8s.io", "v1beta2"))
need("the APIService's caBundle is set (a placeholder to replace)", bool(api.get("caBundle")))
vis_svc = objs.get(("Service", api["service"]["name"]))
need("the APIService's Service %s exists in %s" % (api["service"]["name"], api["service"]["namespace"]),
     vis_svc is not None and vis_svc["metadata"]["namespace"] == api["service"]["namespace"])
need("the visibility Service selects the bridge's pods",
     all(bridge["spec"]["template"]["metadata"]["labels"].get(k) == v
         for k, v in vis_svc["spec"]["selector"].items()))
need("the APIService's port is the Service's", api["service"].get("port", 443) == port_of(vis_svc, "https")["port"])
need("the bridge serves the visibility API on the port the Service targets",
     bports.get(port_of(vis_svc, "https")["targetPort"])
     == int(bargs["visibility-bind-address"].rsplit(":", 1)[1]))

admitd = objs[("StatefulSet", "admitd")]
need("admitd has 1 replica (the one writer)", admitd["spec"]["replicas"] == 1)
admitd_svc = objs.get(("Service", admitd["spec"]["serviceName"]))
need("admitd's governing Service exists", admitd_svc is not None)
need("admitd's Service selects its pods",
     all(admitd["spec"]["template"]["metadata"]["labels"].get(k) == v
         for k, v in admitd_svc["spec"]["selector"].items()))
apod = admitd["spec"]["template"]["spec"]
actr = apod["containers"][0]
aargs = args(actr)
mounts = {m["mountPath"]: m["name"] for m in actr["volumeMounts"]}
def mount_of(path):
    best = max((p for p in mounts if path.startswith(p + "/")), key=len, default=None)
    return mounts.get(best)
claims = [t["metadata"]["name"] for t in admitd["spec"]["volumeClaimTemplates"]]
need("the ledger (%s) is on the volume claim template" % aargs["ledger"], mount_of(aargs["ledger"]) in claims)
volumes = {v["name"]: v for v in apod["volumes"]}
tls_volume = volumes[mount_of(aargs["tls-cert"])]
need("admitd's certificate, key and client CA come from one Secret",
     "secret" in tls_volume and mount_of(aargs["tls-key"]) == mount_of(aargs["client-ca"]) == tls_volume["name"])
policy_volume = volumes[mount_of(aargs["policy"])]
cm = objs.get(("ConfigMap", policy_volume.get("configMap", {}).get("name")))
need("admitd's policy comes from the ConfigMap admitd-policy", cm is not None)
open(sys.argv[1] + ".policy.yaml", "w").write(cm["data"][aargs["policy"].rsplit("/", 1)[1]])
listen_tls = [a for a in actr["args"] if a.startswith("--listen=tls:")]
need("admitd listens on TLS", len(listen_tls) == 1)
rpc_port = int(listen_tls[0].rsplit(":", 1)[1])
aports = {p["name"]: p["containerPort"] for p in actr["ports"]}
need("admitd's Service targets its TLS port", aports.get(port_of(admitd_svc, "rpc")["targetPort"]) == rpc_port)
host, port = bargs["admitd"][len("tls:"):].rsplit(":", 1)
need("the bridge dials admitd's Service (%s)" % bargs["admitd"],
     host == "%s.%s.svc" % (admitd_svc["metadata"]["name"], admitd_svc["metadata"]["namespace"])
     and int(port) == port_of(admitd_svc, "rpc")["port"])
EOF
}
check_served "$dir/served.json" > "$dir/check.out" || fail "$(cat "$dir/check.out")"

step "every flag the manifests pass is one admitd and admit-k8s take (their --help)"
# flags_of KIND NAME: the flag names of the first container of the object, one per line.
flags_of() {
  python3 -c '
import json, sys
for o in json.load(open(sys.argv[1]))["items"]:
    if (o["kind"], o["metadata"]["name"]) == (sys.argv[2], sys.argv[3]):
        for a in o["spec"]["template"]["spec"]["containers"][0]["args"]:
            print(a.split("=", 1)[0].lstrip("-"))
' "$dir/served.json" "$1" "$2"
}
# takes_flags HELP_TEXT FLAG...: each FLAG is listed in HELP_TEXT (CLI11's "  --name", Go's
# "  -name").
takes_flags() {
  local help="$1" flag
  shift
  for flag in "$@"; do
    grep -qE -- "^ +--?$flag( |$)" <<< "$help" || { echo "$flag"; return 1; }
  done
}
mapfile -t admitd_flags < <(flags_of StatefulSet admitd)
mapfile -t bridge_flags < <(flags_of Deployment admit-k8s)
((${#admitd_flags[@]} > 0 && ${#bridge_flags[@]} > 0)) || fail "no flags found in the manifests"
unknown="$(takes_flags "$("$admitd" --help 2>&1)" "${admitd_flags[@]}")" \
  || fail "admitd.yaml passes --$unknown, which admitd --help does not list"
unknown="$(takes_flags "$("$admit_k8s" --help 2>&1)" "${bridge_flags[@]}")" \
  || fail "admit-k8s.yaml passes --$unknown, which admit-k8s --help does not list"
echo "  admitd takes ${admitd_flags[*]}" >&2
echo "  admit-k8s takes ${bridge_flags[*]}" >&2
! takes_flags "$("$admit_k8s" --help 2>&1)" webhook-bind-adress > /dev/null \
  || fail "takes_flags found a flag admit-k8s does not have"

step "admitd accepts the ConfigMap's policy"
# admitd_accepts_policy FILE: admitd starts with FILE as its policy (on a throwaway ledger).
admitd_accepts_policy() {
  local ready="$dir/policy-check.ready" status=0
  rm -rf "$dir/policy-check-ledger" "$ready"
  "$admitd" --ledger "$dir/policy-check-ledger" --listen "unix:$dir/policy-check.sock" \
    --policy "$1" --ready-file "$ready" --log-level warn > "$dir/policy-check.out" 2>&1 &
  local pid=$! deadline=$((SECONDS + 30))
  while [[ ! -s "$ready" ]] && kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
    sleep 0.1
  done
  [[ -s "$ready" ]] || status=1
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return "$status"
}
admitd_accepts_policy "$dir/served.json.policy.yaml" \
  || fail "admitd refuses the policy of ConfigMap admitd-policy: $(cat "$dir/policy-check.out")"
sed 's/roles: \[bridge\]/roles: [bridgee]/' \
  "$dir/served.json.policy.yaml" > "$dir/broken-policy.yaml"
# The misspelling must have happened, or the check below proves nothing.
grep -q 'roles: \[bridgee\]' "$dir/broken-policy.yaml" \
  || fail "the ConfigMap's policy no longer gives the bridge 'roles: [bridge]'; mend this check"
! admitd_accepts_policy "$dir/broken-policy.yaml" || fail "admitd accepted a policy with a role 'bridgee'"
grep -q "bridgee" "$dir/policy-check.out" || fail "admitd's refusal does not name the role: $(cat "$dir/policy-check.out")"

step "broken copies of the manifests are refused"
# broken NAME FILE SED EXPECTED: ops/deploy with SED applied to FILE must fail the server-side
# dry run with EXPECTED in the error.
broken() {
  local name="$1" file="$2" script="$3" expected="$4" copy="$dir/broken-$1"
  cp -r "$deploy_dir" "$copy"
  sed -i "$script" "$copy/$file"
  ! cmp -s "$deploy_dir/$file" "$copy/$file" || fail "broken copy $name: the edit changed nothing"
  if kubectl apply --dry-run=server -k "$copy" > "$copy.out" 2>&1; then
    fail "broken copy $name passed the dry run"
  fi
  grep -qF "$expected" "$copy.out" || fail "broken copy $name: the refusal does not say '$expected': $(cat "$copy.out")"
  echo "  refused ($name): $(grep -F "$expected" "$copy.out" | head -n 1)" >&2
}
broken failure-policy webhook.yaml 's/failurePolicy: Fail/failurePolicy: Sometimes/' \
  'failurePolicy: Unsupported value: "Sometimes"'
broken ledger-mount admitd.yaml 's/^        - name: ledger$/        - name: ledgr/' \
  'volumeMounts[0].name: Not found: "ledgr"'
broken role-ref admit-k8s-rbac.yaml '0,/^  kind: ClusterRole$/s//  kind: Role/' \
  'roleRef.kind: Unsupported value: "Role"'
# What the schema allows but the bridge must not have: the test's own checks refuse it.
cp -r "$deploy_dir" "$dir/ignored-failures"
sed -i 's/failurePolicy: Fail/failurePolicy: Ignore/' "$dir/ignored-failures/webhook.yaml"
kubectl apply --dry-run=server -k "$dir/ignored-failures" -o json > "$dir/ignored.json"
if check_served "$dir/ignored.json" > "$dir/ignored.out" 2>/dev/null; then
  fail "the checks passed a webhook with failurePolicy Ignore"
fi
echo "  refused (failurePolicy Ignore): $(cat "$dir/ignored.out")" >&2

step "RBAC: the bridge's service account may do what the bridge does, and no more"
# cluster.sh start applied namespace.yaml and admit-k8s-rbac.yaml for real; again, unchanged.
kubectl apply -f "$deploy_dir/namespace.yaml" -f "$deploy_dir/admit-k8s-rbac.yaml" > /dev/null
# can QUESTION...: kubectl's answer, yes or no; anything else (a warning about a resource it
# does not know, an error) is printed too, and is neither. kubectl's note that a cluster-scoped
# resource has no namespace (it asks in its default one; a core resource's note names no group)
# is dropped.
can() {
  { kubectl auth can-i "$@" --as="$BRIDGE_USER" 2>&1 || true; } |
    grep -v -e "^Warning: resource '[a-z0-9.-]*' is not namespace scoped\( in group '[a-z0-9.-]*'\)\?\$" \
      -e '^$' || true
}
allowed=(
  "watch jobs.batch -A" "patch jobs.batch -n $NAMESPACE" "update jobs.batch -n $NAMESPACE"
  "update jobs.batch --subresource=status -n $NAMESPACE"
  "create workloads.kueue.x-k8s.io -n $NAMESPACE" "update workloads.kueue.x-k8s.io --subresource=status -n $NAMESPACE"
  "patch workloads.kueue.x-k8s.io --subresource=status -n $NAMESPACE"
  "list clusterqueues.kueue.x-k8s.io" "update clusterqueues.kueue.x-k8s.io --subresource=status"
  "update localqueues.kueue.x-k8s.io --subresource=status -n $NAMESPACE"
  "update cohorts.kueue.x-k8s.io --subresource=status"
  "update admissionchecks.kueue.x-k8s.io --subresource=status"
  "watch resourceflavors.kueue.x-k8s.io" "watch cohorts.kueue.x-k8s.io"
  "watch admissionchecks.kueue.x-k8s.io" "watch workloadpriorityclasses.kueue.x-k8s.io"
  "watch topologies.kueue.x-k8s.io" "patch topologies.kueue.x-k8s.io"
  "patch clusterqueues.kueue.x-k8s.io" "patch resourceflavors.kueue.x-k8s.io"
  "patch localqueues.kueue.x-k8s.io -n $NAMESPACE"
  "watch budgetpolicies.admission-ledger.io" "patch budgetpolicies.admission-ledger.io"
  "update budgetpolicies.admission-ledger.io --subresource=status"
  "create events -n $NAMESPACE" "patch events -n $NAMESPACE"
  "get leases.coordination.k8s.io/admit-k8s.admission-ledger.io -n $BRIDGE_NAMESPACE"
  "update leases.coordination.k8s.io/admit-k8s.admission-ledger.io -n $BRIDGE_NAMESPACE"
  "create leases.coordination.k8s.io -n $BRIDGE_NAMESPACE"
  "list leases.coordination.k8s.io -A"
  "watch nodes" "list nodes" "list pods -A" "watch pods -A" "patch pods -n $NAMESPACE"
  "create subjectaccessreviews.authorization.k8s.io"
  "get configmaps/extension-apiserver-authentication -n kube-system"
)
denied=(
  "get secrets -n $BRIDGE_NAMESPACE" "delete secrets -n $NAMESPACE" "list secrets -A"
  "delete pods -n $NAMESPACE" "create pods -n $NAMESPACE" "get pods -n $NAMESPACE"
  "update pods -n $NAMESPACE" "patch nodes" "update nodes --subresource=status" "delete nodes"
  "create jobs.batch -n $NAMESPACE" "delete jobs.batch -n $NAMESPACE"
  "delete workloads.kueue.x-k8s.io -n $NAMESPACE" "update workloads.kueue.x-k8s.io -n $NAMESPACE"
  "update clusterqueues.kueue.x-k8s.io" "delete clusterqueues.kueue.x-k8s.io"
  "update resourceflavors.kueue.x-k8s.io --subresource=status"
  "update budgetpolicies.admission-ledger.io" "delete budgetpolicies.admission-ledger.io"
  "create budgetpolicies.admission-ledger.io"
  "patch jobs.batch --subresource=status -n $NAMESPACE"
  "update leases.coordination.k8s.io/kube-controller-manager -n kube-system"
  "update leases.coordination.k8s.io/other -n $BRIDGE_NAMESPACE"
  "delete leases.coordination.k8s.io/admit-k8s.admission-ledger.io -n $BRIDGE_NAMESPACE"
  "update mutatingwebhookconfigurations.admissionregistration.k8s.io"
  "create clusterrolebindings.rbac.authorization.k8s.io"
  "create serviceaccounts --subresource=token -n $BRIDGE_NAMESPACE"
  "get configmaps/kube-root-ca.crt -n kube-system" "list configmaps -n kube-system"
)
for question in "${allowed[@]}"; do
  # shellcheck disable=SC2086  # each question is words
  answer="$(can $question)"
  [[ "$answer" == yes ]] || fail "the bridge's service account may not: $question ($answer)"
done
for question in "${denied[@]}"; do
  # shellcheck disable=SC2086
  answer="$(can $question)"
  [[ "$answer" == no ]] || fail "the bridge's service account may: $question ($answer)"
done
echo "  ${#allowed[@]} allowed, ${#denied[@]} denied, as expected" >&2

step "Kueue's quick-start: the sample Job is created suspended and released by the bridge cluster.sh started"
# shellcheck source=tests/k8s/quick_start_lib.sh
source "$script_dir/quick_start_lib.sh"
if apply_quick_start_setup "$NAMESPACE" "$examples_dir"; then
  readonly sample_job="$examples_dir/getting-started-quick-start-job.yaml"
else
  cat > "$dir/sample-job.yaml" <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  generateName: sample-job-
  namespace: $NAMESPACE
  labels:
    kueue.x-k8s.io/queue-name: user-queue
spec:
  parallelism: 3
  completions: 3
  template:
    spec:
      containers:
      - name: dummy-job
        image: registry.k8s.io/e2e-test-images/agnhost:2.53
        args: ["entrypoint-tester", "hello", "world"]
        resources:
          requests: {cpu: 1, memory: 200Mi}
      restartPolicy: Never
EOF
  readonly sample_job="$dir/sample-job.yaml"
fi
setup_forwarded() {
  local log
  log="$(ledger log)"
  grep -q "flavorDefined  actor=admit-k8s" <<< "$log" &&
    grep -q "clusterQueueDefined  actor=admit-k8s" <<< "$log" &&
    grep -q "localQueueDefined  actor=admit-k8s" <<< "$log"
}
wait_until "the quick-start setup is not in the ledger" setup_forwarded
created="$(kubectl create -f "$sample_job" -o jsonpath='{.metadata.name} {.spec.suspend}')"
readonly job_name="${created% *}"
[[ "${created#* }" == true ]] || fail "the sample Job was created with suspend '${created#* }', not true"
job_released() {
  [[ "$(kubectl get job "$job_name" -n "$NAMESPACE" -o jsonpath='{.spec.suspend}')" == false ]]
}
wait_until "Job $job_name was not unsuspended" job_released
token="$(ledger get workloads -o json | python3 -c '
import json, sys
for w in json.load(sys.stdin)["items"]:
    if (w["metadata"]["namespace"], w["metadata"]["name"]) == (sys.argv[1], sys.argv[2]):
        print(w["status"].get("fencingToken", ""))
' "$NAMESPACE" "job-$job_name")"
[[ -n "$token" ]] || fail "the ledger has no token for job-$job_name"
annotation="$(kubectl get job "$job_name" -n "$NAMESPACE" -o jsonpath='{.metadata.annotations.admission-ledger\.io/fencing-token}')"
[[ "$annotation" == "$token" ]] || fail "Job $job_name runs with token '$annotation', not the ledger's $token"
ledger log > "$dir/ledger.log"
grep -q "workloadSubmitted  actor=admit-k8s  key=by/admit-k8s/submit/$NAMESPACE/job-$job_name/" "$dir/ledger.log" \
  || fail "the ledger holds no submission of job-$job_name by admit-k8s: $(cat "$dir/ledger.log")"
workload_admitted() {
  kubectl get workload "job-$job_name" -n "$NAMESPACE" --no-headers 2>/dev/null | grep -q 'cluster-queue *True'
}
wait_until "kubectl get workloads does not show job-$job_name Admitted" workload_admitted
! grep -qi forbidden "$cluster/admit-k8s.log" \
  || fail "RBAC refused the bridge something: $(grep -i forbidden "$cluster/admit-k8s.log" | head -n 3)"

step "Kueue's visibility API, served by the bridge behind the API server (kubectl get --raw)"
# A queue of one cpu: the first Job runs, the next three wait, in two LocalQueues. The API
# server forwards the request to the bridge, which asks the API server whether the user may
# read it and the ledger what waits; the answer is Kueue's PendingWorkloadsSummary.
readonly VIS=/apis/visibility.kueue.x-k8s.io/v1beta2
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: visible}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team-a, name: lq}
spec: {clusterQueue: visible}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team-b, name: lq-b}
spec: {clusterQueue: visible}
EOF
queues_forwarded() { ledger get localqueues -A 2>/dev/null | grep -q "lq-b"; }
wait_until "the LocalQueues of ClusterQueue visible are not in the ledger" queues_forwarded
for job in team-a/first team-a/a1 team-b/b1 team-a/a2; do
  kubectl create -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: ${job#*/}
  namespace: ${job%/*}
  labels: {kueue.x-k8s.io/queue-name: $([[ $job == team-b/* ]] && echo lq-b || echo lq)}
spec:
  template:
    spec:
      containers:
      - {name: c, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 1}}}
      restartPolicy: Never
EOF
  sleep 1.1  # distinct creation seconds: the queue's order is the Workloads' creation
done
three_pending() {
  [[ "$(ledger get pendingworkloads --cluster-queue visible -o json 2>/dev/null |
    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["items"]))')" == 3 ]]
}
wait_until "the ledger does not hold three pending workloads in ClusterQueue visible" three_pending
ledger get pendingworkloads --cluster-queue visible -o json > "$dir/vis-ledger.json"
kubectl get --raw "$VIS/clusterqueues/visible/pendingworkloads" > "$dir/vis-cq.json" \
  || fail "kubectl get --raw of the ClusterQueue's pending workloads failed"
kubectl get --raw "$VIS/clusterqueues/visible/pendingworkloads?limit=1&offset=1" > "$dir/vis-page.json"
kubectl get --raw "$VIS/namespaces/team-a/localqueues/lq/pendingworkloads" > "$dir/vis-lq.json"
kubectl get workloads -A -o json > "$dir/vis-workloads.json"
kubectl get jobs -A -o json > "$dir/vis-jobs.json"
python3 - "$dir" > "$dir/vis-check.out" <<'EOF' || fail "$(cat "$dir/vis-check.out")"
import json, sys
d = sys.argv[1]
load = lambda name: json.load(open("%s/%s.json" % (d, name)))
ledger, cq, page, lq = load("vis-ledger"), load("vis-cq"), load("vis-page"), load("vis-lq")
objects = {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in load("vis-workloads")["items"]}
jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): j for j in load("vis-jobs")["items"]}
def need(fact, ok):
    if not ok:
        print("visibility: " + fact + "\n  cq=" + json.dumps(cq) + "\n  ledger=" + json.dumps(ledger))
        sys.exit(1)
for s in (cq, page, lq):
    need("kind and apiVersion are Kueue's", (s["kind"], s["apiVersion"])
         == ("PendingWorkloadsSummary", "visibility.kueue.x-k8s.io/v1beta2"))
key = lambda i: (i["metadata"]["namespace"], i["metadata"]["name"])
need("the ClusterQueue's answer lists the ledger's pending workloads in its order",
     [key(i) for i in cq["items"]] == [key(i) for i in ledger["items"]]
     == [("team-a", "job-a1"), ("team-b", "job-b1"), ("team-a", "job-a2")])
for item, want in zip(cq["items"], ledger["items"]):
    # Kueue's PendingWorkload, field by field (apis/visibility/v1beta2/types.go).
    need("an item has Kueue's fields", set(item) == {"metadata", "priority", "localQueueName",
         "positionInClusterQueue", "positionInLocalQueue"})
    need("metadata has Kueue's fields", set(item["metadata"])
         == {"name", "namespace", "creationTimestamp", "ownerReferences"})
    for field in ("priority", "localQueueName", "positionInClusterQueue", "positionInLocalQueue"):
        need("%s of %s is the ledger's" % (field, key(item)), item[field] == want[field])
    obj = objects[key(item)]
    need("creationTimestamp is the Workload object's", item["metadata"]["creationTimestamp"]
         == obj["metadata"]["creationTimestamp"])
    job = jobs[(item["metadata"]["namespace"], item["metadata"]["name"][len("job-"):])]
    need("the owner of %s is its Job (apiVersion, kind, name, uid as Kueue lists it)" % (key(item),),
         item["metadata"]["ownerReferences"] == [{"apiVersion": "batch/v1", "kind": "Job",
         "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}])
need("positions from 0, in the ClusterQueue and in each LocalQueue",
     [(i["positionInClusterQueue"], i["positionInLocalQueue"], i["localQueueName"]) for i in cq["items"]]
     == [(0, 0, "lq"), (1, 0, "lq-b"), (2, 1, "lq")])
need("limit=1&offset=1 is the second workload alone", [key(i) for i in page["items"]] == [("team-b", "job-b1")]
     and page["items"][0]["positionInClusterQueue"] == 1)
need("the LocalQueue's answer is its own workloads, its positions",
     [(key(i), i["positionInLocalQueue"], i["positionInClusterQueue"]) for i in lq["items"]]
     == [(("team-a", "job-a1"), 0, 0), (("team-a", "job-a2"), 1, 2)])
print("ok")
EOF
echo "  $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$dir/vis-cq.json") pending in ClusterQueue visible, field by field as the ledger and Kueue's types" >&2
# Refusals, as the API server words them: an unknown queue; a user RBAC does not let read it.
if kubectl get --raw "$VIS/clusterqueues/nope/pendingworkloads" > "$dir/vis-404.out" 2>&1; then
  fail "an unknown ClusterQueue was answered: $(cat "$dir/vis-404.out")"
fi
grep -q 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found' "$dir/vis-404.out" \
  || fail "an unknown ClusterQueue: $(cat "$dir/vis-404.out")"
if kubectl get --raw "$VIS/namespaces/team-b/localqueues/lq-b/pendingworkloads" --as=alice \
    > "$dir/vis-403.out" 2>&1; then
  fail "alice, whom RBAC grants nothing, read team-b's queue: $(cat "$dir/vis-403.out")"
fi
grep -q 'User "alice" cannot get resource "localqueues/pendingworkloads"' "$dir/vis-403.out" \
  || fail "alice's refusal: $(cat "$dir/vis-403.out")"
kubectl apply -f - > /dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {namespace: team-b, name: lq-reader}
rules:
- apiGroups: [visibility.kueue.x-k8s.io]
  resources: [localqueues/pendingworkloads]
  resourceNames: [lq-b]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {namespace: team-b, name: alice-lq-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lq-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
EOF
alice_reads() {
  kubectl get --raw "$VIS/namespaces/team-b/localqueues/lq-b/pendingworkloads" --as=alice \
    > "$dir/vis-alice.json" 2> /dev/null
}
wait_until "alice, granted get of team-b's localqueues/pendingworkloads, cannot read them" alice_reads
grep -q '"name":"job-b1"' "$dir/vis-alice.json" || fail "alice's answer: $(cat "$dir/vis-alice.json")"
! kubectl get --raw "$VIS/clusterqueues/visible/pendingworkloads" --as=alice > /dev/null 2>&1 \
  || fail "alice read the whole ClusterQueue with a Role for one LocalQueue"
kubectl get --raw "$VIS" | grep -q '"name":"clusterqueues/pendingworkloads"' \
  || fail "the API's discovery does not list clusterqueues/pendingworkloads"
echo "  refusals: NotFound, Forbidden; alice reads team-b's queue once a Role grants it" >&2
# spec.active both ways: kubectl patch (kueuectl stop workload) deactivates it in the ledger and
# it leaves the pending list; admitctl resume reactivates it and the bridge writes spec.active.
pending_names() {
  kubectl get --raw "$VIS/clusterqueues/visible/pendingworkloads" |
    python3 -c 'import json,sys; print(" ".join(i["metadata"]["name"] for i in json.load(sys.stdin)["items"]))'
}
kubectl patch workload job-a1 -n team-a --type merge -p '{"spec":{"active":false}}' > /dev/null
a1_deactivated() { ledger get workloads -n team-a 2>/dev/null | grep -q "job-a1 .*Deactivated"; }
wait_until "kubectl patch spec.active false did not deactivate job-a1 in the ledger" a1_deactivated
[[ "$(pending_names)" == "job-b1 job-a2" ]] || fail "pending after job-a1 stopped: $(pending_names)"
ledger resume workload team-a/job-a1 > /dev/null
a1_active_again() {
  [[ "$(kubectl get workload job-a1 -n team-a -o jsonpath='{.spec.active}')" == true ]]
}
wait_until "admitctl resume did not show as spec.active true on job-a1" a1_active_again
[[ "$(pending_names)" == "job-a1 job-b1 job-a2" ]] || fail "pending after job-a1 resumed: $(pending_names)"
echo "  spec.active: kubectl patch stops job-a1 in the ledger, admitctl resume shows in the object" >&2

step "stop: the bridge and admitd first, then JobSet, KWOK and the control plane; no process left"
pids=()
for name in admit-k8s admitd jobset-controller kwok kube-scheduler kube-controller-manager \
    kube-apiserver etcd; do
  pids+=("$(<"$cluster/$name.pid")")
done
"$cluster_sh" stop "$cluster" 2> "$dir/stop.err" || fail "stop failed: $(cat "$dir/stop.err")"
cat "$dir/stop.err" >&2
order="$(sed -n 's/^cluster.sh: \([a-z0-9-]*\) (pid [0-9]*) stopped$/\1/p' "$dir/stop.err" | tr '\n' ' ')"
expected_order="admit-k8s admitd jobset-controller kwok kube-scheduler kube-controller-manager"
expected_order+=" kube-apiserver etcd "
[[ "$order" == "$expected_order" ]] \
  || fail "stop stopped '$order'"
for pid in "${pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status"; then
    fail "process $pid still runs after stop"
  fi
done
[[ ! -e "$cluster/admin.kubeconfig" && ! -e "$cluster/admitd.address" ]] \
  || fail "stop left admin.kubeconfig or admitd.address behind"
"$cluster_sh" stop "$cluster" 2> /dev/null || fail "a second stop failed"
"$admitctl" --ledger "$cluster/ledger" verify > "$dir/verify.out" 2>&1 \
  || fail "the ledger left by stop does not verify: $(cat "$dir/verify.out")"

echo "PASS: cluster.sh start (control plane, admitd, the bridge as $BRIDGE_USER) in ${start_seconds}s; ops/deploy's ${#expected_objects[@]} objects pass a server-side dry run and fit together, 4 broken copies refused; RBAC ${#allowed[@]} allowed and ${#denied[@]} denied; the quick-start Job $job_name released with token $token; stop left no process and a ledger that verifies"
