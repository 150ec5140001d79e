#!/usr/bin/env bash
# Sets up a machine and runs every check: lint, types, generated-code freshness, the Go worker
# SDK's tests and the conformance corpus with the Go worker on SQLite and PostgreSQL, the Java
# worker SDK's build, JUnit tests and the corpus with the Java worker on SQLite and PostgreSQL,
# the scenario files of definitions/ (`wiggle test`, every edge of every flow covered), and the
# whole Python test suite (unit, integration on SQLite and PostgreSQL, acceptance, conformance
# with the Python worker). Exits non-zero on any failure, including a test run that
# collected no tests (pytest exit 5).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# Every tool runs from the checkout's .venv; the Go integration tests start `wiggle` through it.
export PYTHON="${PYTHON:-$PWD/.venv/bin/python}"
echo "== ruff" >&2
"$PYTHON" -m ruff check .
"$PYTHON" -m ruff format --check .
echo "== mypy" >&2
"$PYTHON" -m mypy wiggle tools/render
echo "== generated protobuf is fresh" >&2
"$PYTHON" scripts/gen_proto.py --check
echo "== Go worker SDK: generated code is fresh, vet, tests" >&2
bash sdk/go/gen.sh --check
# The corpus with the Go worker runs below, whole and on both databases, rather than in go test.
(cd sdk/go && go vet ./... && WIGGLE_GO_CONFORMANCE=off go test -count=1 ./...)
echo "== the conformance corpus with the Go worker, on SQLite and PostgreSQL" >&2
go -C sdk/go build -o bin/wiggle-conformance-worker ./cmd/wiggle-conformance-worker
"$PYTHON" -m wiggle conformance --worker sdk/go/bin/wiggle-conformance-worker \
    --database sqlite --database postgres
echo "== Java worker SDK: generated code is fresh, build, JUnit (Surefire)" >&2
bash sdk/java/gen.sh --check
mvn -B -ntp -f sdk/java/pom.xml package
echo "== conformance corpus with the Java worker (SQLite, PostgreSQL)" >&2
# C1 only and the serial collector: a worker the corpus restarts a dozen times per session starts
# in about half the time, and leaves the two cores to the server and the cases.
"$PYTHON" -m wiggle conformance --database sqlite --database postgres \
    --worker "java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -jar sdk/java/target/wiggle-conformance-worker.jar"
# --- the scenarios of definitions/ under every mode, every edge of every flow taken (wiggle test)
echo "== wiggle test definitions" >&2
"$PYTHON" -m wiggle test definitions --quiet --fail-under 100 --coverage-file "${TMPDIR:-/tmp}/wiggle-definitions-coverage.json"
# --- end of wiggle test
echo "== pytest" >&2
"$PYTHON" -m pytest "$@"
