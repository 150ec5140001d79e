"""`wiggle conformance`: the corpus under every mode, on every database, against a worker.

Parse, delegate to wiggle.conformance, print. The table has one row per (case, mode, database)
and one "(modes agree)" row per (case, database); the last line is `N passed, N failed`.
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from wiggle.cli._remote_commands import env, env_flag
from wiggle.graph import ExecutionMode

__all__ = ["register"]


# The runner's modes, named here so that building the parser imports nothing heavy
# (tests/unit/test_cli_imports.py keeps `wiggle --help` free of grpc and SQLAlchemy).
MODES = tuple(m.value for m in ExecutionMode if m is not ExecutionMode.DEFAULT)


def _modes(text: str) -> list[str]:
    modes = [m.strip().upper() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(
            f"unknown mode {', '.join(bad) or '(none)'}: choose from {', '.join(MODES)}"
        )
    return modes


def _select(pattern: str | None) -> list[Any]:
    """Cases by id glob over the corpus, or case files by path glob (e.g. elsewhere on disk)."""
    from wiggle.conformance import load_case, load_cases

    if pattern and Path(pattern).suffix in (".yaml", ".yml", ".json"):
        paths = sorted(glob.glob(pattern, recursive=True))
        if paths:
            return [load_case(Path(p)) for p in paths]
    return load_cases(pattern)


def _run(args: argparse.Namespace) -> int:
    from wiggle.conformance import (
        PYTHON_WORKER,
        RunnerOptions,
        format_table,
        run_corpus,
        summarise,
    )

    cases = _select(args.cases)
    if not cases:
        print(f"wiggle conformance: no case matches {args.cases!r}", file=sys.stderr)
        return 2
    from_env = [d.strip() for d in (env("WIGGLE_CONFORMANCE_DATABASES") or "").split(",")]
    databases = args.database or [d for d in from_env if d] or ["sqlite"]
    started = time.monotonic()
    print(
        f"{len(cases)} cases x {len(args.modes)} modes x {len(databases)} databases",
        file=sys.stderr,
        flush=True,
    )
    results = run_corpus(
        cases,
        RunnerOptions(
            modes=args.modes,
            databases=databases,
            worker=args.worker or PYTHON_WORKER,
            parallel=args.parallel,
            verbose=args.verbose,
        ),
    )
    rows = summarise(results)
    if args.json:
        for row in rows:
            print(orjson.dumps(row.as_json()).decode())
    else:
        print(format_table(rows))
        print()
    passed = sum(r.passed for r in rows)
    failed = len(rows) - passed
    print(f"in {time.monotonic() - started:.1f} s", file=sys.stderr)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 0 if failed == 0 else 1


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "conformance",
        help="run the conformance corpus under every mode and database",
        description="Run every case of spec/conformance/ under each execution mode on each "
        "database, against the Python conformance worker or an external one, and check that "
        "each run matches its expectation and that the modes agree. Exit 1 on any failure.",
    )
    p.add_argument(
        "--modes",
        type=_modes,
        default=_modes(env("WIGGLE_CONFORMANCE_MODES", ",".join(MODES)) or ",".join(MODES)),
        help="comma-separated modes (env WIGGLE_CONFORMANCE_MODES; default all three)",
    )
    p.add_argument(
        "--database",
        action="append",
        default=None,  # not the env list: --database replaces it rather than adding to it
        metavar="URL",
        help="'sqlite' (a temporary file), 'postgres' (WIGGLE_TEST_POSTGRES_URL or a throwaway "
        "server) or a database URL; repeatable (env WIGGLE_CONFORMANCE_DATABASES, "
        "comma-separated; default sqlite)",
    )
    p.add_argument(
        "--worker",
        default=env("WIGGLE_CONFORMANCE_WORKER", None),
        metavar="CMD",
        help="the worker command to start; it gets WIGGLE_ADDRESS, WIGGLE_AUTH_TOKEN and "
        "WIGGLE_CONFORMANCE_TRACE in its environment (env WIGGLE_CONFORMANCE_WORKER; "
        "default the Python conformance worker)",
    )
    p.add_argument(
        "--cases",
        default=env("WIGGLE_CONFORMANCE_CASES"),
        metavar="GLOB",
        help="only the cases whose id matches GLOB (e.g. 'crash/*'; several separated by "
        "commas), or the case files a path glob ending in .yaml or .json finds "
        "(env WIGGLE_CONFORMANCE_CASES)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        default=int(env("WIGGLE_CONFORMANCE_PARALLEL", "16") or 16),
        help="cases run at once against the shared worker (env WIGGLE_CONFORMANCE_PARALLEL)",
    )
    p.add_argument(
        "--verbose",
        "-v",
        action="store_true",
        default=env_flag("WIGGLE_CONFORMANCE_VERBOSE"),
        help="with each failed run, show its trace and the instance's event log",
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=env_flag("WIGGLE_JSON"),
        help="one JSON object per row instead of the table",
    )
    p.set_defaults(handler=_run)
