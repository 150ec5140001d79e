"""How `wiggle test` reports: one line per scenario and mode (as `pytest -v` does), the
failures with what was expected and what happened, and pytest's closing line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from wiggle.errors import FlowError

from ._runner import ModeRun, RunReport

__all__ = ["closing_line", "failure_lines", "report_document", "result_line"]

_WIDTH = 80
_FIRES_SHOWN = 30  # a failed run under a schedule shows its last fires


def result_line(run: ModeRun) -> str:
    return f"{run.nodeid} {'PASSED' if run.passed else 'FAILED'}"


def _banner(text: str, fill: str = "=") -> str:
    text = f" {text} "
    left = max(3, (_WIDTH - len(text)) // 2)
    right = max(3, _WIDTH - len(text) - left)
    return fill * left + text + fill * right


def failure_lines(report: RunReport) -> Iterator[str]:
    """The FAILURES section: each failed run, where its scenario is written, its problems, a
    schedule's fires and the path it took (under a schedule, its last instance's)."""
    failed = [r for r in report.runs if not r.passed]
    if not failed and not report.errors:
        return
    if report.errors:
        yield _banner("ERRORS")
        for error in report.errors:
            for diagnostic in error.diagnostics:
                yield str(diagnostic)
    if failed:
        yield _banner("FAILURES")
    for run in failed:
        yield _banner(run.nodeid, "_")
        yield f"{run.file}:{run.line}: scenario {run.scenario!r} under {run.mode}"
        for problem in run.problems:
            for i, line in enumerate(problem.splitlines()):
                yield ("  - " if i == 0 else "    ") + line
        if run.fires:
            earlier = len(run.fires) - _FIRES_SHOWN
            yield "  the schedule's fires" + (
                f" (the last {_FIRES_SHOWN}):" if earlier > 0 else ":"
            )
            for fire in run.fires[-_FIRES_SHOWN:]:
                yield f"    {fire}"
        if run.status:
            reason = f" ({run.reason})" if run.reason else ""
            shown = any("actual path:" in p for p in run.problems)  # no need to say it twice
            path = "" if shown else f"; path taken: [{', '.join(run.path)}]"
            which = f"{run.instance} " if run.instance else ""
            yield f"  {which}ended {run.status}{reason}{path}"


def closing_line(report: RunReport) -> str:
    """pytest's last line: `=== 2 failed, 19 passed, 1 error in 0.41s ===`."""
    parts = []
    if report.failed:
        parts.append(f"{report.failed} failed")
    if report.passed or not (report.failed or report.errors):
        parts.append(f"{report.passed} passed")
    if report.errors:
        parts.append(f"{len(report.errors)} error{'s' if len(report.errors) > 1 else ''}")
    return _banner(f"{', '.join(parts)} in {report.seconds:.2f}s")


def report_document(report: RunReport, *, coverage: bool) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "results": [r.document() for r in report.runs],
        "errors": [_error(e) for e in report.errors],
        "summary": {
            "passed": report.passed,
            "failed": report.failed,
            "errors": len(report.errors),
            "seconds": round(report.seconds, 3),
        },
    }
    if coverage:
        doc["coverage"] = report.coverage.document()
    return doc


def _error(error: FlowError) -> dict[str, Any]:
    return {"diagnostics": [str(d) for d in error.diagnostics]}
