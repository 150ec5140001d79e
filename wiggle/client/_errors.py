"""Status codes and the `wiggle-error-code` metadata back into wiggle.errors classes."""

from __future__ import annotations

from typing import Any

import grpc
import orjson

from wiggle import errors
from wiggle.wire import DETAIL_KEY, ERROR_CODE_KEY, code_of, error_class_for

__all__ = ["from_rpc_error"]


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
    elif reason == "REPORT_OUT_OF_ORDER":
        return errors.Conflict(message)  # its seq numbers travel in the message only
    else:
        cls = error_class_for(reason, None)
        return None if cls is None else cls(message)
    exc.args = (message,)  # keep the server's wording, which may carry more detail
    return exc


def from_rpc_error(exc: grpc.RpcError, address: str) -> errors.WiggleError:
    """The Wiggle error a failed call stands for."""
    code = code_of(exc) or grpc.StatusCode.UNKNOWN
    details_fn = getattr(exc, "details", None)
    message = (details_fn() if callable(details_fn) else None) or str(code)
    reason, detail = _trailers(exc)
    built = _build(reason, detail, message)
    if built is not None:
        return built
    if code is grpc.StatusCode.UNAVAILABLE:
        return errors.Unavailable(f"cannot reach the Wiggle server at {address}: {message}")
    cls = error_class_for("", code)
    if cls is not None:
        return cls(message)
    return errors.WiggleError(f"server error {code.name}: {message}")
