#!/usr/bin/env bash
# Fails when any given file includes a header the pure decider must not see: storage, Kafka,
# async I/O, RPC, logging, clocks/threads of the OS, or another folder than schema/.
set -u
status=0
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](rocksdb/|librdkafka/|rdkafka|kj/async|capnp/rpc|capnp/ez-rpc|spdlog/|thread>|mutex>|random>|ledger/|replay/|consumers/|ops/)'
for f in "$@"; do
  if hits=$(grep -nE "$pattern" "$f"); then
    while IFS= read -r line; do
      echo "$f:${line%%:*}: error: forbidden include in a pure library: ${line#*:}" >&2
    done <<< "$hits"
    status=1
  fi
done
exit $status
