"""The worker's one I/O seam: calls on the generated stub, with auth, deadlines and retries.

Everything else in the worker talks to `Rpc`; unit tests hand it an in-memory stand-in for the
generated `WiggleStub` (any object with the same methods taking `(request, timeout=, metadata=)`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import grpc

from wiggle._trouble import Trouble
from wiggle.wire import (
    REPORT_FIELDS,
    RETRYABLE,
    Retry,
    code_of,
    describe,
    details_of,
    retrying,
    token_metadata,
)
from wiggle.worker._batching import ReportBatcher

__all__ = ["Outage", "Rpc", "RpcFailed"]

_log = logging.getLogger("wiggle.worker")

T = TypeVar("T")


class RpcFailed(Exception):
    """A call that failed for good (or whose retries ran out): `code` says why."""

    def __init__(self, method: str, code: grpc.StatusCode | None, detail: str) -> None:
        super().__init__(f"{method}: {code.name if code else 'error'}: {detail}")
        self.method = method
        self.code = code
        self.detail = detail


class Outage:
    """Logs once when the server becomes unreachable and once when it is back, not per attempt.

    Shared by every thread of a worker: many calls failing during one outage make one line.
    """

    def __init__(self, address: str) -> None:
        self._trouble = Trouble(
            _log,
            down=f"server at {address} unreachable ({{why}}); retrying with backoff",
            up=f"server at {address} reachable again after {{seconds:.1f}} s",
            expected=(Exception,),  # only a call that could not reach the server is told here
        )

    def failed(self, exc: BaseException, method: str = "") -> None:
        self._trouble.failed(exc, f"{method}: {describe(exc)}" if method else describe(exc))

    def succeeded(self) -> None:
        self._trouble.succeeded()

    @property
    def down(self) -> bool:
        return self._trouble.down


class Rpc:
    """Calls on the stub with the bearer token and a deadline; retries while unreachable."""

    def __init__(
        self,
        stub: Any,
        *,
        address: str = "",
        token: str | None = None,
        call_timeout: float = 30.0,
        stopped: threading.Event | None = None,
        batch_reports: bool = False,
    ) -> None:
        self.stub = stub
        self.metadata = token_metadata(token)
        # Reports of concurrent tasks share ReportBatch calls (see _batching).
        self.batcher = ReportBatcher(stub, self.metadata) if batch_reports else None
        self.call_timeout = call_timeout
        self.outage = Outage(address)
        # Metrics: told of every finished call (method, request, answered without error).
        self.observer: Callable[[str, Any, bool], None] | None = None
        # Set when the worker is torn down without draining: retry loops give up at once.
        self.stopped = stopped or threading.Event()

    def call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None = None,
        retry_for: float = 0.0,
        retry_on: frozenset[grpc.StatusCode] = RETRYABLE,
    ) -> Any:
        """Call `method`; while it fails with a `retry_on` code (by default: unreachable),
        retry with backoff for up to `retry_for` seconds.

        Raises RpcFailed for every other status, and when the retry time is spent.
        """
        try:
            response = self._call(
                method, request, timeout=timeout, retry_for=retry_for, retry_on=retry_on
            )
        except RpcFailed:
            if self.observer is not None:
                self.observer(method, request, False)
            raise
        if self.observer is not None:
            self.observer(method, request, True)
        return response

    def _call(
        self,
        method: str,
        request: Any,
        *,
        timeout: float | None,
        retry_for: float,
        retry_on: frozenset[grpc.StatusCode],
    ) -> Any:
        fn: Callable[..., Any] = getattr(self.stub, method)
        batcher = self.batcher if method in REPORT_FIELDS else None

        def send() -> Any:
            if batcher is not None:
                return batcher.call(method, request, timeout or self.call_timeout)
            return fn(request, timeout=timeout or self.call_timeout, metadata=self.metadata)

        def again(exc: grpc.RpcError) -> bool:
            code = code_of(exc)
            if code not in retry_on:
                return False
            if code in RETRYABLE:
                self.outage.failed(exc, method)
            return True

        try:
            response = retrying(send, Retry(retry_for, stopped=self.stopped), again)
        except grpc.RpcError as exc:
            raise RpcFailed(method, code_of(exc), details_of(exc)) from exc
        self.outage.succeeded()
        return response
