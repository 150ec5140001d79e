"""The Python member of the mixed fleet: the conformance activities on the queues in WIGGLE_QUEUES.

`python fleet_python_worker.py`, with WIGGLE_ADDRESS, WIGGLE_QUEUES (comma-separated) and
WIGGLE_CONFORMANCE_TRACE set, as the Go and Java conformance workers read them. SIGTERM drains.
"""

from __future__ import annotations

import logging
import os

from wiggle.conformance._activities import build_registry
from wiggle.worker import Worker


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="python worker %(levelname)s: %(message)s")
    worker = Worker(
        os.environ["WIGGLE_ADDRESS"],
        queues=os.environ["WIGGLE_QUEUES"].split(","),
        registry=build_registry(),
        concurrency=16,
        poll_wait_ms=1_000,
    )
    worker.run()


if __name__ == "__main__":
    main()
