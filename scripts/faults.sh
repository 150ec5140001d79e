#!/usr/bin/env bash
# The full fault suite (tests/faults/ with WIGGLE_FAULTS=full): real server, worker and
# PostgreSQL processes killed, stopped, crashed, cut off and drained under load, and a Patroni +
# etcd cluster failed over (tests/faults/test_patroni.py), each scenario ending with a ledger
# line; the table of every line is printed at the end. Bounded: every
# scenario has a fixed count of instances and a timeout. `bash scripts/test.sh` runs the short
# version: fewer instances and modes, and without the scenarios marked `full_only` (each names
# the shorter test of test.sh that checks the same rule). Extra arguments go to pytest (e.g.
# -k zombie).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export WIGGLE_FAULTS=full
unset PYTHONDONTWRITEBYTECODE  # each server and worker it starts would compile the package again
exec .venv/bin/python -m pytest tests/faults -q "$@"
