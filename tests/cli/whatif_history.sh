# A small recorded history for the what-if and estimate tests (tests/cli/whatif_cli_test.sh,
# tests/ui/whatif_report_test.sh). Sourced; defines:
#   whatif_history ADMITCTL LEDGER DIR [open]   record it into the embedded ledger LEDGER
# ClusterQueue gpu holds 4 GPUs; 4-GPU jobs (ml/job-a..f, LocalQueue ml/lq) run one at a time.
# a..e are submitted at 10:00 and run a 1h, b 2h, c 30m, d 1h, e 45m (finished at 11:00, 13:00,
# 13:30, 14:30 and 15:15); f, submitted at 12:30, runs 15m (15:15 to 15:30). Recorded waits: 0,
# 1h, 3h, 3h30m, 4h30m and f 2h45m. With `open` the record ends at a tick at 13:40 instead:
# d (admitted at 13:30) still runs, e and f are still pending.
# Writes its YAML into DIR, with DIR/bigger-quota.yaml: ClusterQueue gpu with 24 GPUs.
whatif_job() {  # NAME: a Job of one 4-GPU pod in LocalQueue ml/lq
  cat <<YAML
---
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
  namespace: ml
  labels: {kueue.x-k8s.io/queue-name: lq}
spec:
  template:
    spec:
      containers:
      - {name: c, image: trainer, resources: {requests: {nvidia.com/gpu: "4"}}}
      restartPolicy: Never
YAML
}
whatif_history() {
  local admitctl=$1 ledger=$2 dir=$3 name
  cat > "$dir/setup.yaml" <<'YAML'
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
      resources: [{name: nvidia.com/gpu, nominalQuota: 4}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: ml}
spec: {clusterQueue: gpu}
YAML
  sed 's/nominalQuota: 4}/nominalQuota: 24}/' "$dir/setup.yaml" |
    awk 'BEGIN { RS = "---\n"; ORS = "" } /kind: ClusterQueue/ { print }' > "$dir/bigger-quota.yaml"
  for name in a b c d e; do whatif_job $name; done > "$dir/jobs.yaml"
  whatif_job f > "$dir/jobs-f.yaml"
  local t=2026-11-29T at
  "$admitctl" --ledger "$ledger" --at ${t}10:00:00Z apply -f "$dir/setup.yaml" > /dev/null &&
    "$admitctl" --ledger "$ledger" --at ${t}10:00:00Z submit -f "$dir/jobs.yaml" > /dev/null ||
    return 1
  for at in a/11:00 submit-f/12:30 b/13:00 c/13:30 open/13:40 d/14:30 e/15:15 f/15:30; do
    case ${at%/*} in
      submit-f)
        "$admitctl" --ledger "$ledger" --at "${t}${at#*/}:00Z" submit -f "$dir/jobs-f.yaml" ;;
      open)
        [ "${4:-}" != open ] && continue
        "$admitctl" --ledger "$ledger" tick --to "${t}${at#*/}:00Z"
        return ;;
      *)
        "$admitctl" --ledger "$ledger" --at "${t}${at#*/}:00Z" finish "ml/job-${at%/*}" ;;
    esac > /dev/null || return 1
  done
}
