"""Checking expectations against what a run did: one message per problem, each showing what
was expected and what happened (a path problem shows both paths)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wiggle.engine import MISSING, resolve_pointer
from wiggle.jsonvalue import json_equal, show

from ._model import Expect

__all__ = ["Observed", "check", "path_problem", "show_path"]


@dataclass(frozen=True)
class Observed:
    """What a run looks like at one moment (the instance under test; calls count its tree)."""

    status: str
    reason: str
    context: Any
    path: Sequence[str]
    waiting_at: Sequence[str]
    calls: Mapping[str, int]
    events: Sequence[Any]  # EventView: kind, node_id, detail


def show_path(path: Sequence[str]) -> str:
    return "[" + ", ".join(path) + "]"


def path_problem(expected: Sequence[str], actual: Sequence[str]) -> str | None:
    """None when equal, else both paths, aligned, and where they part."""
    if list(expected) == list(actual):
        return None
    at = next(
        (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a),
        min(len(expected), len(actual)),
    )
    if at < len(expected) and at < len(actual):
        where = f"step {at + 1}: expected {expected[at]!r}, took {actual[at]!r}"
    elif at < len(expected):
        where = f"step {at + 1}: expected {expected[at]!r}, the path ends there"
    else:
        where = f"step {at + 1}: the path goes on to {actual[at]!r}"
    return (
        f"path differs at {where}\n"
        f"  expected path: {show_path(expected)}\n"
        f"  actual path:   {show_path(actual)}"
    )


def _visits(order: Sequence[str], path: Sequence[str]) -> str | None:
    i = 0
    for node in path:
        if i < len(order) and node == order[i]:
            i += 1
    if i == len(order):
        return None
    seen = "never visited" if order[i] not in path else "not visited after " + repr(order[i - 1])
    return f"visits {show_path(order)}: {order[i]!r} {seen}"


def _events(wanted: Sequence[Mapping[str, Any]], events: Sequence[Any]) -> str | None:
    i = 0
    for event in events:
        if i == len(wanted):
            break
        want = wanted[i]
        detail = event.detail if isinstance(event.detail, dict) else {}
        if (
            event.kind == want["kind"]
            and want.get("node", event.node_id) == event.node_id
            and all(
                k in detail and json_equal(detail[k], v)
                for k, v in (want.get("detail") or {}).items()
            )
        ):
            i += 1
    if i == len(wanted):
        return None
    missing = wanted[i]
    shown = ", ".join(f"{k}: {show(v) if k == 'detail' else v}" for k, v in missing.items())
    after = f" after the one before it ({_event_text(wanted[i - 1])})" if i else ""
    kinds = [f"{e.kind}({e.node_id})" if e.node_id else e.kind for e in events]
    return f"events: no {{{shown}}}{after}; the events were: {', '.join(kinds)}"


def _event_text(want: Mapping[str, Any]) -> str:
    return f"{want['kind']} {want.get('node', '')}".strip()


def check(expect: Expect, seen: Observed) -> list[str]:
    """Every way `seen` falls short of `expect`."""
    problems: list[str] = []
    if expect.status is not None and expect.status != seen.status:
        why = f" ({seen.reason})" if seen.reason else ""
        problems.append(f"status: expected {expect.status}, got {seen.status}{why}")
    if expect.reason is not None and expect.reason not in seen.reason:
        problems.append(f"reason: expected it to contain {expect.reason!r}, got {seen.reason!r}")
    if expect.has_context and not json_equal(expect.context, seen.context):
        problems.append(
            f"context: expected {show(expect.context)}\n  actual context: {show(seen.context)}"
        )
    for pointer, want in expect.context_at.items():
        got = resolve_pointer(seen.context, pointer)
        if got is MISSING:
            problems.append(f"context at {pointer!r}: expected {show(want)}, found nothing there")
        elif not json_equal(want, got):
            problems.append(f"context at {pointer!r}: expected {show(want)}, got {show(got)}")
    if expect.path is not None:
        problem = path_problem(expect.path, seen.path)
        if problem:
            problems.append(problem)
    if expect.visits:
        problem = _visits(expect.visits, seen.path)
        if problem:
            problems.append(problem)
    for node in expect.skips:
        if node in seen.path:
            problems.append(f"skips: {node!r} was visited")
    if expect.waiting_at is not None and sorted(expect.waiting_at) != sorted(seen.waiting_at):
        problems.append(
            f"waiting at: expected {show_path(sorted(expect.waiting_at))}, "
            f"got {show_path(sorted(seen.waiting_at))}"
        )
    for activity, times in expect.calls.items():
        got_calls = seen.calls.get(activity, 0)
        if got_calls != times:
            problems.append(f"calls: {activity!r} ran {got_calls} time(s), expected {times}")
    if expect.events:
        problem = _events(expect.events, seen.events)
        if problem:
            problems.append(problem)
    return problems
