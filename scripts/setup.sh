#!/usr/bin/env bash
# Sets up a machine for Wiggle: Graphviz's `dot` and openssl (Debian packages, only when missing), the Python
# package with its test tools, and the Go modules of sdk/go when that SDK is present.
# Safe to run again: every step is skipped or a no-op when already done.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: Graphviz renders flows; openssl makes the certificates of the TLS tests.
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PYTHON="${PYTHON:-python3}"
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
echo "setup: installing the wiggle Python package" >&2
"$PYTHON" -m pip install -q -e ".[test]"

if [ -f sdk/go/go.mod ] && command -v go >/dev/null 2>&1; then
    echo "setup: downloading Go modules" >&2
    (cd sdk/go && go mod download)
fi
