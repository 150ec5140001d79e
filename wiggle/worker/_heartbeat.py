"""Leases the worker holds, and the background thread that keeps them alive.

A task's lease is renewed by a Heartbeat at about a third of its length, so one lost heartbeat
never costs the lease. AdvanceRun renews it too (`Lease.renewed`). When the server answers that
the instance is no longer RUNNING, or that the lease is not ours any more, the lease is marked
lost and whoever runs the task abandons it at its next check.
"""

from __future__ import annotations

import logging
import threading
import time

import grpc

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import RETRYABLE
from wiggle.worker._rpc import Rpc, RpcFailed

__all__ = ["Lease", "LeaseKeeper"]

_log = logging.getLogger("wiggle.worker")

_RUNNING = pb.InstanceStatus.RUNNING

#: Codes a heartbeat answers with when the lease is gone for good: stop working on the task.
_LOST = frozenset(
    {grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.ABORTED}
)


class Lease:
    """One leased task: its fencing token, when it runs out (on this host's monotonic clock), the
    number of reports sent under it, and the step a local run is in."""

    def __init__(
        self,
        task_id: str,
        lease: str,
        expires_at_ms: int,
        timeout_ms: int,
        server_now_ms: int = 0,
    ) -> None:
        self.task_id = task_id
        self.lease = lease
        self._lock = threading.Lock()
        self.lost_reason: str | None = None
        self.warned = False
        self.length_ms = max(1, timeout_ms)
        self._deadline = 0.0
        self._renewed_at = 0.0
        #: Reports the server acknowledged under this lease (docs/worker-protocol.md, report
        #: identity): the next report carries `acked + 1`, and a resend carries the same seq.
        self.acked = 0
        #: The step a local run is running now: heartbeats name it, so the server renews the
        #: lease by that step's timeout (empty: the node the server last saw).
        self.node_id = ""
        self.renewed(expires_at_ms, server_now_ms)

    def renewed(
        self, expires_at_ms: int, server_now_ms: int = 0, *, length_ms: int | None = None
    ) -> None:
        """Record a renewal the server reported as an absolute expiry (database clock, ms).

        With `server_now_ms` (the server's clock when it answered) what is left is measured on
        the server's own clock, and is also the lease's new length (the server renews by the
        timeout of the step it renewed for). Without it (an older server), what is left is
        measured against our wall clock and `length_ms`, when given, is the new length.
        """
        now = time.monotonic()
        if server_now_ms > 0 and expires_at_ms > 0:
            left_ms = expires_at_ms - server_now_ms
            if left_ms > 0:
                self.length_ms = left_ms
        else:
            if length_ms is not None and length_ms > 0:
                self.length_ms = length_ms
            # The server's clock is the database's; ours may differ. A nonsense expiry falls
            # back to one lease length.
            left_ms = (
                expires_at_ms - int(time.time() * 1000) if expires_at_ms > 0 else self.length_ms
            )
            if left_ms <= 0 or left_ms > 10 * self.length_ms:
                left_ms = self.length_ms
        # Anchored on the monotonic clock: immune to later wall-clock jumps on this host.
        with self._lock:
            self._deadline = now + left_ms / 1000
            self._renewed_at = now

    def next_seq(self) -> int:
        """The seq of the next new report under this lease."""
        with self._lock:
            return self.acked + 1

    def ack(self, seq: int) -> None:
        """The server answered the report `seq`: it was applied (or recognised as a resend)."""
        with self._lock:
            self.acked = max(self.acked, seq)

    def lose(self, reason: str) -> None:
        with self._lock:
            if self.lost_reason is None:
                self.lost_reason = reason

    @property
    def lost(self) -> bool:
        return self.lost_reason is not None

    def remaining_ms(self) -> int:
        with self._lock:
            return int((self._deadline - time.monotonic()) * 1000)

    def due(self, now: float) -> bool:
        """Whether a heartbeat is due: a third of the lease has passed since the last renewal."""
        with self._lock:
            return now - self._renewed_at >= self.length_ms / 3000


class LeaseKeeper:
    """A daemon thread that heartbeats every held lease when it falls due."""

    def __init__(self, rpc: Rpc) -> None:
        self._rpc = rpc
        self._leases: dict[str, Lease] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="wiggle-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def hold(self, lease: Lease) -> None:
        with self._lock:
            self._leases[lease.task_id] = lease

    def drop(self, lease: Lease) -> None:
        with self._lock:
            if self._leases.get(lease.task_id) is lease:
                del self._leases[lease.task_id]

    def beat(self, lease: Lease) -> None:
        """Heartbeat one lease now (also used by tests)."""
        try:
            response = self._rpc.call(
                "Heartbeat",
                pb.HeartbeatRequest(
                    task_id=lease.task_id, lease=lease.lease, node_id=lease.node_id
                ),
                timeout=max(1.0, lease.length_ms / 3000),
            )
        except RpcFailed as exc:
            if exc.code in _LOST:
                lease.lose(f"heartbeat refused: {exc.detail}")
            elif exc.code not in RETRYABLE and not lease.warned:
                lease.warned = True  # once per lease: a broken server would flood the log
                _log.warning("heartbeat for task %s failed: %s", lease.task_id, exc)
            # Unreachable or slow: the next tick tries again; the lease budget check in a local
            # run notices if the deadline comes close.
            return
        if response.instance_status != _RUNNING:
            lease.lose(f"instance is {pb.InstanceStatus.Name(response.instance_status)}")
            return
        lease.renewed(response.lease_expires_at_ms, response.server_now_ms)

    def _loop(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                due = [
                    lease for lease in self._leases.values() if not lease.lost and lease.due(now)
                ]
            for lease in due:
                if self._stop.is_set():
                    return
                try:
                    self.beat(lease)
                except Exception:  # never let one bad answer kill the keeper
                    _log.exception("heartbeat for task %s failed", lease.task_id)
            self._stop.wait(0.05)
