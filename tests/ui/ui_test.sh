#!/usr/bin/env bash
# The dashboard end to end (docs/dashboard.md): admitd on the demo's ledger with a policy that
# maps bearer tokens to an operator and a tenant, driven in headless Chromium (Debian's
# chromium) by playwright-core (npm, installed into NODE_DIR on the first run):
# tests/ui/dashboard_test.mjs. Screenshots of each page go to SHOTS.
# Usage: ui_test.sh ADMITCTL ADMITD NODE_DIR SHOTS
set -euo pipefail
admitctl=$1 admitd=$2 node_dir=$3 shots=$4
here=$(cd "$(dirname "$0")" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
chromium=${CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || fail "$chromium is needed (Debian's chromium; ops/scripts/setup.sh installs it)"
command -v node > /dev/null || fail "node is needed (Debian's nodejs; ops/scripts/setup.sh installs it)"
mkdir -p "$node_dir" "$shots"
node_dir=$(cd "$node_dir" && pwd) shots=$(cd "$shots" && pwd)
(
  flock 9
  if [ ! -d "$node_dir/node_modules/playwright-core" ]; then
    (cd "$node_dir" && npm install --no-audit --no-fund --silent playwright-core@1.65.1) ||
      fail "npm install playwright-core"
  fi
) 9> "$node_dir/.lock"
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-ui-test.XXXXXX")
daemon_pid=
trap 'kill -9 $daemon_pid 2>/dev/null; rm -rf "$work"' EXIT

"$admitctl" demo --dir "$work/ledger" > "$work/demo.txt" 2>&1 || fail "demo: $(tail -3 "$work/demo.txt")"
op_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
tenant_token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
sha() { printf %s "$1" | sha256sum | cut -d' ' -f1; }
cat > "$work/policy.yaml" <<YAML
principals:
- name: platform-ops
  roles: [operator]
  tokenSha256: $(sha "$op_token")
- name: nlp-team
  roles: [tenant]
  namespaces: [nlp]
  tokenSha256: $(sha "$tenant_token")
YAML
S="$work/admitd.sock"
"$admitd" --ledger "$work/ledger" --listen "unix:$S" --metrics-listen 127.0.0.1:0 \
  --policy "$work/policy.yaml" --ready-file "$work/ready" --log-level warn \
  > "$work/admitd.out" 2> "$work/admitd.err" &
daemon_pid=$!
for _ in $(seq 200); do [ -s "$work/ready" ] && break; sleep 0.05; done
[ -s "$work/ready" ] || fail "admitd did not start: $(tail -5 "$work/admitd.err")"
url=$(grep '^http://' "$work/ready")
cat > "$work/live.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: live, namespace: nlp, labels: {kueue.x-k8s.io/queue-name: jobs}}
spec:
  template:
    spec:
      containers:
      - {name: c, image: trainer, resources: {requests: {nvidia.com/gpu: "64"}}}
      restartPolicy: Never
YAML
# A GPU-hour budget (docs/budgets.md) on a ClusterQueue of its own, with one job charged to it:
# the overview shows where the policy stands.
cat > "$work/budget.yaml" <<'YAML'
apiVersion: admission-ledger.io/v1alpha1
kind: BudgetPolicy
metadata: {name: research-month}
spec:
  scope: {namespace: research}
  limits: {nvidia.com/gpu: "500"}
  period: {calendar: Month}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: AdmissionCheck
metadata: {name: research-budget}
spec:
  controllerName: admission-ledger.io/budget
  parameters: {apiGroup: admission-ledger.io, kind: BudgetPolicy, name: research-month}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: research}
spec:
  namespaceSelector: {}
  admissionChecks: [research-budget]
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100-eu
      resources: [{name: nvidia.com/gpu, nominalQuota: 16}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: research, namespace: research}
spec: {clusterQueue: research}
YAML
cat > "$work/sweep.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
metadata:
  name: sweep
  namespace: research
  labels: {kueue.x-k8s.io/queue-name: research}
  annotations: {admission-ledger.io/expected-runtime: 12h}
spec:
  template:
    spec:
      containers:
      - {name: c, image: trainer, resources: {requests: {nvidia.com/gpu: "8"}}}
      restartPolicy: Never
YAML
"$admitctl" --connect "unix:$S" apply -f "$work/budget.yaml" > /dev/null || fail "apply the budget"
# (After the definitions above: a definition change while a TAS workload holds quota sends
# Engine::TasFor into unbounded recursion, a bug of tas_engine.cc reported with this branch.)
# A TAS flavor (docs/tas.md): 1 block x 2 racks x 2 hosts of 8 GPUs; a job holding a rack and
# one pending by quota for another rack: the overview's topology table shows per level the
# largest free domain (block 16, rack 16, host 8) and the domains that hold the pending request
# (block 1, rack 1, host 0).
cat > "$work/tas.yaml" <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: gpu-topology}
spec:
  levels: [{nodeLabel: example.com/block}, {nodeLabel: example.com/rack}, {nodeLabel: kubernetes.io/hostname}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tas-gpu}
spec: {nodeLabels: {pool: tas}, topologyName: gpu-topology}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: tas}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: tas-gpu
      resources: [{name: nvidia.com/gpu, nominalQuota: 16}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: tas, namespace: tas}
spec: {clusterQueue: tas}
YAML
tas_job() {  # tas_job NAME
  cat <<YAML
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: $1, namespace: tas}
spec:
  queueName: tas
  podSets:
  - name: main
    count: 2
    topologyRequest: {required: example.com/rack}
    template:
      spec:
        containers:
        - {name: c, image: trainer, resources: {requests: {nvidia.com/gpu: "8"}}}
YAML
}
"$admitctl" --connect "unix:$S" apply -f "$work/tas.yaml" > /dev/null || fail "apply the TAS flavor"
for rack in r1 r2; do
  for host in h1 h2; do
    "$admitctl" --connect "unix:$S" node capacity "$rack-$host" --flavor tas-gpu \
      --capacity nvidia.com/gpu=8,cpu=64,pods=110 \
      --labels "example.com/block=b1,example.com/rack=$rack,kubernetes.io/hostname=$rack-$host,pool=tas" \
      > /dev/null || fail "report TAS node $rack-$host"
  done
done
tas_job holds > "$work/tas-jobs.yaml"
"$admitctl" --connect "unix:$S" submit -f "$work/tas-jobs.yaml" > /dev/null || fail "submit a TAS job"
tas_job waits > "$work/tas-jobs.yaml"
"$admitctl" --connect "unix:$S" submit -f "$work/tas-jobs.yaml" > /dev/null || fail "submit a TAS job"
"$admitctl" --connect "unix:$S" submit -f "$work/sweep.yaml" > /dev/null || fail "submit the budgeted job"
URL=$url OPERATOR_TOKEN=$op_token TENANT_TOKEN=$tenant_token TENANT_NS=nlp SHOTS=$shots \
  CHROMIUM=$chromium NODE_DIR="$node_dir" \
  SUBMIT="nlp/job-live '$admitctl' --connect 'unix:$S' submit -f '$work/live.yaml' > /dev/null" \
  node "$here/dashboard_test.mjs"
