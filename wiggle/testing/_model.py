"""A scenario file as typed data: what `_load` builds and the runner reads (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiggle.compiler import CompiledFlow
from wiggle.schedules import Schedule

__all__ = [
    "Answer",
    "Expect",
    "ExpectedFire",
    "Moment",
    "Scenario",
    "ScenarioFile",
    "Where",
]

#: Where a value was written: (file, line, column), for messages that point at the scenario.
Where = tuple[str, int, int]


@dataclass(frozen=True)
class Answer:
    """How one activity call is answered: exactly one of `returns`, `merge`, `fail`, `handler`.

    `returns` uses `has_value` to tell "returns null" from "no value given".
    """

    returns: Any = None
    has_value: bool = False
    merge: Mapping[str, Any] | None = None
    fail: str | None = None
    non_retryable: bool = False
    error_type: str = ""
    handler: bool = False

    @staticmethod
    def value(value: Any) -> Answer:
        return Answer(returns=value, has_value=True)


@dataclass(frozen=True)
class ExpectedFire:
    """A nominal time of a scenario's schedule that must have fired (or been skipped, with a
    reason containing `reason`), as written: an instant or an instance id."""

    nominal_ms: int
    reason: str | None = None
    text: str = ""


@dataclass(frozen=True)
class Expect:
    """What must hold, each field optional (None or empty: not checked). Under a schedule,
    `fired` and `skipped` are its decided nominal times, `calls` counts the whole run and the
    other fields hold for each instance the schedule started."""

    status: str | None = None
    reason: str | None = None
    context: Any = None
    has_context: bool = False
    context_at: Mapping[str, Any] = field(default_factory=dict)
    path: Sequence[str] | None = None
    visits: Sequence[str] = ()
    skips: Sequence[str] = ()
    waiting_at: Sequence[str] | None = None
    calls: Mapping[str, int] = field(default_factory=dict)
    events: Sequence[Mapping[str, Any]] = ()
    fired: Sequence[ExpectedFire] | None = None
    skipped: Sequence[ExpectedFire] | None = None
    where: Where = ("", 0, 0)

    def about_instances(self) -> bool:
        """Whether anything here is about an instance (status, context, path...), rather than
        only about a schedule's fires and the run's calls."""
        return bool(
            self.status is not None
            or self.reason is not None
            or self.has_context
            or self.context_at
            or self.path is not None
            or self.visits
            or self.skips
            or self.waiting_at is not None
            or self.events
        )


@dataclass(frozen=True)
class Moment:
    """One timeline entry: optionally move to `at_ms` (since the start), then do one thing.
    `outage_ms`: no server runs for this long (the clock moves, nothing fires)."""

    at_ms: int | None = None
    advance_ms: int | None = None
    outage_ms: int | None = None
    signal: str | None = None
    payload: Any = None
    cancel: str | None = None
    complete: TaskCompletion | None = None
    expect: Expect | None = None
    where: Where = ("", 0, 0)


@dataclass(frozen=True)
class TaskCompletion:
    """A timeline's `complete`: a person answers a human step's open task."""

    task: str
    person: str
    groups: tuple[str, ...] = ()
    answer: Any = None


@dataclass(frozen=True)
class Scenario:
    name: str
    input: Any
    answers: Mapping[str, Sequence[Answer] | Answer]  # file-level merged with the scenario's
    timeline: Sequence[Moment]
    expect: Expect | None
    run_to_end: bool
    start_ms: int
    description: str = ""
    where: Where = ("", 0, 0)
    #: The schedule whose fires start the instances (none of the scenario's own), if any.
    schedule: Schedule | None = None
    #: Who starts the instance (the starter a human step's `exclude: [starter]` excludes).
    started_by: str | None = None


@dataclass(frozen=True)
class ScenarioFile:
    """A loaded, checked scenario file: the flow under test (last of `flows`), the flows it
    starts, the handlers file and the scenarios."""

    path: Path
    flows: Sequence[CompiledFlow]
    flow_file: Path
    handlers: str | None
    scenarios: Sequence[Scenario]

    @property
    def flow(self) -> CompiledFlow:
        return self.flows[-1]
