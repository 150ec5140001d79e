"""From a position in a document to what is written there, and back.

A `SourceMap` knows where each key and value starts; `hit` finds the key or scalar whose token
covers a position, `extent` how far a value's subtree reaches (for outline ranges), and
`step_nodes` which node ids the compiler gave each step (from the values that named them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from wiggle.compiler import DocumentPath, NodeClaim, SourceMap
from wiggle.lsp import _flowdoc
from wiggle.lsp._text import Lines, Span

__all__ = ["Hit", "extent", "hit", "step_nodes", "step_of", "value_at"]


@dataclass(frozen=True)
class Hit:
    path: DocumentPath  # of the value, or of the value the key names (`at_key`)
    at_key: bool
    span: Span


def hit(source: SourceMap, lines: Lines, line: int, column: int) -> Hit | None:
    """The key or value whose token covers 1-based (line, column); the innermost one."""
    best: Hit | None = None
    for places, at_key in ((source.keys, True), (source.values, False)):
        for path, (at_line, at_column) in places.items():
            if at_line != line or at_column > column:
                continue
            if best is not None and at_column < best.span.start:
                continue
            span = lines.token(at_line, at_column)
            if span.covers(line, column) and (best is None or at_column > best.span.start):
                best = Hit(path, at_key, span)
    return best


def value_at(document: Any, path: DocumentPath) -> Any:
    """The value at `path`, or None when the document has none there."""
    value = document
    for part in path:
        if isinstance(value, dict) and isinstance(part, str):
            value = value.get(part)
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            value = value[part]
        else:
            return None
    return value


def extent(source: SourceMap, path: DocumentPath) -> int:
    """The last line any value under `path` (itself included) is written on."""
    start = source.values.get(path)
    if start is None:
        return 0
    last = start[0]
    size = len(path)
    found = False
    for other, (line, _) in source.values.items():
        if other[:size] == path:
            found = True
            last = max(last, line)
        elif found:
            break  # the values of a subtree are recorded together, in document order
    return last


def step_of(document: Any, path: DocumentPath) -> DocumentPath | None:
    """The innermost step whose mapping holds `path`."""
    best: DocumentPath | None = None
    for step in _flowdoc.steps(document):
        if path[: len(step.path)] == step.path and (best is None or len(step.path) > len(best)):
            best = step.path
    return best


def step_nodes(document: Any, sites: Iterable[NodeClaim]) -> dict[DocumentPath, list[str]]:
    """Each step's node ids (a parallel has its fork and join, a choice one per arm)."""
    paths = sorted((s.path for s in _flowdoc.steps(document)), key=len, reverse=True)
    found: dict[DocumentPath, list[str]] = {}
    for claim in sites:
        for path in paths:
            if claim.path[: len(path)] == path:
                found.setdefault(path, []).append(claim.node_id)
                break
    return found
