#!/usr/bin/env bash
# Sets up a machine and runs every check. Exits non-zero on any failure, including a test run
# that collected no tests (pytest exit 5).
#
#   bash scripts/test.sh [PYTEST_ARGS...]          everything (CI runs this, through .ci/run):
#       the Go, Java (its protobuf classes generated from spec/proto) and TypeScript SDKs'
#       builds; then the whole Python suite in parallel processes: unit, integration on SQLite
#       and PostgreSQL, acceptance, browser, the short fault suite, and the conformance corpus
#       with each worker (Python and Java on PostgreSQL; Go, TypeScript and the embedded one on
#       SQLite; scripts/corpus.sh runs each on both); and beside it lint, types and
#       generated-code freshness, the Go SDK's vet and tests, the Java SDK's JUnit tests, the
#       TypeScript SDK's node tests and exports check, and the scenarios of definitions/
#       (`wiggle test`, every edge of every shipped flow covered).
#   bash scripts/test.sh --quick [PYTEST_ARGS...]  the edit-run loop, a few minutes: lint, types,
#       generated Python code, the unit tests and the integration tests on SQLite.
#
# First what pytest needs (the Go, Java and TypeScript conformance workers, the TypeScript
# tests' build, the test modules collected once), side by side; then pytest with pytest-xdist
# (WIGGLE_TEST_PROCESSES processes, default 4: most tests wait on timers, leases and subprocesses
# rather than on the two cores), and beside it the checks that only read the tree (lint, the
# SDKs' own tests, the scenarios), each printed when pytest has ended. Extra arguments go to pytest. At the end:
# the ten slowest tests, the ten that took the most CPU, and how long each stage took and the CPU
# its commands used (on two cores, a run takes about half its CPU).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [ "${1:-}" = "--quick" ]; then
    quick=1
    shift
fi
began=$SECONDS
bash scripts/setup.sh

# Every tool runs from the checkout's .venv; the Go integration tests start `wiggle` through it.
export PYTHON="${PYTHON:-$PWD/.venv/bin/python}"
# Bytecode is written and compiled once, up front: the suite starts a few thousand Python
# processes (servers, workers, CLI calls) and, with PYTHONDONTWRITEBYTECODE set (some machines
# set it for everyone), each of them would compile the package from source again, and every
# pytest process would rewrite every test module's asserts again: a third of the CPU of a
# test that drives the CLI.
unset PYTHONDONTWRITEBYTECODE
"$PYTHON" -m compileall -q -j 0 wiggle tests >/dev/null
processes="${WIGGLE_TEST_PROCESSES:-4}"
logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT
timings=()
failed=()

lint() {
    "$PYTHON" -m ruff check .
    "$PYTHON" -m ruff format --check .
    "$PYTHON" -m mypy wiggle tools/render
    "$PYTHON" scripts/gen_proto.py --check
}

collect() {
    # Collection errors (an import error, a module fixture xdist would split) said once, plainly:
    # under xdist they only crash a worker process. Done before pytest's processes start, it
    # also writes the assertion-rewritten test modules once, which they then read: in a fresh
    # clone each of them rewrote all of them at once, 46 s before the first test began.
    "$PYTHON" -m pytest --collect-only -q -p no:cacheprovider >/dev/null
}

# What pytest needs built (the conformance workers, the TypeScript test build its negative
# controls run) comes first; the checks that only read the tree run beside pytest.
go_build() {
    bash sdk/go/gen.sh --check
    go -C sdk/go build -o bin/wiggle-conformance-worker ./cmd/wiggle-conformance-worker
}

go_sdk() {
    # The corpus with the Go worker runs in pytest (tests/conformance/test_corpus.py), not here.
    (cd sdk/go && go vet ./... && WIGGLE_GO_CONFORMANCE=off go test -count=1 ./...)
}

# Maven and the JVM its tests fork run seconds each: the JIT's first tier alone and one GC
# thread halve their CPU (29 to 14 CPU-s to build, 19 to 11 for the JUnit tests), as the corpus's
# Java worker does (tests/conftest.py, JAVA_FLAGS).
java_flags="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# Maven on the Java SDK, quiet, with those flags unless MAVEN_OPTS says otherwise.
maven() {
    MAVEN_OPTS="${MAVEN_OPTS:-$java_flags}" \
        mvn -B -ntp -q -Dstyle.color=never -f sdk/java/pom.xml "$@"
}

java_build() {
    bash sdk/java/gen.sh --check
    maven -DskipTests package
}

