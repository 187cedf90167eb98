#!/usr/bin/env bash
# Pods that run on the cluster of ops/k8s/cluster.sh: kube-scheduler places them on the nodes of
# ops/k8s/nodes/default.yaml, and KWOK plays their kubelets with our Stages (ops/k8s/kwok/).
#   tests/k8s/pods_test.sh
# Shows, with `start --control-plane-only` (no admitd, no bridge):
# - the committed node files are what gen-nodes.sh writes; bad --nodes options are refused;
# - the scheduler, KWOK and the JobSet controller listen on 127.0.0.1 only; the 6 nodes are
#   Ready, labelled, tainted and with the capacity of the file, each renewing its Lease;
# - a plain batch/v1 Job for H100s (nodeSelector, toleration, 8 GPUs per pod, parallelism 2,
#   simulated runtime 3s): its pods land on the two H100 nodes, one each, are Running and Ready
#   (the Job counts them ready), then Succeeded after about 3 s, and the Job is Complete;
# - a pod with admission-ledger.io/simulated-exit: failed ends Failed (exit code 1);
# - a pod without a runtime runs until it is deleted, then goes away;
# - pods without the toleration never land on a GPU node (a pod asking for an H100 without it
#   stays Pending, unschedulable);
# - the Job controller's suspend and a Job's deletion take its running pods away;
# - a nodes file with a node KWOK would not manage fails the start, leaving nothing running;
# - stop stops the scheduler, KWOK and the JobSet controller with the rest.
# Exits 77 (ctest's SKIP_RETURN_CODE) when the binaries are not built. K8S_TEST_KEEP_DIR=1 keeps
# the cluster's folder (logs, certificates, etcd data) for a look.
set -euo pipefail

# Bounded waits, in seconds.
readonly WAIT_SECONDS=60
readonly POLL_INTERVAL_SECONDS=0.3
# How long a pod without a runtime is watched to keep running.
readonly STILL_RUNNING_SECONDS=5
readonly NAMESPACE=pods-test
readonly H100=NVIDIA-H100-80GB-HBM3
readonly RUNTIME_ANNOTATION=admission-ledger.io/simulated-runtime
readonly EXIT_ANNOTATION=admission-ledger.io/simulated-exit

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly nodes_dir="$script_dir/../../ops/k8s/nodes"
# shellcheck source=tests/k8s/cluster_test_lib.sh
source "$script_dir/cluster_test_lib.sh"

step "the committed node files are what gen-nodes.sh writes"
diff <("$nodes_dir/gen-nodes.sh" --cpu 2 --h100 2 --a100 2 --rack-size 1 --racks-per-block 2) \
  "$nodes_dir/default.yaml" >&2 || fail "ops/k8s/nodes/default.yaml is not gen-nodes.sh's output"
diff <("$nodes_dir/gen-nodes.sh" --cpu 2 --h100 12 --a100 8 --rack-size 4 --racks-per-block 2) \
  "$nodes_dir/load-20.yaml" >&2 || fail "ops/k8s/nodes/load-20.yaml is not gen-nodes.sh's output"

skip_unless_cluster_built
# dir/unmanaged: the start that a node KWOK would not manage fails.
make_test_dir k8s-pods-test --cluster cluster --cluster unmanaged --log 'cluster/*.log'

step "bad --nodes options are refused before anything starts"
"$cluster_sh" --help | grep -q -- "--nodes FILE" || fail "--help does not describe --nodes"
if "$cluster_sh" start --control-plane-only --nodes "$dir/no-such.yaml" "$dir/cluster" 2>/dev/null
then
  fail "start with a missing nodes file succeeded"
fi
if "$cluster_sh" start --control-plane-only --nodes "$nodes_dir/default.yaml" --no-nodes \
    "$dir/cluster" 2>/dev/null; then
  fail "start with --nodes and --no-nodes succeeded"
fi
[[ ! -e "$dir/cluster/etcd.pid" ]] || fail "a refused start started etcd"

step "start --control-plane-only: the control plane, the scheduler, KWOK and the default nodes"
started_at=$SECONDS
kubeconfig="$("$cluster_sh" start --control-plane-only "$dir/cluster")"
start_seconds=$((SECONDS - started_at))
echo "cluster up, nodes Ready, in ${start_seconds}s" >&2
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=20s "$@"; }
[[ "$(tr '\n' ' ' < "$dir/cluster/components")" == \
  "etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller " ]] \
  || fail "start started $(tr '\n' ' ' < "$dir/cluster/components")"

