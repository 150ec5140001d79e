"""`wiggle bench NAME`: the benchmarks. They print figures; they never pass or fail on speed."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["register"]


def _throughput_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", default="postgres", help="postgres (throwaway) or sqlite")
    parser.add_argument("--modes", default="SERVER,LOCAL_SYNC,LOCAL_ASYNC")
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4, help="worker processes")
    parser.add_argument("--concurrency", type=int, default=16, help="slots per worker")
    parser.add_argument("--servers", type=int, default=1, help="server processes")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds before starting")
    parser.add_argument("--timeout", type=float, default=600.0)


def _latency_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", default="postgres", help="postgres (throwaway) or sqlite")
    parser.add_argument("--starts", type=int, default=50)


# name -> (module with run(args), arguments, one-line description). The modules import grpc and
# SQLAlchemy, so they are loaded only when their benchmark runs.
_BENCHMARKS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], str]] = {
    "throughput": (
        "wiggle.bench._throughput",
        _throughput_arguments,
        "linear flow, many instances, worker processes over gRPC: inst/s, commits/inst per mode",
    ),
    "latency": (
        "wiggle.bench._latency",
        _latency_arguments,
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
    for name, (module_name, arguments, description) in _BENCHMARKS.items():
        sub = names.add_parser(name, help=description, description=description)
        arguments(sub)
        sub.set_defaults(handler=_runner(module_name))


def _runner(module_name: str) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        return int(importlib.import_module(module_name).run(args))

    return handler
