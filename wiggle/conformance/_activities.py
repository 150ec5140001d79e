"""The conformance activities of spec/conformance/ACTIVITIES.md, for the Python worker SDK.

Each is a pure function of the context and of `step()` (node id, attempt), so a worker in any
other language computes the same bytes. Every invocation first appends a line to the trace file
(`WIGGLE_CONFORMANCE_TRACE`): the runner counts executions from it, including those of a
LOCAL_ASYNC run that dies before it is reported.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from wiggle.worker import NonRetryable, Registry, step

__all__ = ["ACTIVITY_NAMES", "TRACE_ENV", "build_registry"]

TRACE_ENV = "WIGGLE_CONFORMANCE_TRACE"

_trace_lock = threading.Lock()
_trace_fds: dict[str, int] = {}  # path -> descriptor, opened once per process


def _trace(activity: str, path: str | None = None) -> None:
    path = path or os.environ.get(TRACE_ENV)
    if not path:
        return
    info = step()
    line = orjson.dumps(
        {
            "instance_id": info.instance_id,
            "flow": info.flow,
            "node_id": info.node_id,
            "activity": activity,
            "attempt": info.attempt,
        }
    )
    with _trace_lock:
        fd = _trace_fds.get(path)
        if fd is None:
            fd = _trace_fds[path] = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        # One unbuffered write on an O_APPEND file: a SIGKILL right after leaves the whole line.
        os.write(fd, line + b"\n")


def _obj(ctx: Any, activity: str) -> dict[str, Any]:
    if not isinstance(ctx, dict):
        raise NonRetryable(f"conformance: {activity} needs an object")
    return ctx


def _pred_obj(ctx: Any) -> dict[str, Any]:
    return ctx if isinstance(ctx, dict) else {}


_INT64 = range(-(2**63), 2**63)


def _int(value: Any) -> int:
    """A count: an integer within 64 bits, else 0 (JSON true is not a number here, though
    Python thinks bool is an int; 4.0 is not an integer)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value in _INT64
    return value if ok else 0


def _append(ctx: Any, activity: str) -> dict[str, Any]:
    c = _obj(ctx, activity)
    trail = c.get("trail")
    return {**c, "trail": [*(trail if isinstance(trail, list) else []), step().node_id]}


def noop(ctx: Any) -> Any:
    return ctx


def append(ctx: Any) -> Any:
    return _append(ctx, "append")


def inc(ctx: Any) -> Any:
    c = _obj(ctx, "inc")
    return {**c, "n": _int(c.get("n")) + 1}


def inc_m(ctx: Any) -> Any:
    c = _obj(ctx, "inc_m")
    return {**c, "m": _int(c.get("m")) + 1}


def zero(ctx: Any) -> Any:
    return {**_obj(ctx, "zero"), "n": 0}


def double(ctx: Any) -> Any:
    if isinstance(ctx, bool) or not isinstance(ctx, int | float):
        raise NonRetryable("conformance: double needs a number")
    return 2 * ctx


def grow(ctx: Any) -> Any:
    c = _obj(ctx, "grow")
    return {**c, "blob": "x" * max(0, _int(c.get("grow_bytes", 0)))}


def nest(ctx: Any) -> Any:
    depth = _int(ctx.get("nest_depth", 1)) if isinstance(ctx, dict) else 1
    for _ in range(depth):
        ctx = [ctx]
    return ctx


def fail_times(ctx: Any) -> Any:
    c = _obj(ctx, "fail_times")
    info = step()
    plan = c.get("fail_times")
    k = _int(plan.get(info.node_id)) if isinstance(plan, dict) else 0
    if info.attempt <= k:
        raise RuntimeError(f"planned failure {info.node_id} attempt {info.attempt}")
    return _append(c, "fail_times")


def fail_always(ctx: Any) -> Any:
    info = step()
    raise RuntimeError(f"failure {info.node_id} attempt {info.attempt}")


def fail_fatal(ctx: Any) -> Any:
    raise NonRetryable(f"fatal {step().node_id}")