step "the scheduler, KWOK and the JobSet controller listen on 127.0.0.1 only"
if command -v ss > /dev/null; then
  for name in kube-scheduler kwok jobset-controller; do
    pid="$(<"$dir/cluster/$name.pid")"
    listening="$(ss -Hltnp | grep "pid=$pid," | awk '{print $4}')"
    [[ -n "$listening" ]] || fail "$name (pid $pid) listens nowhere"
    ! grep -qv '^127\.0\.0\.1:' <<< "$listening" \
      || fail "$name listens on $(tr '\n' ' ' <<< "$listening"), not only on 127.0.0.1"
  done
else
  echo "ss is not installed: listening addresses not checked" >&2
fi

step "the nodes are Ready, labelled, tainted and sized as ops/k8s/nodes/default.yaml says"
nodes="$(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort \
  | tr '\n' ' ')"
[[ "$nodes" == "a100-1 a100-2 cpu-1 cpu-2 h100-1 h100-2 " ]] || fail "the nodes are: $nodes"
# The facts checked of a node, in this order, separated by spaces: Ready, its taint, the GPU
# model, memory (MiB) and count, the allocatable GPUs and CPUs, zone, block, rack, hostname.
node_facts_jsonpath='{.status.conditions[?(@.type=="Ready")].status}'
node_facts_jsonpath+=' {.spec.taints[*].key}={.spec.taints[*].value}:{.spec.taints[*].effect}'
for field in product memory count; do
  node_facts_jsonpath+=" {.metadata.labels.nvidia\\.com/gpu\\.$field}"
done
node_facts_jsonpath+=' {.status.allocatable.nvidia\.com/gpu} {.status.allocatable.cpu}'
node_facts_jsonpath+=' {.metadata.labels.topology\.kubernetes\.io/zone}'
for field in block rack; do
  node_facts_jsonpath+=" {.metadata.labels.topology\\.admission-ledger\\.io/$field}"
done
node_facts_jsonpath+=' {.metadata.labels.kubernetes\.io/hostname}'
readonly node_facts_jsonpath
expect_node() {
  local facts
  facts="$(kubectl get node "$1" -o jsonpath="$node_facts_jsonpath")"
  [[ "$facts" == "$2" ]] || fail "node $1: '$facts', not '$2'"
}
readonly GPU_TAINT=nvidia.com/gpu=present:NoSchedule
expect_node h100-1 "True $GPU_TAINT $H100 81559 8 8 206 us-central1-a h100-b1 h100-b1-r1 h100-1"
expect_node h100-2 "True $GPU_TAINT $H100 81559 8 8 206 us-central1-a h100-b1 h100-b1-r2 h100-2"
expect_node a100-2 \
  "True $GPU_TAINT NVIDIA-A100-SXM4-40GB 40960 8 8 94 us-central1-b a100-b1 a100-b1-r2 a100-2"
expect_node cpu-1 "True =:     31 us-central1-a cpu-b1 cpu-b1-r1 cpu-1"
for node in $nodes; do
  holder="$(kubectl get lease "$node" -n kube-node-lease -o jsonpath='{.spec.holderIdentity}')"
  [[ -n "$holder" ]] || fail "node $node has no Lease held in kube-node-lease"
done
[[ "$(kubectl get nodes -o name | wc -l)" == 6 ]] || fail "more nodes than the file's"

kubectl create namespace "$NAMESPACE" > /dev/null
has_default_service_account() {
  kubectl get serviceaccount default -n "$NAMESPACE" -o name > /dev/null 2>&1
}
wait_until "no default service account in $NAMESPACE" has_default_service_account

# pods_of JOB: the Job's pods, "NAME NODE PHASE" per line.
pods_of() {
  kubectl get pods -n "$NAMESPACE" -l "batch.kubernetes.io/job-name=$1" \
    -o jsonpath='{range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}'
}
job_field() { kubectl get job "$1" -n "$NAMESPACE" -o jsonpath="$2"; }

step "a plain Job for H100s: its pods on the H100 nodes, Running and Ready, then Complete"
kubectl apply -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: h100
  namespace: $NAMESPACE
