#!/usr/bin/env bash
# The partition drill (admitctl drill partition; docs/faults.md, "Drills"): admitd on the Kafka
# ledger is cut from its broker and the cut heals. Nothing may be answered without a durable
# record, and service must resume without a restart.
#
#   ops/scripts/drill_partition.sh ADMITCTL ADMITD [VENV]
#
# Everything runs in a network namespace this script makes (unshare -n), with only its own
# loopback: a fresh broker (ops/kafka/kafka.sh), admitd, the clients, and the cut, made with
# iptables rules that drop the broker's port in that namespace alone. Needs root and iptables.
# Prints PASS or FAIL, with the drill's evidence above it. Exit status: 0 PASS, 1 FAIL, 2 when
# it cannot run here.
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 ADMITCTL ADMITD [VENV]" >&2; exit 2; }
admitctl=$(realpath "$1") admitd=$(realpath "$2")
top=$(cd "$(dirname "$0")/../.." && pwd)
venv=${3:-$top/build/kafka-py-venv}

[ "$(id -u)" = 0 ] || { echo "drill partition: needs root (a network namespace of its own and its packet filter)" >&2; exit 2; }
command -v iptables > /dev/null || { echo "drill partition: needs iptables (Debian package iptables)" >&2; exit 2; }
command -v unshare > /dev/null || { echo "drill partition: needs unshare (util-linux)" >&2; exit 2; }
# What needs the network comes before the namespace: the broker's jars and the Python reader.
"$top/ops/kafka/kafka.sh" fetch > /dev/null
"$top/tests/kafka/python_env.sh" "$venv" > /dev/null

rc=0
unshare -n bash -c 'ip link set lo up && ADMISSION_IN_TEST_NETNS=1 exec "$@"' drill \
  "$top/tests/kafka/run_with_broker.sh" "$top/tests/kafka/drills_test.sh" \
  "$admitctl" "$admitd" "$venv" partition || rc=$?
if [ "$rc" = 0 ]; then
  echo "PASS drill partition"
else
  echo "FAIL drill partition (exit $rc; the evidence is above)"
  exit 1
fi
