"""Bearer-token authentication as a server interceptor.

Every call must carry `authorization: Bearer <token>` metadata, except the standard health
check, which load balancers and orchestrators probe without credentials.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc

from wiggle.server._errors import ERROR_CODE_KEY

__all__ = ["TokenAuth", "is_loopback"]

_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/",)


def is_loopback(address: str) -> bool:
    """Whether a `host:port` listen address only accepts connections from this machine."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name (or 0.0.0.0 / [::] binds every interface): assume reachable


def _deny(context: grpc.ServicerContext, message: str) -> None:
    context.set_trailing_metadata(((ERROR_CODE_KEY, "UNAUTHENTICATED"),))
    context.abort(grpc.StatusCode.UNAUTHENTICATED, message)


def _denying_handler(
    handler: grpc.RpcMethodHandler[Any, Any], message: str
) -> grpc.RpcMethodHandler[Any, Any]:
    """A handler of the same shape as `handler` that refuses the call."""

    def unary(request: Any, context: grpc.ServicerContext) -> Any:
        _deny(context, message)

    kwargs: dict[str, Any] = {
        "request_deserializer": handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(unary, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(unary, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(unary, **kwargs)
    return grpc.unary_unary_rpc_method_handler(unary, **kwargs)


if TYPE_CHECKING:
    _Interceptor = grpc.ServerInterceptor[Any, Any]
else:  # generic only in the type stubs
    _Interceptor = grpc.ServerInterceptor


class TokenAuth(_Interceptor):
    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_EXEMPT_PREFIXES):
            return handler
        presented = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                presented = value if isinstance(value, str) else value.decode(errors="replace")
                break
        if not presented:
            return _denying_handler(handler, "missing bearer token (authorization metadata)")
        # Constant-time comparison: the token is a shared secret.
        if not hmac.compare_digest(presented.encode(), self._expected):
            return _denying_handler(handler, "wrong bearer token")
        return handler
