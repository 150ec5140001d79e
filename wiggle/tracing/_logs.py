"""Trace ids on log lines, for what runs outside any span (the server's handlers).

A handler binds the ids of what it handles (`bind`): a start's instance span, a report's step
attempt span, or a function that finds them, called only if a line is actually logged (a report
names its task, not its instance, and finding the rest costs a read). The log record factory
that tracing installs (`wiggle.tracing._sdk.log_trace_ids`) appends the bound ids to the lines of
Wiggle's loggers when no OpenTelemetry span is current. Pure: importing this imports nothing of
OpenTelemetry, and while tracing is off nothing binds and no factory reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar

__all__ = ["Ids", "bind", "bound", "unbind"]

#: (trace id, span id), 32 and 16 lowercase hex digits.
Ids = tuple[str, str]

_BOUND: ContextVar[Ids | Callable[[], Ids | None] | None] = ContextVar(
    "wiggle_log_trace_ids", default=None
)


def bind(ids: Ids | Callable[[], Ids | None] | None) -> None:
    """The ids this thread's (this context's) log lines carry from now on, until `unbind`.
    A callable is called at the first line logged, and its answer kept."""
    _BOUND.set(ids)


def unbind() -> None:
    """No ids any more (a handler's wrapper, when the handler is done)."""
    if _BOUND.get() is not None:
        _BOUND.set(None)


def bound() -> Ids | None:
    """The bound ids, finding them first if a function was bound (an error finding them: none,
    and no second try)."""
    value = _BOUND.get()
    if value is None or isinstance(value, tuple):
        return value
    try:
        found = value()
    except Exception:  # a line must be logged even when its ids cannot be found
        found = None
    _BOUND.set(found)
    return found
