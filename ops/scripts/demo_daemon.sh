#!/usr/bin/env bash
# The demo through admitd: a throwaway PKI with one client certificate per actor (openssl, by
# test_pki.sh), a policy giving each actor its role, admitd on a fresh ledger listening on
# loopback TLS, then `admitctl --connect tls:... demo --certs PKI`. Stops admitd with SIGTERM
# afterwards (its ledger stays at LEDGER for inspection).
# Usage: demo_daemon.sh ADMITCTL ADMITD LEDGER [PAGE_DIR]
# LEDGER is a directory, or kafka://HOST:PORT/TOPIC: the Kafka ledger (the topic is created;
# admitd's local copy goes to $DEMO_STATE, default a folder removed afterwards).
set -euo pipefail
admitctl=$1 admitd=$2 ledger=$3 page_dir=${4:-$3}
here=$(cd "$(dirname "$0")" && pwd)
kafka_args=()
if [[ "$ledger" == kafka://* ]]; then
  [ $# -ge 4 ] || { echo "demo_daemon: a Kafka ledger needs PAGE_DIR" >&2; exit 2; }
elif [ -e "$ledger" ] && [ -n "$(ls -A "$ledger" 2>/dev/null)" ]; then
  echo "demo_daemon: $ledger is not empty; the demo only writes a fresh ledger" >&2
  exit 2
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/admission-demo-daemon.XXXXXX")
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; wait "$pid" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
if [[ "$ledger" == kafka://* ]]; then
  kafka_args=(--state "${DEMO_STATE:-$work/state}" --create-topic)
fi
actors=(platform-ops tenant pod-runtime security.example.com/scanner
        security.example.com/revoker finance.example.com/budget)
"$here/test_pki.sh" "$work/pki" "${actors[@]}"
cat > "$work/policy.yaml" <<'YAML'
principals:
- name: platform-ops
  roles: [operator]
- name: tenant
  roles: [tenant]
  namespaces: [nlp, vision, inference, batch]
- name: pod-runtime
  roles: [runtime]
- name: security.example.com/scanner
  roles: [check-controller]
- name: finance.example.com/budget
  roles: [check-controller]
- name: security.example.com/revoker
  roles: [operator]
YAML
"$admitd" --ledger "$ledger" "${kafka_args[@]}" --listen tls:127.0.0.1:0 --tls-cert "$work/pki/server.pem" \
  --tls-key "$work/pki/server.key" --client-ca "$work/pki/ca.pem" \
  --policy "$work/policy.yaml" --ready-file "$work/ready" --log-level warn &
pid=$!
for _ in $(seq 1 300); do
  [ -s "$work/ready" ] && break
  kill -0 "$pid" 2>/dev/null || { echo "demo_daemon: admitd exited before it was ready" >&2; exit 1; }
  sleep 0.1
done
[ -s "$work/ready" ] || { echo "demo_daemon: admitd was not ready within 30 s" >&2; exit 1; }
address=$(grep '^tls:' "$work/ready")
rc=0
"$admitctl" --connect "$address" demo --certs "$work/pki" --dir "$page_dir" || rc=$?
kill -TERM "$pid"
wait "$pid" || { echo "demo_daemon: admitd did not stop cleanly" >&2; [ $rc != 0 ] || rc=1; }
pid=
[ $rc != 0 ] || echo "admitd stopped; its ledger stays: admitctl --ledger $ledger log | verify | replay --verify"
exit $rc
