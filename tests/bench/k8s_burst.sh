#!/usr/bin/env bash
# The bridge's cost per Job against the size of a burst (docs/benchmarks.md, "Bursts of Jobs"):
# on one local cluster (ops/k8s/cluster.sh start: control plane, scheduler, KWOK CPU nodes,
# admitd, admit-k8s), bursts of Jobs (1 pod of 100m CPU, a simulated run of 2 s; one
# ClusterQueue whose quota holds every Job of the largest burst at once) are created one burst
# after another, each run until every Job is Complete and the ledger holds every workload
# Finished. For each burst it prints the bridge's CPU time (utime + stime of the admit-k8s
# process, /proc) per Job, the same with the bridge's idle CPU rate (measured before the first
# burst) taken out, admitd's CPU per Job and the burst's wall time, then the ratio of the
# largest burst's CPU per Job to the smallest's (goal <= 1.25: a reconcile costs the same
# however many workloads the ledger holds). Lines are `name: value`.
#   tests/bench/k8s_burst.sh ADMITCTL ADMITD ADMIT_K8S
# BURST_SIZES (default "200 2000") are the bursts, smallest first. Exits 77 when the Kubernetes
# binaries or admit-k8s are not built. K8S_TEST_KEEP_DIR=1 keeps its folder.
set -euo pipefail

# The bridge tests' harness (arguments, cluster start and stop, fail, step, wait_until).
script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../k8s" && pwd)"
readonly script_dir
# shellcheck source=tests/k8s/bridge_test_lib.sh
source "$script_dir/bridge_test_lib.sh" k8s-burst-bench "$@"

