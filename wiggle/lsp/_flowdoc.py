"""What a flow document names, read from its data as written (valid or not).

The compiler needs a valid document; an editor needs the steps of the one being typed. These
walkers look before they index, so a half-written document yields whatever it has: each step
with its block, each activity it names (tasks, predicates, combines, applies) and where, the
queues, the signals and the subflows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from wiggle.compiler import DocumentPath

__all__ = ["ACTIVITY_KEYS", "BLOCKS", "ActivityUse", "Step", "activity_uses", "queues", "steps"]

#: Every block a step may be, in the schema's order.
BLOCKS = (
    "task",
    "filter",
    "choice",
    "parallel",
    "for_each",
    "sleep",
    "await",
    "subflow",
    "loop",
    "set",
    "human",
)

#: The keys whose value names an activity, and whether a predicate is wanted there.
ACTIVITY_KEYS = {
    "task": False,
    "combine": False,
    "apply": False,
    "filter": True,
    "when": True,
    "while": True,
}


@dataclass(frozen=True)
class Step:
    path: DocumentPath  # of the step's mapping
    block: str  # its block key, or "" when it has none yet
    depth: int  # 0 for a top-level step


@dataclass(frozen=True)
class ActivityUse:
    """An activity a flow names: `role` is task, predicate, combine or apply."""

    name: str
    role: str
    path: DocumentPath  # of the string naming it


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def steps(doc: Any) -> Iterator[Step]:
    """Every step mapping of a flow document, nested ones included, in document order."""
    for step, _ in _walk(_dict(doc).get("steps"), ("steps",), 0):
        yield step


def _walk(value: Any, path: DocumentPath, depth: int) -> Iterator[tuple[Step, dict[str, Any]]]:
    for i, mapping in enumerate(_list(value)):
        if not isinstance(mapping, dict):
            continue
        here = (*path, i)
        block = next((b for b in mapping if b in BLOCKS), "")
        yield Step(here, block, depth), mapping
        for inner, inner_path in nested(mapping, here):
            yield from _walk(inner, inner_path, depth + 1)


def nested(step: dict[str, Any], path: DocumentPath) -> Iterator[tuple[Any, DocumentPath]]:
    """The lists of steps inside a step, with their paths, in document order."""
    for key, value in step.items():
        if key == "choice":
            for i, arm in enumerate(_list(value)):
                yield _dict(arm).get("steps"), (*path, "choice", i, "steps")
        elif key == "parallel":
            for name, branch in _dict(value).items():
                yield branch, (*path, "parallel", name)
        elif key in ("otherwise", "on_timeout") or (key == "steps" and "for_each" in step):
            yield value, (*path, key)
        elif key == "loop":
            yield _dict(value).get("steps"), (*path, "loop", "steps")


def activity_uses(doc: Any) -> Iterator[ActivityUse]:
    """Every activity a flow document names, with the role it plays, in document order."""
    for step, mapping in _walk(_dict(doc).get("steps"), ("steps",), 0):
        yield from own_activity_uses(mapping, step.path)


def own_activity_uses(step: dict[str, Any], path: DocumentPath) -> Iterator[ActivityUse]:
    """The activities one step names itself (a block's combine or condition, not the steps of
    its branches); `path` is the step's place in the document."""
    if isinstance(step.get("task"), str):
        yield ActivityUse(step["task"], "task", (*path, "task"))
    if isinstance(step.get("filter"), str):
        yield ActivityUse(step["filter"], "predicate", (*path, "filter"))
    for i, arm in enumerate(_list(step.get("choice"))):
        if isinstance(_dict(arm).get("when"), str):
            yield ActivityUse(arm["when"], "predicate", (*path, "choice", i, "when"))
    while_ = _dict(step.get("loop")).get("while")
    if isinstance(while_, str):
        yield ActivityUse(while_, "predicate", (*path, "loop", "while"))
    if isinstance(step.get("combine"), str):
        yield ActivityUse(step["combine"], "combine", (*path, "combine"))
    if isinstance(step.get("apply"), str):
        yield ActivityUse(step["apply"], "apply", (*path, "apply"))


def queues(doc: Any) -> set[str]:
    """The queues a flow document names (the flow's own and its steps')."""
    found = set()
    if isinstance(_dict(doc).get("queue"), str):
        found.add(doc["queue"])
    for _, value in _walk(_dict(doc).get("steps"), ("steps",), 0):
        for owner in (value, *(_dict(a) for a in _list(value.get("choice")))):
            if isinstance(owner.get("queue"), str):
                found.add(owner["queue"])
    return found
