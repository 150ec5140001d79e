"""An analysis's problems as the protocol's diagnostics, and what the workspace adds to them.

Each problem of the checks is an error at the line and column `wiggle validate` prints, spanning
the token written there. A problem located in another file (a scenario file's flow) is shown at
the key naming that file, with its own FILE:LINE:COL. The workspace adds one warning the
compiler cannot give: an activity no handler of the workspace registers (only once the index is
built and holds some registrations, so a workspace without workers gets no such warnings).
"""

from __future__ import annotations

from lsprotocol import types

from wiggle.errors import Diagnostic
from wiggle.lsp._analysis import Analysis
from wiggle.lsp._flowdoc import activity_uses
from wiggle.lsp._index import WorkspaceIndex
from wiggle.lsp._kinds import Kind
from wiggle.lsp._text import Lines

__all__ = ["SOURCE", "diagnostics"]

SOURCE = "wiggle"
WORKSPACE_SOURCE = "wiggle workspace"


def diagnostics(
    analysis: Analysis, lines: Lines, index: WorkspaceIndex | None
) -> list[types.Diagnostic]:
    found = [_problem(analysis, lines, p) for p in analysis.problems]
    if index is not None and analysis.kind is Kind.FLOW:
        found.extend(_unregistered(analysis, lines, index))
    return found


def _problem(analysis: Analysis, lines: Lines, problem: Diagnostic) -> types.Diagnostic:
    line, column, message = problem.line, problem.column, problem.message
    if problem.file != analysis.path:
        # Somewhere else: shown where this document names that file.
        line, column = 1, 1
        document = analysis.document
        if analysis.source is not None and isinstance(document, dict) and "flow" in document:
            line, column = analysis.source.value(("flow",))
        message = str(problem)
    span = lines.token(max(line, 1), max(column, 1))
    return types.Diagnostic(
        range=lines.range(span),
        message=message,
        severity=types.DiagnosticSeverity.Error,
        source=SOURCE,
        data={"pointer": problem.path},
    )


def _unregistered(
    analysis: Analysis, lines: Lines, index: WorkspaceIndex
) -> list[types.Diagnostic]:
    if analysis.source is None or not index.ready.is_set():
        return []
    known = {r.name for _, r in index.registrations()}
    if not known:
        return []
    found = []
    for use in activity_uses(analysis.document):
        if use.name in known:
            continue
        line, column = analysis.source.value(use.path)
        found.append(
            types.Diagnostic(
                range=lines.range(lines.token(line, column)),
                message=f"no handler in the workspace registers activity {use.name!r} "
                f"(the {use.role} of this step); a worker serving it must register it",
                severity=types.DiagnosticSeverity.Warning,
                source=WORKSPACE_SOURCE,
            )
        )
    return found
