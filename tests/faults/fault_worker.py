"""A worker process for the fault suite: the ledger-writing activities of fault_handlers.py.

    python fault_worker.py ADDRESS [--queue Q ...] [--concurrency N] [--batch N]

Prints `ready` once it is about to serve, `drained` after a graceful stop (SIGTERM). The ledger
file is named by WIGGLE_FAULT_LEDGER.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fault_handlers  # noqa: F401  (registers the activities)

from wiggle.worker import Worker, default_registry


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("address")
    parser.add_argument("--queue", action="append")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(name)s: %(message)s"
    )
    worker = Worker(
        args.address,
        queues=args.queue or ["default"],
        registry=default_registry,
        concurrency=args.concurrency,
        local_batch_size=args.batch,
        token=args.token,
        poll_wait_ms=2_000,
    )
    print("ready", flush=True)
    worker.run()
    print("drained", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
