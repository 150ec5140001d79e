"""Comparing what a run did with what its case expects, and the modes with each other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from wiggle.conformance._cases import MISSING, Count, Expect

__all__ = [
    "RunResult",
    "check_reports",
    "check_retry_delays",
    "check_steps",
    "compare_modes",
    "json_equal",
    "show",
]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as Wiggle keeps them (docs/worker-protocol.md, "JSON values"):
    an integer and a number written with a fraction are different (4 is not 4.0, as a worker must
    not turn one into the other), integers compare exactly at any size, and true is not 1 (as it
    is in Python)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def show(value: Any, limit: int = 400) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class RunResult:
    """One run of one case under one mode on one database."""

    case_id: str
    run: int
    mode: str
    database: str
    problems: list[str] = field(default_factory=list)
    status: str | None = None
    context: Any = MISSING
    steps: dict[str, int] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()  # nodes the case allows not to run (min 0)
    instance_id: str = ""
    seconds: float = 0.0
    #: Why the machine, not the worker, spoiled this try (_spoiled); None when it did not.
    spoiled: str | None = None
    notes: list[str] = field(default_factory=list)  # e.g. earlier tries that were spoiled

    @property
    def passed(self) -> bool:
        return not self.problems

    def executed(self, optional: frozenset[str] = frozenset()) -> frozenset[str]:
        """The nodes that ran, leaving out those allowed to run or not (they may differ)."""
        return frozenset(k for k, n in self.steps.items() if n > 0) - self.optional - optional


def check_steps(expected: Mapping[str, Count], observed: Mapping[str, int]) -> list[str]:
    problems = []
    for key, count in sorted(expected.items()):
        n = observed.get(key, 0)
        if not count.min <= n <= count.max:
            problems.append(f"step {key} ran {n} times; expected {count}")
    for key in sorted(set(observed) - set(expected)):
        problems.append(f"step {key} ran {observed[key]} times; expected it not to run")
    return problems


def check_reports(expected: Sequence[str], observed: Sequence[str]) -> list[str]:
    """The reports a case expects in this mode, compared as a multiset: branches interleave."""
    missing = Counter(expected) - Counter(observed)
    extra = Counter(observed) - Counter(expected)
    if not missing and not extra:
        return []
    problems = [f"reports {list(observed)}; expected {list(expected)}"]
    problems += [f"missing report: {r}" for r in sorted(missing.elements())]
    problems += [f"unexpected report: {r}" for r in sorted(extra.elements())]
    return problems


def check_retry_delays(expected: Mapping[str, Sequence[int]], events: Sequence[Any]) -> list[str]:
    """The backoffs the server scheduled before each retry (the `delay_ms` of the instance's
    step_retried events, in order), per node, against the case's. A retry policy judged from
    what the engine decided, not from how long a loaded machine took."""
    seen: dict[str, list[int]] = {}
    for e in events:
        if e.kind == "step_retried" and isinstance(e.detail, dict):
            delay = e.detail.get("delay_ms")
            seen.setdefault(e.node_id, []).append(delay if isinstance(delay, int) else -1)
    return [
        f"retries of {node} waited {seen.get(node, [])} ms; expected {list(delays)}"
        for node, delays in sorted(expected.items())
        if seen.get(node, []) != list(delays)
    ]


def check_outcome(expect: Expect, status: str, context: Any, reason: str) -> list[str]:
    problems = []
    if status != expect.status:
        problems.append(f"status {status} ({reason}); expected {expect.status}")
    if expect.context is not MISSING and not json_equal(context, expect.context):
        problems.append(f"context {show(context)}; expected {show(expect.context)}")
    if expect.reason is not None and expect.reason not in reason:
        problems.append(f"reason {reason!r} does not contain {expect.reason!r}")
    return problems


def compare_modes(results: Sequence[RunResult]) -> list[str]:
    """The same run under every mode must end alike: status, context (but for a cancelled run,
    whose context is what its mode had committed), the set of steps run."""
    problems: list[str] = []
    done = [r for r in results if r.status is not None]
    if len(done) < 2:
        return problems
    first = done[0]
    for other in done[1:]:
        pair = f"{first.mode} vs {other.mode}"
        if other.status != first.status:
            problems.append(f"run {first.run}: status {first.status} vs {other.status} ({pair})")
        # A cancelled instance keeps the context committed when the cancel landed, and what a
        # mode has committed by then differs by design (LOCAL_ASYNC reports at its handback).
        cancelled = first.status == other.status == "CANCELLED"
        if not cancelled and (
            (first.context is MISSING) != (other.context is MISSING)
            or (first.context is not MISSING and not json_equal(first.context, other.context))
        ):
            problems.append(
                f"run {first.run}: context {show(first.context)} vs {show(other.context)} ({pair})"
            )
        mine, theirs = first.executed(other.optional), other.executed(first.optional)
        if mine != theirs:
            a, b = sorted(mine - theirs), sorted(theirs - mine)
            problems.append(
                f"run {first.run}: steps only in {first.mode} {a}, only in {other.mode} {b}"
            )
    return problems
