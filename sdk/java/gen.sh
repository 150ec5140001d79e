#!/usr/bin/env bash
# Regenerates the committed protobuf classes (src/main/java/dev/wiggle/proto/v1/) from spec/proto. Run it after any change to the .proto and commit the diff.
#
#   sdk/java/gen.sh           regenerate in place
#   sdk/java/gen.sh --check   regenerate into a temporary directory; exit 1 if the committed
#                             classes differ (CI runs this)
#
# protoc is pinned and fetched from Maven Central by Maven itself (`dependency:copy`), so two
# machines produce the same bytes: 4.36.2, the version of the protobuf-java runtime in pom.xml.
# Only messages are generated: the gRPC method descriptors are written out in
# dev.wiggle.worker.internal.WiggleRpc (no native protoc-gen-grpc-java build is served here),
# and a unit test pins them to the service in this .proto.
#
# The .proto names no Java package. Until it does, the copy handed to protoc gets
# `java_package = "dev.wiggle.proto.v1"`, `java_multiple_files = true` and
# `java_outer_classname = "WiggleProto"`: each message a class of its own rather than a nested
# class of one 15,000-line file.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
PROTOC_VERSION="4.36.2"

case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) classifier="linux-x86_64" ;;
    Linux-aarch64) classifier="linux-aarch_64" ;;
    Darwin-x86_64) classifier="osx-x86_64" ;;
    Darwin-arm64) classifier="osx-aarch_64" ;;
    *) echo "gen.sh: no protoc build known for $(uname -s)-$(uname -m)" >&2; exit 2 ;;
esac

tools="$here/target/gen-tools"
protoc="$tools/protoc-$PROTOC_VERSION-$classifier.exe"
if [ ! -f "$protoc" ]; then
    mvn -q -B -f "$here/pom.xml" org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy \
        -Dartifact="com.google.protobuf:protoc:$PROTOC_VERSION:exe:$classifier" -DoutputDirectory="$tools"
fi
chmod +x "$protoc"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/proto/wiggle/v1" "$work/out"
src="$root/spec/proto/wiggle/v1/wiggle.proto"
if grep -q '^option java_package' "$src"; then
    cp "$src" "$work/proto/wiggle/v1/wiggle.proto"
else
    sed '/^option go_package/a\
option java_package = "dev.wiggle.proto.v1";\
option java_multiple_files = true;\
option java_outer_classname = "WiggleProto";' "$src" > "$work/proto/wiggle/v1/wiggle.proto"
fi
"$protoc" -I "$work/proto" --java_out="$work/out" "$work/proto/wiggle/v1/wiggle.proto"

committed="$here/src/main/java/dev/wiggle/proto/v1"
if [ "${1:-}" = "--check" ]; then
    if ! diff -r "$work/out/dev/wiggle/proto/v1" "$committed" >/dev/null; then
        diff -rq "$work/out/dev/wiggle/proto/v1" "$committed" >&2 || true
        echo "sdk/java/src/main/java/dev/wiggle/proto/v1 is stale: run sdk/java/gen.sh and commit the result" >&2
        exit 1
    fi
    echo "sdk/java generated classes are fresh" >&2
else
    rm -rf "$committed"
    mkdir -p "$(dirname "$committed")"
    cp -r "$work/out/dev/wiggle/proto/v1" "$committed"
fi
