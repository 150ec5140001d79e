#!/usr/bin/env bash
# The whole conformance matrix: the corpus with every worker (Python, Go, Java, TypeScript and
# the embedded one) on both databases (SQLite, PostgreSQL), every mode, with the negative
# controls of both broken workers (tests/conformance/ with WIGGLE_CORPUS=full).
# `bash scripts/test.sh` runs each worker on one database, two or more on each
# (tests/conformance/test_corpus.py says why). Extra arguments go to pytest (e.g. -k java).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WIGGLE_CORPUS=full
unset PYTHONDONTWRITEBYTECODE  # each worker it starts would compile the package again
exec .venv/bin/python -m pytest tests/conformance -q -n "${WIGGLE_TEST_PROCESSES:-4}" "$@"
