"""`wiggle trace-receiver`: a small OTLP/gRPC receiver that prints each trace it is sent as a
tree of spans (wiggle.tracing.receiver; docs/observability.md, "Seeing a trace")."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from wiggle.cli._options import flag

__all__ = ["register"]


def _receive(args: argparse.Namespace) -> int:
    try:
        from wiggle.tracing.receiver import serve
    except ModuleNotFoundError as exc:
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        print(
            f"wiggle: trace-receiver needs the OpenTelemetry protocol package ({exc.name}): "
            "pip install 'wiggle[otel]'",
            file=sys.stderr,
        )
        return 2
    serve(args.address, lambda text: print(text, flush=True))
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "trace-receiver",
        help="receive OpenTelemetry spans over OTLP/gRPC and print each trace as a tree",
        description="Listen for OTLP/gRPC trace exports (what `wiggle server`, `wiggle worker` "
        "and the SDKs' workers send once OTEL_EXPORTER_OTLP_ENDPOINT points here) and print "
        "each trace as a tree of spans, with their services, start offsets, durations, links "
        "and errors, as its spans arrive; until Ctrl-C. For a look at a trace where no Jaeger "
        "or collector runs (docs/observability.md).",
    )
    flag(
        p,
        "--address",
        env="WIGGLE_TRACE_RECEIVER_ADDRESS",
        default="127.0.0.1:4317",
        metavar="HOST:PORT",
        help="where it listens (port 0: any free one, printed first)",
    )
    p.set_defaults(handler=_receive)
