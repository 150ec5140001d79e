"""Concurrency slots, and the eager-start reservation a client takes on one
(docs/worker-protocol.md, "Eager dispatch").

A slot is the right to run one task. The poller takes free slots before asking for tasks (so it
never claims more than it can start at once); a client starting an instance in this process
reserves one first, asks the server for the first task in the start response, then either
dispatches that task onto the slot or releases it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

__all__ = ["EagerSlot", "Slots"]


class Slots:
    """A counter of free task slots that one can wait on."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("concurrency must be at least 1")
        self.capacity = capacity
        self._free = capacity
        self._cond = threading.Condition()

    @property
    def free(self) -> int:
        with self._cond:
            return self._free

    def take(self, most: int) -> int:
        """Take up to `most` free slots without waiting; returns how many were taken."""
        with self._cond:
            n = max(0, min(most, self._free))
            self._free -= n
            return n

    def take_over(self, n: int) -> None:
        """Take `n` slots even when they are not free (the count may go below zero)."""
        with self._cond:
            self._free -= n

    def give(self, n: int = 1) -> None:
        if n <= 0:
            return
        with self._cond:
            self._free += n
            self._cond.notify_all()

    def wait_free(self, timeout: float) -> bool:
        """Wait until at least one slot is free; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._free > 0, timeout)

    def wait_idle(self, timeout: float | None) -> bool:
        """Wait until every slot is free again (nothing in flight); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._free >= self.capacity, timeout)


class EagerSlot:
    """One reserved slot: `dispatch` a task onto it, or `release` it. Either happens once."""

    def __init__(self, submit: Callable[[pb.Task], bool], give_back: Callable[[], None]) -> None:
        self._submit = submit
        self._give_back = give_back
        self._lock = threading.Lock()
        self._used = False

    def dispatch(self, task: pb.Task) -> bool:
        """Run `task` on this slot exactly like a polled one. False: declined, slot freed.

        The worker declines when it began shutting down since the reservation; it then
        releases the task (READY again at once, no attempt consumed).
        """
        with self._lock:
            if self._used:
                return False
            self._used = True
        if self._submit(task):
            return True
        self._give_back()
        return False

    def release(self) -> None:
        """Free the slot; a no-op after `dispatch` (or a second `release`)."""
        with self._lock:
            if self._used:
                return
            self._used = True
        self._give_back()

    @property
    def used(self) -> bool:
        return self._used

    def __enter__(self) -> EagerSlot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
