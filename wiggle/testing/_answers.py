"""Answering activity calls: a scenario's result for the call, else the real handler.

Calls are counted per activity name over the whole run (every attempt, subflow children
included): call 1 is the first time any step of the run called the activity. A handler that
raises is the step's failure, exactly as under a worker (`wiggle.worker`'s `run_handler`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wiggle.engine import StepFailure
from wiggle.worker import Registry, StepInfo, run_handler

from ._model import Answer

__all__ = ["Answers", "Outcome"]


@dataclass(frozen=True)
class Outcome:
    """What a call produced: `value` or `failure`."""

    value: Any = None
    failure: StepFailure | None = None


def _handler_registry(handlers: Registry | Mapping[str, Callable[..., Any]] | None) -> Registry:
    if isinstance(handlers, Registry):
        return handlers
    registry = Registry()
    for name, fn in (handlers or {}).items():
        registry.register(fn, name)
    return registry


class Answers:
    """The results a run gives its activity calls, and how often each activity was called."""

    def __init__(
        self,
        answers: Mapping[str, Sequence[Answer] | Answer],
        handlers: Registry | Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self._answers = answers
        self._registry = _handler_registry(handlers)
        self.calls: Counter[str] = Counter()

    def call(self, activity: str, value: Any, info: StepInfo, *, wrapped: bool = False) -> Outcome:
        """Answer one call. `wrapped`: the step is a combine or an apply, whose input is
        {"context": ..., "results" | "signal": ...} (a `merge` result merges into `context`)."""
        self.calls[activity] += 1
        answer = self._pick(activity, self.calls[activity])
        if answer is None or answer.handler:
            return self._run(activity, value, info)
        if answer.fail is not None:
            return Outcome(
                failure=StepFailure(answer.fail, answer.non_retryable, answer.error_type)
            )
        if answer.merge is not None:
            base = value.get("context") if wrapped and isinstance(value, dict) else value
            if not isinstance(base, dict):
                message = f"merge needs an object context; {activity!r} got {type(base).__name__}"
                return Outcome(failure=StepFailure(message, True, "ScenarioError"))
            return Outcome(value={**base, **answer.merge})
        return Outcome(value=answer.returns)

    def _pick(self, activity: str, call: int) -> Answer | None:
        given = self._answers.get(activity)
        if given is None or isinstance(given, Answer):
            return given
        return given[call - 1] if call <= len(given) else None

    def _run(self, activity: str, value: Any, info: StepInfo) -> Outcome:
        act = self._registry.get(activity)
        if act is None:
            call = self.calls[activity]
            message = (
                f"no result for activity {activity!r} (call {call}): give one under "
                "`activities:`, or name a `handlers:` file that has it"
            )
            return Outcome(failure=StepFailure(message, True, "ScenarioError"))
        outcome = run_handler(act, activity, value, info, predicate=False)
        if outcome.failure is not None:
            f = outcome.failure
            return Outcome(failure=StepFailure(f.message, f.non_retryable, f.error_type))
        return Outcome(value=outcome.value)
