#!/usr/bin/env bash
# Installs every build and test dependency that is missing. Idempotent: a second run does
# nothing but check. Debian packages only (plus Java 17 and Maven for the Kafka test broker; the Kafka tests' independent reader
# takes confluent-kafka from PyPI into a virtual environment of the build folder). etcd-server
# is the Kubernetes tests' etcd (ops/k8s/cluster.sh, which builds the Kubernetes binaries with
# the Go toolchain of the machine); on a machine booted with systemd, the package also starts a
# system etcd on 127.0.0.1:2379, which the tests do not use.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  clang-14 libclang-rt-14-dev
  librocksdb-dev librdkafka-dev
  capnproto libcapnp-dev
  libspdlog-dev libfmt-dev
  librapidcheck-dev libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev libcli11-dev libssl-dev nlohmann-json3-dev libhowardhinnant-date-dev
  openjdk-17-jre-headless maven
  curl ca-certificates openssl python3 python3-venv python3-yaml
  prometheus chromium nodejs npm
  iptables util-linux
  etcd-server
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Java and Maven may come from outside Debian on a developer machine; accept them if present.
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do
    case "$p" in openjdk-17-jre-headless|maven) ;; *) filtered+=("$p") ;; esac
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi
# Node.js and npm (the dashboard's browser test) may come from outside Debian too (NodeSource's
# nodejs bundles npm and conflicts with Debian's npm); accept them if present.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do
    case "$p" in nodejs|npm) ;; *) filtered+=("$p") ;; esac
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if ((${#missing[@]} == 0)); then
  echo "setup: all dependencies present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
