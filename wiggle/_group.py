"""Group commit: work that arrives together is done together.

The engine uses it for reports and starts: on a busy server most of a transition's cost is per
transaction, not per report (the lock statement, the write statement, the commit and its WAL
flush). The worker uses it for its reports: most of a report's cost is per RPC. `GroupCommit`
lets threads that submit while a batch is being done queue up, and the next batch takes them
all at once. A lone item never waits: the thread that finds no batch running does it at once.

Leader/follower, no thread of its own: the submitting thread that finds a free committer slot
becomes the leader, takes what is queued (its own item first), runs the batch, hands every
follower its result, and passes the lead to the oldest waiting follower if more queued up
meanwhile. `max_active` batches may run at once (the engine runs two on PostgreSQL, so that one
batch's commit flush overlaps the next batch's statements, and one on SQLite, whose writes are
serialised anyway).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["GroupCommit"]

In = TypeVar("In")
Out = TypeVar("Out")


class _Slot(Generic[In, Out]):
    __slots__ = ("event", "finished", "item", "leading", "result", "waited_on")

    def __init__(self, item: In) -> None:
        self.item = item
        self.event = threading.Event()  # set: finished, or handed the lead
        self.finished = False  # the result is in (read and written under the lock)
        self.leading = False  # this slot's thread is a leader
        self.waited_on = False  # a submitting thread waits on this slot (the last of its items)
        self.result: Out | BaseException | None = None


class GroupCommit(Generic[In, Out]):
    """Runs `run_batch` over items submitted concurrently, in batches of up to `max_batch`.

    `run_batch(items)` returns one result per item, in order; a result that is an exception is
    raised in the submitting thread. If `run_batch` itself raises, every item of that batch
    gets the exception.
    """

    def __init__(
        self,
        run_batch: Callable[[Sequence[In]], Sequence[Out | BaseException]],
        *,
        max_batch: int = 64,
        max_active: int = 1,
    ) -> None:
        self._run_batch = run_batch
        self._max_batch = max(1, max_batch)
        self._max_active = max(1, max_active)
        self._lock = threading.Lock()
        self._queue: deque[_Slot[In, Out]] = deque()
        self._active = 0  # leaders right now
        self.batches = 0  # committed batches (for tests and benchmarks)
        self.items = 0  # items in them

    def submit(self, item: In) -> Out:
        """Commit `item` (with whatever else is queued); its result, or raise its error."""
        (result,) = self.submit_many([item])
        if isinstance(result, BaseException):
            raise result
        return result

    def submit_many(self, items: Sequence[In]) -> list[Out | BaseException]:
        """Commit `items` (in order, possibly across batches); each one's result or error."""
        slots: list[_Slot[In, Out]] = [_Slot(item) for item in items]
        if not slots:
            return []
        mine = slots[-1]  # the last to be taken: when it is finished, all of ours are
        mine.waited_on = True
        with self._lock:
            self._queue.extend(slots)
            if self._active < self._max_active:
                self._active += 1
                mine.leading = True
        while True:
            if mine.leading:
                self._lead(mine)
                break
            mine.event.wait()
            with self._lock:
                mine.event.clear()
                # Handed the lead: lead, even if another leader finished our item meanwhile
                # (the lead must still be passed on or given back).
                if mine.finished and not mine.leading:
                    break
        # Batches are taken in queue order, so every earlier slot of ours is finished too.
        return [slot.result for slot in slots]  # type: ignore[misc]

    def _lead(self, mine: _Slot[In, Out]) -> None:
        """Commit batches until our own item is done, then pass the lead on or give it up."""
        while True:
            with self._lock:
                if mine.finished:
                    mine.leading = False
                    heir = next((s for s in self._queue if s.waited_on and not s.leading), None)
                    if heir is None:
                        self._active -= 1
                    else:  # the oldest waiting thread leads the next batch; we answer our caller
                        heir.leading = True
                        heir.event.set()
                    return
                size = min(self._max_batch, len(self._queue))
                batch = [self._queue.popleft() for _ in range(size)]
            if batch:
                self._commit(batch)
            else:
                # Another leader took our item: wait for it to finish it.
                mine.event.wait()
                mine.event.clear()

    def _commit(self, batch: list[_Slot[In, Out]]) -> None:
        results: Sequence[Out | BaseException]
        try:
            results = self._run_batch([slot.item for slot in batch])
        except BaseException as exc:
            results = [exc] * len(batch)
        with self._lock:
            self.batches += 1
            self.items += len(batch)
            for slot, result in zip(batch, results, strict=True):
                slot.result = result
                slot.finished = True
                slot.event.set()
