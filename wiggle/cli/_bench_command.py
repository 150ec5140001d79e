"""`wiggle bench NAME`: the benchmarks. They print figures; they never pass or fail on speed."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

__all__ = ["register"]

# name -> (module, one-line description)
_BENCHMARKS = {
    "throughput": (
        "wiggle.bench._throughput",
        "linear flow, many instances, worker processes over gRPC: inst/s, commits/inst per mode",
    ),
    "latency": (
        "wiggle.bench._latency",
        "start-to-first-step latency with and without eager dispatch",
    ),
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="run a benchmark",
        description="Run a benchmark and print its figures (ratios and counts).",
    )
    names = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module_name, description) in _BENCHMARKS.items():
        sub = names.add_parser(name, help=description, description=description)
        module = importlib.import_module(module_name)
        module.add_arguments(sub)
        sub.set_defaults(handler=_runner(module_name))


def _runner(module_name: str) -> Any:
    def handler(args: argparse.Namespace) -> int:
        return int(importlib.import_module(module_name).run(args))

    return handler
