#!/usr/bin/env bash
# Sets up a machine for Wiggle. Nothing is installed into the machine's own Python. Safe to run
# again: every step is skipped or a no-op when already done.
#
#   bash scripts/setup.sh          for the tests (scripts/test.sh): Graphviz's `dot`, openssl,
#                                  Chromium and chromedriver, Maven, etcd, Patroni, HAProxy and
#                                  PostgreSQL 15 (Debian packages, only when missing), a virtual
#                                  environment in the checkout (.venv) holding the Python package
#                                  and its test tools, the Go modules of sdk/go,
#                                  the Maven artifacts of sdk/java, Node.js and npm (Debian) and
#                                  the npm packages of sdk/typescript (npm ci, its lockfile) and
#                                  Neovim (the language server's editor test)
#   bash scripts/setup.sh --demo   only what running and drawing flows needs (scripts/demo.sh):
#                                  `dot` and the virtual environment
#
# Afterwards: `. .venv/bin/activate` puts `wiggle` (and pytest, ruff, mypy) on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
demo=0
if [ "${1:-}" = "--demo" ]; then
    demo=1
fi

# Debian packages: Graphviz renders flows; openssl makes the certificates of the TLS tests;
# Chromium and its driver run the console's browser tests (tests/browser); Maven builds and tests
# the Java worker SDK (Debian's maven brings a JDK when there is none); etcd, Patroni, HAProxy
# and PostgreSQL 15 make the fault suite's Patroni cluster (the tests start their own processes on
# free loopback ports; a service a package starts by itself is not used).
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
if [ "$demo" -eq 0 ]; then
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)
    command -v chromium >/dev/null 2>&1 || missing+=(chromium)
    command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
    command -v mvn >/dev/null 2>&1 || missing+=(maven)
    # The fault suite's highly available PostgreSQL (tests/faults/hacluster.py): three etcd
    # members, three PostgreSQL 15 nodes under Patroni, HAProxy in front.
    command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
    command -v patroni >/dev/null 2>&1 || missing+=(patroni)
    command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
    [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql-15)
    # Node.js 20+ and npm build and test the TypeScript worker SDK.
    command -v node >/dev/null 2>&1 || missing+=(nodejs)
    command -v npm >/dev/null 2>&1 || missing+=(npm)
    # Neovim, headless, opens a flow with `wiggle lsp` as its language server (tests/integration/lsp).
    command -v nvim >/dev/null 2>&1 || missing+=(neovim)
fi
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The virtual environment: created from the machine's python3 (3.11 or newer) once, then reused.
BASE_PYTHON="${WIGGLE_BASE_PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv" >&2
    "$BASE_PYTHON" -m venv .venv
fi
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
# Reinstall only when the declared dependencies changed since the last install.
stamp=".venv/.wiggle-$(sha1sum pyproject.toml | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    echo "setup: installing the wiggle Python package into .venv" >&2
    # With uv (from PyPI, into .venv): it installs the package's 80-odd dependencies in about
    # 3 s where pip takes about 20, and every clean clone's test command makes a new .venv.
    # The newest pip and setuptools come too, as before (the install test builds a wheel with
    # them); pip installs everything itself when uv cannot be had.
    if .venv/bin/python -m pip install -q uv >/dev/null 2>&1; then
        .venv/bin/uv pip install -q --python .venv/bin/python --upgrade pip setuptools \
            -e ".[test,otel,lsp]"
    else
        .venv/bin/python -m pip install -q --upgrade pip setuptools
        # setuptools warns on every editable install that a folder named like the package
        # (wiggle/, the package itself here) may shadow it: true of any src-less project.
        PYTHONWARNINGS="ignore::UserWarning" .venv/bin/python -m pip install -q -e ".[test,otel,lsp]"
    fi
    rm -f .venv/.wiggle-*
    touch "$stamp"
fi

if [ "$demo" -eq 1 ]; then
    exit 0  # the demo runs Python only: no Go modules, no Maven artifacts
fi

if [ -f sdk/go/go.mod ] && command -v go >/dev/null 2>&1; then
    echo "setup: downloading Go modules" >&2
    (cd sdk/go && go mod download)
fi

# The Java SDK's Maven artifacts (plugins included), once per pom.xml: a build after this needs
# no download. The stamp lives in Maven's own repository, which `mvn clean` leaves alone.
if [ -f sdk/java/pom.xml ] && command -v mvn >/dev/null 2>&1; then
    m2="${MAVEN_REPO:-$HOME/.m2/repository}"
    stamp="$m2/.wiggle-java-$(sha1sum sdk/java/pom.xml | cut -c1-12)"
    if [ ! -f "$stamp" ]; then
        echo "setup: downloading the Java SDK's Maven artifacts" >&2
        mvn -q -B -f sdk/java/pom.xml dependency:go-offline >/dev/null
        mkdir -p "$m2"
        touch "$stamp"
    fi
fi

# The TypeScript SDK's npm packages, exactly as its committed lockfile says (npm ci), once per
# package-lock.json. The stamp lives in node_modules, which npm ci recreates.
if [ -f sdk/typescript/package-lock.json ] && command -v npm >/dev/null 2>&1; then
    stamp="sdk/typescript/node_modules/.wiggle-$(sha1sum sdk/typescript/package-lock.json | cut -c1-12)"
    if [ ! -f "$stamp" ]; then
        echo "setup: installing the TypeScript SDK's npm packages (npm ci)" >&2
        (cd sdk/typescript && npm ci --no-audit --no-fund --loglevel=error)
        touch "$stamp"
    fi
fi
