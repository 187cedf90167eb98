#!/usr/bin/env bash
# A throwaway Kubernetes cluster on loopback, like a local kind cluster: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, KWOK simulating the kubelets of the nodes it
# creates (pods run and finish as their annotations say), the JobSet controller, then admitd and
# the bridge admit-k8s. Only package registries are reachable from our machines and CI, so the
# Kubernetes binaries, KWOK and the JobSet controller are built from the Go module proxy and etcd
# comes from Debian's etcd-server package.
#
#   ops/k8s/cluster.sh build        build the Kubernetes binaries, KWOK and JobSet once per machine
#   ops/k8s/cluster.sh start DIR    start a fresh cluster in DIR; prints DIR/admin.kubeconfig
#   ops/k8s/cluster.sh start --control-plane-only DIR    without admitd and the bridge
#   ops/k8s/cluster.sh start --nodes FILE DIR            other nodes than nodes/default.yaml
#   ops/k8s/cluster.sh stop DIR     stop what start started in DIR
#
# stdout carries only what callers capture (the kubeconfig path printed by `start`, the folder
# printed by `bin-dir`); every progress or error message goes to stderr.
set -euo pipefail

readonly K8S_VERSION=v1.34.0
# The staging modules (k8s.io/api, client-go, apiserver, ...) are published as v0.MINOR.PATCH.
readonly STAGING_VERSION=v0.34.0
readonly K8S_GIT_MAJOR=1
readonly K8S_GIT_MINOR=34
# The commit that the v1.34.0 tag names (the module proxy's Origin.Hash for the module).
readonly K8S_GIT_COMMIT=f28b4c9efbca5c5c0af716d9f2d5702667ee8a45
# kubectl too, of the server's version: the tests then depend neither on a kubectl installed on
# the machine nor on its version skew (Debian's kubernetes-client conflicts with the kubectl that
# our machines come with).
readonly COMPONENTS=(kube-apiserver kube-controller-manager kubectl)
# The scheduler, from the same module and pins, has a stamp of its own (it came later): a machine
# whose cache holds the three above builds only the scheduler.
readonly SCHEDULER=kube-scheduler
# KWOK's controller (sigs.k8s.io/kwok, `go install` from the module proxy) plays the kubelets of
# simulated nodes. Its module's hash is pinned as go.sum records it, and its Stage CRD is copied
# from the module beside the binary.
readonly KWOK_MODULE=sigs.k8s.io/kwok
readonly KWOK_VERSION=v0.7.0
readonly KWOK_MODULE_SUM="h1:+eGsNOIPapjsSzeZlOEcwbpyEVa2Vqlcafa0qIjaKV4="
readonly KWOK_STAGE_CRD=kwok.x-k8s.io_stages.yaml
# The JobSet controller (sigs.k8s.io/jobset, the module's main package, from the module proxy)
# runs JobSets: groups of Jobs, as GPU training platforms run them. Its module's hash is pinned
# as for KWOK and its JobSet CRD is copied from the module beside the binary. The proxy serves
# this exact version, but not the module's version list. The commit is the proxy's Origin.Hash.
readonly JOBSET_MODULE=sigs.k8s.io/jobset
readonly JOBSET_VERSION=v0.10.1
readonly JOBSET_MODULE_SUM="h1:u8QKifNsrWVrlRFe6w2ofYTqFT9ma2DRHxfeB2m9xyU="
readonly JOBSET_GIT_COMMIT=da72d32bb0060354aa04b1a5868f3b363b088446
readonly JOBSET_CRD=jobset.x-k8s.io_jobsets.yaml
readonly JOBSET_CRD_NAME=jobsets.jobset.x-k8s.io
# Kueue's scalability harness (tests/bench/kueue_side_by_side.sh): its runner and minimalkueue
# from sigs.k8s.io/kueue, built like the JobSet controller, with Kueue's CRDs and profiles.
readonly KUEUE_MODULE=sigs.k8s.io/kueue
readonly KUEUE_VERSION=v0.17.0
readonly KUEUE_MODULE_SUM="h1:7hzb38M4eKGzYW+CFv2s1L+swzzacUCHOCXxZmAV90I="

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
top="$(cd "$script_dir/../.." && pwd)"
readonly top
# The edited go.mod and go.sum of k8s.io/kubernetes, committed so that builds repeat exactly.
readonly pinned_go_mod="$script_dir/kubernetes-go.mod"
readonly pinned_go_sum="$script_dir/kubernetes-go.sum"
# Our kueue.x-k8s.io CRDs and BudgetPolicy's, installed by start (docs/k8s.md).
readonly crds_dir="$script_dir/crds"
# KWOK's Stages (our pods' and nodes' lifecycles) and its RBAC, and the nodes start creates
# unless told otherwise (docs/k8s.md, "Pods that run").
readonly kwok_dir="$script_dir/kwok"
readonly default_nodes_file="$script_dir/nodes/default.yaml"
# The JobSet controller's RBAC (it runs as the user jobset-controller).
readonly jobset_dir="$script_dir/jobset"
# The names of its webhook configurations in the module's kustomize deployment.
readonly JOBSET_MUTATING_WEBHOOKS=jobset-mutating-webhook-configuration
readonly JOBSET_VALIDATING_WEBHOOKS=jobset-validating-webhook-configuration
# KWOK manages the nodes that carry this annotation, and only those (a Node object made by a
# test, without it, stays without a kubelet).
readonly KWOK_NODE_ANNOTATION_KEY=kwok.x-k8s.io/node
readonly KWOK_NODE_ANNOTATION_VALUE=fake
# Pod IPs, handed out by KWOK; apart from the Service range.
readonly KWOK_POD_CIDR=10.244.0.1/16
# The Lease each simulated node renews in kube-node-lease, as a kubelet's (its default).
readonly KWOK_NODE_LEASE_SECONDS=40
# Those of them converted between v1beta1 and v1beta2 by admit-k8s's conversion webhook.
readonly CONVERTED_CRDS=(clusterqueues.kueue.x-k8s.io cohorts.kueue.x-k8s.io
  localqueues.kueue.x-k8s.io workloads.kueue.x-k8s.io)
# The deployment manifests (docs/k8s.md, "Deployment"): start applies their namespace and the
# bridge's RBAC, and runs the bridge under that service account.
readonly deploy_dir="$top/ops/deploy"
readonly BRIDGE_NAMESPACE=admission-ledger
readonly BRIDGE_SERVICE_ACCOUNT=admit-k8s
# The Lease of the bridge's leader election (ops/k8s/bridge/cmd/admit-k8s).
readonly BRIDGE_LEASE=admit-k8s.admission-ledger.io
# Kueue's visibility API as the bridge serves it (docs/k8s.md, "Visibility"): the APIService
# (Kueue's name) and the Service it names, and the front proxy's name.
readonly VISIBILITY_APISERVICE=v1beta2.visibility.kueue.x-k8s.io
readonly VISIBILITY_SERVICE=admit-k8s-visibility
readonly FRONT_PROXY_CLIENT=front-proxy-client
# Common names of the client certificates admitd's policy names: the bridge's, and one for
# admitctl (operator and auditor).
readonly BRIDGE_PRINCIPAL=admit-k8s
readonly ADMITCTL_PRINCIPAL=admitctl
# Binaries, and the sources and Go build cache while building. Outside the work tree by default:
# CI runs in a fresh clone each time, and every clone and work tree of the machine should reuse
# one build. ADMISSION_K8S_BIN_DIR moves it.
readonly bin_root="${ADMISSION_K8S_BIN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/admission-ledger/k8s}"
readonly version_dir="$bin_root/$K8S_VERSION"
# Written last by build, listing each binary and its SHA-256: its presence means the build is
# complete. One for COMPONENTS, one for the scheduler, one each for KWOK and the JobSet
# controller (named by their versions).
readonly built_stamp="$version_dir/built.txt"
readonly scheduler_stamp="$version_dir/built-$SCHEDULER.txt"
readonly kwok_stamp="$version_dir/built-kwok-$KWOK_VERSION.txt"
readonly jobset_stamp="$version_dir/built-jobset-$JOBSET_VERSION.txt"
readonly kueue_perf_stamp="$version_dir/built-kueue-perf-$KUEUE_VERSION.txt"
readonly go_bin="${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}"

# Bounded waits, in seconds.
readonly BUILD_LOCK_WAIT_SECONDS=3600  # another process may be building (6 min cold on 2 cores)
# The whole start, nodes Ready included: 10 to 17 s on a 2-core machine running another build.
readonly START_TIMEOUT_SECONDS=180
readonly STOP_TIMEOUT_SECONDS=30       # each component exits within a second or two of SIGTERM
readonly KILL_TIMEOUT_SECONDS=10       # after SIGKILL, only the kernel is left to wait for
readonly POLL_INTERVAL_SECONDS=0.2
# Each node on a line: its name, its Ready condition's status, its taints' keys.
readonly NODES_STATE_JSONPATH='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}{"\n"}{end}'
# How long created nodes may stay not Ready before KWOK is restarted (nodes_ready_nudging).
readonly NODES_NUDGE_SECONDS=15
# Ports are picked at random and checked, then bound by the processes a moment later; another
# process can take one in between, so a start that fails on a busy port is retried.
readonly START_ATTEMPTS=3
# Below Linux's default ephemeral range (32768-60999), so the kernel does not hand these ports
# to outgoing connections while we are choosing.
readonly PORT_RANGE_LOW=20000
readonly PORT_RANGE_SIZE=12000
readonly CERT_DAYS=7
# Addresses of the cluster's Services; nothing routes them (no kube-proxy), the API server only
# allocates from the range and the `kubernetes` Service takes its first address.
readonly SERVICE_CLUSTER_IP_RANGE=10.0.0.0/24
readonly KUBERNETES_SERVICE_IP=10.0.0.1
# Started in this order, stopped in the reverse one. start --control-plane-only starts the
# first six (the cluster: its control plane, KWOK's simulated kubelets and the JobSet
# controller); DIR/components lists what a start started.
readonly PROCESSES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok
  jobset-controller admitd admit-k8s)
readonly CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok
  jobset-controller)

