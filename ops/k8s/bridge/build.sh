#!/usr/bin/env bash
# Builds admit-k8s, the bridge between Kubernetes and admitd (docs/k8s.md):
#   ops/k8s/bridge/build.sh [OUTPUT]     default OUTPUT: build/admit-k8s
# 1. generates the Go code of schema/admission_rpc.capnp and schema/events.capnp with capnpc-go
#    (a tool of this module, pinned in go.mod) into internal/ledgerrpc/ and internal/ledgerevents/
#    (git-ignored). capnpc-go needs the Go package annotations, which our schemas do not carry
#    (the C++ build would then need Go's go.capnp), so it compiles annotated copies made in a
#    temporary folder;
# 2. gofmt -l, go vet ./... and go test ./... (the Go unit tests, e.g. of the CRDs' conversion);
# 3. go build ./cmd/admit-k8s.
# Needs the capnp compiler (Debian's capnproto) and Go 1.25 or newer; modules come from the Go
# module proxy into the user's module cache.
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly script_dir
top="$(cd "$script_dir/../../.." && pwd)"
readonly top
# Relative to where it was called from, not to this folder (it cds into it).
output="$(realpath -m -- "${1:-$top/build/admit-k8s}")"
readonly output
readonly go_bin="${GO:-$(command -v go 2>/dev/null || echo /usr/local/go/bin/go)}"

log() { echo "bridge/build.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

case "${1:-}" in
  -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
[[ -x "$go_bin" ]] || die "no go command (set GO=/path/to/go; Go 1.25 or newer)"
command -v capnp > /dev/null || die "the capnp compiler is not installed (ops/scripts/setup.sh installs capnproto)"

export GOTOOLCHAIN=local GOFLAGS=-mod=readonly GOWORK=off
cd "$script_dir"

# capnpc-go, built from the version go.mod pins; its std/go.capnp declares the annotations.
plugin="$(nice -n 10 "$go_bin" tool -n capnpc-go)" || die "building capnpc-go failed"
capnp_module="$("$go_bin" list -m -f '{{.Dir}}' capnproto.org/go/capnp/v3)"
[[ -f "$capnp_module/std/go.capnp" ]] || die "no std/go.capnp in $capnp_module"

work="$(mktemp -d "${TMPDIR:-/tmp}/bridge-capnp.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# generate SCHEMA PACKAGE: the Go code of schema/SCHEMA.capnp into internal/PACKAGE/.
generate() {
  local schema="$1" package="$2"
  # The annotations go right after the file's id (its first line).
  {
    head -n 1 "$top/schema/$schema.capnp"
    echo 'using Go = import "/go.capnp";'
    echo "\$Go.package(\"$package\");"
    echo "\$Go.import(\"admission-ledger/bridge/internal/$package\");"
    tail -n +2 "$top/schema/$schema.capnp"
  } > "$work/$schema.capnp"
  mkdir -p "$work/out"
  capnp compile -I "$capnp_module/std" --src-prefix="$work" -o "$plugin:$work/out" \
    "$work/$schema.capnp" || die "capnp compile -o go of $schema.capnp failed"
  mkdir -p "$script_dir/internal/$package"
  mv "$work/out/$schema.capnp.go" "$script_dir/internal/$package/$schema.capnp.go"
}
# The RPC API, and the events the bridge builds (pod reports) and reads.
generate admission_rpc ledgerrpc
generate events ledgerevents

unformatted="$(gofmt -l cmd internal/ledger internal/definitions internal/jobs internal/checks internal/nodes internal/podsetupdates internal/conversion internal/migration)"
[[ -z "$unformatted" ]] || die "not gofmt-formatted: $unformatted"
nice -n 10 "$go_bin" vet ./... || die "go vet found problems"
nice -n 10 "$go_bin" test ./... > "$work/go-test.log" 2>&1 || { cat "$work/go-test.log" >&2; die "go test failed"; }
mkdir -p "$(dirname "$output")"
nice -n 10 "$go_bin" build -trimpath -o "$output" ./cmd/admit-k8s || die "go build failed"
log "built $output"
