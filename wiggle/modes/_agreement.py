"""Do the modes agree? How the ends of one instance run under several modes are compared.

Each run is an `Ending`; `differences` compares every ending with the first and returns one
`Difference` per way they part. Status and context always count. What else counts is a `Rule`,
because how much two runs may differ depends on how they were run, not on who asks:

    EXACT   a virtual clock and an in-process worker (`wiggle test`): nothing races, so the
            reason, every count and a cancelled run's context must match too
    LIVE    a real server and worker (`wiggle conformance --flow`): a failure's reason is the
            worker's text, and the branches of a run that failed or was cancelled race its end
    CORPUS  the conformance corpus: live runs whose cases bound each step's count and name the
            steps that may run or not (min 0), so the modes need only have run the same steps

Each caller words the differences in its own report.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.jsonvalue import json_equal

__all__ = ["CORPUS", "EXACT", "LIVE", "Difference", "Ending", "Rule", "differences"]


@dataclass(frozen=True)
class Ending:
    """How one run of an instance ended under one mode."""

    mode: str
    status: str
    #: The final context; a value that is not JSON (a "none read" sentinel) equals only itself.
    context: Any = None
    reason: str = ""
    #: What ran how often, by whatever key the run counts (node, `flow/node`, activity); a key
    #: counted 0 times did not run.
    steps: Mapping[str, int] = field(default_factory=dict)
    #: Steps this run may run or not: left out of the comparison with any other run.
    optional: frozenset[str] = frozenset()
    #: The nodes visited in order, when the run records them (None: it does not).
    path: Sequence[str] | None = None


@dataclass(frozen=True)
class Rule:
    """What must match, beyond status and context, for two endings to agree."""

    #: The reason must be the same text.
    reason: bool = True
    #: Each step must have run as often; False: only whether it ran.
    step_counts: bool = True
    #: Steps count when a run did not complete; False: only when both COMPLETED.
    steps_unless_completed: bool = True
    #: The contexts of two CANCELLED runs must match; False: what a mode had committed when the
    #: cancel landed differs by design (LOCAL_ASYNC reports at its handback).
    cancelled_context: bool = True


EXACT = Rule()
LIVE = Rule(reason=False, steps_unless_completed=False, cancelled_context=False)
CORPUS = Rule(reason=False, step_counts=False, cancelled_context=False)


@dataclass(frozen=True)
class Difference:
    """One way `other` ended unlike `reference`. `aspect` is "status", "reason", "context",
    "path" or "steps"; for "steps", `step` is the one that ran differently."""

    aspect: str
    reference: Ending
    other: Ending
    step: str = ""


def differences(endings: Sequence[Ending], rule: Rule) -> list[Difference]:
    """How each ending after the first parted from the first, in order: status, reason,
    context, path, then the steps (sorted)."""
    if not endings:
        return []
    first = endings[0]
    return [d for other in endings[1:] for d in _pair(first, other, rule)]


def _pair(a: Ending, b: Ending, rule: Rule) -> list[Difference]:
    out: list[Difference] = []
    if a.status != b.status:
        out.append(Difference("status", a, b))
    if rule.reason and a.reason != b.reason:
        out.append(Difference("reason", a, b))
    cancelled = a.status == b.status == "CANCELLED"
    if (rule.cancelled_context or not cancelled) and not json_equal(a.context, b.context):
        out.append(Difference("context", a, b))
    if (a.path is not None or b.path is not None) and (
        a.path is None or b.path is None or list(a.path) != list(b.path)
    ):
        out.append(Difference("path", a, b))
    completed = a.status == b.status == "COMPLETED"
    if rule.steps_unless_completed or completed:
        out += [Difference("steps", a, b, step) for step in _steps_apart(a, b, rule.step_counts)]
    return out


def _steps_apart(a: Ending, b: Ending, counts: bool) -> list[str]:
    """The steps `a` and `b` ran differently (how often, or only whether), optional ones of
    either left out."""
    apart = []
    for step in sorted((set(a.steps) | set(b.steps)) - a.optional - b.optional):
        n, m = a.steps.get(step, 0), b.steps.get(step, 0)
        if (n != m) if counts else ((n > 0) != (m > 0)):
            apart.append(step)
    return apart
