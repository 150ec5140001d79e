"""`wiggle bench NAME`: the benchmarks. They print figures; they never pass or fail on speed."""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Callable
from typing import Any

__all__ = ["register"]


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise SystemExit(f"wiggle: {name}={value!r} is not an integer") from None


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name, "")
    try:
        return float(value) if value else default
    except ValueError:
        raise SystemExit(f"wiggle: {name}={value!r} is not a number") from None


def _throughput_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--database",
        default=env("WIGGLE_BENCH_DATABASE") or "postgres",
        help="postgres (a throwaway server, a fresh database per mode), sqlite (a temporary "
        "file per mode) or a database URL, used as it is by every mode and kept "
        "(env WIGGLE_BENCH_DATABASE; default %(default)s)",
    )
    parser.add_argument(
        "--modes",
        default=env("WIGGLE_BENCH_MODES") or "SERVER,LOCAL_SYNC,LOCAL_ASYNC",
        help="comma-separated execution modes, run one after the other "
        "(env WIGGLE_BENCH_MODES; default %(default)s)",
    )
    ints = (
        ("instances", 1000, "measured instances per mode"),
        ("warmup", 50, "instances run before the measured window opens"),
        ("inflight", 64, "instances in flight: the closed loop starts one when one ends"),
        ("steps", 20, "tasks in the linear flow"),
        ("servers", 1, "wiggle server processes over the one database"),
        ("workers", 4, "wiggle worker processes (spread over the servers)"),
        ("concurrency", 16, "slots per worker"),
        (
            "history",
            0,
            "finished instances written into each database before the run "
            "(bulk INSERTs): the cost as history grows",
        ),
    )
    for name, default, what in ints:
        var = f"WIGGLE_BENCH_{name.upper()}"
        parser.add_argument(
            f"--{name}",
            type=int,
            default=_env_int(var, default),
            help=f"{what} (env {var}; default %(default)s)",
        )
    parser.add_argument(
        "--settle",
        type=float,
        default=_env_float("WIGGLE_BENCH_SETTLE", 11.0),
        help="PostgreSQL: seconds between the warm-up and the first counter reading, so that "
        "every backend has published its statistics (env WIGGLE_BENCH_SETTLE; default "
        "%(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=_env_float("WIGGLE_BENCH_TIMEOUT", 300.0),
        help="seconds an instance may take before the run counts as failed "
        "(env WIGGLE_BENCH_TIMEOUT; default %(default)s)",
    )
    parser.add_argument(
        "--worker-command",
        metavar="CMD",
        default=env("WIGGLE_BENCH_WORKER_COMMAND") or None,
        help="run the workers as another program: CMD runs through /bin/sh once per worker "
        "process (--workers of them), with WIGGLE_ADDRESS (its server), WIGGLE_BENCH_QUEUE "
        "(the queue to serve), WIGGLE_BENCH_CONCURRENCY (its slots, --concurrency) and "
        "WIGGLE_BENCH_WORKER (0, 1, ...) in its environment; it must register bench_step as "
        "wiggle/bench/_handlers.py does (Java: sdk/java/bench/BenchWorker.java), and drain "
        "and exit on SIGTERM. Its CPU counts with every process it starts "
        "(env WIGGLE_BENCH_WORKER_COMMAND; default: wiggle worker processes)",
    )
    parser.add_argument(
        "--rpcs",
        action="store_true",
        default=(env("WIGGLE_BENCH_RPCS") or "").lower() in ("1", "true", "yes", "on"),
        help="also count the servers' RPCs by method and their transactions by kind per step "
        "(each server serves its metrics endpoint for it) (env WIGGLE_BENCH_RPCS)",
    )
    parser.add_argument(
        "--tracing",
        choices=("off", "on", "both"),
        default=env("WIGGLE_BENCH_TRACING") or "off",
        help="OpenTelemetry in the servers and workers: off (as without it), on (spans "
        "exported by the batch processor over OTLP/gRPC to a receiver in the driver), or both: "
        "each mode off, then on, and the CPU tracing adds per step "
        "(env WIGGLE_BENCH_TRACING; default %(default)s)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=(env("WIGGLE_JSON") or "").lower() in ("1", "true", "yes", "on"),
        help="print one JSON document instead of the table (env WIGGLE_JSON)",
    )
    parser.add_argument(
        "--inject-failure",
        action="store_true",
        help="test aid: the first measured instance fails for good, so the run must fail "
        "verification and print no figure",
    )


def _latency_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", default="postgres", help="postgres (throwaway) or sqlite")
    parser.add_argument("--starts", type=int, default=50)
    parser.add_argument(
        "--steps",
        type=int,
        default=0,
        help="instead: one instance in flight, a flow of this many steps, start to result per "
        "mode (the peers harness's one-in-flight workload)",
    )
    parser.add_argument("--instances", type=int, default=100, help="with --steps: per mode")
    parser.add_argument("--warmup", type=int, default=10, help="with --steps: per mode")
    parser.add_argument(
        "--mode", dest="modes", action="append", help="with --steps: only this mode (repeatable)"
    )
    parser.add_argument("--json", action="store_true", help="with --steps: one JSON document")
    parser.add_argument(
        "--workers",
        type=int,
        default=4,
        help="with --steps: wiggle worker processes (the peers harness's slot runs 4)",
    )
    parser.add_argument(
        "--concurrency", type=int, default=16, help="with --steps: slots per worker (harness: 16)"
    )
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="with --steps: the embedded layout (wiggle.embedded: node, one worker and the "
        "client in this process, no socket) instead of a server and --workers processes",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="with --steps: rounds per mode, interleaved; the figures are their medians "
        "(as the harness's)",
    )


def _plan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database", default="postgres", help="postgres (throwaway) or sqlite")
    parser.add_argument("--instances", type=int, default=10_000, help="live instances to plan")
    parser.add_argument("--rounds", type=int, default=3, help="plans timed; the best is kept")


# name -> (module with run(args), arguments, one-line description). The modules import grpc and
# SQLAlchemy, so they are loaded only when their benchmark runs.
_BENCHMARKS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], str]] = {
    "throughput": (
        "wiggle.bench._throughput",
        _throughput_arguments,
        "closed loop over server and worker processes, verified from the database: inst/s, "
        "steps/s, latency, commits, WAL syncs and CPU per step, per mode",
    ),
    "latency": (
        "wiggle.bench._latency",
        _latency_arguments,
        "start-to-first-step latency with and without eager dispatch",
    ),
    "plan": (
        "wiggle.bench._plan",
        _plan_arguments,
        "time planning a migration of many live instances (docs/migration.md)",
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
