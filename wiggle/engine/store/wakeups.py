"""Wake-ups: who in this process waits for what, and how a committed transaction wakes them.

Three kinds of waiters park in a server process:

- pollers (PollTasks long polls) wait for tasks on their queues;
- the ticker waits until a timer is armed (or its bounded sleep ends);
- WaitInstance callers wait for an instance to end.

A transaction records in a `Wakeups` what it made happen (tasks made READY on which queues, a
timer armed, instances ended). Only once it has committed does the database hand that record to
`Waiters.committed` (nothing a rolled-back transaction did wakes anyone), and on PostgreSQL
also NOTIFY the other processes of the queues, whose listeners call `Waiters.notified`
(see `db`). Everything a waiter may have missed while it was not parked is covered by a
generation counter (pollers) or by re-reading after the wait (instance waiters).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Sequence

__all__ = ["Waiters", "Wakeups"]


class Wakeups:
    """What one transaction made happen that someone may wait for; acted on after its commit."""

    __slots__ = ("finished", "queues", "ready", "timer_armed")

    def __init__(self) -> None:
        self.queues: set[str] = set()  # queues that got READY tasks
        self.ready = 0  # how many tasks became READY (at most this many pollers need waking)
        self.timer_armed = False  # a sleep, retry backoff or await deadline was armed
        self.finished: list[str] = []  # instances that ended

    def task_ready(self, queue: str) -> None:
        self.queues.add(queue)
        self.ready += 1

    def task_taken(self) -> None:
        """A task made READY in this transaction was leased in it too (eager dispatch): no
        poller needs waking for it."""
        self.ready -= 1
        if self.ready <= 0:
            self.ready = 0
            self.queues.clear()

    def merge(self, other: Wakeups) -> None:
        self.queues |= other.queues
        self.ready += other.ready
        self.timer_armed |= other.timer_armed
        self.finished += other.finished

    def __bool__(self) -> bool:
        return bool(self.queues or self.timer_armed or self.finished)


class Waiters:
    """The waiters of one engine (one process), and the wake-ups that reach them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._gen = 0  # bumped by every wake-up of pollers
        self._local = threading.local()  # the generation a polling thread last polled at
        self._pollers: list[tuple[frozenset[str], threading.Event]] = []
        self._timers = threading.Event()
        self._instance_lock = threading.Lock()
        self._instances: dict[str, list[threading.Event]] = {}

    # -- what committed transactions and other processes tell -----------------------------------

    def committed(self, done: Wakeups) -> None:
        """A transaction committed: wake whoever waits for what it did."""
        if done.timer_armed:
            self._timers.set()
        if done.queues:
            self.tasks_ready(done.queues, done.ready)
        if done.finished and self._instances:  # the common case: nobody waits on instances
            self.instances_ended(done.finished)

    def instances_ended(self, instance_ids: Collection[str]) -> None:
        """These instances are no longer RUNNING: wake whoever waits for them."""
        with self._instance_lock:
            for instance_id in instance_ids:
                for event in self._instances.get(instance_id, ()):
                    event.set()

    def notified(self) -> None:
        """Another process made tasks READY (a NOTIFY; which queues is not told): every poller
        polls again."""
        self.tasks_ready(None, None)

    def wake_all(self) -> None:
        """Wake every waiter now (at shutdown)."""
        self._timers.set()
        self.tasks_ready(None, None)
        with self._instance_lock:
            for events in self._instances.values():
                for event in events:
                    event.set()

    # -- pollers --------------------------------------------------------------------------------

    def polled(self) -> None:
        """The calling thread is about to poll: a wake-up from now on is not missed."""
        with self._cond:
            self._local.gen = self._gen

    def tasks_ready(self, queues: Collection[str] | None, count: int | None) -> None:
        """Wake pollers of `queues` (None: all), at most `count` of them (None: all): one per
        task made READY. A poller between its poll and its wait sees the bumped generation and
        polls again, so no wake-up is lost; the others stay parked instead of racing each other
        to an empty claim."""
        with self._cond:
            self._gen += 1
            left = len(self._pollers) if count is None else count
            if left <= 0:
                return
            keep: list[tuple[frozenset[str], threading.Event]] = []
            for poller in self._pollers:
                if left > 0 and (queues is None or not poller[0].isdisjoint(queues)):
                    poller[1].set()
                    left -= 1
                else:
                    keep.append(poller)
            self._pollers = keep

    def parked_queues(self) -> set[str]:
        """The queues some poller is parked on now."""
        with self._cond:
            return {q for queues, _ in self._pollers for q in queues}

    def wait_for_tasks(
        self, queues: Sequence[str], timeout_s: float, waiter: threading.Event | None = None
    ) -> None:
        """Return when a task may have become READY on `queues` since this thread's last
        `polled()`, or after `timeout_s`. `waiter`: the event to park on, so the caller can end
        the wait itself by setting it."""
        if waiter is not None and waiter.is_set():
            return
        parked = (frozenset(queues), waiter or threading.Event())
        with self._cond:
            if self._gen != getattr(self._local, "gen", -1):
                return
            self._pollers.append(parked)
        woken = parked[1].wait(timeout_s)
        if not woken or waiter is not None:
            # A caller's own event may be set by the caller rather than by a wake-up: either way
            # this poller must not stay in the list.
            with self._cond, contextlib.suppress(ValueError):
                self._pollers.remove(parked)

    # -- the ticker -----------------------------------------------------------------------------

    def ticker_needed(self) -> None:
        """Wake the ticker now (a bulk action was created in this process)."""
        self._timers.set()

    def wait_for_timers(self, timeout_s: float) -> None:
        """Sleep until `timeout_s` passes or a timer is armed in this process (or wake_all)."""
        if self._timers.wait(timeout_s):
            self._timers.clear()

    # -- instance waiters -----------------------------------------------------------------------

    def watch(self, instance_id: str) -> threading.Event:
        """An event set when a transaction of this process ends `instance_id`."""
        event = threading.Event()
        with self._instance_lock:
            self._instances.setdefault(instance_id, []).append(event)
        return event

    def watched(self) -> list[str]:
        """The instances some thread of this process waits for now."""
        with self._instance_lock:
            return list(self._instances)

    def unwatch(self, instance_id: str, event: threading.Event) -> None:
        with self._instance_lock:
            events = self._instances.get(instance_id, [])
            with contextlib.suppress(ValueError):
                events.remove(event)
            if not events:
                self._instances.pop(instance_id, None)
