"""Status codes and the `wiggle-error-code` metadata back into wiggle.errors classes."""

from __future__ import annotations

from typing import Any

import grpc
import orjson

from wiggle import errors

__all__ = ["from_rpc_error"]

ERROR_CODE_KEY = "wiggle-error-code"
DETAIL_KEY = "wiggle-error-detail-bin"

_BY_STATUS: dict[grpc.StatusCode, type[errors.WiggleError]] = {
    grpc.StatusCode.NOT_FOUND: errors.NotFound,
    grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidRequest,
    grpc.StatusCode.FAILED_PRECONDITION: errors.Conflict,
    grpc.StatusCode.RESOURCE_EXHAUSTED: errors.PayloadTooLarge,
    grpc.StatusCode.UNAUTHENTICATED: errors.Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: errors.PermissionDenied,
    grpc.StatusCode.UNAVAILABLE: errors.Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: errors.Unavailable,
}


def _trailers(exc: grpc.RpcError) -> tuple[str, dict[str, Any]]:
    reason, detail = "", {}
    trailing = getattr(exc, "trailing_metadata", None)
    for key, value in (trailing() if callable(trailing) else None) or ():
        if key == ERROR_CODE_KEY:
            reason = value if isinstance(value, str) else value.decode()
        elif key == DETAIL_KEY:
            try:
                loaded = orjson.loads(value)
            except orjson.JSONDecodeError:
                continue
            if isinstance(loaded, dict):
                detail = loaded
    return reason, detail


def _build(reason: str, detail: dict[str, Any], message: str) -> errors.WiggleError | None:
    def text(key: str) -> str:
        value = detail.get(key)
        return value if isinstance(value, str) else ""

    exc: errors.WiggleError
    if reason == "FLOW_INVALID":
        diagnostics = [errors.Diagnostic(**d) for d in detail.get("diagnostics", [])]
        return errors.FlowError(diagnostics or [errors.Diagnostic("<flow>", 0, 0, message)])
    if reason == "DEFINITION_NOT_FOUND":
        exc = errors.DefinitionNotFound(text("name"), text("version") or None)
    elif reason == "INSTANCE_NOT_FOUND":
        exc = errors.InstanceNotFound(text("instance_id"))
    elif reason == "STALE_LEASE":
        exc = errors.StaleLease(text("task_id"))
    elif reason == "SIGNAL_NOT_AWAITED":
        awaited = detail.get("awaited")
        names = [a for a in awaited if isinstance(a, str)] if isinstance(awaited, list) else []
        exc = errors.SignalNotAwaited(text("instance_id"), text("name"), names)
    elif reason == "INSTANCE_NOT_RUNNING":
        exc = errors.InstanceNotRunning(text("instance_id"), text("status"))
    else:
        simple: dict[str, type[errors.WiggleError]] = {
            "INPUT_REJECTED": errors.InputRejected,
            "INVALID_REQUEST": errors.InvalidRequest,
            "WRONG_PATH": errors.WrongPath,
            "PAYLOAD_TOO_LARGE": errors.PayloadTooLarge,
            "UNAUTHENTICATED": errors.Unauthenticated,
            "PERMISSION_DENIED": errors.PermissionDenied,
            "REPORT_OUT_OF_ORDER": errors.Conflict,
            "UNAVAILABLE": errors.Unavailable,
        }
        cls = simple.get(reason)
        return None if cls is None else cls(message)
    exc.args = (message,)  # keep the server's wording, which may carry more detail
    return exc


def from_rpc_error(exc: grpc.RpcError, address: str) -> errors.WiggleError:
    """The Wiggle error a failed call stands for."""
    code_fn = getattr(exc, "code", None)
    details_fn = getattr(exc, "details", None)
    code = code_fn() if callable(code_fn) else grpc.StatusCode.UNKNOWN
    message = (details_fn() if callable(details_fn) else None) or str(code)
    reason, detail = _trailers(exc)
    built = _build(reason, detail, message)
    if built is not None:
        return built
    if code is grpc.StatusCode.UNAVAILABLE:
        return errors.Unavailable(f"cannot reach the Wiggle server at {address}: {message}")
    cls = _BY_STATUS.get(code)
    if cls is not None:
        return cls(message)
    name = code.name if isinstance(code, grpc.StatusCode) else str(code)
    return errors.WiggleError(f"server error {name}: {message}")