spec:
  parallelism: 2
  completions: 2
  backoffLimit: 0
  template:
    metadata:
      annotations:
        $RUNTIME_ANNOTATION: 3s
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
job_ready_is() { [[ "$(job_field h100 '{.status.ready}')" == "$1" ]]; }
# The Job controller counts a pod ready from its Ready condition: both run at once.
wait_until "Job h100 never had 2 ready pods: $(pods_of h100 | tr '\n' ';')" job_ready_is 2
running="$(pods_of h100)"
echo "$running" >&2
[[ "$(grep -c ' Running$' <<< "$running")" == 2 ]] || fail "Job h100's pods: $running"
# 8 GPUs each: one pod per H100 node.
[[ "$(awk '{print $2}' <<< "$running" | sort | tr '\n' ' ')" == "h100-1 h100-2 " ]] \
  || fail "Job h100's pods are not one on each H100 node: $running"
# shellcheck disable=SC2013  # pod names are words
for pod in $(awk '{print $1}' <<< "$running"); do
  ip="$(kubectl get pod "$pod" -n "$NAMESPACE" -o jsonpath='{.status.podIP}')"
  [[ "$ip" =~ ^10\.244\.[0-9]+\.[0-9]+$ ]] || fail "pod $pod has the IP '$ip'"
done
job_complete() {
  [[ "$(job_field h100 '{.status.conditions[?(@.type=="Complete")].status}')" == True ]]
}
wait_until "Job h100 is not Complete: $(pods_of h100 | tr '\n' ';')" job_complete
counts="$(job_field h100 '{.status.succeeded}/{.status.failed}')"
[[ "$counts" =~ ^2/0?$ ]] || fail "Job h100 counts $counts succeeded/failed, not 2/0"
runtimes=""
# shellcheck disable=SC2013  # pod names are words
for pod in $(awk '{print $1}' <<< "$running"); do
  t='.status.containerStatuses[0].state.terminated'
  read -r phase started finished code <<< "$(kubectl get pod "$pod" -n "$NAMESPACE" \
    -o jsonpath="{.status.phase} {$t.startedAt} {$t.finishedAt} {$t.exitCode}")"
  [[ "$phase/$code" == Succeeded/0 ]] || fail "pod $pod is $phase with exit code $code"
  ran=$(($(date -d "$finished" +%s) - $(date -d "$started" +%s)))
  # Whole seconds: the runtime counts from startTime, which is stored to the second.
  ((ran >= 2 && ran <= 10)) || fail "pod $pod ran ${ran}s ($started to $finished), not about 3s"
  runtimes+="${ran}s "
done
echo "Job h100 complete; its pods ran on h100-1 and h100-2" >&2

# bare_pod NAME [ANNOTATION=VALUE...]: a pod without toleration or node selector.
bare_pod() {
  local name="$1" annotations="" pair
  shift
  for pair in "$@"; do annotations+="    ${pair%%=*}: \"${pair#*=}\""$'\n'; done
  kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $name
  namespace: $NAMESPACE
  annotations:
$annotations    test: "true"
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: registry.invalid/main:1
    resources:
      requests: {cpu: 100m}
EOF
}
pod_field() { kubectl get pod "$1" -n "$NAMESPACE" -o jsonpath="$2" 2>/dev/null; }
pod_phase_is() { [[ "$(pod_field "$1" '{.status.phase}')" == "$2" ]]; }

step "a pod with $EXIT_ANNOTATION: failed ends Failed"
bare_pod fails "$RUNTIME_ANNOTATION=1s" "$EXIT_ANNOTATION=failed"
wait_until "pod fails is not Failed but $(pod_field fails '{.status.phase}')" \
  pod_phase_is fails Failed
exit_code="$(pod_field fails '{.status.containerStatuses[0].state.terminated.exitCode}')"
[[ "$exit_code" == 1 ]] || fail "pod fails ended with exit code $exit_code"
[[ "$(pod_field fails '{.spec.nodeName}')" == cpu-* ]] \
  || fail "pod fails, without toleration, ran on $(pod_field fails '{.spec.nodeName}')"

step "a pod without a runtime runs until it is deleted, then goes away"
bare_pod forever
pod_ready() {
  [[ "$(pod_field forever '{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}')" \
    == Running/True ]]
}
wait_until "pod forever is not Running and Ready" pod_ready
sleep "$STILL_RUNNING_SECONDS"
pod_ready || fail "pod forever stopped running: $(pod_field forever '{.status.phase}')"
kubectl delete pod forever -n "$NAMESPACE" --wait=false > /dev/null
pod_gone() { ! kubectl get pod "$1" -n "$NAMESPACE" > /dev/null 2>&1; }
wait_until "deleted pod forever is still there: $(pod_field forever '{.status.phase}')" \
  pod_gone forever

