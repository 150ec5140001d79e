"""Handlers bound to the graph by activity name: `@activity`, `Registry`, and running one step.

A handler takes the context (any JSON value) and returns the next context; a predicate returns a
bool. `run_handler` turns whatever happens into an `Outcome` the worker can report, so no
exception from user code ever escapes into the worker's own loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

import orjson

from wiggle._limits import json_depth_over, too_deep
from wiggle.worker._context import StepInfo, _current
from wiggle.worker._errors import NonRetryable

__all__ = [
    "Activity",
    "Failure",
    "Outcome",
    "Registry",
    "activity",
    "default_registry",
    "run_handler",
]

_log = logging.getLogger("wiggle.worker")

F = TypeVar("F", bound=Callable[..., Any])

# Set on a decorated function so a loader can find the activities a module defines even when
# the module was imported before the loader looked at it.
_MARK = "__wiggle_activity__"


@dataclass(frozen=True)
class Activity:
    """One registered handler."""

    name: str
    fn: Callable[[Any], Any]
    # Decided once at registration: inspecting the function per step costs more than the step.
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))


class Registry:
    """Activity name -> handler. The module-level `@activity` fills `default_registry`."""

    def __init__(self, *, strict: bool = True) -> None:
        self._by_name: dict[str, Activity] = {}
        self._strict = strict

    def register(self, fn: F, name: str | None = None) -> F:
        """Register `fn` under `name` (default: its `__name__`); returns `fn` unchanged."""
        if not callable(fn):
            raise TypeError(f"an activity must be callable, got {fn!r}")
        name = name or fn.__name__
        if not name:
            raise ValueError("an activity needs a non-empty name")
        existing = self._by_name.get(name)
        # The same function defined again (a module re-imported, a file loaded twice) replaces
        # itself quietly; two different functions under one name is almost always a mistake.
        if existing is not None and _identity(existing.fn) != _identity(fn):
            if not self._strict:
                _log.info("activity %r now bound to %s", name, _describe(fn))
                self._by_name[name] = Activity(name, fn)
                return fn
            raise ValueError(
                f"activity {name!r} is already registered by {_describe(existing.fn)}; "
                f"{_describe(fn)} needs another name (@activity('other-name'))"
            )
        self._by_name[name] = Activity(name, fn)
        return fn

    @overload
    def activity(self, fn: F, /) -> F: ...
    @overload
    def activity(self, name: str | None = None, /) -> Callable[[F], F]: ...
    def activity(self, fn_or_name: Any = None, /) -> Any:
        """Decorator: `@registry.activity` or `@registry.activity("name")`."""
        return _decorate(self, fn_or_name)

    def get(self, name: str) -> Activity | None:
        return self._by_name.get(name)

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def update(self, other: Registry) -> None:
        """Add every activity of `other` (same conflict rule as `register`)."""
        for act in other:
            self.register(act.fn, act.name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Activity]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Registry({self.names()!r})"


def _identity(fn: Callable[..., Any]) -> tuple[str, str]:
    return (getattr(fn, "__module__", "") or "", getattr(fn, "__qualname__", repr(fn)))


def _describe(fn: Callable[..., Any]) -> str:
    module, qualname = _identity(fn)
    return f"{module}.{qualname}"


def _decorate(registry: Registry, fn_or_name: Any) -> Any:
    if callable(fn_or_name):
        return _register_marked(registry, fn_or_name, None)
    if fn_or_name is not None and not isinstance(fn_or_name, str):
        raise TypeError("use @activity or @activity('name')")

    def decorator(fn: F) -> F:
        return _register_marked(registry, fn, fn_or_name)

    return decorator


def _register_marked(registry: Registry, fn: F, name: str | None) -> F:
    registry.register(fn, name)
    # A builtin or a callable object without a __dict__ cannot carry the mark; the loader then
    # finds it through the capture registry only.
    with contextlib.suppress(AttributeError, TypeError):
        setattr(fn, _MARK, name or fn.__name__)
    for capture in _captures:
        capture.register(fn, name)
    return fn


#: The registry `@activity` fills and a Worker serves when given no other. It is lenient: several
#: handler modules loaded into one process may reuse a name, the last one wins (a loader's own
#: registry, and any Registry built by hand, refuse that instead).
default_registry = Registry(strict=False)

# Registries collecting what is being registered right now (the loader pushes one while it
# imports a handlers file). Import runs under the import lock, so a list is enough.
_captures: list[Registry] = []


@overload
def activity(fn: F, /) -> F: ...
@overload
def activity(name: str | None = None, /) -> Callable[[F], F]: ...
def activity(fn_or_name: Any = None, /) -> Any:
    """Register a handler in the default registry: `@activity` or `@activity("name")`."""
    return _decorate(default_registry, fn_or_name)


def marked_name(obj: object) -> str | None:
    """The activity name `@activity` gave `obj`, or None."""
    name = getattr(obj, _MARK, None)
    return name if isinstance(name, str) else None


@dataclass(frozen=True)
class Failure:
    """A failed step, as the wire's StepFailure."""

    message: str
    non_retryable: bool = False
    error_type: str = ""


