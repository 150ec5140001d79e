"""The long polls open on this server, and the hand-off of a new instance's first task to one.

A worker waiting in PollTasks is parked until a task may be READY; when one is, it wakes and
claims it in a transaction of its own. A StartInstance on this server can spare that claim:
it offers the new instance's first task to a parked poll, leasing it to that poll's worker in
the start's own transaction (the engine's eager start, with the poll's worker id, queues and
activities), and the poll answers with it at once.

The hand-off has one rule: a task leased to a poll reaches the poll or is released. A poll
takes an offer only while it is parked and open; before it answers it closes, waiting for an
offer in progress to settle, and answers the task it was handed (or, when its caller went away
or it is full, the server releases it: READY again, no attempt consumed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from wiggle.engine import EagerRequest, StartResult, TaskActivation

__all__ = ["OpenPoll", "OpenPolls", "PollWorker"]

#: How long a poll about to answer waits for a start that is leasing it a task (its
#: transaction); past it, the start finds the poll closed and releases the task.
SETTLE_WAIT_S = 5.0


@dataclass(frozen=True)
class PollWorker:
    """What a poll's worker serves: the lease an offered task is given under."""

    worker_id: str
    queues: tuple[str, ...]
    activities: tuple[str, ...]

    def eager(self) -> EagerRequest:
        return EagerRequest(self.worker_id, self.queues, self.activities)


class OpenPoll:
    """One PollTasks call: the event it parks on, whether EndPolls ended it, and the tasks
    starts handed it."""

    def __init__(self, worker: PollWorker) -> None:
        self.worker = worker
        self.wake = threading.Event()
        self.ended = False
        self._lock = threading.Condition()
        self._parked = False
        self._closed = False
        self._offering = False
        self._handed: list[TaskActivation] = []

    @property
    def parked(self) -> bool:
        return self._parked

    def park(self, parked: bool) -> None:
        """Whether the poll waits now (only a parked poll takes offers: one that is claiming
        would answer without waiting for them)."""
        with self._lock:
            self._parked = parked

    def offer(self) -> bool:
        """Reserve this poll for one task a start is about to lease to it."""
        with self._lock:
            if self._closed or self._offering or not self._parked or self.ended:
                return False
            self._offering = True
            return True

    def settle(self, task: TaskActivation | None) -> bool:
        """The reserved offer's outcome: the task leased to this poll, or None. False when the
        poll closed meanwhile: the caller releases the task."""
        with self._lock:
            self._offering = False
            self._lock.notify_all()
            if task is None:
                return True
            if self._closed:
                return False
            self._handed.append(task)
        self.wake.set()
        return True

    def take(self) -> list[TaskActivation]:
        """The tasks handed to this poll since it last took them."""
        with self._lock:
            handed, self._handed = self._handed, []
            return handed

    def close(
        self, tasks: Sequence[TaskActivation], most: int, caller_here: bool
    ) -> tuple[list[TaskActivation], list[TaskActivation]]:
        """Take no more offers (waiting for one in progress to settle). What to answer: `tasks`
        and those starts handed it, up to `most`; and what to give back: the rest, or all of
        them when the caller went away."""
        with self._lock:
            self._lock.wait_for(lambda: not self._offering, timeout=SETTLE_WAIT_S)
            self._closed = True
            late, self._handed = self._handed, []
        room = max(0, most - len(tasks))
        send, unsent = [*tasks, *late[:room]], late[room:]
        return (send, unsent) if caller_here else ([], [*send, *unsent])


class OpenPolls:
    """The open polls by worker id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_worker: dict[str, set[OpenPoll]] = {}

    def add(self, poll: OpenPoll) -> None:
        with self._lock:
            self._by_worker.setdefault(poll.worker.worker_id, set()).add(poll)

    def remove(self, poll: OpenPoll) -> None:
        with self._lock:
            mine = self._by_worker.get(poll.worker.worker_id)
            if mine is not None:
                mine.discard(poll)
                if not mine:
                    del self._by_worker[poll.worker.worker_id]

    def parked(self) -> int:
        """How many polls wait now."""
        with self._lock:
            return sum(p.parked for polls in self._by_worker.values() for p in polls)

    def end(self, worker_id: str) -> int:
        """EndPolls: end every open poll of the worker; how many."""
        with self._lock:
            polls = list(self._by_worker.get(worker_id, ()))
        for poll in polls:
            poll.ended = True
            poll.wake.set()
        return len(polls)

    def start(
        self,
        start: Callable[[EagerRequest | None], StartResult],
        give_back: Callable[[list[TaskActivation]], None],
    ) -> tuple[StartResult, bool | None]:
        """Run `start` leasing the new instance's first task to a parked poll when there is one
        (StartInstance without an eager request of its own); whether the poll took a task (None:
        no poll was parked). The result keeps no task: it is the poll's to answer, or given back
        when the poll answered first."""
        with self._lock:
            candidates = [p for polls in self._by_worker.values() for p in polls]
        poll = next((p for p in candidates if p.offer()), None)
        if poll is None:
            return start(None), None
        try:
            result = start(poll.worker.eager())
        except BaseException:
            poll.settle(None)
            raise
        handed = result.eager_task
        if not poll.settle(handed) and handed is not None:
            give_back([handed])
        return replace(result, eager_task=None), handed is not None
