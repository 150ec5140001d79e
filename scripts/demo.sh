#!/usr/bin/env bash
# The main job on a fresh machine: set up, then run the shipped order-fulfilment flow end to end
# (server, worker and an embedded SQLite database in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --demo
exec .venv/bin/wiggle run definitions/order-fulfilment.yaml \
    --handlers definitions/handlers/order_fulfilment.py \
    --input "$(cat definitions/samples/order-fulfilment.json)" "$@"