log() { echo "cluster.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  cat <<EOF
Usage: ops/k8s/cluster.sh COMMAND [OPTIONS] [DIR]

A throwaway Kubernetes $K8S_VERSION cluster on 127.0.0.1 for tests and trying things out, like
a local kind cluster: etcd (Debian's etcd-server), kube-apiserver, kube-controller-manager and
kube-scheduler, KWOK $KWOK_VERSION simulating the kubelets of the nodes (GPU nodes among them),
the JobSet controller $JOBSET_VERSION (jobsets.jobset.x-k8s.io), then admitd (the ledger) and
admit-k8s (the bridge). Pods are scheduled onto the simulated
nodes and run: Running and Ready at once, finished after the time their annotation
admission-ledger.io/simulated-runtime gives (Succeeded, or Failed with
admission-ledger.io/simulated-exit: failed), else running until deleted (docs/k8s.md).

Commands:
  build       Build kube-apiserver, kube-controller-manager, kubectl and kube-scheduler
              $K8S_VERSION, KWOK's controller $KWOK_VERSION, the JobSet controller
              $JOBSET_VERSION ($JOBSET_MODULE) and Kueue $KUEUE_VERSION's scalability runner
              and minimalkueue (kueue-perf/, for tests/bench/kueue_side_by_side.sh) from the Go
              module proxy into $version_dir. Builds only what is missing
              (each has its stamp there: built.txt, built-$SCHEDULER.txt,
              built-kwok-$KWOK_VERSION.txt, built-jobset-$JOBSET_VERSION.txt,
              built-kueue-perf-$KUEUE_VERSION.txt); a no-op when all
              are there. On 2 cores: 6 to 17 minutes for the first three, up to 5 more for the
              scheduler, 2 to 3 for KWOK, 3 to 4 for JobSet, 4 to 6 for Kueue's runner, with a
              Go build cache of up to 3 GB (deleted afterwards).
  start [--control-plane-only] [--nodes FILE | --no-nodes] [--admitd PATH]
        [--admit-k8s PATH] DIR
              Start a fresh cluster whose certificates, data, logs and pid files live in DIR:
              waits for the API server's /readyz, starts the scheduler (its own identity
              system:kube-scheduler, no leader election), installs our CRDs
              (ops/k8s/crds/) and the MutatingWebhookConfiguration of admit-k8s's Job webhook
              (at the address written to DIR/webhook.address, served with DIR/pki/webhook.pem
              and .key), and points the CRDs' conversion webhook (v1beta1 <-> v1beta2) at the
              same address; installs KWOK's Stage CRD, our Stages (ops/k8s/kwok/) and KWOK's
              RBAC, starts KWOK (as kwok-controller, for the nodes annotated
              $KWOK_NODE_ANNOTATION_KEY=$KWOK_NODE_ANNOTATION_VALUE), creates the nodes and
              waits until they are Ready; installs the JobSet CRD (jobset.x-k8s.io v1alpha2),
              the JobSet controller's RBAC (ops/k8s/jobset/) and its webhook configurations
              (JobSets' defaulting and validation, their pods' for exclusive placement; at a
              free port of 127.0.0.1, served with DIR/pki/jobset-webhook.pem) and starts it
              (as jobset-controller, no leader election, its internal cert management and
              metrics off); then
              - admitd on a fresh ledger in DIR/ledger, listening on unix:DIR/admitd.sock
                (admin for this user) and on TLS on 127.0.0.1 (the address is written to
                DIR/admitd.address), its certificates from the cluster's CA (DIR/pki/admitd.pem),
                its policy DIR/admitd-policy.yaml: admit-k8s has the bridge role (define,
                submit, delete and finish in every namespace, report pods, forward checks);
                admitctl (DIR/pki/admitctl.pem and .key) is operator and auditor;
              - ops/deploy/'s namespace $BRIDGE_NAMESPACE and the bridge's RBAC, and admit-k8s
                as its service account (a token in DIR/admit-k8s.kubeconfig), with leader
                election, serving the Job webhook and the conversion webhook;
              and prints the path of DIR/admin.kubeconfig on stdout. When DIR's cluster is
              already running, just prints the path. Data left in DIR by a stopped cluster
              (etcd's and the ledger) is deleted.
              --control-plane-only  start neither admitd nor the bridge (the bridge's own
                                    tests start theirs); the scheduler, KWOK, the nodes and
                                    the JobSet controller are part of the cluster and start
                                    all the same. The
                                    webhooks stay installed and, with nobody serving them,
                                    labelled Jobs are refused and so is what needs a
                                    conversion (a v1beta1 ClusterQueue, Cohort, LocalQueue
                                    or Workload)
              --nodes FILE          the nodes to create: Node objects in YAML, each with the
                                    annotation $KWOK_NODE_ANNOTATION_KEY: \
$KWOK_NODE_ANNOTATION_VALUE
                                    (default ops/k8s/nodes/default.yaml: 2 CPU nodes, 2 with 8
                                    H100 and 2 with 8 A100 GPUs; load-20.yaml has 20 GPU
                                    nodes; ops/k8s/nodes/gen-nodes.sh writes others)
              --no-nodes            create no node: pods are created but stay Pending
              --admitd PATH         admitd (default \$ADMITD, else $top/build/ops/admitd)
              --admit-k8s PATH      the bridge (default \$ADMIT_K8S, else $top/build/admit-k8s)
              With the cluster up:
                kubectl --kubeconfig DIR/admin.kubeconfig get nodes,pods -A
                kubectl --kubeconfig DIR/admin.kubeconfig get workloads -A
                admitctl --connect unix:DIR/admitd.sock log
                admitctl --connect \$(cat DIR/admitd.address) --cert DIR/pki/admitctl.pem \\
                         --key DIR/pki/admitctl.key --ca DIR/pki/ca.pem get clusterqueues
  stop DIR    Stop everything that start started in DIR, the bridge and admitd first, then the
              JobSet controller, KWOK, the scheduler, the controller manager, the API server
              and etcd (SIGTERM, then SIGKILL after ${STOP_TIMEOUT_SECONDS}s). A no-op when
              nothing is running. Leaves DIR, the ledger and the logs in place.
  bin-dir     Print the folder holding the built binaries, kubectl among them (exit 1 when they
              are not all built).
  --help      Show this text.

Environment:
  ADMISSION_K8S_BIN_DIR  Where build puts its binaries (default
                         \${XDG_CACHE_HOME:-~/.cache}/admission-ledger/k8s, shared by every
                         clone on the machine).
  GO                     The go command for build (default: go on PATH, else /usr/local/go/bin/go).
  ADMITD, ADMIT_K8S      admitd and admit-k8s for start (see --admitd, --admit-k8s).
  K8S_UPDATE_PINS=1      build resolves the module graph anew (-mod=mod) and rewrites
                         ops/k8s/kubernetes-go.mod and .sum; otherwise it builds exactly
                         what they pin (-mod=readonly).
EOF
}

require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (ops/scripts/setup.sh installs it)"
  done
}

# stamp_ok STAMP FILE...: STAMP, written by a successful build, lists every FILE, and each is in
# version_dir with the hash listed.
stamp_ok() {
  local stamp="$1" file
  shift
  [[ -s "$stamp" ]] || return 1
  for file in "$@"; do
    grep -q "  $file\$" "$stamp" || return 1
  done
  (cd "$version_dir" && sha256sum --quiet --check "$stamp" >/dev/null 2>&1)
}
kubernetes_built() { stamp_ok "$built_stamp" "${COMPONENTS[@]}"; }
scheduler_built() { stamp_ok "$scheduler_stamp" "$SCHEDULER"; }
kwok_built() { stamp_ok "$kwok_stamp" kwok "$KWOK_STAGE_CRD"; }
jobset_built() { stamp_ok "$jobset_stamp" jobset-controller "$JOBSET_CRD"; }
kueue_perf_built() { stamp_ok "$kueue_perf_stamp" kueue-perf/runner kueue-perf/minimalkueue; }
# True when everything start needs is built.
is_built() { kubernetes_built && scheduler_built && kwok_built && jobset_built; }

# Prints the go.mod of k8s.io/kubernetes with every `k8s.io/X => ./staging/src/k8s.io/X`
# replacement pointed at the published module k8s.io/X at STAGING_VERSION.
edit_go_mod() {
  local go_mod="$1"
  sed -E "s#^([[:space:]]*)(k8s\.io/[A-Za-z0-9._/-]+) => \./staging/src/k8s\.io/[A-Za-z0-9._/-]+\$#\1\2 => \2 $STAGING_VERSION#" "$go_mod"
}

# build_kubernetes COMPONENT...: builds these commands of k8s.io/kubernetes (./cmd/COMPONENT)
# into version_dir with the pinned module graph, then writes the stamps of what they complete.
build_kubernetes() {
  local started_in=$SECONDS
  local src="$version_dir/src"
  local gocache="$version_dir/gocache"
  # The Go module cache stays the user's (shared and read-only); the build cache is ours, so
  # that its 3 GB can be deleted once the binaries exist.
  export GOCACHE="$gocache"

  log "downloading k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
  local module_dir
  module_dir="$(cd /tmp \
    && GOFLAGS=-mod=mod "$go_bin" mod download -json "k8s.io/kubernetes@$K8S_VERSION" \
    | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$module_dir" && -f "$module_dir/go.mod" ]] \
    || die "go mod download k8s.io/kubernetes@$K8S_VERSION gave no module folder"

  rm -rf "$src"
  cp -r "$module_dir" "$src"
  chmod -R u+w "$src"
  # The workspace file names the staging folders, which the module zip does not carry.
  rm -f "$src/go.work" "$src/go.work.sum"
  local mod_flag
  if [[ -s "$pinned_go_mod" && -s "$pinned_go_sum" && "${K8S_UPDATE_PINS:-0}" != 1 ]]; then
    cp "$pinned_go_mod" "$src/go.mod"
    cp "$pinned_go_sum" "$src/go.sum"
    # Exactly the committed module graph: a build that would change go.mod or go.sum fails.
    mod_flag=-mod=readonly
  else
    log "making $pinned_go_mod anew: pointing the staging replacements at $STAGING_VERSION"
    edit_go_mod "$module_dir/go.mod" > "$src/go.mod"
    ! grep -q '=> \./staging' "$src/go.mod" || die "a staging replacement was left in go.mod"
    mod_flag=-mod=mod
  fi

  local ldflags="-s -w"
  ldflags+=" -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=$K8S_GIT_MAJOR"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$K8S_GIT_MINOR"
  ldflags+=" -X k8s.io/component-base/version.gitCommit=$K8S_GIT_COMMIT"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  local component component_started_in
  for component in "$@"; do
    component_started_in=$SECONDS
    log "building $component $K8S_VERSION ($mod_flag)"
    (cd "$src" && nice -n 10 "$go_bin" build "$mod_flag" -trimpath -ldflags "$ldflags" \
      -o "$version_dir/$component.partial" "./cmd/$component") \
      || die "building $component failed (sources in $src, build cache in $gocache)"
    mv "$version_dir/$component.partial" "$version_dir/$component"
    if [[ "$component" != kubectl ]]; then
      "$version_dir/$component" --version | grep -qx "Kubernetes $K8S_VERSION" \
        || die "$component reports '$("$version_dir/$component" --version)', not $K8S_VERSION"
    fi
    log "built $component in $((SECONDS - component_started_in))s"
  done
  if [[ "$mod_flag" == -mod=mod ]]; then
    cp "$src/go.mod" "$pinned_go_mod"
    cp "$src/go.sum" "$pinned_go_sum"
    log "wrote $pinned_go_mod and $pinned_go_sum: commit them so that builds repeat exactly"
  fi
  local cache_size
  cache_size="$(du -sh "$gocache" | cut -f1)"
  rm -rf "$gocache" "$src"
  if [[ " $* " == *" ${COMPONENTS[0]} "* ]]; then
    (cd "$version_dir" && sha256sum "${COMPONENTS[@]}") > "$built_stamp.partial"
    mv "$built_stamp.partial" "$built_stamp"
  fi
  if [[ " $* " == *" $SCHEDULER "* ]]; then
    (cd "$version_dir" && sha256sum "$SCHEDULER") > "$scheduler_stamp.partial"
    mv "$scheduler_stamp.partial" "$scheduler_stamp"
  fi
  log "built $* in $((SECONDS - started_in))s into $version_dir (build cache $cache_size, deleted)"
}

