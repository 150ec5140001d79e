"""Waiting in a test for something to happen: the one helper every tier uses.

A test never sleeps a fixed time and hopes: it names what it waits for, checks it every few
milliseconds, and fails with that name after a bound generous enough for a loaded machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["count_poll_retries", "wait_until"]

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 15.0,
    what: str = "the condition",
    *,
    interval: float = 0.02,
) -> T:
    """The first truthy value `predicate()` returns; AssertionError naming `what` when none
    came within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(interval)


def count_poll_retries(monkeypatch: Any) -> threading.Semaphore:
    """A semaphore released each time a worker's poll loop (wiggle.worker) pauses before trying
    again, that is once per failed or refused poll: `acquire(timeout=...)` waits for the next."""
    from wiggle.wire import Retry
    from wiggle.worker import _poller

    failed = threading.Semaphore(0)

    class Counted(Retry):
        def pause(self) -> bool:
            failed.release()
            return super().pause()

    monkeypatch.setattr(_poller, "Retry", Counted)
    return failed
