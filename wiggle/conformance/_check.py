"""Comparing what a run did with what its case expects, and the modes with each other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.conformance._cases import MISSING, Count, Expect
from wiggle.jsonvalue import json_equal, show
from wiggle.modes import CORPUS, Difference, Ending, differences

__all__ = [
    "RunResult",
    "check_reports",
    "check_retry_delays",
    "check_steps",
    "compare_modes",
]


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
    """The same run under every mode must end alike (wiggle.modes, the CORPUS rule): status,
    context (but for a cancelled run), the set of steps run, the optional ones left out."""
    done = [r for r in results if r.status is not None]
    endings = [_ending(r) for r in done]
    problems: list[str] = []
    for other in endings[1:]:
        problems += _worded(done[0].run, differences([endings[0], other], CORPUS))
    return problems


def _ending(r: RunResult) -> Ending:
    assert r.status is not None
    return Ending(r.mode, r.status, r.context, steps=r.steps, optional=r.optional)


def _worded(run: int, apart: Sequence[Difference]) -> list[str]:
    """The differences of one pair of modes as the corpus's table lists them."""
    out: list[str] = []
    steps = [d for d in apart if d.aspect == "steps"]
    for d in apart:
        a, b = d.reference, d.other
        pair = f"{a.mode} vs {b.mode}"
        if d.aspect == "status":
            out.append(f"run {run}: status {a.status} vs {b.status} ({pair})")
        elif d.aspect == "context":
            out.append(f"run {run}: context {show(a.context)} vs {show(b.context)} ({pair})")
    if steps:
        a, b = steps[0].reference, steps[0].other
        mine = [d.step for d in steps if a.steps.get(d.step, 0) > 0]
        theirs = [d.step for d in steps if b.steps.get(d.step, 0) > 0]
        out.append(f"run {run}: steps only in {a.mode} {mine}, only in {b.mode} {theirs}")
    return out
