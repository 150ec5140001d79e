"""The server's services called in this process: the generated stub's shape with no socket.

An embedded node (wiggle.embedded) hands an `InProcessStub` to its own Worker and Client in
place of the stubs of a gRPC channel. A call runs the servicer's method on the caller's thread,
with the request message as it was built: no HTTP/2, no encoding of the message, no thread hop.
Everything else is the service's own: the request checks, the limits, the error mapping (an
error ends the call as `abort` would, with the status code and the trailing details a remote
caller gets, so the worker's retry rules and the client's errors are the same). What a remote
call has that these do not: the server's interceptors (authentication is for callers from
elsewhere; a caller in this process holds the engine already), unless the stub is given some
(`interceptors`: the conformance runner's recorder sees an embedded worker's calls so).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, cast

import grpc

__all__ = ["InProcessRpcError", "InProcessStub"]

Metadata = Sequence[tuple[str, str | bytes]]


class InProcessRpcError(grpc.RpcError):
    """A call the servicer ended with a status: what `grpc.RpcError` of a channel answers to
    (`code()`, `details()`, `trailing_metadata()`)."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing: Metadata = ()) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details
        self._trailing = tuple(trailing)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Any:
        return self._trailing

    def initial_metadata(self) -> Any:
        return ()


class _CallContext:
    """The part of `grpc.ServicerContext` the services use, for one call in this process."""

    def __init__(
        self,
        timeout: float | None,
        metadata: Metadata | None,
        alive: Callable[[], bool] | None = None,
    ) -> None:
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._alive = alive
        self._metadata = tuple(metadata or ())
        self._trailing: Metadata = ()
        self._code: grpc.StatusCode | None = None
        self._details = ""

    def is_active(self) -> bool:
        # The caller waits on this thread: it is there until the deadline passes (or, given
        # `alive`, until that says the caller is gone, as a dropped connection would).
        if self._alive is not None and not self._alive():
            return False
        return self._deadline is None or time.monotonic() < self._deadline

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def invocation_metadata(self) -> Metadata:
        return self._metadata

    def set_trailing_metadata(self, metadata: Metadata) -> None:
        self._trailing = tuple(metadata)

    def trailing_metadata(self) -> Metadata:
        return self._trailing

    def code(self) -> grpc.StatusCode | None:
        """The status the call was ended with (None: not ended with one yet)."""
        return self._code

    def details(self) -> str:
        return self._details

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details
        raise InProcessRpcError(code, details, self._trailing)

    def auth_context(self) -> dict[str, list[bytes]]:
        return {}

    def peer(self) -> str:
        return "in-process"


class InProcessStub:
    """`servicer`'s methods with a stub's signature, `Method(request, timeout=, metadata=)`.

    `counts` holds the calls made through it by method (what a channel's RPCs would be).
    `interceptors` (grpc.ServerInterceptor) wrap each method as a server applies them, the
    first outermost; they see the method as `/service/Method`. `alive`: asked by a call's
    `is_active()`; once it answers False the caller counts as gone (a long poll then ends and
    hands back what it claimed, as for a caller whose connection dropped)."""

    def __init__(
        self,
        servicer: Any,
        *,
        service: str = "",
        interceptors: Sequence[Any] = (),
        alive: Callable[[], bool] | None = None,
    ) -> None:
        self._servicer = servicer
        self._service = service
        self._interceptors = tuple(interceptors)
        self._alive = alive
        self._methods: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    @property
    def calls(self) -> int:
        """How many calls were made through it, of every method."""
        return sum(self.counts.values())

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        method = self._methods.get(name)
        if method is None:
            handler = getattr(self._servicer, name)
            method = self._bind(name, handler)
            self._methods[name] = method
        return method

    def _bind(self, name: str, handler: Callable[[Any, Any], Any]) -> Callable[..., Any]:
        if self._interceptors:
            handler = self._intercepted(name, handler)

        def call(
            request: Any,
            timeout: float | None = None,
            metadata: Metadata | None = None,
            **_: Any,  # wait_for_ready, compression, credentials: a channel's, not ours
        ) -> Any:
            with self._lock:
                self.counts[name] += 1
            return handler(request, _CallContext(timeout, metadata, self._alive))

        return call

    def _intercepted(
        self, name: str, handler: Callable[[Any, Any], Any]
    ) -> Callable[[Any, Any], Any]:
        """`handler` wrapped by the interceptors, built once per method: each interceptor is
        given the method's details and the next one as its continuation, as a server does."""
        details = _MethodDetails(f"/{self._service}/{name}")

        def innermost(_: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler[Any, Any] | None:
            return grpc.unary_unary_rpc_method_handler(handler)

        continuation: Callable[[grpc.HandlerCallDetails], Any] = innermost
        for interceptor in reversed(self._interceptors):

            def outer(
                d: grpc.HandlerCallDetails, i: Any = interceptor, c: Any = continuation
            ) -> Any:
                return i.intercept_service(c, d)

            continuation = outer
        wrapped = continuation(details)
        serve = None if wrapped is None else wrapped.unary_unary
        if serve is None:
            raise AttributeError(f"{name}: no unary handler after the interceptors")
        return cast("Callable[[Any, Any], Any]", serve)


class _MethodDetails(grpc.HandlerCallDetails):
    """What an interceptor learns of a call before it is served: its method (the metadata an
    interceptor would read are not passed in process)."""

    def __init__(self, method: str) -> None:
        self.method = method
        self.invocation_metadata: tuple[tuple[str, str | bytes], ...] = ()