@dataclass(frozen=True)
class Outcome:
    """What one step produced: exactly one of `context` (JSON bytes), `predicate`, `failure`.

    `value` keeps the decoded result of a task so the next local step needs no re-decoding.
    """

    context: bytes | None = None
    value: Any = None
    predicate: bool | None = None
    failure: Failure | None = None


def run_handler(
    act: Activity | None, name: str, ctx: Any, info: StepInfo, *, predicate: bool
) -> Outcome:
    """Run one step of `act` on `ctx`; every exception becomes a Failure."""
    if act is None:
        return Outcome(
            failure=Failure(
                f"no activity named {name!r} is registered on this worker",
                error_type="ActivityNotFound",
            )
        )
    token = _current.set(info)
    try:
        result = asyncio.run(act.fn(ctx)) if act.is_async else act.fn(ctx)
    except NonRetryable as exc:
        return Outcome(failure=Failure(exc.message, non_retryable=True, error_type="NonRetryable"))
    except Exception as exc:
        return Outcome(failure=_failure_of(exc, name, info))
    finally:
        _current.reset(token)
    if predicate:
        if isinstance(result, bool):
            return Outcome(predicate=result)
        return Outcome(
            failure=Failure(
                f"predicate {name!r} returned {type(result).__name__}, expected a bool",
                error_type="TypeError",
            )
        )
    try:
        encoded = orjson.dumps(result)
    except TypeError as exc:
        if json_depth_over(result):
            # orjson stops at 254 levels with a TypeError: past the depth limit anyway, and
            # failed as every over-deep result is (non-retryably), not as "not JSON" (retried).
            return Outcome(
                failure=Failure(
                    too_deep("the step's result"), non_retryable=True, error_type="DepthLimit"
                )
            )
        return Outcome(
            failure=Failure(
                f"activity {name!r} returned a value that is not JSON: {exc}",
                error_type="TypeError",
            )
        )
    return Outcome(context=encoded, value=result)


def _failure_of(exc: BaseException, name: str, info: StepInfo) -> Failure:
    # The message alone travels (it becomes the instance's reason when retries run out). A
    # failure the retry policy absorbs is routine, so the log gets one line per failed attempt;
    # the traceback, for whoever hunts a bug in the handler, only at DEBUG.
    failure = Failure(
        str(exc) or type(exc).__name__, non_retryable=False, error_type=type(exc).__name__
    )
    _log.warning(
        "step %s of instance %s failed (activity %r, attempt %d): %s: %s",
        info.node_id,
        info.instance_id,
        name,
        info.attempt,
        failure.error_type,
        failure.message,
    )
    _log.debug("traceback of activity %r, attempt %d", name, info.attempt, exc_info=exc)
    return failure
