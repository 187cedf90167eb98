#!/usr/bin/env bash
# JobSets on the cluster of ops/k8s/cluster.sh: the real JobSet controller (sigs.k8s.io/jobset,
# built by `cluster.sh build`) creates their Jobs, kube-scheduler places the pods on the nodes of
# ops/k8s/nodes/default.yaml and KWOK runs them with our Stages (ops/k8s/kwok/).
#   tests/k8s/jobset_test.sh
# Shows, with `start --control-plane-only` (no admitd, no bridge; nothing labels the JobSets for
# Kueue, so nothing holds them):
# - the JobSet CRD (jobset.x-k8s.io, v1alpha2) is served; the controller runs as
#   jobset-controller, listens on 127.0.0.1 only and holds no leader-election Lease;
# - its webhooks answer through the configurations start registers: a JobSet is defaulted
#   (success policy All, startup order AnyOrder, Indexed Jobs) and one whose success policy names
#   a replicated job it does not have is refused;
# - a JobSet of a leader (1 Job of 1 pod, on a CPU node) and workers (2 Jobs of 1 pod, 8 H100s
#   each) with a simulated runtime of 5s: its 3 Jobs and headless Service are created, the
#   leader's pod lands on a CPU node and the workers' one on each H100 node, they run and
#   succeed, and the JobSet is Completed;
# - a JobSet created with spec.suspend: true creates no pod within 10 s (Suspended=True); after
#   `kubectl patch` sets spec.suspend to false its pods run and it is Completed;
# - stop stops the JobSet controller with the rest.
# Exits 77 (ctest's SKIP_RETURN_CODE) when the binaries are not built. K8S_TEST_KEEP_DIR=1 keeps
# the cluster's folder (logs, certificates, etcd data) for a look.
set -euo pipefail

# Bounded waits, in seconds.
readonly WAIT_SECONDS=90
readonly POLL_INTERVAL_SECONDS=0.3
# How long a suspended JobSet is watched to create no pod.
readonly SUSPENDED_SECONDS=10
readonly NAMESPACE=jobset-test
readonly H100=NVIDIA-H100-80GB-HBM3
readonly RUNTIME_ANNOTATION=admission-ledger.io/simulated-runtime
readonly RUNTIME=5s
readonly JOBSET_NAME_LABEL=jobset.sigs.k8s.io/jobset-name
readonly REPLICATED_JOB_LABEL=jobset.sigs.k8s.io/replicatedjob-name

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/k8s/cluster_test_lib.sh
source "$script_dir/cluster_test_lib.sh"

skip_unless_cluster_built "the Kubernetes binaries, KWOK and the JobSet controller"
make_test_dir k8s-jobset-test

test_started_at=$SECONDS
step "start --control-plane-only: the control plane, KWOK, the nodes and the JobSet controller"
"$cluster_sh" --help | grep -q "JobSet controller" || fail "--help does not mention JobSet"
started_at=$SECONDS
kubeconfig="$("$cluster_sh" start --control-plane-only "$dir/cluster")"
start_seconds=$((SECONDS - started_at))
echo "cluster up, nodes Ready, JobSet controller ready, in ${start_seconds}s" >&2
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
[[ "$(tr '\n' ' ' < "$dir/cluster/components")" == *" kwok jobset-controller " ]] \
  || fail "start started $(tr '\n' ' ' < "$dir/cluster/components")"

step "the JobSet CRD is served; the controller acts as jobset-controller on 127.0.0.1 only"
versions="$(kubectl get crd jobsets.jobset.x-k8s.io \
  -o jsonpath='{range .spec.versions[*]}{.name}:{.served}:{.storage} {end}')"
[[ "$versions" == "v1alpha2:true:true " ]] || fail "the JobSet CRD's versions: $versions"
out="$(kubectl get jobsets -A 2>&1)" || fail "jobsets are not served: $out"
controller_user="$("$kubectl_bin" --kubeconfig "$dir/cluster/jobset-controller.kubeconfig" \
  auth whoami -o jsonpath='{.status.userInfo.username}')"
[[ "$controller_user" == jobset-controller ]] \
  || fail "the JobSet controller acts as '$controller_user'"
# Its RBAC has no Secrets: its internal cert management is off.
if kubectl auth can-i list secrets --as jobset-controller -A > /dev/null 2>&1; then
  fail "the JobSet controller may list Secrets"
fi
pid="$(<"$dir/cluster/jobset-controller.pid")"
if command -v ss > /dev/null; then
  listening="$(ss -Hltnp | grep "pid=$pid," | awk '{print $4}')"
  [[ -n "$listening" ]] || fail "the JobSet controller (pid $pid) listens nowhere"
  ! grep -qv '^127\.0\.0\.1:' <<< "$listening" \
    || fail "the JobSet controller listens on $(tr '\n' ' ' <<< "$listening"), not only 127.0.0.1"
  # Its webhooks and its health probes; no metrics server.
  [[ "$(wc -l <<< "$listening")" == 2 ]] \
    || fail "the JobSet controller listens on $(tr '\n' ' ' <<< "$listening"), not on 2 ports"