read -r -a sizes <<< "${BURST_SIZES:-200 2000}"
readonly sizes
((${#sizes[@]} >= 2)) || fail "BURST_SIZES needs at least two sizes: ${sizes[*]}"
# Each burst done within this long (2,000 Jobs take 10 to 30 minutes on 2 busy cores).
readonly BURST_WAIT_SECONDS=3600
readonly IDLE_SECONDS=20
readonly NAMESPACE=burst
readonly LABEL=admission-ledger.io/burst
readonly cluster="$dir/cluster"
ticks_per_second="$(getconf CLK_TCK)"
readonly ticks_per_second

# 20 CPU nodes of 110 pods and 31 CPUs: room for 2,200 pods at once.
"$top/ops/k8s/nodes/gen-nodes.sh" --cpu 20 --h100 0 --a100 0 --rack-size 4 \
  --racks-per-block 5 > "$dir/nodes.yaml"
step "cluster.sh start: control plane, scheduler, 20 KWOK nodes, admitd, bridge"
kubeconfig="$("$cluster_sh" start --nodes "$dir/nodes.yaml" --admitd "$admitd" \
  --admit-k8s "$admit_k8s" "$cluster")"
kubectl() { "$kubectl_bin" --kubeconfig "$kubeconfig" --request-timeout=60s "$@"; }
ledger() { "$admitctl" --connect "unix:$cluster/admitd.sock" "$@"; }
bridge_process="$(<"$cluster/admit-k8s.pid")"
admitd_process="$(<"$cluster/admitd.pid")"

# cpu_ticks PID: the process's utime + stime, in clock ticks.
cpu_ticks() {
  awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

kubectl apply -f - > /dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $NAMESPACE}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: burst}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default-flavor
      resources:
      - {name: cpu, nominalQuota: 600}
      - {name: memory, nominalQuota: 2000Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: burst, namespace: $NAMESPACE}
spec: {clusterQueue: burst}
EOF
queue_defined() {
  local queues
  queues="$(ledger get localqueues 2> /dev/null)" || return 1
  grep -q "^$NAMESPACE *burst " <<< "$queues"
}
wait_until "the ledger holds the LocalQueue" queue_defined

step "the bridge idle for ${IDLE_SECONDS}s"
idle_before="$(cpu_ticks "$bridge_process")"
sleep "$IDLE_SECONDS"
idle_ticks_per_second="$(awk -v a="$idle_before" -v b="$(cpu_ticks "$bridge_process")" \
  -v s="$IDLE_SECONDS" 'BEGIN { printf "%.3f", (b - a) / s }')"
echo "bridge.idle_cpu_ms_per_s: $(awk -v t="$idle_ticks_per_second" -v h="$ticks_per_second" \
  'BEGIN { printf "%.1f", t * 1000 / h }')"

# jobs_yaml ID N: a List of N Jobs named burst-ID-0 ... in $NAMESPACE.
jobs_yaml() {
  python3 - "$1" "$2" "$NAMESPACE" "$LABEL" <<'EOF'
import json, sys
burst, count, namespace, label = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
items = []
for i in range(count):
    items.append({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"burst-{burst}-{i}", "namespace": namespace,
                     "labels": {"kueue.x-k8s.io/queue-name": "burst", label: burst}},
        "spec": {"parallelism": 1, "completions": 1, "template": {
            "metadata": {"annotations": {"admission-ledger.io/simulated-runtime": "2s"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}})
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
EOF
}

# done_counts ID: "COMPLETE FINISHED": the burst's Jobs Complete, and its workloads Finished in
# the ledger.
done_counts() {
  local complete finished
  complete="$(kubectl get jobs -n "$NAMESPACE" -l "$LABEL=$1" -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(sum(any(c["type"] == "Complete" and c["status"] == "True"
              for c in j.get("status", {}).get("conditions", [])) for j in items))')"
  finished="$(ledger get workloads -o json | python3 -c '
import json, sys
prefix = "job-burst-" + sys.argv[1] + "-"
items = json.load(sys.stdin)["items"]
print(sum(w["metadata"]["name"].startswith(prefix) and w["status"]["phase"] == "Finished"
          for w in items))' "$1")"
  echo "$complete $finished"
}

declare -A per_job
for size in "${sizes[@]}"; do
  id="$size"
  jobs_yaml "$id" "$size" > "$dir/burst-$id.json"
  step "a burst of $size Jobs"
  started=$SECONDS
  bridge_before="$(cpu_ticks "$bridge_process")"
  admitd_before="$(cpu_ticks "$admitd_process")"
  kubectl create -f "$dir/burst-$id.json" > /dev/null
  echo "created $size Jobs in $((SECONDS - started)) s" >&2
  last_report=$SECONDS
  while true; do
    read -r complete finished <<< "$(done_counts "$id")"
    ((complete == size && finished == size)) && break
    ((SECONDS - started < BURST_WAIT_SECONDS)) ||
      fail "after ${BURST_WAIT_SECONDS}s: $complete of $size Jobs Complete, $finished Finished"
    if ((SECONDS - last_report >= 30)); then
      echo "+$((SECONDS - started))s: $complete Complete, $finished Finished" >&2
      last_report=$SECONDS
    fi
    sleep 5
  done
  wall=$((SECONDS - started))
  bridge_ticks=$(($(cpu_ticks "$bridge_process") - bridge_before))
  admitd_ticks=$(($(cpu_ticks "$admitd_process") - admitd_before))
  awk -v n="$size" -v b="$bridge_ticks" -v a="$admitd_ticks" -v w="$wall" \
    -v idle="$idle_ticks_per_second" -v h="$ticks_per_second" 'BEGIN {
      printf "burst%d.wall_s: %d\n", n, w
      printf "burst%d.bridge_cpu_ms_per_job: %.2f\n", n, b * 1000 / h / n
      net = b - idle * w; if (net < 0) net = 0
      printf "burst%d.bridge_cpu_ms_per_job_less_idle: %.2f\n", n, net * 1000 / h / n
      printf "burst%d.admitd_cpu_ms_per_job: %.2f\n", n, a * 1000 / h / n
    }'
  per_job[$size]="$bridge_ticks $wall"
done

first="${sizes[0]}"
last="${sizes[${#sizes[@]} - 1]}"
read -r first_ticks first_wall <<< "${per_job[$first]}"
read -r last_ticks last_wall <<< "${per_job[$last]}"
awk -v f="$first" -v l="$last" -v ft="$first_ticks" -v lt="$last_ticks" -v fw="$first_wall" \
  -v lw="$last_wall" -v idle="$idle_ticks_per_second" 'BEGIN {
    printf "ratio.bridge_cpu_per_job_%d_vs_%d (goal <= 1.25): %.3f\n", l, f, (lt / l) / (ft / f)
    fn = ft - idle * fw; ln = lt - idle * lw
    if (fn > 0 && ln > 0) {
      printf "ratio.bridge_cpu_per_job_less_idle_%d_vs_%d: %.3f\n", l, f, (ln / l) / (fn / f)
    }
  }'