# build_kwok: KWOK's controller from the Go module proxy at KWOK_VERSION (its own go.mod and
# go.sum pin its dependencies; the module's hash is checked against KWOK_MODULE_SUM), and the
# Stage CRD of that module.
build_kwok() {
  local started_in=$SECONDS
  local gocache="$version_dir/gocache-kwok"
  local gobin="$version_dir/kwok-build"
  log "downloading $KWOK_MODULE@$KWOK_VERSION from the Go module proxy"
  local info module_dir sum
  info="$(cd /tmp && GOFLAGS=-mod=mod "$go_bin" mod download -json "$KWOK_MODULE@$KWOK_VERSION")" \
    || die "go mod download $KWOK_MODULE@$KWOK_VERSION failed"
  module_dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<< "$info")"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<< "$info")"
  [[ "$sum" == "$KWOK_MODULE_SUM" ]] \
    || die "$KWOK_MODULE@$KWOK_VERSION has the hash '$sum', not the pinned $KWOK_MODULE_SUM"
  [[ -f "$module_dir/kustomize/crd/bases/$KWOK_STAGE_CRD" ]] \
    || die "$KWOK_MODULE@$KWOK_VERSION has no kustomize/crd/bases/$KWOK_STAGE_CRD"
  log "building kwok $KWOK_VERSION"
  rm -rf "$gobin"
  (cd /tmp && GOCACHE="$gocache" GOBIN="$gobin" nice -n 10 "$go_bin" install -trimpath \
    -ldflags "-s -w" "$KWOK_MODULE/cmd/kwok@$KWOK_VERSION") \
    || die "building kwok $KWOK_VERSION failed (build cache in $gocache)"
  "$gobin/kwok" --version | grep -q "^kwok version $KWOK_VERSION " \
    || die "kwok reports '$("$gobin/kwok" --version)', not $KWOK_VERSION"
  mv "$gobin/kwok" "$version_dir/kwok"
  install -m 644 "$module_dir/kustomize/crd/bases/$KWOK_STAGE_CRD" "$version_dir/$KWOK_STAGE_CRD"
  local cache_size
  cache_size="$(du -sh "$gocache" | cut -f1)"
  rm -rf "$gocache" "$gobin"
  (cd "$version_dir" && sha256sum kwok "$KWOK_STAGE_CRD") > "$kwok_stamp.partial"
  mv "$kwok_stamp.partial" "$kwok_stamp"
  log "built kwok $KWOK_VERSION in $((SECONDS - started_in))s into $version_dir" \
    "(build cache $cache_size, deleted)"
}

# download_module MODULE VERSION SUM: downloads MODULE@VERSION from the Go module proxy into the
# module cache, dies unless its hash is SUM, and sets module_dir (the caller's local) to it.
download_module() {
  local module="$1" version="$2" want="$3" info sum
  log "downloading $module@$version from the Go module proxy"
  info="$(cd /tmp && GOFLAGS=-mod=mod "$go_bin" mod download -json "$module@$version")" \
    || die "go mod download $module@$version failed"
  module_dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<< "$info")"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<< "$info")"
  [[ "$sum" == "$want" ]] || die "$module@$version has the hash '$sum', not the pinned $want"
}

# build_jobset: the JobSet controller from the Go module proxy at JOBSET_VERSION, installed as
# jobset-controller, and the JobSet CRD of that module. The module's hash is checked against
# JOBSET_MODULE_SUM and its main package is built in a copy of the module with its own go.mod and
# go.sum (-mod=readonly): the same module graph as `go install MODULE@VERSION`, which cannot be
# used here because it asks the proxy for the module's version list (for deprecations), which
# the proxy refuses for this module.
build_jobset() {
  local started_in=$SECONDS
  local gocache="$version_dir/gocache-jobset"
  local src="$version_dir/jobset-src"
  local module_dir
  download_module "$JOBSET_MODULE" "$JOBSET_VERSION" "$JOBSET_MODULE_SUM"
  [[ -f "$module_dir/config/components/crd/bases/$JOBSET_CRD" && -f "$module_dir/main.go" ]] \
    || die "$JOBSET_MODULE@$JOBSET_VERSION has no main.go or" \
      "config/components/crd/bases/$JOBSET_CRD"
  rm -rf "$src"
  cp -r "$module_dir" "$src"
  chmod -R u+w "$src"
  log "building the JobSet controller $JOBSET_VERSION"
  # The version its log reports at start ("Initializing", gitVersion), as its release sets it.
  local ldflags="-s -w"
  ldflags+=" -X $JOBSET_MODULE/pkg/version.GitVersion=$JOBSET_VERSION"
  ldflags+=" -X $JOBSET_MODULE/pkg/version.GitCommit=$JOBSET_GIT_COMMIT"
  (cd "$src" && GOCACHE="$gocache" nice -n 10 "$go_bin" build -mod=readonly -trimpath \
    -ldflags "$ldflags" -o "$version_dir/jobset-controller.partial" .) \
    || die "building the JobSet controller $JOBSET_VERSION failed (sources in $src, build" \
      "cache in $gocache)"
  # It has no --version flag; the build information Go embeds names its main package.
  [[ "$("$go_bin" version -m "$version_dir/jobset-controller.partial" \
    | awk '$1 == "path" {print $2}')" == "$JOBSET_MODULE" ]] \
    || die "the JobSet controller built is not $JOBSET_MODULE's main package"
  mv "$version_dir/jobset-controller.partial" "$version_dir/jobset-controller"
  install -m 644 "$module_dir/config/components/crd/bases/$JOBSET_CRD" "$version_dir/$JOBSET_CRD"
  local cache_size
  cache_size="$(du -sh "$gocache" | cut -f1)"
  rm -rf "$gocache" "$src"
  (cd "$version_dir" && sha256sum jobset-controller "$JOBSET_CRD") > "$jobset_stamp.partial"
  mv "$jobset_stamp.partial" "$jobset_stamp"
  log "built the JobSet controller $JOBSET_VERSION in $((SECONDS - started_in))s into" \
    "$version_dir (build cache $cache_size, deleted)"
}

# build_kueue_perf: Kueue's scalability runner and minimalkueue (test/performance/scheduler of
# KUEUE_MODULE at KUEUE_VERSION, its hash checked against KUEUE_MODULE_SUM) in
# $version_dir/kueue-perf/, with the module's CRDs (crds/) and profiles (configs/).
build_kueue_perf() {
  local started_in=$SECONDS
  local gocache="$version_dir/gocache-kueue" src="$version_dir/kueue-src"
  local out="$version_dir/kueue-perf"
  local module_dir
  download_module "$KUEUE_MODULE" "$KUEUE_VERSION" "$KUEUE_MODULE_SUM"
  rm -rf "$src" "$out.partial"
  cp -r "$module_dir" "$src"
  chmod -R u+w "$src"
  mkdir -p "$out.partial"
  log "building Kueue $KUEUE_VERSION's scalability runner and minimalkueue"
  local cmd
  for cmd in runner minimalkueue; do
    (cd "$src" && GOCACHE="$gocache" nice -n 10 "$go_bin" build -mod=readonly -trimpath \
      -ldflags "-s -w" -o "$out.partial/$cmd" "./test/performance/scheduler/$cmd") \
      || die "building Kueue's $cmd failed (sources in $src, build cache in $gocache)"
  done
  cp -r "$src/config/components/crd/bases" "$out.partial/crds"
  cp -r "$src/test/performance/scheduler/configs" "$out.partial/configs"
  rm -rf "$out"
  mv "$out.partial" "$out"
  local cache_size
  cache_size="$(du -sh "$gocache" | cut -f1)"
  rm -rf "$gocache" "$src"
  (cd "$version_dir" && sha256sum kueue-perf/runner kueue-perf/minimalkueue) \
    > "$kueue_perf_stamp.partial"
  mv "$kueue_perf_stamp.partial" "$kueue_perf_stamp"
  log "built Kueue's runner and minimalkueue $KUEUE_VERSION in $((SECONDS - started_in))s" \
    "into $out (build cache $cache_size, deleted)"
}

