"""Wiggle errors on the wire: one status code per branch of the tree, plus a stable reason.

The reason is the proto `ErrorCode` name in the trailing metadata key `wiggle-error-code`. The
typed fields an error carries (a FlowError's diagnostics, an instance id, a lease's task id) ride
along as JSON in `wiggle-error-detail-bin`, so the client can rebuild the same class with the
same fields. Anything that is not a WiggleError is a bug: it is logged here and the caller gets
INTERNAL with a short message, never a traceback.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from typing import Any

import grpc
import orjson

from wiggle import errors
from wiggle.wire import DETAIL_KEY, ERROR_CODE_KEY, status_for

__all__ = ["DETAIL_KEY", "ERROR_CODE_KEY", "abort_with", "status_for"]

_log = logging.getLogger("wiggle.server")

#: The most of an error message sent, in UTF-8 bytes: it travels percent-encoded (up to three
#: characters a byte) in the `grpc-message` header, and a client refuses headers over 16 KB.
MAX_MESSAGE_BYTES = 2000
#: The most of one typed field sent in the detail trailer, and of the trailer as a whole.
MAX_FIELD_CHARS = 200
MAX_DETAIL_BYTES = 4096


def _detail(exc: errors.WiggleError) -> bytes:
    """The error's typed fields as JSON, bounded: headers are capped (16 KB by default), and a
    trailer over the cap makes the client see a broken stream instead of the error."""
    if isinstance(exc, errors.FlowError):
        diagnostics = [asdict(d) for d in exc.diagnostics]
        encoded = orjson.dumps({"diagnostics": diagnostics})
        while len(encoded) > MAX_DETAIL_BYTES and diagnostics:
            diagnostics = diagnostics[: len(diagnostics) // 2]  # the first ones matter most
            encoded = orjson.dumps({"diagnostics": diagnostics})
        return encoded if diagnostics else b""
    fields = ("name", "version", "instance_id", "status", "task_id")
    detail: dict[str, Any] = {
        f: v[:MAX_FIELD_CHARS] for f in fields if isinstance(v := getattr(exc, f, None), str)
    }
    if isinstance(exc, errors.SignalNotAwaited):
        # The names a flow's awaits take: a handful, each bounded; at most 50 of them.
        detail["awaited"] = [name[:MAX_FIELD_CHARS] for name in list(exc.awaited)[:50]]
    if not detail:
        return b""
    encoded = orjson.dumps(detail)
    return encoded if len(encoded) <= MAX_DETAIL_BYTES else b""


def _message(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    encoded = text.encode()
    if len(encoded) <= MAX_MESSAGE_BYTES:
        return text
    cut = encoded[:MAX_MESSAGE_BYTES].decode(errors="ignore")
    return f"{cut}... ({len(text)} characters in all)"


def status_name(exc: BaseException) -> str:
    """The name of the status code `abort_with` ends a call with for `exc`."""
    if isinstance(exc, errors.WiggleError):
        return str(status_for(exc)[0].name)
    return "INTERNAL"


def abort_with(context: grpc.ServicerContext, exc: BaseException) -> None:
    """End the call with the status `exc` maps to; always raises."""
    if isinstance(exc, errors.WiggleError):
        code, reason = status_for(exc)
        metadata: list[tuple[str, str | bytes]] = [(ERROR_CODE_KEY, reason)]
        detail = _detail(exc)
        if detail:
            metadata.append((DETAIL_KEY, detail))
        context.set_trailing_metadata(tuple(metadata))
        context.abort(code, _message(exc))
    _log.error("unexpected error in a request", exc_info=exc)
    context.abort(
        grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__}); see the server log"
    )
