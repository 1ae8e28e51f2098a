#!/bin/bash
# Generates the Go code of KubeVirt's hook sidecar protos (proto/) into
# OUT/kubevirt/hooks/{info,v1alpha3} (OUT is the module root: make proto
# passes the repository; the unit test a temp dir and diffs). protoc is
# Debian's protobuf-compiler (test/host-deps.sh); the plugins are built at
# the pinned versions into BIN (default OUT/.cache/protoc-bin).
set -euo pipefail
OUT=${1:?usage: gen.sh OUTDIR [BINDIR]}
BIN=${2:-$OUT/.cache/protoc-bin}
HERE=$(cd "$(dirname "$0")" && pwd)
MOD=github.com/netctl/netctl
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
command -v protoc >/dev/null || { echo "gen.sh: protoc missing: apt-get install protobuf-compiler (test/host-deps.sh does)" >&2; exit 1; }
mkdir -p "$BIN"
[ -x "$BIN/protoc-gen-go" ] || GOBIN=$BIN GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO"
[ -x "$BIN/protoc-gen-go-grpc" ] || GOBIN=$BIN GOFLAGS=-mod=mod go install "$PROTOC_GEN_GO_GRPC"
I=info/api_info.proto
V=v1alpha3/api_v1alpha3.proto
M="M$I=$MOD/kubevirt/hooks/info,M$V=$MOD/kubevirt/hooks/v1alpha3"
PATH=$BIN:$PATH protoc -I "$HERE/proto" \
  --go_out="$OUT" --go_opt=module=$MOD --go_opt="$M" \
  --go-grpc_out="$OUT" --go-grpc_opt=module=$MOD --go-grpc_opt="$M" \
  "$I" "$V"