def hold(ctx: Any) -> Any:
    c = _obj(ctx, "hold")
    # Until a deadline, in slices, so the SDK's heartbeat thread and a cancellation check get
    # their turn. Counting slices instead would add each slice's oversleep: on a loaded machine
    # a 3 s hold took over 4 s, which the lease cases' margins are not made for.
    until = time.monotonic() + _int(c.get("hold_ms", 300)) / 1000
    while (left_s := until - time.monotonic()) > 0:
        time.sleep(min(left_s, 0.05))
    return _append(c, "hold")


def is_true(ctx: Any) -> bool:
    return _pred_obj(ctx).get(step().node_id) is True


def lt(ctx: Any) -> bool:
    c = _pred_obj(ctx)
    return _int(c.get("n")) < _int(c.get("limit"))


def lt_m(ctx: Any) -> bool:
    c = _pred_obj(ctx)
    return _int(c.get("m")) < _int(c.get("limit_m"))


def is_even(ctx: Any) -> bool:
    return isinstance(ctx, int) and not isinstance(ctx, bool) and ctx % 2 == 0


def _combine_input(ctx: Any, activity: str) -> tuple[dict[str, Any], Any]:
    c = _obj(ctx, activity)
    return _obj(c.get("context"), activity), c.get("results")


def merge_results(ctx: Any) -> Any:
    context, results = _combine_input(ctx, "merge_results")
    return {**context, "results": results}


def sum_results(ctx: Any) -> Any:
    context, results = _combine_input(ctx, "sum_results")
    values: list[Any] = []  # neither a list nor an object: no terms
    if isinstance(results, dict):
        values = list(results.values())
    elif isinstance(results, list):
        values = results
    total: int | float = 0
    for r in values:
        if isinstance(r, int | float) and not isinstance(r, bool):
            total += r
        elif isinstance(r, dict):
            total += _int(r.get("n"))
    return {**context, "sum": total}


def apply_signal(ctx: Any) -> Any:
    c = _obj(ctx, "apply_signal")
    context = _obj(c.get("context"), "apply_signal")
    signals = context.get("signals")
    return {
        **context,
        "signals": [*(signals if isinstance(signals, list) else []), c.get("signal")],
    }


_ALL: tuple[Callable[[Any], Any], ...] = (
    noop,
    append,
    inc,
    inc_m,
    zero,
    double,
    grow,
    nest,
    fail_times,
    fail_always,
    fail_fatal,
    hold,
    is_true,
    lt,
    lt_m,
    is_even,
    merge_results,
    sum_results,
    apply_signal,
)


ACTIVITY_NAMES = frozenset(fn.__name__ for fn in _ALL)


#: What a step passes before it begins: called with the step's first act (writing its trace
#: line), which it runs, holds or refuses (see build_registry).
Gate = Callable[[Callable[[], None]], None]


def _traced(fn: Callable[[Any], Any], path: str | None, gate: Gate | None) -> Callable[[Any], Any]:
    name = fn.__name__

    def run(ctx: Any) -> Any:
        if gate is None:
            _trace(name, path)
        else:
            gate(lambda: _trace(name, path))
        return fn(ctx)

    run.__name__ = name
    run.__qualname__ = name
    return run


def build_registry(trace_path: str | None = None, gate: Gate | None = None) -> Registry:
    """A fresh registry holding every conformance activity, each writing the trace first (to
    `trace_path`, else to the file WIGGLE_CONFORMANCE_TRACE names). With `gate`, a step's
    trace line is written through it: the runner's in-process worker (_embedded_worker) holds
    a frozen worker's steps there and refuses a killed one's, as the OS holds a stopped
    process's and ends a dead one's, and writes the line under the lock its kill takes, so
    that the line of a step that began is written before the kill returns, as a killed
    process's last write is."""
    registry = Registry()
    for fn in _ALL:
        registry.register(_traced(fn, trace_path, gate), fn.__name__)
    return registry
