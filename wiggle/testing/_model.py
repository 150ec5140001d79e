"""A scenario file as typed data: what `_load` builds and the runner reads (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wiggle.compiler import CompiledFlow

__all__ = [
    "Answer",
    "Expect",
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
class Expect:
    """What must hold, each field optional (None or empty: not checked)."""

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
    where: Where = ("", 0, 0)


@dataclass(frozen=True)
class Moment:
    """One timeline entry: optionally move to `at_ms` (since the start), then do one thing."""

    at_ms: int | None = None
    advance_ms: int | None = None
    signal: str | None = None
    payload: Any = None
    cancel: str | None = None
    expect: Expect | None = None
    where: Where = ("", 0, 0)


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
