"""Checking expectations against what a run did: one message per problem, each showing what
was expected and what happened (a path problem shows both paths, a schedule's fires both lists
of times, in the schedule's zone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from wiggle.engine import MISSING, resolve_pointer
from wiggle.jsonvalue import json_equal, show
from wiggle.schedules import Schedule, nominal_times

from ._model import Expect

__all__ = ["Observed", "ScheduledFire", "check", "check_fires", "path_problem", "show_path"]


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


@dataclass(frozen=True)
class ScheduledFire:
    """One nominal time a schedule decided: `started` (its instance), `buffered` (waiting for
    the running one) or `skipped` (with the reason)."""

    nominal_ms: int
    outcome: str  # started | buffered | skipped
    instance_id: str | None = None
    reason: str = ""

    def what(self) -> str:
        """`started nightly-batch-20261025T003000Z`, `skipped: <reason>`."""
        if self.outcome == "started":
            return f"started {self.instance_id}"
        return self.outcome + (f": {self.reason}" if self.reason else "")

    def describe(self, schedule: Schedule) -> str:
        """`2026-10-25T02:30:00+02:00 started nightly-batch-20261025T003000Z`."""
        return f"{zoned(schedule, self.nominal_ms)} {self.what()}"


def zoned(schedule: Schedule, ms: int) -> str:
    """An instant in the schedule's zone, with its offset (2026-10-25T02:30:00+02:00)."""
    return datetime.fromtimestamp(ms / 1000, schedule.spec.zone).isoformat()


def _times(schedule: Schedule, times: Sequence[int]) -> str:
    return "[" + ", ".join(zoned(schedule, t) for t in times) + "]"


def _why_not(
    schedule: Schedule,
    nominal: int,
    by_time: Mapping[int, ScheduledFire],
    span: tuple[int, int],
) -> str:
    """Why a time expected to have fired (or been skipped) is not among them; `span`: when the
    schedule was applied, and now."""
    fire = by_time.get(nominal)
    if fire is not None:
        return fire.what()
    if next(iter(nominal_times(schedule.spec, nominal - 1, until_ms=nominal)), None) != nominal:
        return "not a time the schedule fires at"
    applied_ms, now_ms = span
    if nominal <= applied_ms:
        return f"before the schedule was applied, at {zoned(schedule, applied_ms)}"
    if nominal > now_ms:
        return f"not due yet (the clock is at {zoned(schedule, now_ms)})"
    return "not decided yet"


def check_fires(
    expect: Expect, fires: Sequence[ScheduledFire], schedule: Schedule, span: tuple[int, int]
) -> list[str]:
    """Every way a schedule's fires (every nominal time it decided, oldest first) fall short of
    `expect`'s `fired` and `skipped`: each list is exact, in order. `span`: when the schedule
    was applied, and now."""
    problems: list[str] = []
    by_time = {f.nominal_ms: f for f in fires}
    for key, outcome, wanted in (
        ("fired", "started", expect.fired),
        ("skipped", "skipped", expect.skipped),
    ):
        if wanted is None:
            continue
        expected = [w.nominal_ms for w in wanted]
        actual = [f.nominal_ms for f in fires if f.outcome == outcome]
        if expected != actual:
            lines = [
                f"{key} differs",
                f"  expected: {_times(schedule, expected)}",
                f"  actual:   {_times(schedule, actual)}",
            ]
            for t in expected:
                if t not in actual:
                    why = _why_not(schedule, t, by_time, span)
                    lines.append(f"  {zoned(schedule, t)} (expected): {why}")
            for t in actual:
                if t not in expected:
                    lines.append(f"  {zoned(schedule, t)} (not expected): {by_time[t].what()}")
            problems.append("\n".join(lines))
        for w in wanted:
            fire = by_time.get(w.nominal_ms)
            if (
                w.reason is not None
                and fire is not None
                and fire.outcome == outcome
                and w.reason not in fire.reason
            ):
                problems.append(
                    f"{key}: {zoned(schedule, w.nominal_ms)} was skipped for "
                    f"{fire.reason!r}, expected a reason containing {w.reason!r}"
                )
    return problems
