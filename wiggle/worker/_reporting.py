"""Reports under a lease: numbered, resent with the same number, released when abandoned.

Every report on a lease (CompleteTask, FailTask, AdvanceRun, ReleaseTask) carries `seq`: 1 for
the first, then one more per report the server acknowledged. A report whose answer was lost
(UNAVAILABLE, DEADLINE_EXCEEDED, a reset connection) is resent as it was, with the same seq, for
as long as the lease lasts: the server recognises the resend and answers it again instead of
applying it twice (docs/worker-protocol.md, "Report identity").

When the worker gives up on a task whose lease may still be its own (a report refused for a
reason that does not end the lease, a task received while draining), it releases the lease at
once with ReleaseTask, so the task is READY again now instead of when the lease expires, and
without the expiry costing an attempt.

Results are checked against the server's limits before they are sent: a result over
`max_payload_bytes`, or nested deeper than the JSON depth limit, fails its step at once and
non-retryably (running the step again would produce the same result).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import grpc

from wiggle._limits import MAX_REASON_CHARS, depth_problem
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import RETRYABLE
from wiggle.worker._activities import Failure, Outcome
from wiggle.worker._heartbeat import Lease
from wiggle.worker._rpc import Rpc, RpcFailed

__all__ = [
    "GONE",
    "UNKNOWN_FATE",
    "check_result",
    "refused",
    "release",
    "retry_window",
    "send_report",
]

_log = logging.getLogger("wiggle.worker")

#: Refusals that mean the task is not ours to report any more (stale lease, finished instance,
#: a report out of order, an unknown task).
GONE = frozenset({grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND})

#: Answers after which a report's fate is unknown: resent unchanged, same seq, within the lease.
#: INTERNAL and UNKNOWN are among them: a server bug, or a stream reset mid-call (gRPC reports
#: some resets so); the server applies a resent report at most once either way.
UNKNOWN_FATE = RETRYABLE | {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

_said_unimplemented = threading.Event()


def retry_window(lease: Lease) -> float:
    """How long a report may be resent: what is left of the lease (at least a second).

    Past the lease's end the task belongs to someone else and the resend would be refused.
    """
    return max(1.0, lease.remaining_ms() / 1000)


def _attempt_timeout(rpc: Rpc, lease: Lease) -> float:
    # One attempt never outlives the lease by much: a hung call must leave time to resend.
    return min(rpc.call_timeout, max(2.0, lease.remaining_ms() / 1000))


def send_report(rpc: Rpc, lease: Lease, method: str, request: Any) -> Any:
    """Send one report numbered `lease.next_seq()`; resends keep that number.

    Raises RpcFailed when the server refused it, or when it could not be delivered within the
    lease (its fate is then unknown).
    """
    seq = lease.next_seq()
    request.seq = seq
    response = rpc.call(
        method,
        request,
        timeout=_attempt_timeout(rpc, lease),
        retry_for=retry_window(lease),
        retry_on=UNKNOWN_FATE,
    )
    lease.ack(seq)
    return response


def release(rpc: Rpc, lease: Lease, reason: str) -> bool:
    """Give the task back (READY again, same attempt); True when the server took it back."""
    request = pb.ReleaseTaskRequest(
        task_id=lease.task_id, lease=lease.lease, reason=reason[:MAX_REASON_CHARS]
    )
    try:
        send_report(rpc, lease, "ReleaseTask", request)
    except RpcFailed as exc:
        if exc.code == grpc.StatusCode.UNIMPLEMENTED:
            if not _said_unimplemented.is_set():  # once per process, not per task
                _said_unimplemented.set()
                _log.warning("server does not implement ReleaseTask; given-up leases expire")
        else:
            _log.info("release of task %s refused: %s", lease.task_id, exc)
        return False
    lease.lose(f"released: {reason}")
    return True


def refused(rpc: Rpc, lease: Lease, exc: RpcFailed, what: str) -> None:
    """A report was refused or could not be delivered: log it, and release the lease when the
    refusal left it ours (the report was not applied, the lease is still current)."""
    if exc.code in GONE:
        _log.info("%s of task %s refused: %s", what, lease.task_id, exc)
        lease.lose(f"{what} refused: {exc.detail}")
        return
    if exc.code in RETRYABLE:
        # Undeliverable for the whole lease: the server is unreachable, so a release would not
        # reach it either; the lease expires there. (INTERNAL / UNKNOWN answers for as long:
        # a release is tried, the server may take that.)
        _log.error("%s of task %s not delivered within its lease: %s", what, lease.task_id, exc)
        return
    _log.error("%s of task %s refused: %s; releasing the task", what, lease.task_id, exc)
    release(rpc, lease, f"{what} refused")


def check_result(outcome: Outcome, max_payload_bytes: int) -> Outcome:
    """The outcome as is, or a non-retryable failure when its result breaks a server limit."""
    if outcome.context is None:
        return outcome
    size = len(outcome.context)
    if max_payload_bytes > 0 and size > max_payload_bytes:
        return Outcome(
            failure=Failure(
                f"the step's result is {size} bytes of JSON; the server's limit "
                f"(max_payload_bytes) is {max_payload_bytes} bytes",
                non_retryable=True,
                error_type="PayloadTooLarge",
            )
        )
    problem = depth_problem("the step's result", outcome.value, outcome.context)
    if problem is not None:
        return Outcome(failure=Failure(problem, non_retryable=True, error_type="DepthLimit"))
    return outcome
