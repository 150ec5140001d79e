"""Status codes and the `wiggle-error-code` metadata back into wiggle.errors classes.

One decoder for every error: the class is the row of `wire.ERROR_TABLE` the reason names (or,
without one, the status code's); its typed fields come from the detail trailer by the names of
the class's own constructor parameters (what `server._errors` sends is what the constructor
takes); the message is the server's own wording, which may carry more than the fields.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Sequence
from typing import Any

import grpc
import orjson

from wiggle import errors
from wiggle.wire import DETAIL_KEY, ERROR_CODE_KEY, code_of, details_of, error_class_for

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


def _field(value: Any, hint: Any) -> Any:
    """`value` when it has the type `hint` names (str, int, a sequence of str, or one of those
    or None), else that type's empty value: a detail from the wire is never trusted blindly."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    for option in options:
        if option is type(None) and value is None:
            return None
        if option in (str, int) and isinstance(value, option) and not isinstance(value, bool):
            return value
        if typing.get_origin(option) is Sequence and isinstance(value, list):
            return tuple(v for v in value if isinstance(v, str))
    if type(None) in options:
        return None
    first = options[0]
    return first() if first in (str, int) else ()


def _build(
    cls: type[errors.WiggleError], detail: dict[str, Any], message: str
) -> errors.WiggleError:
    if cls is errors.FlowError:
        diagnostics = [errors.Diagnostic(**d) for d in detail.get("diagnostics", [])]
        return errors.FlowError(diagnostics or [errors.Diagnostic("<flow>", 0, 0, message)])
    if cls.__init__ is Exception.__init__:  # a class of the message alone
        return cls(message)
    hints = typing.get_type_hints(cls.__init__)
    fields = {}
    for p in inspect.signature(cls).parameters.values():
        if p.name in hints:
            given = detail.get(p.name, None if p.default is p.empty else p.default)
            fields[p.name] = _field(given, hints[p.name])
    exc = cls(**fields)
    exc.args = (message,)  # keep the server's wording, which may carry more detail
    return exc


def from_rpc_error(exc: grpc.RpcError, address: str) -> errors.WiggleError:
    """The Wiggle error a failed call stands for."""
    code = code_of(exc) or grpc.StatusCode.UNKNOWN
    message = details_of(exc) or str(code)
    reason, detail = _trailers(exc)
    cls = error_class_for(reason, code)
    if cls is None:
        return errors.WiggleError(f"server error {code.name}: {message}")
    if cls is errors.Unavailable and not reason:  # no server answered: say which one
        message = f"cannot reach the Wiggle server at {address}: {message}"
    return _build(cls, detail, message)
