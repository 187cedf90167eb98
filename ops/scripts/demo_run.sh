#!/usr/bin/env bash
# Runs the demo with a built admitctl into a fresh ledger directory.
# Usage: demo_run.sh ADMITCTL LEDGER_DIR
set -euo pipefail
admitctl=$1
ledger=$2
rm -rf "$ledger"
a() { "$admitctl" --ledger "$ledger" "$@"; }

echo "== Recording a small GPU platform's definitions at 2026-11-29T09:00:00Z (operator 'platform-ops')"
a --at 2026-11-29T09:00:00Z --as platform-ops dev append \
  --json '{"idempotencyKey":"flavor/h100-eu","body":{"flavorDefined":{"name":"h100-eu","nodeLabels":[{"key":"nvidia.com/gpu.product","value":"H100-SXM5-80GB"},{"key":"nvidia.com/gpu.memory","value":"81920"},{"key":"topology.kubernetes.io/block","value":"b1"},{"key":"topology.kubernetes.io/region","value":"eu-west"}]}}}' \
  --json '{"idempotencyKey":"flavor/a100-us","body":{"flavorDefined":{"name":"a100-us","nodeLabels":[{"key":"nvidia.com/gpu.product","value":"A100-SXM4-40GB"},{"key":"nvidia.com/gpu.memory","value":"40960"},{"key":"topology.kubernetes.io/region","value":"us-east"}]}}}' \
  --json '{"idempotencyKey":"cq/research","body":{"clusterQueueDefined":{"name":"research","cohortName":"ml","resourceGroups":[{"coveredResources":["nvidia.com/gpu"],"flavors":[{"name":"h100-eu","resources":[{"name":"nvidia.com/gpu","nominalQuotaMilli":"8000"}]},{"name":"a100-us","resources":[{"name":"nvidia.com/gpu","nominalQuotaMilli":"16000"}]}]}]}}}'

echo
echo "== A tenant submits a training job at 09:05 (the same request retried is recorded once)"
submit='{"idempotencyKey":"submit/team-a/llm-pretrain","body":{"workloadSubmitted":{"workload":{"namespace":"team-a","name":"llm-pretrain","uid":"7f1c","queueName":"research","priority":1000,"hasPriority":true,"podSets":[{"name":"workers","count":4,"requests":[{"name":"nvidia.com/gpu","milli":"8000"}]}]}}}}'
a --at 2026-11-29T09:05:00Z --as team-a dev append --json "$submit"
a --at 2026-11-29T09:05:02Z --as team-a dev append --json "$submit"

echo
echo "== The ledger (sequence, logical time, event, actor, idempotency key)"
a log
echo
echo "== One event as JSON (admitctl log -o json)"
a log --from 4 --limit 1 -o json
echo
echo "== Verifying the hash chain"
a verify