else
  echo "ss is not installed: listening addresses not checked" >&2
fi
[[ -z "$(kubectl get leases -A -o name | grep -i jobset || true)" ]] \
  || fail "the JobSet controller holds a leader-election Lease"

kubectl create namespace "$NAMESPACE" > /dev/null
has_default_service_account() {
  kubectl get serviceaccount default -n "$NAMESPACE" -o name > /dev/null 2>&1
}
wait_until "no default service account in $NAMESPACE" has_default_service_account

# jobset_yaml NAME SUSPEND [SUCCESS_TARGET]: a JobSet of a leader (1 Job of 1 pod, on a CPU node:
# no toleration, 1 CPU) and workers (2 Jobs of 1 pod each, 8 H100s per pod), every pod finishing
# after RUNTIME. With SUCCESS_TARGET, a success policy naming that replicated job.
jobset_yaml() {
  local name="$1" suspend="$2" success_policy=""
  if (($# > 2)); then
    success_policy="  successPolicy: {operator: All, targetReplicatedJobs: [$3]}"
  fi
  cat <<EOF
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: $name
  namespace: $NAMESPACE
spec:
  suspend: $suspend
$success_policy
  replicatedJobs:
  - name: leader
    replicas: 1
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          metadata:
            annotations:
              $RUNTIME_ANNOTATION: $RUNTIME
          spec:
            restartPolicy: Never
            containers:
            - name: leader
              image: registry.invalid/leader:1
              resources:
                requests: {cpu: "1", memory: 1Gi}
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 1
        completions: 1
        backoffLimit: 0
        template:
          metadata:
            annotations:
              $RUNTIME_ANNOTATION: $RUNTIME
          spec:
            restartPolicy: Never
            nodeSelector:
              nvidia.com/gpu.product: $H100
            tolerations:
            - key: nvidia.com/gpu
              operator: Exists
              effect: NoSchedule
            containers:
            - name: train
              image: registry.invalid/train:1
              resources:
                requests: {cpu: "100", memory: 1000Gi, nvidia.com/gpu: 8}
                limits: {nvidia.com/gpu: 8}
EOF
}

# pods_of JOBSET: its pods, "NAME REPLICATED_JOB NODE PHASE" per line.
pods_of() {
  local jsonpath='{range .items[*]}{.metadata.name}'
  jsonpath+=" {.metadata.labels.${REPLICATED_JOB_LABEL//./\\.}} {.spec.nodeName}"
  jsonpath+=' {.status.phase}{"\n"}{end}'
  kubectl get pods -n "$NAMESPACE" -l "$JOBSET_NAME_LABEL=$1" -o jsonpath="$jsonpath"
}
jobset_field() { kubectl get jobset "$1" -n "$NAMESPACE" -o jsonpath="$2"; }
condition_of() { jobset_field "$1" "{.status.conditions[?(@.type==\"$2\")].status}"; }
completed() { [[ "$(condition_of "$1" Completed)" == True ]]; }
# The JobSet's pods, all bound and at least Running (not Pending): "REPLICATED_JOB NODE" sorted.
all_started() {
  local name="$1" count="$2" pods
  pods="$(pods_of "$name")"
  [[ -n "$pods" && "$(wc -l <<< "$pods")" == "$count" ]] || return 1
  ! awk '$3 == "" || ($4 != "Running" && $4 != "Succeeded")' <<< "$pods" | grep -q .
}
# placement JOBSET: "leader:cpu workers:h100-1 workers:h100-2" when each pod is where it belongs.
placement() {
  pods_of "$1" | awk '{node = $3; if (node ~ /^cpu-/) node = "cpu"; print $2 ":" node}' \
    | sort | tr '\n' ' '
}
readonly EXPECTED_PLACEMENT="leader:cpu workers:h100-1 workers:h100-2 "

# check_finished JOBSET: every pod Succeeded with exit code 0, ran about RUNTIME, placed as
# expected; each of its Jobs Complete. Prints the pods' run times.
check_finished() {
  local name="$1" pod phase started finished code ran runtimes="" t
  t='.status.containerStatuses[0].state.terminated'
  for pod in $(pods_of "$name" | awk '{print $1}'); do
    read -r phase started finished code <<< "$(kubectl get pod "$pod" -n "$NAMESPACE" \
      -o jsonpath="{.status.phase} {$t.startedAt} {$t.finishedAt} {$t.exitCode}")"
    [[ "$phase/$code" == Succeeded/0 ]] || fail "pod $pod is $phase with exit code $code"
    ran=$(($(date -d "$finished" +%s) - $(date -d "$started" +%s)))
    # Whole seconds: the runtime counts from startTime, which is stored to the second.
    ((ran >= 4 && ran <= 12)) || fail "pod $pod ran ${ran}s ($started to $finished), not ~5s"
    runtimes+="${ran}s "
  done
  [[ "$(placement "$name")" == "$EXPECTED_PLACEMENT" ]] \
    || fail "JobSet $name's pods ran on $(placement "$name")"
  local jobs jsonpath='{range .items[*]}{.metadata.name}='
  jsonpath+='{.status.conditions[?(@.type=="Complete")].status} {end}'
  jobs="$(kubectl get jobs -n "$NAMESPACE" -l "$JOBSET_NAME_LABEL=$name" -o jsonpath="$jsonpath")"
  [[ "$jobs" == "$name-leader-0=True $name-workers-0=True $name-workers-1=True " ]] \
    || fail "JobSet $name's Jobs: $jobs"
  echo "${runtimes% }"
}

step "the webhooks: a JobSet is defaulted, an invalid one refused"
if out="$(jobset_yaml invalid false no-such-job | kubectl apply -f - 2>&1)"; then
  fail "a JobSet whose success policy names an unknown replicated job was created"
fi
[[ "$out" == *'denied the request'*"'no-such-job' does not appear"* ]] \
  || fail "the invalid JobSet was refused, but not by the JobSet webhook: $out"

step "a JobSet of a leader and 2 workers runs on the KWOK nodes and completes"
run_started_at=$SECONDS
jobset_yaml train false | kubectl apply -f - > /dev/null
defaults_jsonpath='{.spec.successPolicy.operator} {.spec.startupPolicy.startupPolicyOrder}'
defaults_jsonpath+=' {.spec.replicatedJobs[*].template.spec.completionMode}'
defaults_jsonpath+=' {.spec.network.publishNotReadyAddresses}'
defaults="$(jobset_field train "$defaults_jsonpath")"
[[ "$defaults" == "All AnyOrder Indexed Indexed true" ]] \
  || fail "JobSet train was not defaulted by the JobSet webhook: $defaults"
wait_until "JobSet train's 3 pods did not all start: $(pods_of train | tr '\n' ';')" \
  all_started train 3
pods_of train >&2
[[ "$(placement train)" == "$EXPECTED_PLACEMENT" ]] \
  || fail "JobSet train's pods are on $(placement train), not $EXPECTED_PLACEMENT"
# The headless Service of its pods' DNS names (spec.network), named after the JobSet.
[[ "$(kubectl get service train -n "$NAMESPACE" -o jsonpath='{.spec.clusterIP}')" == None ]] \
  || fail "JobSet train has no headless Service"
wait_until "JobSet train is not Completed: $(pods_of train | tr '\n' ';')" completed train
train_seconds=$((SECONDS - run_started_at))
[[ "$(jobset_field train '{.status.terminalState}')" == Completed ]] \
  || fail "JobSet train's terminal state is $(jobset_field train '{.status.terminalState}')"
train_runtimes="$(check_finished train)"
echo "JobSet train Completed ${train_seconds}s after its creation; its pods ran $train_runtimes" \
  >&2

step "a suspended JobSet creates no pod for ${SUSPENDED_SECONDS}s, then runs once resumed"
jobset_yaml held true | kubectl apply -f - > /dev/null
suspended() { [[ "$(condition_of held Suspended)" == True ]]; }
wait_until "JobSet held is not Suspended: $(jobset_field held '{.status}')" suspended
watch_until=$((SECONDS + SUSPENDED_SECONDS))
while ((SECONDS < watch_until)); do
  [[ -z "$(pods_of held)" ]] || fail "suspended JobSet held has pods: $(pods_of held)"
  sleep "$POLL_INTERVAL_SECONDS"
done
kubectl patch jobset held -n "$NAMESPACE" --type=merge -p '{"spec":{"suspend":false}}' \
  > /dev/null
resumed_at=$SECONDS
wait_until "resumed JobSet held's 3 pods did not all start: $(pods_of held | tr '\n' ';')" \
  all_started held 3
wait_until "resumed JobSet held is not Completed: $(pods_of held | tr '\n' ';')" completed held
held_seconds=$((SECONDS - resumed_at))
[[ "$(condition_of held Suspended)" != True ]] || fail "completed JobSet held is still Suspended"
held_runtimes="$(check_finished held)"
echo "JobSet held Completed ${held_seconds}s after it was resumed; its pods ran $held_runtimes" \
  >&2

step "stop stops the JobSet controller with the rest"
pids=()
for name in $(<"$dir/cluster/components"); do
  pids+=("$(<"$dir/cluster/$name.pid")")
done
"$cluster_sh" stop "$dir/cluster"
for pid in "${pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status"; then
    fail "process $pid still runs after stop"
  fi
done

echo "PASS: JobSet controller up with the cluster in ${start_seconds}s; a JobSet defaulted and" \
  "an invalid one refused by its webhooks; JobSet train (leader on a CPU node, a worker on" \
  "each H100 node) Completed in ${train_seconds}s (pods ran $train_runtimes); a suspended" \
  "JobSet made no pod in ${SUSPENDED_SECONDS}s and Completed ${held_seconds}s after resuming;" \
  "$((SECONDS - test_started_at))s in all"
