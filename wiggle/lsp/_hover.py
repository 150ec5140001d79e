"""Hover: what the step under the cursor compiles to, where its handler is, and a flow's version.

On a step of a flow: each node it compiles to (id, kind, queue, timeout, retry, checkpoint), the
flow's mode, and the handlers of its activities in the workspace. On the flow's `name`: its
version. In a scenario file: the node, activity or signal of the flow under test that a name
refers to. In a schedule: the flow it starts.
"""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types

from wiggle.lsp import _flowdoc
from wiggle.lsp._analysis import Analysis
from wiggle.lsp._index import WorkspaceIndex
from wiggle.lsp._kinds import Kind
from wiggle.lsp._locate import Hit, step_nodes, step_of, value_at
from wiggle.lsp._text import Lines

__all__ = ["NODE_LISTS", "duration_text", "handler_lines", "hover", "node_lines"]

#: Where a scenario file lists node ids (docs/testing.md).
NODE_LISTS = frozenset({"path", "visits", "skips", "waiting_at"})


def duration_text(ms: int | None) -> str:
    """`ms` in the largest unit that divides it, as a flow writes durations."""
    if ms is None:
        return "none"
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _retry(retry: dict[str, Any]) -> str:
    attempts = retry.get("max_attempts", 1)
    if attempts <= 1:
        return "1 attempt, no retry"
    initial = duration_text(retry.get("initial_ms"))
    if retry.get("backoff") == "fixed":
        return f"{attempts} attempts, {initial} apart"
    cap = duration_text(retry.get("max_ms"))
    return f"{attempts} attempts, exponential from {initial} to at most {cap}"


def node_lines(node_id: str, node: dict[str, Any], execution: str) -> list[str]:
    """Markdown lines describing one compiled node."""
    kind = node.get("kind", "?")
    lines = [f"**node `{node_id}`** · {kind}"]
    facts = []
    if "activity" in node:
        facts.append(f"activity `{node['activity']}`")
        facts.append(f"queue `{node.get('queue')}`")
        facts.append(f"timeout {duration_text(node.get('timeout_ms'))}")
        facts.append(f"retry {_retry(node.get('retry') or {})}")
    if node.get("checkpoint"):
        facts.append("checkpoint")
    if kind == "await":
        facts.append(f"signal `{node.get('signal')}`")
        facts.append(f"deadline {duration_text(node.get('timeout_ms'))}")
        apply = node.get("apply")
        if isinstance(apply, dict):
            facts.append(f"apply `{apply.get('activity')}` on queue `{apply.get('queue')}`")
    if kind == "sleep":
        facts.append(
            f"for {duration_text(node['duration_ms'])}"
            if node.get("duration_ms")
            else f"until `{node.get('until') or node.get('until_expression')}`"
        )
    if kind == "subflow":
        facts.append(
            f"flow `{node.get('flow')}`" + (f" at {node['version']}" if node.get("version") else "")
        )
    if kind == "condition":
        facts.append(f"if `{node.get('if')}`")
    if node.get("max_iterations") is not None:
        facts.append(f"at most {node['max_iterations']} iterations")
    facts.append(f"mode {execution}")
    lines.append(" · ".join(facts))
    return lines


def handler_lines(index: WorkspaceIndex, activity: str, root: str | None) -> list[str]:
    """Where the workspace registers `activity`, as markdown links."""
    found = index.registrations(activity)
    if not found:
        ready = index.ready.is_set()
        return [
            f"no handler registers `{activity}` in the workspace"
            + ("" if ready else " (still indexing)")
        ]
    out = []
    for path, reg in found:
        shown = os.path.relpath(path, root) if root else path
        uri = f"file://{path}#L{reg.target_line}"
        out.append(
            f"handler `{activity}` ({reg.language}, {reg.kind}): [{shown}:{reg.target_line}]({uri})"
        )
    return out


def hover(
    analysis: Analysis, lines: Lines, at: Hit, index: WorkspaceIndex, root: str | None
) -> types.Hover | None:
    if analysis.document is None:
        return None
    if analysis.kind is Kind.FLOW:
        text = _flow_hover(analysis, at, index, root)
    elif analysis.kind is Kind.SCENARIOS:
        text = _scenario_hover(analysis, at, index, root)
    elif analysis.kind is Kind.SCHEDULE:
        text = _schedule_hover(analysis, at, index)
    else:
        text = []
    if not text:
        return None
    return types.Hover(
        contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n\n".join(text)),
        range=lines.range(at.span),
    )


def _flow_hover(analysis: Analysis, at: Hit, index: WorkspaceIndex, root: str | None) -> list[str]:
    compiled = analysis.flow.flow if analysis.flow is not None else None
    if at.path == ("name",):
        if compiled is None:
            return [
                f"flow `{analysis.document.get('name')}`: no version while the flow has problems"
            ]
        nodes = len(compiled.document["nodes"])
        return [f"flow **`{compiled.name}`** · {nodes} nodes", f"version `{compiled.version}`"]
    step = step_of(analysis.document, at.path)
    if step is None:
        return []
    out: list[str] = []
    if compiled is not None and analysis.flow is not None:
        execution = compiled.document.get("execution", "DEFAULT")
        for node_id in step_nodes(analysis.document, analysis.flow.sites).get(step, []):
            node = compiled.document["nodes"].get(node_id)
            if node is not None:
                out.extend(node_lines(node_id, node, execution))
    else:
        out.append("the flow has problems: no compiled node to show")
    mapping = value_at(analysis.document, step)
    for use in _flowdoc.own_activity_uses(mapping if isinstance(mapping, dict) else {}, step):
        out.extend(handler_lines(index, use.name, root))
    return out


def _scenario_hover(
    analysis: Analysis, at: Hit, index: WorkspaceIndex, root: str | None
) -> list[str]:
    if at.at_key:
        if len(at.path) >= 2 and at.path[-2] in ("activities", "calls"):
            return handler_lines(index, str(at.path[-1]), root)
        return []
    value = value_at(analysis.document, at.path)
    flow = analysis.flow.flow if analysis.flow is not None else None
    if not isinstance(value, str) or flow is None:
        return []
    nodes = flow.document["nodes"]
    keys = [p for p in at.path if isinstance(p, str)]
    if value in nodes and keys and keys[-1] in (*NODE_LISTS, "node", "signal"):
        return node_lines(value, nodes[value], flow.document.get("execution", "DEFAULT"))
    if keys and keys[-1] == "signal":
        awaiting = [n for n, node in nodes.items() if node.get("signal") == value]
        return (
            [f"signal `{value}`, awaited at " + ", ".join(f"`{n}`" for n in awaiting)]
            if awaiting
            else []
        )
    if at.path == ("flow",):
        return [f"flow **`{flow.name}`**", f"version `{flow.version}`"]
    return []


def _schedule_hover(analysis: Analysis, at: Hit, index: WorkspaceIndex) -> list[str]:
    if at.path != ("flow",) or at.at_key:
        return []
    name = value_at(analysis.document, at.path)
    entries = index.flows(name) if isinstance(name, str) else []
    if not entries:
        return [f"no flow named `{name}` in the workspace"]
    return [f"flow **`{name}`**: " + ", ".join(f"`{e.path}`" for e in entries)]
