"""`wiggle conformance`: the corpus under every mode, on every database, against a worker; or,
with `--flow`, one flow of the user's under every mode.

Parse, delegate to wiggle.conformance, print. The corpus table has one row per (case, mode,
database) and one "(modes agree)" row per (case, database); the last line is
`N passed, N failed`. The flow check prints one row per (mode, database), every difference
between the modes, and last `modes agree` or `modes differ`.
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from wiggle.cli._options import add_database_profile, env, env_flag
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


def _check_flow(args: argparse.Namespace, databases: list[str]) -> int:
    from wiggle.cli._options import parse_json
    from wiggle.cli._worker_command import load_registry
    from wiggle.conformance import FlowSignal, check_flow
    from wiggle.errors import FlowError, InvalidRequest

    if not args.handlers:
        raise InvalidRequest("--flow needs --handlers (the file or module of its activities)")
    value = parse_json(args.input, "--input")
    signals = []
    for text in args.signal or []:
        name, sep, payload = text.partition("=")
        if not sep or not name:
            raise InvalidRequest(f"--signal {text[:80]!r}: expected NAME=JSON")
        signals.append(FlowSignal(name, parse_json(payload, f"the payload of --signal {name}")))
    registry = load_registry(args.handlers)

    def row(o: Any) -> None:
        if not args.json:
            steps = sum(o.steps.values())
            print(
                f"{o.mode:<12} {o.database:<9} {o.status:<10} {steps:>5}  {o.seconds:6.1f}s"
                + (f"  ({o.problem})" if o.problem else ""),
                flush=True,
            )

    if not args.json:
        print(f"{'mode':<12} {'database':<9} {'status':<10} {'steps':>5}  {'time':>7}")
    try:
        check = check_flow(
            args.flow,
            registry,
            value,
            signals=signals,
            register=args.register or [],
            modes=args.modes,
            databases=databases,
            deadline_s=args.timeout,
            on_outcome=row,
        )
    except FlowError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return 2
    if args.json:
        doc = {
            "agree": check.agree,
            "outcomes": [
                {
                    "mode": o.mode,
                    "database": o.database,
                    "status": o.status,
                    "reason": o.reason,
                    "context": None if o.problem and o.status == "" else o.context,
                    "steps": o.steps,
                    "problem": o.problem,
                }
                for o in check.outcomes
            ],
            "differences": check.differences,
        }
        print(orjson.dumps(doc).decode())
    else:
        stuck = [f"{o.mode} on {o.database}: {o.problem}" for o in check.outcomes if o.problem]
        for problem in stuck + check.differences:
            print(f"  - {problem}")
        print("modes agree" if check.agree else "modes differ")
    return 0 if check.agree else 1


def _run(args: argparse.Namespace) -> int:
    from_env = [d.strip() for d in (env("WIGGLE_CONFORMANCE_DATABASES") or "").split(",")]
    databases = args.database or [d for d in from_env if d] or ["sqlite"]
    if args.flow:
        return _check_flow(args, databases)
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
            database_profile=args.database_profile,
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
        "each run matches its expectation and that the modes agree. Exit 1 on any failure. "
        "With --flow, run one flow of yours with your handlers under each mode instead, and "
        "report any difference between the modes in final status, context, or which steps ran "
        "how often (exit 1 when they differ).",
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
        help="the worker command to start; it gets WIGGLE_ADDRESS, WIGGLE_AUTH_TOKEN, "
        "WIGGLE_CONFORMANCE_TRACE, WIGGLE_QUEUES, WIGGLE_CONFORMANCE_BATCH_SIZE and, in the "
        "TLS cases, WIGGLE_TLS_CA in its environment (spec/conformance/README.md says what "
        "each means; env WIGGLE_CONFORMANCE_WORKER; default the Python conformance worker); "
        "'embedded': the Python worker inside this process, calling its node with no gRPC "
        "(docs/embedded.md)",
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
    add_database_profile(p)
    own = p.add_argument_group("one flow of yours (--flow)")
    own.add_argument(
        "--flow",
        default=env("WIGGLE_CONFORMANCE_FLOW"),
        metavar="FLOW",
        help="run this flow file under each mode (its `execution` overridden) instead of the "
        "corpus (env WIGGLE_CONFORMANCE_FLOW)",
    )
    own.add_argument(
        "--handlers",
        default=env("WIGGLE_HANDLERS"),
        metavar="H",
        help="the handlers file or module of the flow's activities (env WIGGLE_HANDLERS)",
    )
    own.add_argument(
        "--input",
        default=env("WIGGLE_INPUT", "{}"),
        metavar="JSON",
        help="the start input, JSON or @file (env WIGGLE_INPUT; default {})",
    )
    own.add_argument(
        "--signal",
        action="append",
        metavar="NAME=JSON",
        help="send this signal right after the start (buffered until awaited); repeatable",
    )
    own.add_argument(
        "--register",
        action="append",
        metavar="FLOW",
        help="a child flow the flow starts as a subflow, registered first; repeatable",
    )
    own.add_argument(
        "--timeout",
        type=float,
        default=float(env("WIGGLE_CONFORMANCE_TIMEOUT", "60") or 60),
        metavar="S",
        help="give up on a run still RUNNING after S seconds (env WIGGLE_CONFORMANCE_TIMEOUT; "
        "default 60)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        default=env_flag("WIGGLE_JSON"),
        help="one JSON object per row instead of the table",
    )
    p.set_defaults(handler=_run)