step "pods without the toleration never land on GPU nodes"
kubectl apply -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: cpu
  namespace: $NAMESPACE
spec:
  parallelism: 8
  completions: 8
  template:
    metadata:
      annotations:
        $RUNTIME_ANNOTATION: 1s
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.invalid/main:1
        resources:
          requests: {cpu: "2"}
EOF
cpu_complete() {
  [[ "$(job_field cpu '{.status.conditions[?(@.type=="Complete")].status}')" == True ]]
}
wait_until "Job cpu is not Complete: $(pods_of cpu | tr '\n' ';')" cpu_complete
placed="$(pods_of cpu | awk '{print $2}' | sort -u | tr '\n' ' ')"
[[ "$placed" =~ ^(cpu-[12] )+$ ]] || fail "Job cpu's pods ran on $placed"
# Asking for an H100 without tolerating the GPU taint: no node fits.
kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: intolerant
  namespace: $NAMESPACE
spec:
  restartPolicy: Never
  nodeSelector:
    nvidia.com/gpu.product: $H100
  containers:
  - name: main
    image: registry.invalid/main:1
EOF
unschedulable() {
  [[ "$(pod_field intolerant '{.status.conditions[?(@.type=="PodScheduled")].reason}')" \
    == Unschedulable ]]
}
wait_until "pod intolerant is not marked Unschedulable" unschedulable
[[ -z "$(pod_field intolerant '{.spec.nodeName}')" ]] || fail "pod intolerant was placed"
echo "pod intolerant: $(pod_field intolerant \
  '{.status.conditions[?(@.type=="PodScheduled")].message}')" >&2

step "the Job controller's suspend and a Job's deletion take its running pods away"
kubectl apply -f - > /dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: held
  namespace: $NAMESPACE
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.invalid/main:1
EOF
held_running() { [[ "$(pods_of held | grep -c ' Running$')" == 2 ]]; }
wait_until "Job held has not 2 running pods: $(pods_of held | tr '\n' ';')" held_running
kubectl patch job held -n "$NAMESPACE" --type=merge -p '{"spec":{"suspend":true}}' > /dev/null
held_suspended() {
  [[ -z "$(pods_of held)" &&
    "$(job_field held '{.status.active}/{.status.terminating}')" =~ ^0?/0?$ &&
    "$(job_field held '{.status.conditions[?(@.type=="Suspended")].status}')" == True ]]
}
wait_until "suspended Job held still has pods: $(pods_of held | tr '\n' ';')" held_suspended
kubectl patch job held -n "$NAMESPACE" --type=merge -p '{"spec":{"suspend":false}}' > /dev/null
wait_until "resumed Job held has not 2 running pods: $(pods_of held | tr '\n' ';')" held_running
kubectl delete job held -n "$NAMESPACE" --cascade=background --wait=false > /dev/null
held_gone() { [[ -z "$(pods_of held)" ]]; }
wait_until "deleted Job held still has pods: $(pods_of held | tr '\n' ';')" held_gone

step "a nodes file with a node KWOK would not manage fails the start, leaving nothing running"
cat > "$dir/unmanaged.yaml" <<EOF
apiVersion: v1
kind: Node
metadata:
  name: orphan
EOF
if out="$("$cluster_sh" start --control-plane-only --nodes "$dir/unmanaged.yaml" \
    "$dir/unmanaged" 2>&1)"; then
  fail "start with a node without the KWOK annotation succeeded"
fi
[[ "$out" == *"without the annotation kwok.x-k8s.io/node: fake"*"orphan"* ]] \
  || fail "start with an unmanaged node says: $out"
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller; do
  [[ ! -s "$dir/unmanaged/$name.pid" ]] || fail "the failed start left $name running"
done

step "stop stops every process"
pids=()
for name in etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller; do
  pids+=("$(<"$dir/cluster/$name.pid")")
done
"$cluster_sh" stop "$dir/cluster"
for pid in "${pids[@]}"; do
  if kill -0 "$pid" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$pid/status"; then
    fail "process $pid still runs after stop"
  fi
done

echo "PASS: scheduler and KWOK up with 6 Ready nodes in ${start_seconds}s; the H100 Job ran" \
  "on both H100 nodes (${runtimes% }) and completed; a failing pod Failed; a pod without" \
  "runtime ran until deleted; no pod without toleration on a GPU node; suspend and deletion" \
  "took running pods away; an unmanaged node refused"
