#!/usr/bin/env bash
# Regenerates wigglepb/ from spec/proto. The generated code is committed; run this after any
# change to the .proto. Uses grpcio-tools' bundled protoc (no system protoc needed) and pinned
# plugin versions, so two machines produce the same bytes.
#
#   sdk/go/gen.sh           regenerate in place
#   sdk/go/gen.sh --check   regenerate into a temporary directory; exit 1 if wigglepb/ differs
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PROTOC_GEN_GO_VERSION="v1.36.12"
PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
PYTHON="${PYTHON:-python3}"

bin="$(go env GOPATH)/bin"
go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"

out="$here"
if [ "${1:-}" = "--check" ]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
fi

cd "$root"
"$PYTHON" -m grpc_tools.protoc -I spec/proto \
    --plugin=protoc-gen-go="$bin/protoc-gen-go" \
    --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
    --go_out="$out" --go_opt=module=github.com/wiggle-engine/wiggle/sdk/go \
    --go-grpc_out="$out" --go-grpc_opt=module=github.com/wiggle-engine/wiggle/sdk/go \
    spec/proto/wiggle/v1/wiggle.proto

if [ "$out" != "$here" ]; then
    if ! diff -r "$out/wigglepb" "$here/wigglepb"; then
        echo "sdk/go/wigglepb is stale: run sdk/go/gen.sh and commit the result" >&2
        exit 1
    fi
    echo "sdk/go/wigglepb is fresh" >&2
fi