java_sdk() {
    # The JUnit tests of what java_build compiled (nothing is recompiled, the jar is left as
    # pytest's Java worker found it).
    maven surefire:test -DargLine="$java_flags"
}

scenarios() {
    # The scenarios of definitions/ under every mode, every edge of every flow taken.
    "$PYTHON" -m wiggle test definitions --quiet --fail-under 100 \
        --coverage-file "${TMPDIR:-/tmp}/wiggle-definitions-coverage.json"
}

typescript_build() {
    # Build (ESM + CommonJS, its protobuf types generated from spec/proto) and the tests' build.
    (cd sdk/typescript && npm run -s build && npx tsc -p tsconfig.test.json)
}

typescript_sdk() {
    # node --test, and the package's exports checked with attw. Its corpus runs in pytest.
    (cd sdk/typescript && node --test build/test/*.test.js && npm run -s check:exports)
    # The VS Code extension of `wiggle lsp` builds as docs/editors.md says.
    (cd editors/vscode && npm ci --no-audit --no-fund && npm run -s compile)
}

# "N CPU-s": user + system time of the commands of a group, from the `times` output in FILE.
cpu_of() {
    awk 'NR == 2 {
        split($1, u, /[ms]/); split($2, k, /[ms]/)
        printf "(%.0f CPU-s)", u[1] * 60 + u[2] + k[1] * 60 + k[2]
    }' "$1" 2>/dev/null || true
}

# Starts each named function in the background, its output in a log of its own.
group_names=()
group_pids=()
group_starts=()
start_groups() {
    local name
    for name in "$@"; do
        group_names+=("$name")
        group_starts+=("$SECONDS")
        # As the group ends, however it ends (errexit stays on inside): when, and the CPU its
        # commands took (`times`, whose second line is the children's).
        (trap 'echo "$SECONDS" >"$logs/$name.end"; times >"$logs/$name.cpu"' EXIT; "$name") \
            >"$logs/$name.log" 2>&1 &
        group_pids+=("$!")
    done
}

# Waits for every started group; prints each one's time, and the log of each one that failed.
wait_groups() {
    local i name status took
    for i in "${!group_pids[@]}"; do
        name="${group_names[$i]}"
        status=0
        wait "${group_pids[$i]}" || status=$?
        took=$(($(cat "$logs/$name.end" 2>/dev/null || echo "$SECONDS") - ${group_starts[$i]}))
        timings+=("$name ${took} s $(cpu_of "$logs/$name.cpu")")
        if [ "$status" -ne 0 ]; then
            failed+=("$name")
            echo "== $name: FAILED (exit $status, ${took}s $(cpu_of "$logs/$name.cpu"))" >&2
            cat "$logs/$name.log" >&2
        else
            echo "== $name: ok (${took}s $(cpu_of "$logs/$name.cpu"))" >&2
        fi
    done
    group_names=()
    group_pids=()
    group_starts=()
    return 0
}

side_by_side() {
    start_groups "$@"
    wait_groups
}

summary() {
    local line="" t
    for t in "${timings[@]}"; do line+="${line:+, }$t"; done
    times >"$logs/all.cpu"
    echo "== took: $line; all $((SECONDS - began)) s $(cpu_of "$logs/all.cpu")" >&2
}

if [ "$quick" -eq 1 ]; then
    side_by_side lint collect
    if [ ${#failed[@]} -gt 0 ]; then
        summary
        exit 1
    fi
    start=$SECONDS
    status=0
    "$PYTHON" -m pytest -n "$processes" \
        tests/unit tests/integration -m "not postgres" --ignore=tests/integration/fleet \
        "$@" || status=$?
    timings+=("pytest $((SECONDS - start)) s")
    summary
    exit "$status"
fi

side_by_side collect go_build java_build typescript_build
if [ ${#failed[@]} -gt 0 ]; then
    summary
    exit 1
fi
# The checks that read the tree run beside pytest, whose processes leave the cores idle while
# they wait on timers, leases and subprocesses; their reports follow pytest's.
start_groups lint go_sdk java_sdk typescript_sdk scenarios
echo "== pytest ($processes processes; lint, the SDKs' own tests and the scenarios beside it)" >&2
start=$SECONDS
status=0
"$PYTHON" -m pytest -n "$processes" "$@" || status=$?
timings+=("pytest $((SECONDS - start)) s")
wait_groups
if [ ${#failed[@]} -gt 0 ] && [ "$status" -eq 0 ]; then
    status=1
fi
summary
exit "$status"
