#!/usr/bin/env bash
# Fails when any given file includes a header the pure decider must not see: storage, Kafka,
# async I/O, RPC, logging, clocks/threads of the OS, or another folder than schema/.
# --allow PREFIX (first): includes of PREFIX (a pure room's own folder, e.g. ops/views/) pass.
set -u
status=0
allow=
if [ "${1:-}" = --allow ]; then allow=$2; shift 2; fi
pattern='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"](rocksdb/|librdkafka/|rdkafka|kj/async|capnp/rpc|capnp/ez-rpc|spdlog/|thread>|mutex>|random>|ledger/|replay/|consumers/|ops/)'
for f in "$@"; do
  if hits=$(grep -nE "$pattern" "$f" | { if [ -n "$allow" ]; then grep -vF "\"$allow"; else grep -E .; fi; }); then
    while IFS= read -r line; do
      echo "$f:${line%%:*}: error: forbidden include in a pure library: ${line#*:}" >&2
    done <<< "$hits"
    status=1
  fi
done
exit $status
