#!/usr/bin/env bash
# Writes a nodes file for `ops/k8s/cluster.sh start DIR --nodes FILE` on stdout: Node objects
# that KWOK simulates (docs/k8s.md, "Nodes"), labelled and tainted as GPU clusters label them.
#
#   ops/k8s/nodes/gen-nodes.sh [--cpu N] [--h100 N] [--a100 N] [--rack-size N]
#                              [--racks-per-block N]
#
# Kinds (instance types as Google Cloud names them, with about their figures; allocatable is a
# little less than capacity, as a kubelet reserves some for the system):
#   cpu   n2-standard-32: 32 CPUs, 128 GiB, no GPU
#   h100  a3-highgpu-8g: 8 NVIDIA H100 80GB HBM3, 208 CPUs, 1872 GiB
#   a100  a2-highgpu-8g: 8 NVIDIA A100 SXM4 40GB, 96 CPUs, 680 GiB
# Placement: every kind in blocks of its own (a block is RACKS_PER_BLOCK racks of RACK_SIZE
# nodes); CPU and H100 nodes in zone us-central1-a, A100 nodes in us-central1-b.
#
# The committed files are this script's output:
#   default.yaml  gen-nodes.sh --cpu 2 --h100 2 --a100 2 --rack-size 1 --racks-per-block 2
#   load-20.yaml  gen-nodes.sh --cpu 2 --h100 12 --a100 8 --rack-size 4 --racks-per-block 2
#   tas-16.yaml   gen-nodes.sh --h100 16 --rack-size 4 --racks-per-block 2
#                 (2 blocks x 2 racks x 4 hosts, 8 GPUs each: tests/k8s/bridge_tas_test.sh)
set -euo pipefail

readonly REGION=us-central1
readonly POD_CAPACITY=110
# Each node's InternalIP: 10.128.X.Y, one X per kind.
readonly NODE_NET=10.128

die() { echo "gen-nodes.sh: error: $*" >&2; exit 1; }

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

cpu=0 h100=0 a100=0 rack_size=4 racks_per_block=2
while (($# > 0)); do
  case "$1" in
    --cpu|--h100|--a100|--rack-size|--racks-per-block)
      (($# > 1)) && [[ "$2" =~ ^[0-9]+$ ]] || die "$1 needs a number"
      case "$1" in
        --cpu) cpu="$2" ;;
        --h100) h100="$2" ;;
        --a100) a100="$2" ;;
        --rack-size) rack_size="$2" ;;
        --racks-per-block) racks_per_block="$2" ;;
      esac
      shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
((rack_size > 0 && racks_per_block > 0)) || die "--rack-size and --racks-per-block must be positive"
((cpu + h100 + a100 > 0)) || die "no nodes asked for"
((cpu < 250 && h100 < 250 && a100 < 250)) || die "at most 249 nodes of a kind"

# node KIND INDEX ZONE SUBNET INSTANCE_TYPE CPU CPU_ALLOCATABLE MEMORY MEMORY_ALLOCATABLE
#      [GPU_PRODUCT GPU_MEMORY_MIB GPU_FAMILY]: one Node object. INDEX counts from 1.
node() {
  local kind="$1" index="$2" zone="$3" subnet="$4" instance_type="$5" cpus="$6"
  local cpus_allocatable="$7" memory="$8" memory_allocatable="$9"
  local gpu_product="${10:-}" gpu_memory="${11:-}" gpu_family="${12:-}"
  local name="$kind-$index"
  local rack=$(((index - 1) / rack_size + 1))
  local block=$(((rack - 1) / racks_per_block + 1))
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: $name
  annotations:
    # KWOK manages this node (cluster.sh runs it with this annotation selector).
    kwok.x-k8s.io/node: fake
  labels:
    kubernetes.io/hostname: $name
    kubernetes.io/os: linux
    kubernetes.io/arch: amd64
    node.kubernetes.io/instance-type: $instance_type
    topology.kubernetes.io/region: $REGION
    topology.kubernetes.io/zone: $zone
    topology.admission-ledger.io/block: $kind-b$block
    topology.admission-ledger.io/rack: $kind-b$block-r$rack
EOF
  if [[ -n "$gpu_product" ]]; then
    cat <<EOF
    nvidia.com/gpu.present: "true"
    nvidia.com/gpu.product: $gpu_product
    nvidia.com/gpu.family: $gpu_family
    nvidia.com/gpu.memory: "$gpu_memory"
    nvidia.com/gpu.count: "8"
spec:
  taints:
  - key: nvidia.com/gpu
    value: present
    effect: NoSchedule
EOF
  fi
  cat <<EOF
status:
  addresses:
  - type: InternalIP
    address: $NODE_NET.$subnet.$index
  - type: Hostname
    address: $name
  capacity:
    cpu: "$cpus"
    memory: $memory
    ephemeral-storage: 1Ti
    pods: "$POD_CAPACITY"
EOF
  [[ -z "$gpu_product" ]] || echo '    nvidia.com/gpu: "8"'
  cat <<EOF
  allocatable:
    cpu: "$cpus_allocatable"
    memory: $memory_allocatable
    ephemeral-storage: 1000Gi
    pods: "$POD_CAPACITY"
EOF
  [[ -z "$gpu_product" ]] || echo '    nvidia.com/gpu: "8"'
}

echo "# Nodes for ops/k8s/cluster.sh start --nodes FILE, written by ops/k8s/nodes/gen-nodes.sh"
echo "#   --cpu $cpu --h100 $h100 --a100 $a100 --rack-size $rack_size" \
  "--racks-per-block $racks_per_block"
echo "# (regenerate it rather than editing it; docs/k8s.md, \"Nodes\")."
for ((i = 1; i <= cpu; i++)); do
  node cpu "$i" "$REGION-a" 1 n2-standard-32 32 31 128Gi 120Gi
done
for ((i = 1; i <= h100; i++)); do
  node h100 "$i" "$REGION-a" 2 a3-highgpu-8g 208 206 1872Gi 1840Gi \
    NVIDIA-H100-80GB-HBM3 81559 hopper
done
for ((i = 1; i <= a100; i++)); do
  node a100 "$i" "$REGION-b" 3 a2-highgpu-8g 96 94 680Gi 660Gi \
    NVIDIA-A100-SXM4-40GB 40960 ampere
done