cmd_build() {
  require_tools flock sha256sum
  [[ -x "$go_bin" ]] || die "no go command (set GO=/path/to/go; Go 1.24 or newer)"
  mkdir -p "$version_dir"
  # Two test runs may start at once on a fresh checkout: the second waits for the first one's
  # binaries instead of building over them.
  {
    flock -w "$BUILD_LOCK_WAIT_SECONDS" 9 || die "timed out waiting for another build ($bin_root/.lock)"
    if is_built && kueue_perf_built; then
      log "${COMPONENTS[*]} $SCHEDULER $K8S_VERSION, kwok $KWOK_VERSION, the JobSet" \
        "controller $JOBSET_VERSION and Kueue's runner $KUEUE_VERSION already built in" \
        "$version_dir"
      return 0
    fi
    export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOWORK=off CGO_ENABLED=0
    # Only what is missing: a cache built before the scheduler, KWOK or the JobSet controller
    # keeps its binaries.
    local missing=()
    kubernetes_built || missing+=("${COMPONENTS[@]}")
    scheduler_built || missing+=("$SCHEDULER")
    if ((${#missing[@]} > 0)); then
      # New pins must cover every command built with them.
      [[ "${K8S_UPDATE_PINS:-0}" != 1 ]] || missing=("${COMPONENTS[@]}" "$SCHEDULER")
      build_kubernetes "${missing[@]}"
    fi
    kwok_built || build_kwok
    jobset_built || build_jobset
    kueue_perf_built || build_kueue_perf
  } 9> "$bin_root/.lock"
}

# Status of a process by pid: running unless gone or a zombie. A process killed after cluster.sh
# exited is reparented; in a container whose init does not reap, it stays a zombie forever.
is_alive() {
  local pid="$1" stat
  stat="$(cat "/proc/$pid/stat" 2>/dev/null)" || return 1
  # The state letter follows the command name, which is in parentheses and may hold spaces.
  stat="${stat##*) }"
  [[ "${stat:0:1}" != "Z" ]]
}

# Prints the pid of DIR's process NAME if it is running. Checks the command line too, so a pid
# file left by a crash, whose number now belongs to another process, is not taken for ours:
# every process started here names DIR in its arguments.
running_pid() {
  local dir="$1" name="$2" pid cmdline
  [[ -s "$dir/$name.pid" ]] || return 1
  pid="$(<"$dir/$name.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  is_alive "$pid" || return 1
  cmdline="$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null)" || return 1
  [[ "$cmdline" == *"$name"*"$dir/"* ]] || return 1
  echo "$pid"
}

# True when something accepts TCP connections on 127.0.0.1:PORT.
port_accepts() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Prints a port that nothing listens on and that is not among the ports given.
pick_free_port() {
  local port attempt taken avoid
  for attempt in $(seq 1 100); do
    port=$((PORT_RANGE_LOW + (RANDOM * 32768 + RANDOM) % PORT_RANGE_SIZE))
    taken=0
    for avoid in "$@"; do [[ "$port" == "$avoid" ]] && taken=1; done
    if ((taken == 0)) && ! port_accepts "$port"; then
      echo "$port"
      return 0
    fi
  done
  die "found no free port in $PORT_RANGE_LOW-$((PORT_RANGE_LOW + PORT_RANGE_SIZE - 1))"
}

# Runs openssl quietly; shows its output only when it fails.
openssl_quiet() {
  local out
  out="$(openssl "$@" 2>&1)" || { echo "$out" >&2; die "openssl $1 failed"; }
}

# issue_cert PKI NAME SUBJECT EXTENSIONS [CA]: a P-256 key NAME.key and a certificate NAME.pem
# signed by PKI/CA (default ca), with the x509v3 EXTENSIONS given (one per line).
issue_cert() {
  local pki="$1" name="$2" subject="$3" extensions="$4" ca="${5:-ca}"
  openssl_quiet req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subject"
  printf '%s\n' "$extensions" > "$pki/$name.ext"
  openssl_quiet x509 -req -in "$pki/$name.csr" -CA "$pki/$ca.pem" -CAkey "$pki/$ca.key" \
    -CAcreateserial -days "$CERT_DAYS" -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.pem"
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

# A fresh PKI in DIR/pki: the cluster's CA, the API server's serving certificate, the serving
# certificate of admit-k8s's webhook, client certificates for the admin (group system:masters,
# which RBAC lets do anything), the controller manager and the scheduler (the users that
# Kubernetes' bootstrap RBAC policy names), KWOK (kwok-controller, bound by
# ops/k8s/kwok/rbac.yaml) and the JobSet controller (jobset-controller, bound by
# ops/k8s/jobset/rbac.yaml), the serving certificates of the controller manager, the scheduler
# and the JobSet controller's webhooks, admitd's serving certificate and the client certificates
# of the bridge and admitctl for it, and the service-account signing key pair.
make_pki() {
  local pki="$1/pki"
  rm -rf "$pki"
  mkdir -p "$pki"
  openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$pki/ca.key" -out "$pki/ca.pem" -days "$CERT_DAYS" \
    -subj "/CN=admission-ledger test cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  local server_usage=$'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth'
  local client_usage=$'keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth'
  issue_cert "$pki" kube-apiserver "/CN=kube-apiserver" "$server_usage
subjectAltName=IP:127.0.0.1,IP:$KUBERNETES_SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  issue_cert "$pki" kube-controller-manager-serving "/CN=kube-controller-manager" "$server_usage
subjectAltName=IP:127.0.0.1,DNS:localhost"
  issue_cert "$pki" kube-scheduler-serving "/CN=kube-scheduler" "$server_usage
subjectAltName=IP:127.0.0.1,DNS:localhost"
  # admit-k8s's Job webhook (docs/k8s.md, "Jobs"), served on loopback like the rest.
  issue_cert "$pki" webhook "/CN=admit-k8s webhook" "$server_usage
subjectAltName=IP:127.0.0.1,DNS:localhost"
  issue_cert "$pki" jobset-webhook "/CN=jobset webhook" "$server_usage
subjectAltName=IP:127.0.0.1,DNS:localhost"
  issue_cert "$pki" admin "/O=system:masters/CN=admission-ledger-admin" "$client_usage"
  # admitd's serving certificate and its clients' (their common names are admitd's principals):
  # admitd trusts the cluster's CA for clients, and the bridge trusts it for admitd.
  # kj-tls (admitctl) checks a tls:127.0.0.1 address against the DNS names, Go against the IPs.
  issue_cert "$pki" admitd "/CN=admitd" "$server_usage
subjectAltName=IP:127.0.0.1,DNS:127.0.0.1,DNS:localhost"
  issue_cert "$pki" "$BRIDGE_PRINCIPAL" "/CN=$BRIDGE_PRINCIPAL" "$client_usage"
  issue_cert "$pki" "$ADMITCTL_PRINCIPAL" "/CN=$ADMITCTL_PRINCIPAL" "$client_usage"
  issue_cert "$pki" kube-controller-manager "/CN=system:kube-controller-manager" "$client_usage"
  issue_cert "$pki" kube-scheduler "/CN=system:kube-scheduler" "$client_usage"
  issue_cert "$pki" kwok "/CN=kwok-controller" "$client_usage"
  issue_cert "$pki" jobset-controller "/CN=jobset-controller" "$client_usage"
  # The API server's front proxy (its aggregation layer) has a CA of its own, as kubeadm sets it
  # up: an aggregated API (the bridge's visibility API) trusts a user named in a request's
  # headers only from a certificate of this CA, which signs no user's certificate.
  openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$pki/front-proxy-ca.key" -out "$pki/front-proxy-ca.pem" -days "$CERT_DAYS" \
    -subj "/CN=admission-ledger test front-proxy CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
  issue_cert "$pki" front-proxy-client "/CN=$FRONT_PROXY_CLIENT" "$client_usage" front-proxy-ca
  # The bridge's visibility API, for the name the API server checks: its Service's.
  issue_cert "$pki" visibility "/CN=admit-k8s visibility" "$server_usage
subjectAltName=DNS:$VISIBILITY_SERVICE.$BRIDGE_NAMESPACE.svc,IP:127.0.0.1,DNS:localhost"
  openssl_quiet genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/service-account.key"
  openssl_quiet pkey -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub"
  chmod 600 "$pki"/*.key
}

# write_kubeconfig FILE SERVER USER: a kubeconfig for USER (its certificate pki/USER.pem) with
# the CA and the client certificate embedded, so the file can be copied elsewhere.
write_kubeconfig() {
  local file="$1" server="$2" user="$3" pki
  pki="$(dirname "$file")/pki"
  cat > "$file.partial" <<EOF
# Generated by ops/k8s/cluster.sh start; rewritten on every start.
apiVersion: v1
kind: Config
clusters:
- name: admission-ledger-test
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 < "$pki/ca.pem")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 < "$pki/$user.pem")
    client-key-data: $(base64 -w0 < "$pki/$user.key")
contexts:
- name: $user@admission-ledger-test
  context:
    cluster: admission-ledger-test
    user: $user
current-context: $user@admission-ledger-test
EOF
  chmod 600 "$file.partial"
  mv "$file.partial" "$file"
}

# launch DIR NAME COMMAND...: runs COMMAND in the background with its output in DIR/NAME.log and
# its pid in DIR/NAME.pid. Its stdin and stdout are not the caller's: a caller capturing this
# script's stdout must not wait for the control plane to close it.
launch() {
  local dir="$1" name="$2"
  shift 2
  "$@" < /dev/null >> "$dir/$name.log" 2>&1 &
  echo "$!" > "$dir/$name.pid"
}

# True when GET https://127.0.0.1:PORT/PATH answers "ok", checked against the cluster's CA and
# asked with the admin's certificate.
endpoint_ok() {
  local dir="$1" port="$2" path="$3" body
  body="$(curl -sS --max-time 5 --cacert "$dir/pki/ca.pem" --cert "$dir/pki/admin.pem" \
    --key "$dir/pki/admin.key" "https://127.0.0.1:$port/$path" 2>/dev/null)" || return 1
  [[ "$body" == ok ]]
}

etcd_healthy() {
  local body
  body="$(curl -sS --max-time 5 "http://127.0.0.1:$1/health" 2>/dev/null)" || return 1
  [[ "$body" == *'"health":"true"'* ]]
}

# wait_for DIR NAME DEADLINE CHECK...: waits until the command CHECK succeeds while DIR's process
# NAME runs. Sets start_outcome to "ready", "port_taken" (NAME exited and its log says a port was
# busy) or "failed" (after printing why). Reports through a variable, not its status, because
# calling it in a condition would switch off set -e inside it.
start_outcome=""
wait_for() {
  local dir="$1" name="$2" deadline="$3"
  shift 3
  # The pid, not running_pid: a process launched a moment ago may not have exec'd yet, and until
  # then its command line is this script's.
  local pid
  while ((SECONDS < deadline)); do
    pid="$(<"$dir/$name.pid")"  # each time: CHECK may restart NAME (nodes_ready_nudging)
    if ! is_alive "$pid"; then
      if grep -qi "address already in use" "$dir/$name.log"; then
        log "$name could not bind its port: it was taken meanwhile"
        start_outcome="port_taken"
        return 0
      fi
      log "$name exited during startup; last lines of $dir/$name.log:"
      tail -n 40 "$dir/$name.log" >&2
      start_outcome="failed"
      return 0
    fi
    if "$@"; then
      start_outcome="ready"
      return 0
    fi
    sleep "$POLL_INTERVAL_SECONDS"
  done
  log "$name was not ready after ${START_TIMEOUT_SECONDS}s; last lines of $dir/$name.log:"
  tail -n 40 "$dir/$name.log" >&2
  start_outcome="failed"
}

# Starts etcd, the API server, the controller manager, the scheduler and KWOK in DIR on fresh
# ports, creates the nodes, starts the JobSet controller and waits for each; then admitd and the
# bridge unless --control-plane-only. Sets start_outcome like wait_for; stops whatever it
# started unless all are ready.
start_once() {
  local dir="$1" bin="$version_dir" deadline
  deadline=$((SECONDS + START_TIMEOUT_SECONDS))
  local etcd_port etcd_peer_port apiserver_port kcm_port scheduler_port kwok_port
  etcd_port="$(pick_free_port)"
  etcd_peer_port="$(pick_free_port "$etcd_port")"
  apiserver_port="$(pick_free_port "$etcd_port" "$etcd_peer_port")"
  kcm_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port")"
  scheduler_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" "$kcm_port")"
  kwok_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" "$kcm_port" \
    "$scheduler_port")"
  local process
  for process in $(started_components "$dir"); do : > "$dir/$process.log"; done
  rm -rf "$dir/etcd-data" "$dir/ledger" "$dir/nodes"

  # Plain HTTP on loopback: only the API server talks to it, and nothing off this machine can.
  launch "$dir" etcd etcd --name admission-ledger-test --data-dir "$dir/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "admission-ledger-test=http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster-state new
  wait_for "$dir" etcd "$deadline" etcd_healthy "$etcd_port"
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }

  local pki="$dir/pki"
  # RBAC, as in a real cluster: the admin is in system:masters, the controller manager gets the
  # bootstrap policy's roles, and the bridge will get exactly what its manifests grant. Node
  # authorization is left out: there are no kubelets. No streaming lists (WatchList): Debian's
  # etcd 3.4.23 lacks the progress requests they need, and with the gate on the API server
  # turns every watch from resourceVersion 0 into one and fails it, which is how KWOK watches
  # pods (it then saw them only at its periodic relists, seconds late). Clients fall back to
  # list and watch, as they do against any server without the feature.
  launch "$dir" kube-apiserver "$bin/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$apiserver_port" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --cert-dir="$dir/kube-apiserver-certs" \
    --tls-cert-file="$pki/kube-apiserver.pem" --tls-private-key-file="$pki/kube-apiserver.key" \
    --client-ca-file="$pki/ca.pem" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/service-account.pub" \
    --service-account-signing-key-file="$pki/service-account.key" \
    --service-cluster-ip-range="$SERVICE_CLUSTER_IP_RANGE" \
    --authorization-mode=RBAC \
    --requestheader-client-ca-file="$pki/front-proxy-ca.pem" \
    --requestheader-allowed-names="$FRONT_PROXY_CLIENT" \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$pki/front-proxy-client.pem" \
    --proxy-client-key-file="$pki/front-proxy-client.key" \
    --feature-gates=WatchList=false \
    --profiling=false
  wait_for "$dir" kube-apiserver "$deadline" endpoint_ok "$dir" "$apiserver_port" readyz
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }

  local server="https://127.0.0.1:$apiserver_port"
  write_kubeconfig "$dir/kube-controller-manager.kubeconfig" "$server" kube-controller-manager
  # Each controller acts as its own service account (as kubeadm sets it up), so RBAC applies to
  # the Job controller and the garbage collector as in a real cluster.
  launch "$dir" kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$dir/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" \
    --tls-cert-file="$pki/kube-controller-manager-serving.pem" \
    --tls-private-key-file="$pki/kube-controller-manager-serving.key" \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/service-account.key" \
    --root-ca-file="$pki/ca.pem" \
    --cluster-signing-cert-file="$pki/ca.pem" --cluster-signing-key-file="$pki/ca.key" \
    --leader-elect=false \
    --controllers='*' \
    --profiling=false
  wait_for "$dir" kube-controller-manager "$deadline" endpoint_ok "$dir" "$kcm_port" healthz
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }

  # The scheduler as the user the bootstrap RBAC policy names, which reads the
  # extension-apiserver-authentication ConfigMap too (for its own /healthz and /readyz, which
  # need no credentials). One replica: no leader election.
  write_kubeconfig "$dir/kube-scheduler.kubeconfig" "$server" kube-scheduler
  launch "$dir" kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$scheduler_port" \
    --tls-cert-file="$pki/kube-scheduler-serving.pem" \
    --tls-private-key-file="$pki/kube-scheduler-serving.key" \
    --leader-elect=false \
    --profiling=false
  wait_for "$dir" kube-scheduler "$deadline" endpoint_ok "$dir" "$scheduler_port" readyz
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }

  write_kubeconfig "$dir/admin.kubeconfig.partial" "$server" admin
  install_crds "$dir" "$dir/admin.kubeconfig.partial" "$deadline"
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  local webhook_port jobset_webhook_port jobset_health_port
  webhook_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" "$kcm_port" \
    "$scheduler_port" "$kwok_port")"
  jobset_webhook_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" \
    "$kcm_port" "$scheduler_port" "$kwok_port" "$webhook_port")"
  jobset_health_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" \
    "$kcm_port" "$scheduler_port" "$kwok_port" "$webhook_port" "$jobset_webhook_port")"
  install_webhook "$dir" "$dir/admin.kubeconfig.partial" "127.0.0.1:$webhook_port"
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  start_kwok "$dir" "$dir/admin.kubeconfig.partial" "$server" "$kwok_port" "$deadline"
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  if [[ -n "$nodes_file" ]]; then
    create_nodes "$dir" "$dir/admin.kubeconfig.partial" "$nodes_file" "$deadline"
    [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  fi
  start_jobset "$dir" "$dir/admin.kubeconfig.partial" "$server" "$jobset_webhook_port" \
    "$jobset_health_port" "$deadline"
  [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  if ((start_ledger_side)); then
    start_admitd "$dir" "$deadline"
    [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
    local health_port visibility_port
    health_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" "$kcm_port" \
      "$scheduler_port" "$kwok_port" "$webhook_port" "$jobset_webhook_port" \
      "$jobset_health_port")"
    visibility_port="$(pick_free_port "$etcd_port" "$etcd_peer_port" "$apiserver_port" \
      "$kcm_port" "$scheduler_port" "$kwok_port" "$webhook_port" "$jobset_webhook_port" \
      "$jobset_health_port" "$health_port")"
    start_bridge "$dir" "$dir/admin.kubeconfig.partial" "$server" "127.0.0.1:$webhook_port" \
      "127.0.0.1:$health_port" "$visibility_port" "$deadline"
    [[ "$start_outcome" == ready ]] || { cmd_stop "$dir" 2>/dev/null; return 0; }
  fi

  # Last: its presence says the control plane is up (cmd_start prints it for a running one).
  mv "$dir/admin.kubeconfig.partial" "$dir/admin.kubeconfig"
}

# install_crds DIR KUBECONFIG DEADLINE: applies ops/k8s/crds/ and waits until every CRD is
# Established (its API is served). Sets start_outcome to "ready" or "failed" (after saying why).
install_crds() {
  local dir="$1" kubeconfig="$2" deadline="$3" seconds_left
  local kubectl_cmd=("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s)
  seconds_left=$((deadline - SECONDS))
  ((seconds_left > 0)) || seconds_left=1
  if ! "${kubectl_cmd[@]}" apply -f "$crds_dir" > "$dir/crds.log" 2>&1 ||
      ! "${kubectl_cmd[@]}" wait --for condition=established --timeout="${seconds_left}s" \
        -f "$crds_dir" >> "$dir/crds.log" 2>&1; then
    log "installing the CRDs of $crds_dir failed:"
    cat "$dir/crds.log" >&2
    start_outcome="failed"
    return 0
  fi
  start_outcome="ready"
}

# install_webhook DIR KUBECONFIG ADDRESS: the MutatingWebhookConfiguration of admit-k8s's Job
# and JobSet webhooks, which the bridge serves at https://ADDRESS with DIR/pki/webhook.pem
# (docs/k8s.md, "Jobs"). Only objects that carry kueue.x-k8s.io/queue-name are sent to it
# (objectSelector): every other one is created without asking the bridge. failurePolicy Fail, as Kueue's: while no
# bridge answers, a labelled Job is refused rather than created unsuspended. Then points the
# conversion webhook of CONVERTED_CRDS at https://ADDRESS/convert (the same server). Writes
# ADDRESS to DIR/webhook.address for whoever starts the bridge. Sets start_outcome to "ready" or
# "failed".
install_webhook() {
  local dir="$1" kubeconfig="$2" address="$3"
  echo "$address" > "$dir/webhook.address"
  if ! "$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s apply -f - \
      > "$dir/webhook.log" 2>&1 <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: admit-k8s
  labels:
    app.kubernetes.io/part-of: admission-ledger
webhooks:
- name: mjob.admission-ledger.io
  clientConfig:
    url: https://$address/mutate-batch-v1-job
    caBundle: $(base64 -w0 < "$dir/pki/ca.pem")
  rules:
  - apiGroups: [batch]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [jobs]
  objectSelector:
    matchExpressions:
    - {key: kueue.x-k8s.io/queue-name, operator: Exists}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10
- name: mjobset.admission-ledger.io
  clientConfig:
    url: https://$address/mutate-jobset-x-k8s-io-v1alpha2-jobset
    caBundle: $(base64 -w0 < "$dir/pki/ca.pem")
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE]
    resources: [jobsets]
  objectSelector:
    matchExpressions:
    - {key: kueue.x-k8s.io/queue-name, operator: Exists}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
  timeoutSeconds: 10
EOF
  then
    log "installing the Job webhook's configuration failed:"
    cat "$dir/webhook.log" >&2
    start_outcome="failed"
    return 0
  fi
  # The CRDs that convert between v1beta1 and v1beta2 (spec.conversion.strategy Webhook) name
  # the deployment's Service; here the same server at ADDRESS answers, with the cluster's CA.
  local crd patch
  patch="$(printf '{"spec":{"conversion":{"webhook":{"clientConfig":{"service":null,"url":"https://%s/convert","caBundle":"%s"}}}}}' \
    "$address" "$(base64 -w0 < "$dir/pki/ca.pem")")"
  for crd in "${CONVERTED_CRDS[@]}"; do
    if ! "$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s patch crd \
        "$crd" --type=merge -p "$patch" >> "$dir/webhook.log" 2>&1; then
      log "pointing the conversion webhook of CRD $crd at $address failed:"
      cat "$dir/webhook.log" >&2
      start_outcome="failed"
      return 0
    fi
  done
  start_outcome="ready"
}

# True when KWOK's server on 127.0.0.1:PORT answers /healthz.
kwok_healthy() {
  local body
  body="$(curl -sS --max-time 5 "http://127.0.0.1:$1/healthz" 2>/dev/null)" || return 1
  [[ "$body" == ok ]]
}

# start_kwok DIR KUBECONFIG SERVER PORT DEADLINE: installs KWOK's Stage CRD (from its module,
# copied beside the binary by build), our Stages and KWOK's RBAC (ops/k8s/kwok/), and starts
# KWOK's controller as kwok-controller for the nodes with our annotation, its server (health,
# metrics, debugging) on 127.0.0.1:PORT. Sets start_outcome like wait_for.
start_kwok() {
  local dir="$1" kubeconfig="$2" server="$3" port="$4" deadline="$5" seconds_left
  local kubectl_cmd=("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s)
  seconds_left=$((deadline - SECONDS))
  ((seconds_left > 0)) || seconds_left=1
  if ! "${kubectl_cmd[@]}" apply -f "$version_dir/$KWOK_STAGE_CRD" > "$dir/kwok-setup.log" 2>&1 ||
      ! "${kubectl_cmd[@]}" wait --for condition=established --timeout="${seconds_left}s" \
        -f "$version_dir/$KWOK_STAGE_CRD" >> "$dir/kwok-setup.log" 2>&1 ||
      ! "${kubectl_cmd[@]}" apply -f "$kwok_dir" >> "$dir/kwok-setup.log" 2>&1; then
    log "installing KWOK's Stage CRD, our Stages and KWOK's RBAC ($kwok_dir) failed:"
    cat "$dir/kwok-setup.log" >&2
    start_outcome="failed"
    return 0
  fi
  write_kubeconfig "$dir/kwok.kubeconfig" "$server" kwok
  cat > "$dir/kwok.yaml" <<EOF
# Written by ops/k8s/cluster.sh start: KWOK is configured by its flags; naming this empty file
# keeps it from reading ~/.kwok/kwok.yaml.
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options: {}
EOF
  local selector="$KWOK_NODE_ANNOTATION_KEY=$KWOK_NODE_ANNOTATION_VALUE"
  kwok_cmd=("$version_dir/kwok"
    --config "$dir/kwok.yaml" --kubeconfig "$dir/kwok.kubeconfig"
    --manage-all-nodes=false --manage-nodes-with-annotation-selector="$selector"
    --enable-crds=Stage --cidr="$KWOK_POD_CIDR"
    --node-lease-duration-seconds="$KWOK_NODE_LEASE_SECONDS"
    --server-address="127.0.0.1:$port")
  kwok_run_dir="$dir"
  launch "$dir" kwok "${kwok_cmd[@]}"
  wait_for "$dir" kwok "$deadline" kwok_healthy "$port"
}

# nodes_ready KUBECONFIG NODE...: every NODE is Ready and no longer tainted not-ready (the node
# lifecycle controller removes the taint the API server put on it at creation), so the
# scheduler places pods on it.
nodes_ready() {
  local kubeconfig="$1" state node
  shift
  state="$("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=10s \
    get nodes -o jsonpath="$NODES_STATE_JSONPATH" 2>/dev/null)" || return 1
  for node in "$@"; do
    grep -q "^$node True" <<< "$state" || return 1
  done
  ! grep -q 'node\.kubernetes\.io/not-ready\|node\.kubernetes\.io/unreachable' <<< "$state"
}

# create_nodes DIR KUBECONFIG FILE DEADLINE: creates the Node objects of FILE (status included:
# capacity, allocatable, addresses), refuses one that KWOK would not manage, and waits until
# KWOK has made every one Ready. Writes their names to DIR/nodes. Sets start_outcome like
# wait_for.
create_nodes() {
  local dir="$1" kubeconfig="$2" file="$3" deadline="$4"
  local kubectl_cmd=("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s)
  local created object names=() annotations unmanaged
  if ! created="$("${kubectl_cmd[@]}" create -f "$file" -o name 2> "$dir/nodes.log")"; then
    log "creating the nodes of $file failed:"
    cat "$dir/nodes.log" >&2
    start_outcome="failed"
    return 0
  fi
  for object in $created; do
    if [[ "$object" != node/* ]]; then
      log "$file holds $object: a nodes file holds Node objects only"
      start_outcome="failed"
      return 0
    fi
    names+=("${object#node/}")
  done
  if ((${#names[@]} == 0)); then
    log "$file holds no Node (start --no-nodes starts without nodes)"
    start_outcome="failed"
    return 0
  fi
  local key_path="${KWOK_NODE_ANNOTATION_KEY//./\\.}"
  # Every node (a list even when there is one): the cluster holds only the file's.
  annotations="$("${kubectl_cmd[@]}" get nodes \
    -o jsonpath="{range .items[*]}{.metadata.name}={.metadata.annotations.$key_path}{'\n'}{end}")"
  unmanaged="$({ grep -v "=$KWOK_NODE_ANNOTATION_VALUE\$" <<< "$annotations" || true; } \
    | cut -d= -f1 | tr '\n' ' ')"
  if [[ -n "$unmanaged" ]]; then
    log "nodes of $file without the annotation" \
      "$KWOK_NODE_ANNOTATION_KEY: $KWOK_NODE_ANNOTATION_VALUE, which KWOK would never make" \
      "Ready: ${unmanaged% }"
    start_outcome="failed"
    return 0
  fi
  printf '%s\n' "${names[@]}" > "$dir/nodes"
  nodes_last_nudge=$SECONDS
  wait_for "$dir" kwok "$deadline" nodes_ready_nudging "$kubeconfig" "${names[@]}"
  if [[ "$start_outcome" != ready ]]; then
    log "the nodes as the API server last showed them (name, Ready, taints):"
    "${kubectl_cmd[@]}" get nodes -o jsonpath="$NODES_STATE_JSONPATH" >&2 || true
  fi
}

# nodes_ready_nudging KUBECONFIG NODE...: nodes_ready; while a NODE is not yet Ready, restarts
# KWOK every NODES_NUDGE_SECONDS. KWOK 0.7 can leave nodes alone for good: it plays a node's
# stages only while its lease cache shows the lease it holds, and it renews the leases without
# re-reading the nodes. In CI it renewed every node's lease for 180 s and never made one Ready
# (annotating the nodes, a fresh event, did not help either); a fresh KWOK lists the nodes and
# the leases anew.
nodes_last_nudge=0
kwok_cmd=()
kwok_run_dir=""
nodes_ready_nudging() {
  nodes_ready "$@" && return 0
  ((SECONDS - nodes_last_nudge >= NODES_NUDGE_SECONDS)) || return 1
  nodes_last_nudge=$SECONDS
  log "nodes not Ready after ${NODES_NUDGE_SECONDS}s; restarting KWOK"
  stop_process "$kwok_run_dir" kwok
  launch "$kwok_run_dir" kwok "${kwok_cmd[@]}"
  return 1
}

# crd_established KUBECONFIG CRD DEADLINE: waits until CRD is Established (its API served).
# Polled rather than `kubectl wait`, which fails outright, instead of waiting, while a CRD
# created by a server-side apply still has null conditions.
crd_established() {
  local kubeconfig="$1" crd="$2" deadline="$3" state
  while ((SECONDS < deadline)); do
    state="$("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=10s get crd \
      "$crd" -o jsonpath='{.status.conditions[?(@.type=="Established")].status}')" || true
    [[ "$state" != True ]] || return 0
    sleep "$POLL_INTERVAL_SECONDS"
  done
  echo "CRD $crd was not Established after ${START_TIMEOUT_SECONDS}s" >&2
  return 1
}

# install_jobset_webhooks DIR KUBECONFIG ADDRESS: the JobSet controller's webhook
# configurations as the module's config/components/webhook/ has them (defaulting and validation
# of JobSets; the mutating and validating webhooks of the pods of JobSets, for exclusive
# placement), under the names its kustomize deployment gives them, pointed at
# https://ADDRESS/... with the cluster's CA instead of the Service jobset-webhook-service.
# failurePolicy Fail, as upstream: while no controller answers, JobSets and their pods are
# refused. Writes to DIR/jobset-setup.log; returns non-zero on failure.
install_jobset_webhooks() {
  local dir="$1" kubeconfig="$2" address="$3" ca_bundle
  ca_bundle="$(base64 -w0 < "$dir/pki/ca.pem")"
  "$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s apply -f - \
    >> "$dir/jobset-setup.log" 2>&1 <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: $JOBSET_MUTATING_WEBHOOKS
  labels:
    app.kubernetes.io/part-of: admission-ledger
webhooks:
- name: mjobset.kb.io
  clientConfig:
    url: https://$address/mutate-jobset-x-k8s-io-v1alpha2-jobset
    caBundle: $ca_bundle
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE]
    resources: [jobsets]
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
- name: mpod.kb.io
  clientConfig:
    url: https://$address/mutate--v1-pod
    caBundle: $ca_bundle
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
  objectSelector:
    matchExpressions:
    - {key: jobset.sigs.k8s.io/jobset-name, operator: Exists}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: $JOBSET_VALIDATING_WEBHOOKS
  labels:
    app.kubernetes.io/part-of: admission-ledger
webhooks:
- name: vjobset.kb.io
  clientConfig:
    url: https://$address/validate-jobset-x-k8s-io-v1alpha2-jobset
    caBundle: $ca_bundle
  rules:
  - apiGroups: [jobset.x-k8s.io]
    apiVersions: [v1alpha2]
    operations: [CREATE, UPDATE]
    resources: [jobsets]
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
- name: vpod.kb.io
  clientConfig:
    url: https://$address/validate--v1-pod
    caBundle: $ca_bundle
  rules:
  - apiGroups: [""]
    apiVersions: [v1]
    operations: [CREATE]
    resources: [pods]
  objectSelector:
    matchExpressions:
    - {key: jobset.sigs.k8s.io/jobset-name, operator: Exists}
  failurePolicy: Fail
  sideEffects: None
  admissionReviewVersions: [v1]
EOF
}

# True when the JobSet controller answers "ok" on http://127.0.0.1:HEALTH_PORT/readyz (its
# webhook server has started) and its webhook server answers over TLS, checked against the
# cluster's CA (any HTTP answer).
jobset_ready() {
  local dir="$1" webhook_port="$2" health_port="$3" body
  body="$(curl -sS --max-time 2 "http://127.0.0.1:$health_port/readyz" 2>/dev/null)" \
    || return 1
  [[ "$body" == ok ]] || return 1
  curl -s -o /dev/null --max-time 2 --cacert "$dir/pki/ca.pem" \
    "https://127.0.0.1:$webhook_port/" 2>/dev/null
}

# start_jobset DIR KUBECONFIG SERVER WEBHOOK_PORT HEALTH_PORT DEADLINE: installs the JobSet CRD
# (from its module, copied beside the binary by build), the JobSet controller's RBAC
# (ops/k8s/jobset/) and its webhook configurations, and starts it as jobset-controller: its
# webhooks on 127.0.0.1:WEBHOOK_PORT, its health probes on 127.0.0.1:HEALTH_PORT, without
# leader election. Sets start_outcome like wait_for.
#
# Its webhooks: the controller always serves them (it has no flag to turn them off; its
# defaulting webhook fills in what its reconciler expects, e.g. the success policy and the
# pods' restart policy, and its validation refuses what it cannot run). It gets a serving
# certificate from the cluster's CA (DIR/pki/jobset-webhook.pem, as tls.crt and tls.key in
# DIR/jobset-webhook-certs, the names its webhook server reads) and its internal cert
# management is off: that rotator would keep a CA and certificate in a Secret of
# jobset-system and rewrite the webhook configurations' caBundle, for a Service DNS name that
# nothing routes here; start registers the configurations itself, pointed at 127.0.0.1. Its
# metrics server is off ("0"): it would need TokenReviews and SubjectAccessReviews for its
# authentication filter, and nothing here scrapes it.
start_jobset() {
  local dir="$1" kubeconfig="$2" server="$3" webhook_port="$4" health_port="$5" deadline="$6"
  local kubectl_cmd=("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s)
  # Server-side apply: the CRD (780 kB) does not fit kubectl's last-applied annotation.
  if ! "${kubectl_cmd[@]}" apply --server-side -f "$version_dir/$JOBSET_CRD" \
        > "$dir/jobset-setup.log" 2>&1 ||
      ! crd_established "$kubeconfig" "$JOBSET_CRD_NAME" "$deadline" \
        >> "$dir/jobset-setup.log" 2>&1 ||
      ! "${kubectl_cmd[@]}" apply -f "$jobset_dir" >> "$dir/jobset-setup.log" 2>&1 ||
      ! install_jobset_webhooks "$dir" "$kubeconfig" "127.0.0.1:$webhook_port"; then
    log "installing the JobSet CRD, the JobSet controller's RBAC ($jobset_dir) or its webhook" \
      "configurations failed:"
    cat "$dir/jobset-setup.log" >&2
    start_outcome="failed"
    return 0
  fi
  local certs="$dir/jobset-webhook-certs"
  rm -rf "$certs"
  mkdir -p "$certs"
  cp "$dir/pki/jobset-webhook.pem" "$certs/tls.crt"
  cp "$dir/pki/jobset-webhook.key" "$certs/tls.key"
  chmod 600 "$certs/tls.key"
  write_kubeconfig "$dir/jobset-controller.kubeconfig" "$server" jobset-controller
  cat > "$dir/jobset-controller.yaml" <<EOF
# Written by ops/k8s/cluster.sh start: the JobSet controller's configuration (its --config).
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
webhook:
  host: 127.0.0.1
  port: $webhook_port
  certDir: $certs
health:
  healthProbeBindAddress: 127.0.0.1:$health_port
metrics:
  bindAddress: "0"
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
EOF
  launch "$dir" jobset-controller "$version_dir/jobset-controller" \
    --config "$dir/jobset-controller.yaml" --kubeconfig "$dir/jobset-controller.kubeconfig" \
    --leader-elect=false --zap-log-level=info
  wait_for "$dir" jobset-controller "$deadline" jobset_ready "$dir" "$webhook_port" "$health_port"
}

# True when admitd has written its ready file with its TLS address (it writes the file once,
# atomically, when it listens).
admitd_listening() {
  [[ -s "$1/admitd.ready" ]] && grep -q '^tls:' "$1/admitd.ready"
}

# start_admitd DIR DEADLINE: admitd on a fresh ledger in DIR/ledger, on unix:DIR/admitd.sock and
# TLS on a port of 127.0.0.1 that it picks (written to DIR/admitd.address), with the policy
# DIR/admitd-policy.yaml. Sets start_outcome like wait_for.
start_admitd() {
  local dir="$1" deadline="$2"
  rm -f "$dir/admitd.ready" "$dir/admitd.address"
  cat > "$dir/admitd-policy.yaml" <<EOF
# Written by ops/k8s/cluster.sh start; admitd reloads it on SIGHUP (docs/admitd.md, "Policy").
principals:
# The bridge: admitd's bridge role (docs/admitd.md): definitions, Jobs' submissions, deletions
# and finishes in every namespace, pod reports, check reports forwarded from the cluster, reads
# and the watch; as the bridge tests give it.
- name: $BRIDGE_PRINCIPAL
  roles: [bridge]
# admitctl with pki/$ADMITCTL_PRINCIPAL.pem: definitions, revocations, every read. (The Unix
# socket is admin for this user.)
- name: $ADMITCTL_PRINCIPAL
  roles: [operator, auditor]
EOF
  launch "$dir" admitd "$admitd_bin" --ledger "$dir/ledger" \
    --listen "unix:$dir/admitd.sock" --listen tls:127.0.0.1:0 \
    --tls-cert "$dir/pki/admitd.pem" --tls-key "$dir/pki/admitd.key" --client-ca "$dir/pki/ca.pem" \
    --policy "$dir/admitd-policy.yaml" --ready-file "$dir/admitd.ready"
  wait_for "$dir" admitd "$deadline" admitd_listening "$dir"
  [[ "$start_outcome" == ready ]] || return 0
  grep '^tls:' "$dir/admitd.ready" | head -n 1 > "$dir/admitd.address"
}

# write_token_kubeconfig FILE SERVER TOKEN: a kubeconfig with a bearer token (the bridge's
# service account's) and the cluster's CA embedded.
write_token_kubeconfig() {
  local file="$1" server="$2" token="$3" pki
  pki="$(dirname "$file")/pki"
  cat > "$file.partial" <<EOF
# Generated by ops/k8s/cluster.sh start: the service account $BRIDGE_NAMESPACE/$BRIDGE_SERVICE_ACCOUNT.
apiVersion: v1
kind: Config
clusters:
- name: admission-ledger-test
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 < "$pki/ca.pem")
users:
- name: $BRIDGE_SERVICE_ACCOUNT
  user:
    token: $token
contexts:
- name: $BRIDGE_SERVICE_ACCOUNT@admission-ledger-test
  context:
    cluster: admission-ledger-test
    user: $BRIDGE_SERVICE_ACCOUNT
    namespace: $BRIDGE_NAMESPACE
current-context: $BRIDGE_SERVICE_ACCOUNT@admission-ledger-test
EOF
  chmod 600 "$file.partial"
  mv "$file.partial" "$file"
}

# bridge_ready DIR KUBECONFIG WEBHOOK_ADDRESS HEALTH_ADDRESS: the bridge answers its webhook over
# TLS (any HTTP answer, checked against the cluster's CA) and its /readyz, holds its Lease, and
# the API server finds its visibility API available.
bridge_ready() {
  local dir="$1" kubeconfig="$2" webhook_address="$3" health_address="$4" body holder
  curl -s -o /dev/null --max-time 2 --cacert "$dir/pki/ca.pem" "https://$webhook_address/" \
    2>/dev/null || return 1
  body="$(curl -sS --max-time 2 "http://$health_address/readyz" 2>/dev/null)" || return 1
  [[ "$body" == ok ]] || return 1
  holder="$("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=5s get lease \
    "$BRIDGE_LEASE" -n "$BRIDGE_NAMESPACE" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)" \
    || return 1
  [[ -n "$holder" ]] || return 1
  [[ "$("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=5s get apiservice \
    "$VISIBILITY_APISERVICE" -o jsonpath='{.status.conditions[?(@.type=="Available")].status}' \
    2>/dev/null)" == True ]]
}

# install_visibility DIR KUBECONFIG PORT: the APIService of Kueue's visibility API, answered by
# the bridge on 127.0.0.1:PORT. Its Service is an ExternalName one (localhost): the API server
# resolves it to localhost:PORT (the APIService's port) and checks the bridge's certificate
# against the cluster's CA for the Service's name. Kueue's own manifests name a Service of its
# pods instead (ops/deploy/visibility.yaml does for the bridge's).
install_visibility() {
  local dir="$1" kubeconfig="$2" port="$3"
  "$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s apply -f - \
      >> "$dir/rbac.log" 2>&1 <<EOF
apiVersion: v1
kind: Service
metadata:
  name: $VISIBILITY_SERVICE
  namespace: $BRIDGE_NAMESPACE
  labels:
    app.kubernetes.io/part-of: admission-ledger
spec:
  type: ExternalName
  externalName: localhost
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: $VISIBILITY_APISERVICE
  labels:
    app.kubernetes.io/part-of: admission-ledger
spec:
  group: visibility.kueue.x-k8s.io
  version: v1beta2
  groupPriorityMinimum: 100
  versionPriority: 100
  service:
    name: $VISIBILITY_SERVICE
    namespace: $BRIDGE_NAMESPACE
    port: $port
  caBundle: $(base64 -w0 < "$dir/pki/ca.pem")
EOF
}

# start_bridge DIR KUBECONFIG SERVER WEBHOOK_ADDRESS HEALTH_ADDRESS VISIBILITY_PORT DEADLINE:
# applies ops/deploy/'s namespace and the bridge's RBAC, and starts admit-k8s as that service
# account (so the bridge here has exactly what the manifests grant), connected to admitd with
# its client certificate, with leader election, serving the Job webhook and (on
# 127.0.0.1:VISIBILITY_PORT) the visibility API. Sets start_outcome like wait_for.
start_bridge() {
  local dir="$1" kubeconfig="$2" server="$3" webhook_address="$4" health_address="$5"
  local visibility_port="$6" deadline="$7"
  local kubectl_cmd=("$version_dir/kubectl" --kubeconfig "$kubeconfig" --request-timeout=30s) token
  if ! "${kubectl_cmd[@]}" apply -f "$deploy_dir/namespace.yaml" \
      -f "$deploy_dir/admit-k8s-rbac.yaml" > "$dir/rbac.log" 2>&1 ||
      ! install_visibility "$dir" "$kubeconfig" "$visibility_port" ||
      ! token="$("${kubectl_cmd[@]}" create token "$BRIDGE_SERVICE_ACCOUNT" \
        -n "$BRIDGE_NAMESPACE" --duration="$((CERT_DAYS * 24))h" 2>> "$dir/rbac.log")"; then
    log "applying the bridge's RBAC ($deploy_dir), its visibility APIService or making its token failed:"
    cat "$dir/rbac.log" >&2
    start_outcome="failed"
    return 0
  fi
  write_token_kubeconfig "$dir/admit-k8s.kubeconfig" "$server" "$token"
  launch "$dir" admit-k8s "$bridge_bin" --kubeconfig "$dir/admit-k8s.kubeconfig" \
    --admitd "$(<"$dir/admitd.address")" --admitd-cert "$dir/pki/$BRIDGE_PRINCIPAL.pem" \
    --admitd-key "$dir/pki/$BRIDGE_PRINCIPAL.key" --admitd-ca "$dir/pki/ca.pem" \
    --leader-election-namespace "$BRIDGE_NAMESPACE" \
    --webhook-bind-address "$webhook_address" \
    --webhook-cert "$dir/pki/webhook.pem" --webhook-key "$dir/pki/webhook.key" \
    --health-probe-bind-address "$health_address" \
    --visibility-bind-address "127.0.0.1:$visibility_port" \
    --visibility-cert "$dir/pki/visibility.pem" --visibility-key "$dir/pki/visibility.key"
  wait_for "$dir" admit-k8s "$deadline" bridge_ready "$dir" "$kubeconfig" "$webhook_address" \
    "$health_address"
}

# The processes DIR's last start started (DIR/components), one per line.
started_components() {
  local dir="$1"
  if [[ -s "$dir/components" ]]; then
    cat "$dir/components"
  else
    printf '%s\n' "${CONTROL_PLANE[@]}"
  fi
}

# True when every process of DIR runs.
all_running() {
  local dir="$1" process
  for process in $(started_components "$dir"); do
    running_pid "$dir" "$process" > /dev/null || return 1
  done
}

# Set by cmd_start from its options, read by start_once and the functions it calls.
start_ledger_side=1
nodes_file="$default_nodes_file"
admitd_bin="${ADMITD:-$top/build/ops/admitd}"
bridge_bin="${ADMIT_K8S:-$top/build/admit-k8s}"

cmd_start() {
  local dir="" nodes_given=0 no_nodes=0
  while (($# > 0)); do
    case "$1" in
      --control-plane-only) start_ledger_side=0 ;;
      --nodes)
        (($# > 1)) && [[ -n "$2" ]] || die "start: --nodes needs a FILE (see --help)"
        nodes_file="$2"
        nodes_given=1
        shift ;;
      --no-nodes) no_nodes=1 ;;
      --admitd|--admit-k8s)
        (($# > 1)) && [[ -n "$2" ]] || die "start: $1 needs a PATH (see --help)"
        if [[ "$1" == --admitd ]]; then admitd_bin="$2"; else bridge_bin="$2"; fi
        shift ;;
      -*) die "start: unknown option '$1' (see --help)" ;;
      *) [[ -z "$dir" ]] || die "start takes one DIR, got '$dir' and '$1' (see --help)"
         dir="$1" ;;
    esac
    shift
  done
  [[ -n "$dir" ]] || die "start needs a DIR (see --help)"
  if ((no_nodes)); then
    ((nodes_given == 0)) || die "start: --nodes and --no-nodes exclude each other"
    nodes_file=""
  else
    [[ -f "$nodes_file" && -r "$nodes_file" ]] || die "start: no nodes file $nodes_file"
    nodes_file="$(cd "$(dirname "$nodes_file")" && pwd)/$(basename "$nodes_file")"
  fi
  local wanted=("${CONTROL_PLANE[@]}")
  if ((start_ledger_side)); then
    # Before anything starts: a missing binary is a clear error, not a half-started cluster.
    [[ -x "$admitd_bin" ]] || die "admitd is not built at $admitd_bin: build it with 'ops/scripts/build.sh admitd' (or name it with --admitd PATH or ADMITD=PATH; --control-plane-only starts no admitd)"
    [[ -x "$bridge_bin" ]] || die "admit-k8s is not built at $bridge_bin: build it with 'ops/k8s/bridge/build.sh $top/build/admit-k8s' (or name it with --admit-k8s PATH or ADMIT_K8S=PATH; --control-plane-only starts no bridge)"
    wanted+=(admitd admit-k8s)
  fi
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  # A Unix socket's path has at most 107 bytes (sun_path).
  if ((start_ledger_side)) && ((${#dir} + 12 > 107)); then
    die "DIR '$dir' is too long for admitd's socket $dir/admitd.sock (at most 107 bytes): use a shorter folder"
  fi
  if all_running "$dir" && [[ -s "$dir/admin.kubeconfig" ]]; then
    local running
    running="$(started_components "$dir" | tr '\n' ' ')"
    [[ "$running" == "${wanted[*]} " ]] \
      || die "a cluster runs in $dir with ${running% }, not ${wanted[*]}: stop it first"
    log "already running in $dir"
    echo "$dir/admin.kubeconfig"
    return 0
  fi
  is_built || die "${COMPONENTS[*]} $SCHEDULER $K8S_VERSION, kwok $KWOK_VERSION and the" \
    "JobSet controller $JOBSET_VERSION are not all built in $version_dir: run" \
    "ops/k8s/cluster.sh build (it builds only what is missing; up to 30 minutes on 2 cores" \
    "for all, once per machine)"
  require_tools etcd openssl curl base64
  # Whatever is left of an earlier start: a process that survived, a stale kubeconfig.
  cmd_stop "$dir" 2>/dev/null
  printf '%s\n' "${wanted[@]}" > "$dir/components"
  make_pki "$dir"
  local started_in=$SECONDS attempt
  for attempt in $(seq 1 "$START_ATTEMPTS"); do
    start_once "$dir"
    case "$start_outcome" in
      ready)
        local rss_kb=0 process pid
        for process in "${wanted[@]}"; do
          pid="$(running_pid "$dir" "$process")"
          rss_kb=$((rss_kb + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")))
        done
        local node_count=0
        [[ ! -s "$dir/nodes" ]] || node_count="$(wc -l < "$dir/nodes")"
        log "${wanted[*]} ready with $node_count nodes after $((SECONDS - started_in))s in" \
          "$dir (RSS $((rss_kb / 1024)) MiB; logs $dir/*.log)"
        if ((start_ledger_side)); then
          log "admitd: admitctl --connect unix:$dir/admitd.sock (admin), or --connect $(<"$dir/admitd.address") --cert $dir/pki/$ADMITCTL_PRINCIPAL.pem --key $dir/pki/$ADMITCTL_PRINCIPAL.key --ca $dir/pki/ca.pem"
        fi
        echo "$dir/admin.kubeconfig"
        return 0
        ;;
      port_taken) log "start attempt $attempt of $START_ATTEMPTS failed on a busy port" ;;
      *) die "could not start the control plane in $dir" ;;
    esac
  done
  die "could not start the control plane: ports kept being taken"
}

# stop_process DIR NAME: SIGTERM, then SIGKILL after STOP_TIMEOUT_SECONDS.
stop_process() {
  local dir="$1" name="$2" pid deadline
  if ! pid="$(running_pid "$dir" "$name")"; then
    rm -f "$dir/$name.pid"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT_SECONDS))
  while is_alive "$pid" && ((SECONDS < deadline)); do
    sleep "$POLL_INTERVAL_SECONDS"
  done
  if is_alive "$pid"; then
    log "$name (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_SECONDS}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + KILL_TIMEOUT_SECONDS))
    while is_alive "$pid" && ((SECONDS < deadline)); do
      sleep "$POLL_INTERVAL_SECONDS"
    done
    if is_alive "$pid"; then
      die "$name (pid $pid) survived SIGKILL"
    fi
  fi
  rm -f "$dir/$name.pid"
  log "$name (pid $pid) stopped"
}

cmd_stop() {
  local dir="${1:-}" i
  [[ -n "$dir" ]] || die "stop needs a DIR (see --help)"
  [[ -d "$dir" ]] || { log "nothing to stop in $dir (no such folder)"; return 0; }
  dir="$(cd "$dir" && pwd)"
  # The admin kubeconfig marks a running control plane: it goes first, so that nobody takes a
  # half-stopped one for a running one.
  rm -f "$dir/admin.kubeconfig" "$dir/admin.kubeconfig.partial" "$dir/admitd.address"
  # The bridge and admitd first: the bridge stops acting while the API server and the ledger
  # are still there, and admitd answers what is in flight.
  for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do
    stop_process "$dir" "${PROCESSES[i]}"
  done
}

cmd_bin_dir() {
  is_built || die "${COMPONENTS[*]} $SCHEDULER $K8S_VERSION, kwok $KWOK_VERSION and the" \
    "JobSet controller $JOBSET_VERSION are not all built (ops/k8s/cluster.sh build)"
  echo "$version_dir"
}

main() {
  local command="${1:-}"
  case "$command" in
    build) cmd_build ;;
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    bin-dir) cmd_bin_dir ;;
    -h|--help|help) usage ;;
    "") usage >&2; exit 2 ;;
    *) log "unknown command '$command'"; usage >&2; exit 2 ;;
  esac
}

main "$@"
