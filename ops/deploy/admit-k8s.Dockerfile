# The bridge admit-k8s (docs/k8s.md), as ops/deploy/admit-k8s.yaml runs it. NOT BUILT BY ANY
# TEST: our machines have no container runtime (the docker client, no daemon).
# From the checkout's top:
#   docker build -f ops/deploy/admit-k8s.Dockerfile -t admission-ledger/admit-k8s:dev .
# ops/k8s/bridge/build.sh generates the Go code of our Cap'n Proto schemas (so it needs
# capnproto and schema/), checks gofmt and go vet, and builds; CGO_ENABLED=0 makes the binary
# static.
FROM golang:1.26-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends capnproto \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY schema/ schema/
COPY ops/k8s/bridge/ ops/k8s/bridge/
RUN CGO_ENABLED=0 ops/k8s/bridge/build.sh /out/admit-k8s

FROM debian:12-slim
COPY --from=build /out/admit-k8s /usr/local/bin/admit-k8s
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/admit-k8s"]
