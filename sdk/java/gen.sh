#!/usr/bin/env bash
# The Java SDK's protobuf classes (package dev.wiggle.proto.v1) are generated at build time from
# spec/proto by the protobuf-maven-plugin (protoc from Maven Central, at the version of the
# protobuf-java runtime in pom.xml) into target/generated-sources/protobuf/java, and never
# committed. Only messages are generated: the gRPC method descriptors are written out in
# dev.wiggle.worker.WiggleRpc (no protoc-gen-grpc-java build is served here for the pinned gRPC),
# and a unit test pins them to the service in the .proto.
#
#   sdk/java/gen.sh           generate the classes now, as the build does (for an IDE)
#   sdk/java/gen.sh --check   exit 1 unless the classes come from spec/proto alone: none is
#                             committed under src/, and the build compiles spec/proto's files
#                             (scripts/test.sh runs this)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if [ "${1:-}" != "--check" ]; then
    mvn -q -B -Dstyle.color=never -f "$here/pom.xml" generate-sources
    echo "generated into $here/target/generated-sources/protobuf/java" >&2
    exit 0
fi

committed="$(git -C "$root" ls-files -- 'sdk/java/src/main/java/dev/wiggle/proto/*' | head -5)"
if [ -n "$committed" ]; then
    echo "generated protobuf classes are committed under sdk/java/src (they are built from" >&2
    echo "spec/proto at build time; remove them):" >&2
    echo "$committed" >&2
    exit 1
fi
# The build's proto source root must be spec/proto, and every .proto there must name the Java
# package the SDK imports.
if ! grep -q '<wiggle.proto.dir>${project.basedir}/../../spec/proto</wiggle.proto.dir>' "$here/pom.xml" ||
    ! grep -q '<protoSourceRoot>${wiggle.proto.dir}</protoSourceRoot>' "$here/pom.xml"; then
    echo "sdk/java/pom.xml does not compile spec/proto (wiggle.proto.dir, protoSourceRoot)" >&2
    exit 1
fi
for proto in $(find "$root/spec/proto" -name '*.proto'); do
    if ! grep -q '^option java_package = "dev.wiggle.proto.v1";' "$proto"; then
        echo "${proto#"$root/"} names no java_package \"dev.wiggle.proto.v1\"" >&2
        exit 1
    fi
done
echo "sdk/java builds its protobuf classes from spec/proto" >&2
