"""Go to definition and find references.

Definition: from an activity a flow names (task, filter, choice `when`, loop `while`, combine,
apply) to every handler of the workspace that registers it, at the function that runs it; from a
`subflow` to the flow file of that name. In a scenario file, from its `flow`, `flows` and
`handlers` to those files, from a node id or signal to the step of the flow under test that
compiles to it, from an activity to its handlers. In a schedule, from `flow` to the flow file.

References: from a handler's registration (its name, or the function it registers) or from an
activity a flow names, to every step of the workspace's flows that names it.
"""

from __future__ import annotations

import os

from lsprotocol import types
from pygls.uris import from_fs_path

from wiggle.lsp._analysis import Analysis
from wiggle.lsp._flowdoc import ACTIVITY_KEYS
from wiggle.lsp._handlers import Registration, language_of, scan
from wiggle.lsp._hover import NODE_LISTS
from wiggle.lsp._index import WorkspaceIndex
from wiggle.lsp._kinds import Kind
from wiggle.lsp._locate import Hit, value_at

__all__ = ["activity_at", "definition", "references", "registration_at"]


def _location(path: str, line: int = 1, column: int = 1, end: int | None = None) -> types.Location:
    # Positions in other files are character columns: exact for ASCII, which names are.
    start = types.Position(line=max(line - 1, 0), character=max(column - 1, 0))
    stop = types.Position(line=start.line, character=max((end or column) - 1, start.character))
    return types.Location(uri=from_fs_path(path) or path, range=types.Range(start=start, end=stop))


def activity_at(analysis: Analysis, at: Hit) -> str | None:
    """The activity name under the cursor, where the document names one."""
    if analysis.kind is Kind.FLOW and not at.at_key and at.path and at.path[-1] in ACTIVITY_KEYS:
        value = value_at(analysis.document, at.path)
        return value if isinstance(value, str) else None
    if (
        analysis.kind is Kind.SCENARIOS
        and at.at_key
        and at.path[-2:-1] in (("activities",), ("calls",))
    ):
        return str(at.path[-1])
    return None


def _handlers(index: WorkspaceIndex, activity: str) -> list[types.Location]:
    return [
        _location(path, reg.target_line, reg.target_column)
        for path, reg in index.registrations(activity)
    ]


def _flow_files(index: WorkspaceIndex, name: object) -> list[types.Location]:
    if not isinstance(name, str):
        return []
    return [_location(entry.path) for entry in index.flows(name)]


def definition(analysis: Analysis, at: Hit, index: WorkspaceIndex) -> list[types.Location]:
    if analysis.document is None:
        return []
    activity = activity_at(analysis, at)
    if activity is not None:
        return _handlers(index, activity)
    value = value_at(analysis.document, at.path)
    if analysis.kind is Kind.FLOW and at.path[-1:] == ("subflow",) and not at.at_key:
        return _flow_files(index, value)
    if analysis.kind is Kind.SCHEDULE and at.path == ("flow",) and not at.at_key:
        return _flow_files(index, value)
    if analysis.kind is Kind.SCENARIOS and not at.at_key and isinstance(value, str):
        return _scenario_definition(analysis, at, value)
    return []


def _scenario_definition(analysis: Analysis, at: Hit, value: str) -> list[types.Location]:
    base = os.path.dirname(analysis.path)
    keys = [p for p in at.path if isinstance(p, str)]
    if keys and keys[0] in ("flow", "flows", "handlers") and len(keys) == 1:
        target = os.path.normpath(os.path.join(base, value))
        return [_location(target)] if os.path.isfile(target) else []
    flow = analysis.flow
    if flow is None or flow.flow is None or flow.source is None or not keys:
        return []
    nodes = flow.flow.document["nodes"]
    wanted: list[str] = []
    if keys[-1] in (*NODE_LISTS, "node") and value in nodes:
        wanted = [value]
    elif keys[-1] == "signal":
        wanted = [n for n, node in nodes.items() if node.get("signal") == value]
    found = []
    for claim in flow.sites:
        if claim.node_id in wanted:
            line, column = (flow.source.key if claim.at_key else flow.source.value)(claim.path)
            found.append(_location(analysis.flow_path or "", line, column))
    return found


def registration_at(path: str, text: str, line: int, column: int) -> Registration | None:
    """The registration of a handler file whose name, or whose function's line, is at
    1-based (line, column)."""
    language = language_of(path)
    if language is None:
        return None
    for reg in scan(language, text):
        if reg.line == line and reg.column <= column <= reg.end:
            return reg
        if reg.target_line == line:
            return reg
    return None


def references(index: WorkspaceIndex, activity: str, *, declarations: bool) -> list[types.Location]:
    """Every step of the workspace's flows naming `activity` (and its handlers)."""
    found = [
        _location(entry.path, use.line, use.column, use.column + len(use.name))
        for entry, use in index.uses(activity)
    ]
    if declarations:
        found.extend(
            _location(path, reg.line, reg.column, reg.end)
            for path, reg in index.registrations(activity)
        )
    return found
