"""Document symbols: the outline of a flow's blocks, a scenario file's scenarios, a schedule.

A flow's outline nests as its steps do: a parallel's branches, a choice's arms and `otherwise`,
a for_each's or loop's body and an await's `on_timeout` are each a level holding their steps.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lsprotocol import types

from wiggle.compiler import DocumentPath, SourceMap
from wiggle.lsp import _flowdoc
from wiggle.lsp._analysis import Analysis
from wiggle.lsp._kinds import Kind
from wiggle.lsp._locate import extent
from wiggle.lsp._text import Lines

__all__ = ["symbols"]

_KINDS = {
    "task": types.SymbolKind.Function,
    "filter": types.SymbolKind.Boolean,
    "choice": types.SymbolKind.Enum,
    "parallel": types.SymbolKind.Struct,
    "for_each": types.SymbolKind.Array,
    "sleep": types.SymbolKind.Event,
    "await": types.SymbolKind.Event,
    "human": types.SymbolKind.Interface,
    "subflow": types.SymbolKind.Module,
    "loop": types.SymbolKind.Array,
    "set": types.SymbolKind.Variable,
}


class _Outline:
    def __init__(self, analysis: Analysis, lines: Lines, source: SourceMap) -> None:
        self.doc = analysis.document
        self.lines = lines
        self.source = source

    def symbol(
        self,
        name: str,
        kind: types.SymbolKind,
        spans: DocumentPath,
        named_by: DocumentPath,
        children: list[types.DocumentSymbol],
        detail: str = "",
        *,
        at_key: bool = False,
    ) -> types.DocumentSymbol:
        """A symbol spanning the value at `spans`, selected at the key or value `named_by`."""
        line, column = (self.source.key if at_key else self.source.value)(named_by)
        first = min(self.source.value(spans)[0], line)
        last = max(extent(self.source, spans), line)
        return types.DocumentSymbol(
            name=name or "?",
            kind=kind,
            range=self.lines.whole_line(first, last),
            selection_range=self.lines.range(self.lines.token(line, column)),
            detail=detail,
            children=children,
        )

    def steps(self, value: Any, path: DocumentPath) -> list[types.DocumentSymbol]:
        out = []
        for i, step in enumerate(value if isinstance(value, list) else []):
            if isinstance(step, dict):
                out.append(self.step(step, (*path, i)))
        return out

    def step(self, step: dict[str, Any], path: DocumentPath) -> types.DocumentSymbol:
        block = next((b for b in step if b in _flowdoc.BLOCKS), "")
        written = step.get(block)
        name = f"{block} {written}" if isinstance(written, str) else block or "step"
        if block == "filter" and isinstance(written, dict):
            name = f"filter if {written.get('if')}"
        facts = [
            f"{key} {step[key]}" for key in ("id", "combine") if isinstance(step.get(key), str)
        ]
        detail = ", ".join(facts)
        children = list(self.inner(step, path))
        kind = _KINDS.get(block, types.SymbolKind.Object)
        named_by = (*path, block) if block else path
        at_key = isinstance(written, dict | list)
        return self.symbol(name, kind, path, named_by, children, detail, at_key=at_key)

    def inner(self, step: dict[str, Any], path: DocumentPath) -> Iterator[types.DocumentSymbol]:
        for value, where in _flowdoc.nested(step, path):
            label = _label(step, where)
            kind = types.SymbolKind.Namespace
            yield self.symbol(label, kind, where, where, self.steps(value, where), at_key=True)


def _label(step: dict[str, Any], where: DocumentPath) -> str:
    """A level of steps named for a person: `branch payment`, `when is_big`, `otherwise`."""
    if "parallel" in where[-2:-1]:
        return f"branch {where[-1]}"
    if where[-1] == "steps" and len(where) >= 3 and where[-3] == "choice":
        arm = step["choice"][where[-2]]
        return f"when {arm['when']}" if "when" in arm else f"if {arm.get('if')}"
    if where[-2:] == ("loop", "steps"):
        return "loop body"
    if where[-1] == "steps":
        return "for each element"
    return str(where[-1])


def symbols(analysis: Analysis, lines: Lines) -> list[types.DocumentSymbol]:
    if analysis.source is None or not isinstance(analysis.document, dict):
        return []
    outline = _Outline(analysis, lines, analysis.source)
    doc = analysis.document
    if analysis.kind is Kind.FLOW:
        name = doc.get("name") if isinstance(doc.get("name"), str) else "flow"
        steps = outline.steps(doc.get("steps"), ("steps",))
        detail = analysis.flow.flow.version[:19] if analysis.flow and analysis.flow.flow else ""
        named_by: DocumentPath = ("name",) if "name" in doc else ()
        return [
            outline.symbol(f"flow {name}", types.SymbolKind.Module, (), named_by, steps, detail)
        ]
    if analysis.kind is Kind.SCENARIOS:
        found = []
        for i, spec in enumerate(doc.get("scenarios") or []):
            if isinstance(spec, dict):
                label = str(spec.get("name", f"scenario {i + 1}"))
                at: DocumentPath = ("scenarios", i)
                named_by = (*at, "name") if "name" in spec else at
                found.append(outline.symbol(label, types.SymbolKind.Method, at, named_by, []))
        return found
    if analysis.kind is Kind.SCHEDULE and "schedule" in doc:
        label = f"schedule {doc['schedule']}"
        return [outline.symbol(label, types.SymbolKind.Event, (), ("schedule",), [])]
    return []
