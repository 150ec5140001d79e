"""What a running handler may know about its step: `step()` and `StepInfo`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from wiggle.graph import ExecutionMode
from wiggle.worker._errors import NotInActivity

__all__ = ["StepInfo", "running", "step"]


@dataclass(frozen=True)
class StepInfo:
    """The step a handler is running; stable across retries except for `attempt`.

    `(instance_id, node_id)` names a step of an instance, `attempt` counts from 1: together they
    make an idempotency key. `task_id` is the leased token the worker was handed; in a local run
    every step after the first shares the task id of the run's first step.
    """

    instance_id: str
    node_id: str
    attempt: int
    flow: str
    version: str
    activity: str
    execution_mode: ExecutionMode
    task_id: str


# A ContextVar rather than a thread-local so that async handlers (run under asyncio.run, which
# copies the context into its task) see the same value as the thread that started them.
_current: ContextVar[StepInfo | None] = ContextVar("wiggle_step", default=None)


def step() -> StepInfo:
    """The step the calling handler is running. Raises NotInActivity outside a handler."""
    info = _current.get()
    if info is None:
        raise NotInActivity()
    return info


@contextmanager
def running(info: StepInfo) -> Iterator[StepInfo]:
    """Make `info` what `step()` returns for the duration of the block."""
    token = _current.set(info)
    try:
        yield info
    finally:
        _current.reset(token)
