"""The poll loop: long-poll for as many tasks as there are free slots, hand each to the pool.

The server never leases this worker more tasks than it had free slots when it asked (give or
take an eager start racing the poll). One loop per worker; it ends when the worker stops.

Stopping never cancels an open poll when it can be avoided: the server may be claiming tasks for
it at that very moment, and a cancelled call would strand them, leased to nobody, until their
leases expired. Instead the worker asks the server to end its polls (EndPolls); the open poll
then answers with whatever it holds, and those tasks go to `submit` like any others (a draining
worker releases them unrun). Only a server that cannot end polls (an older one, or none
reachable) gets its poll cancelled.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import RETRYABLE, Backoff, Retry, answered_by_server, code_of, describe
from wiggle.worker._eager import Slots
from wiggle.worker._rpc import Rpc, RpcFailed

__all__ = ["Poller"]

_log = logging.getLogger("wiggle.worker")

#: How long a stop waits for the open poll to answer after EndPolls before cancelling it.
END_POLL_WAIT_S = 5.0
#: The longest pause between polls of a server that answers UNAVAILABLE itself (see _loop).
ANSWERED_CAP_S = 1.0


class Poller:
    def __init__(
        self,
        rpc: Rpc,
        slots: Slots,
        submit: Callable[[pb.Task], bool],
        *,
        worker_id: str,
        queues: tuple[str, ...],
        wait_ms: int = 10_000,
        activities: Callable[[], list[str]] = list,
        capacity: int = 0,
        sdk: str = "",
        on_poll: Callable[[float, int], None] | None = None,
    ) -> None:
        self._rpc = rpc
        self._slots = slots
        self._submit = submit
        self._worker_id = worker_id
        self._queues = queues
        self._wait_ms = wait_ms
        # Sent with every poll: the server leases only tasks whose activity is listed (so a
        # worker never fails a step for want of a handler) and shows who serves what.
        self._activities = activities
        self._capacity = capacity
        self._sdk = sdk
        self._on_poll = on_poll  # metrics: (seconds, tasks) of each answered poll
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._call: Any = None  # the in-flight PollTasks future, cancelled by stop()
        # A poll in flight on a stub without futures (an embedded node's services in this
        # process), as the event its answer sets: stop() ends it on the server with EndPolls,
        # as it does a future's.
        self._sync_poll: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="wiggle-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop polling: end the poll in flight on the server (EndPolls), let it answer, and
        hand what it brings to `submit`; cancel it only when the server cannot end it."""
        self._stop.set()
        with self._lock:
            call = self._call
            sync_poll = self._sync_poll
        if call is not None and not self._end_polls(call):
            call.cancel()
        elif sync_poll is not None:
            self._end_sync_poll(sync_poll)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=END_POLL_WAIT_S + 5)

    def _end_polls(self, call: Any) -> bool:
        """Ask the server to answer our open polls now; True once the open one has answered."""
        try:
            self._rpc.call("EndPolls", pb.EndPollsRequest(worker_id=self._worker_id), timeout=2.0)
        except (RpcFailed, AttributeError) as exc:  # AttributeError: a stub without EndPolls
            _log.debug("EndPolls failed (%s); cancelling the open poll", exc)
            return False
        # The poll may have reached another server process than EndPolls did (behind a
        # balancer); it is cancelled if it does not answer within a bounded wait.
        done = threading.Event()
        call.add_done_callback(lambda _f: done.set())
        return done.wait(END_POLL_WAIT_S)

    def _end_sync_poll(self, answered: threading.Event) -> None:
        """EndPolls for a poll waiting on this worker's poller thread, until it has answered
        (the join that follows then returns at once). Sent again when the poll has not answered
        within 0.2 s: it may not have reached the server yet when the first one arrived, and
        would then wait its full time. A stub without EndPolls (a test double) lets the poll
        run out."""
        deadline = time.monotonic() + END_POLL_WAIT_S
        while time.monotonic() < deadline:
            try:
                self._rpc.call(
                    "EndPolls", pb.EndPollsRequest(worker_id=self._worker_id), timeout=2.0
                )
            except (RpcFailed, AttributeError) as exc:
                _log.debug("EndPolls failed (%s); the open poll runs out", exc)
                return
            if answered.wait(0.2):
                return

    def _loop(self) -> None:
        retry = Retry(math.inf, stopped=self._stop)  # a poller tries again until it stops
        # A server that answers UNAVAILABLE itself (its database is failing over) is asked
        # again at least every ANSWERED_CAP_S: the database's return is noticed within a
        # second, where a backoff grown to 5 s over a 10 s failover left the worker idle for up
        # to 5 s after it. A server that cannot be reached backs off as far as RETRY's cap.
        answered = Retry(math.inf, backoff=Backoff(cap=ANSWERED_CAP_S), stopped=self._stop)
        last_error: grpc.StatusCode | None = None
        while not self._stop.is_set():
            if not self._slots.wait_free(0.25):
                continue
            # Slots are counted, not held, while the poll is open: an eager start in this process
            # must be able to reserve one during a long poll. If it does, the poll may bring back
            # one task more than there are free slots; it queues for a thread with its lease
            # heartbeated meanwhile, rather than being dropped to expire.
            want = self._slots.free
            if want <= 0:
                continue
            began = time.monotonic()
            try:
                tasks = self._poll(want)
                if self._on_poll is not None:
                    self._on_poll(time.monotonic() - began, len(tasks))
            except grpc.RpcError as exc:
                if self._stop.is_set():
                    return
                code = code_of(exc)
                if code in RETRYABLE and not answered_by_server(exc):
                    self._rpc.outage.failed(exc, "PollTasks")
                elif code != grpc.StatusCode.CANCELLED and code != last_error:
                    # Once per kind of refusal (a wrong token would otherwise log every 5 s). A
                    # server answering "unavailable" (too many waiting polls, its database down)
                    # is reachable: not an outage of ours, but worth one line.
                    level = logging.WARNING if code in RETRYABLE else logging.ERROR
                    _log.log(level, "PollTasks refused: %s", describe(exc))
                last_error = code
                (answered if code in RETRYABLE and answered_by_server(exc) else retry).pause()
                continue
            except Exception:
                if self._stop.is_set():
                    return
                _log.exception("PollTasks failed")
                retry.pause()
                continue
            self._rpc.outage.succeeded()
            retry.reset()
            answered.reset()
            last_error = None
            if not tasks:
                continue
            if len(tasks) > want:
                _log.warning(
                    "PollTasks gave %d tasks for max_tasks=%d; the extra ones queue for a thread",
                    len(tasks),
                    want,
                )
            self._slots.take_over(len(tasks))
            for task in tasks:
                if not self._submit(task):
                    _log.error("task %s could not be started; its lease will expire", task.task_id)
                    self._slots.give(1)

    def _poll(self, max_tasks: int) -> list[pb.Task]:
        request = pb.PollTasksRequest(
            worker_id=self._worker_id,
            queues=list(self._queues),
            max_tasks=max_tasks,
            wait_ms=self._wait_ms,
            activities=self._activities(),
            slots=self._capacity,
            sdk=self._sdk,
        )
        method = self._rpc.stub.PollTasks
        timeout = self._wait_ms / 1000 + 10.0
        future_of = getattr(method, "future", None)
        if future_of is None:  # in-process services (or a test double): a plain call
            answered = threading.Event()
            with self._lock:
                if self._stop.is_set():
                    return []
                self._sync_poll = answered
            try:
                response = method(request, timeout=timeout, metadata=self._rpc.metadata)
            finally:
                with self._lock:
                    self._sync_poll = None
                answered.set()
            return list(response.tasks)
        with self._lock:
            # Under the lock: either stop() sees this call and ends it, or we see the stop.
            if self._stop.is_set():
                return []
            call = future_of(request, timeout=timeout, metadata=self._rpc.metadata)
            self._call = call
        try:
            response = call.result()
        except grpc.FutureCancelledError:
            return []
        finally:
            with self._lock:
                self._call = None
        return list(response.tasks)
