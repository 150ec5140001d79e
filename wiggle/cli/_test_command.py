"""`wiggle test FLOW_OR_DIR...`: run scenario files (docs/testing.md).

Parse, delegate to wiggle.testing, print: one line per scenario and mode, the failures with
expected and actual (and the path taken), pytest's closing line; `--json` prints one document
instead. Exit status 0 when everything passed, 1 on any failure, file that did not load, or
coverage under `--fail-under`, 2 when a target names no scenario file.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any

from wiggle.cli._conformance_command import _modes
from wiggle.cli._options import MODES, add_json_flag, flag

__all__ = ["register"]

DEFAULT_COVERAGE_FILE = "wiggle-coverage.json"


def _percent(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise ValueError(text)
    return value


def _test(args: argparse.Namespace) -> int:
    from wiggle.testing._report import (
        closing_line,
        failure_lines,
        report_document,
        result_line,
    )
    from wiggle.testing._runner import find_scenario_files, run_files

    # Failed attempts are what scenarios are made of: the results report them, not the log.
    logging.getLogger("wiggle.worker").setLevel(logging.ERROR)
    files, problems = find_scenario_files(args.targets)
    if problems:
        for problem in problems:
            print(f"wiggle test: {problem}", file=sys.stderr)
        return 2
    # From the flag each value is a list already; from WIGGLE_TEST_MODES, a string.
    given = [m for v in args.mode or [] for m in (_modes(v) if isinstance(v, str) else v)]
    modes = list(dict.fromkeys(given or MODES))
    coverage = args.coverage or args.fail_under is not None
    quiet = args.quiet or args.json

    def on_run(run: Any) -> None:
        if not quiet:
            print(result_line(run), flush=True)

    report = run_files(
        files, modes=modes, select=args.select or "", on_run=on_run, coverage=coverage
    )
    low = False
    if coverage:
        document = report.coverage.document()
        try:
            with open(args.coverage_file, "w", encoding="utf-8") as handle:
                json.dump(document, handle, indent=2, sort_keys=True)
                handle.write("\n")
        except OSError as exc:
            print(
                f"wiggle test: cannot write {args.coverage_file}: {exc.strerror}", file=sys.stderr
            )
            return 1
        low = args.fail_under is not None and report.coverage.lowest() < args.fail_under
    if args.json:
        print(json.dumps(report_document(report, coverage=coverage), sort_keys=True))
    else:
        for line in failure_lines(report):
            print(line)
        if coverage:
            print(f"coverage (written to {args.coverage_file}):")
            for line in report.coverage.lines():
                print("  " + line)
            if low:
                print(f"coverage under {args.fail_under:g}% for at least one flow")
        print(closing_line(report))
    failed = report.failed or report.errors or low
    return 1 if failed else 0


def register(subparsers: Any) -> None:
    """Add `wiggle test` to the `wiggle` command."""
    test = subparsers.add_parser(
        "test",
        help="run a flow's scenario files under every mode on a virtual clock",
        description="Run every scenario of the scenario files named (a FLOW runs the "
        "NAME.scenarios.yaml beside it; a directory, every scenario file under it) with the "
        "real engine in-process on a virtual clock, under SERVER, LOCAL_SYNC and LOCAL_ASYNC. "
        "A scenario fails when an expectation does not hold or when the modes end it "
        "differently. Exit status 1 on any failure (docs/testing.md).",
    )
    test.add_argument(
        "targets", nargs="+", metavar="FLOW_OR_DIR", help="a flow, a scenario file or a directory"
    )
    flag(
        test,
        "--mode",
        env="WIGGLE_TEST_MODES",
        action="append",
        type=_modes,
        help="run only these modes (repeatable, or comma-separated); default all three",
    )
    flag(
        test,
        "-k",
        "--select",
        env="WIGGLE_TEST_SELECT",
        metavar="TEXT",
        help="run only the scenarios whose name contains TEXT",
    )
    flag(
        test,
        "--coverage",
        env="WIGGLE_TEST_COVERAGE",
        action="store_true",
        help="report the nodes and edges the scenarios took, and write them to --coverage-file",
    )
    flag(
        test,
        "--coverage-file",
        env="WIGGLE_COVERAGE_FILE",
        default=DEFAULT_COVERAGE_FILE,
        metavar="FILE",
        help="where --coverage writes its report (for `wiggle render FLOW --coverage FILE`)",
    )
    flag(
        test,
        "--fail-under",
        env="WIGGLE_COVERAGE_FAIL_UNDER",
        type=_percent,
        metavar="PERCENT",
        help="fail when any flow's edge coverage is below PERCENT (implies --coverage)",
    )
    flag(
        test,
        "-q",
        "--quiet",
        env="WIGGLE_QUIET",
        action="store_true",
        help="no line per passing scenario: the failures and the closing line only",
    )
    add_json_flag(test, "print one JSON document: every result, the errors and the summary")
    test.set_defaults(handler=_test)
