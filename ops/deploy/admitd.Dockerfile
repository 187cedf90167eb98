# admitd and admitctl (docs/admitd.md) on Debian 12, as ops/deploy/admitd.yaml runs them. NOT
# BUILT BY ANY TEST: our machines have no container runtime (the docker client, no daemon).
# From the checkout's top:
#   docker build -f ops/deploy/admitd.Dockerfile -t admission-ledger/admitd:dev .
# The build stage installs what ops/scripts/setup.sh installs for the C++ build (CMake
# configures the tests too, so their libraries are needed); the runtime stage installs the
# Debian 12 packages of the shared libraries admitd and admitctl load (their `ldd`, looked up
# with `dpkg -S` on a build machine; RocksDB is linked statically).
FROM debian:12 AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates python3 \
      librocksdb-dev librdkafka-dev capnproto libcapnp-dev libspdlog-dev libfmt-dev \
      librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev \
      libyaml-cpp-dev libcli11-dev libssl-dev nlohmann-json3-dev libhowardhinnant-date-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset default && cmake --build --preset default --target admitd admitctl

FROM debian:12-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libcapnp-0.9.2 libfmt9 liblz4-1 librdkafka1 libsasl2-2 libsnappy1v5 libspdlog1.10 \
      libssl3 libstdc++6 libyaml-cpp0.7 libzstd1 libdate-tz3 tzdata \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/ops/admitd /src/build/ops/admitctl /usr/local/bin/
# The uid admitd.yaml runs it as; the ledger's volume is given to its group (fsGroup).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/admitd"]
