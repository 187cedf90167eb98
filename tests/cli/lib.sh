# Shared by the admitctl CLI tests: sourced after `admitctl=$1`.
# Sets $work (a scratch directory removed at exit) and $failures, and defines:
#   fail MSG...            count a failure
#   expect_rc RC CMD...    run CMD, capture stdout/stderr in $out/$err, check the exit code
#   contains TEXT WANT     WANT must occur in TEXT
#   lacks TEXT UNWANTED    UNWANTED must not occur in TEXT
#   finish NAME            print the verdict and exit 1 when anything failed
#   gpu_setup FILE NS LQ   write Kueue definitions: flavor h100, ClusterQueue gpu (8 GPUs), and
#                          LocalQueue NS/LQ on it
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_rc() {
  local want=$1; shift
  out=$("$@" 2>"$work/stderr"); rc=$?
  err=$(cat "$work/stderr")
  [ "$rc" = "$want" ] || fail "exit $rc (want $want): $* :: $err"
}
contains() { [[ "$1" == *"$2"* ]] || fail "expected '$2' in: $1"; }
lacks() { [[ "$1" != *"$2"* ]] || fail "did not expect '$2' in: $1"; }
finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$1: $failures failure(s)" >&2
    exit 1
  fi
  echo "$1: all passed"
}
gpu_setup() {
  cat > "$1" <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpu}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [nvidia.com/gpu]
    flavors:
    - name: h100
      resources: [{name: nvidia.com/gpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: $3, namespace: $2}
spec: {clusterQueue: gpu}
YAML
}
