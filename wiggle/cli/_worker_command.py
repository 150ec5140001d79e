"""`wiggle worker`: a Python worker running the activities of a handlers file or module."""

from __future__ import annotations

import argparse
from typing import Any

from wiggle.cli._options import add_connection_flags, connection_of, flag
from wiggle.cli._server_command import add_log_level, setup_logging
from wiggle.errors import InvalidRequest

__all__ = ["load_registry", "register"]


def load_registry(spec: str) -> Any:
    """Import a handlers file or module; InvalidRequest with a clear message when it fails."""
    from wiggle.worker import load_handlers

    try:
        return load_handlers(spec)
    except ImportError as exc:
        raise InvalidRequest(f"cannot load handlers {spec!r}: {exc}") from None
    except Exception as exc:  # an error inside the user's module: say where, not a traceback
        raise InvalidRequest(
            f"importing handlers {spec!r} failed: {type(exc).__name__}: {exc}"
        ) from None


def _worker(args: argparse.Namespace) -> int:
    from wiggle.worker import Worker

    setup_logging(args.log_level)
    conn = connection_of(args)
    registry = load_registry(args.handlers)
    worker = Worker(
        conn.address,
        queues=args.queue or ["default"],
        registry=registry,
        concurrency=args.concurrency,
        local_batch_size=args.batch_size,
        token=conn.token,
        tls=conn.tls or False,  # plaintext: the variables were read already
        metrics_address=args.metrics_address,
    )
    worker.run()
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "worker",
        help="run a Python worker",
        description="Pull tasks from a server and run the activities of a handlers file or "
        "module until SIGTERM / SIGINT (then drain: buffered results are handed back). "
        "The worker is handed only tasks of the queues it serves and the activities it has.",
    )
    flag(
        p,
        "--handlers",
        env="WIGGLE_HANDLERS",
        help="a .py file or a module name defining @activity functions",
        required=True,
    )
    flag(
        p,
        "--queue",
        env="WIGGLE_QUEUES",
        action="append",
        help="a queue to serve; repeatable; without one, `default` (the variable: comma-separated)",
    )
    flag(
        p,
        "--concurrency",
        env="WIGGLE_CONCURRENCY",
        default=16,
        type=int,
        help="tasks run at once",
    )
    flag(
        p,
        "--batch-size",
        env="WIGGLE_LOCAL_BATCH_SIZE",
        default=64,
        type=int,
        help="LOCAL_ASYNC steps buffered before a flush",
    )
    flag(
        p,
        "--metrics-address",
        env="WIGGLE_METRICS_ADDRESS",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (plain HTTP)",
    )
    add_log_level(p)
    add_connection_flags(p)
    p.set_defaults(handler=_worker)
