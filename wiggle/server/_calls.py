"""What every handler of every service shares: the count of handlers running (shutdown waits
for it) and `rpc_handler`, which checks a request's identifiers and maps each exception a
handler raises to its gRPC status."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

import grpc

from wiggle.errors import StaleLease
from wiggle.server._edges import check_request
from wiggle.server._errors import abort_with, status_name
from wiggle.tracing._logs import unbind

if TYPE_CHECKING:
    # Loaded with prometheus_client only when a server serves metrics.
    from wiggle.server._metrics import ServerMetrics

__all__ = ["CallTracker", "rpc_handler"]

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class CallTracker:
    """The handlers running now, over every service of a server (shutdown waits for them)."""

    def __init__(self, metrics: ServerMetrics | None = None) -> None:
        self.metrics = metrics
        self._cond = threading.Condition()
        self._running = 0

    def enter(self) -> None:
        with self._cond:
            self._running += 1

    def leave(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._running == 0, timeout)


class _Tracked(Protocol):
    calls: CallTracker


S = TypeVar("S", bound=_Tracked)


def rpc_handler(
    method: Callable[[S, Req, grpc.ServicerContext], Resp],
) -> Callable[[S, Req, grpc.ServicerContext], Resp]:
    """Check the request's identifiers, count the call as running, and map every exception a
    handler raises to a status (see _errors)."""

    name = method.__name__

    @functools.wraps(method)
    def wrapper(self: S, request: Req, context: grpc.ServicerContext) -> Resp:
        self.calls.enter()
        code = "OK"
        try:
            check_request(name, request)
            return method(self, request, context)
        except Exception as exc:
            code = status_name(exc)
            if self.calls.metrics is not None and isinstance(exc, StaleLease):
                self.calls.metrics.stale_reports.inc()
            abort_with(context, exc)
            raise  # unreachable: abort_with raises
        finally:
            unbind()  # what the handler bound for its log lines (tracing on)
            self.calls.leave()
            if self.calls.metrics is not None:
                self.calls.metrics.rpcs.labels(name, code).inc()

    return wrapper
