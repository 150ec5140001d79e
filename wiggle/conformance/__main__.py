"""`python -m wiggle.conformance`: the Python conformance worker, as a process of its own.

It is what `wiggle conformance` starts unless `--worker CMD` names another one, and it follows
the same contract an external worker does (spec/conformance/README.md): the server address and
token come from WIGGLE_ADDRESS and WIGGLE_AUTH_TOKEN (TLS when WIGGLE_TLS_CA names the CA to
trust), the trace file from WIGGLE_CONFORMANCE_TRACE, the queues from WIGGLE_QUEUES (default
`default,other`) and the LOCAL_ASYNC batch size from WIGGLE_CONFORMANCE_BATCH_SIZE; it serves
until SIGTERM, then drains.
"""

from __future__ import annotations

import logging
import os
import sys

from wiggle.conformance._activities import build_registry
from wiggle.localrun import DEFAULT_BATCH_SIZE
from wiggle.wire import TlsConfig
from wiggle.worker import Worker

QUEUES = "default,other"


def main() -> int:
    address = os.environ.get("WIGGLE_ADDRESS")
    if not address:
        print("wiggle.conformance: set WIGGLE_ADDRESS to the server's host:port", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    queues = tuple(q for q in os.environ.get("WIGGLE_QUEUES", QUEUES).split(",") if q)
    ca = os.environ.get("WIGGLE_TLS_CA")
    worker = Worker(
        address,
        queues=queues,
        registry=build_registry(),
        token=os.environ.get("WIGGLE_AUTH_TOKEN") or None,
        tls=TlsConfig(ca=ca) if ca else None,
        concurrency=int(os.environ.get("WIGGLE_CONCURRENCY", "64")),
        local_batch_size=int(
            os.environ.get("WIGGLE_CONFORMANCE_BATCH_SIZE", str(DEFAULT_BATCH_SIZE))
        ),
        poll_wait_ms=2_000,
    )
    worker.run()  # blocks; SIGTERM drains
    return 0


if __name__ == "__main__":
    sys.exit(main())
