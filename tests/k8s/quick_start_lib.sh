# Sourced by the k8s tests that run Kueue's quick-start: applies its setup (ResourceFlavor
# default-flavor, ClusterQueue cluster-queue, LocalQueue user-queue in NAMESPACE) with kubectl.
#   apply_quick_start_setup NAMESPACE EXAMPLES_DIR
# Returns 0 when it applied EXAMPLES_DIR/getting-started-quick-start-setup.yaml (Kueue's own
# file, whose sample Job is getting-started-quick-start-job.yaml beside it); 1 when that folder
# is absent (a clone without ../shared) and it applied the test's own setup of the same shape,
# saying so: the caller then writes its own sample Job (3 pods of 1 cpu, as Kueue's).
apply_quick_start_setup() {
  local namespace="$1" examples="$2"
  if [[ -f "$examples/getting-started-quick-start-setup.yaml" ]]; then
    kubectl apply -f "$examples/getting-started-quick-start-setup.yaml" > /dev/null \
      || { echo "FAIL: kubectl apply of Kueue's quick-start setup failed" >&2; exit 1; }
    return 0
  fi
  echo "note: $examples is absent; using the test's own setup of the same shape" >&2
  # Called as an `if` condition, where set -e does not act: a failure exits here.
  kubectl apply -f - > /dev/null <<YAML || { echo "FAIL: kubectl apply of the quick-start setup failed" >&2; exit 1; }
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cluster-queue}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 9}
      - {name: memory, nominalQuota: 9Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: $namespace, name: user-queue}
spec: {clusterQueue: cluster-queue}
YAML
  return 1
}
