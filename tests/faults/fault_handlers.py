"""The fault suite's activities: each execution appends one line to the side-effect ledger.

The ledger (a file named by WIGGLE_FAULT_LEDGER, opened O_APPEND so lines from many processes
never interleave) is what the checker counts re-executions from: a line is written when a step
starts, before any work, so a process killed inside a step still leaves its trace, exactly like
a real side effect (a charge, an email) would have happened.

Line: `INSTANCE NODE#N ATTEMPT PID MODE`, where N is the loop counter the context carries (so
each iteration of a loop is its own key). A context may ask a step to take its time:
`{"sleep": 0.05}` for every step, or `{"pause": {"s2": 1.0}}` for one.
"""

from __future__ import annotations

import os
import time
from typing import Any

from wiggle.worker import NonRetryable, activity, step

_fd = os.open(os.environ["WIGGLE_FAULT_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def _record(ctx: Any) -> None:
    info = step()
    n = ctx.get("n", 0) if isinstance(ctx, dict) else 0
    line = f"{info.instance_id} {info.node_id}#{n} {info.attempt} {os.getpid()} "
    os.write(_fd, f"{line}{info.execution_mode.value}\n".encode())


def _work(ctx: Any) -> None:
    if not isinstance(ctx, dict):
        return
    pause = ctx.get("pause", {}).get(step().node_id) or ctx.get("sleep", 0)
    if pause:
        time.sleep(pause)


def _task(ctx: Any) -> Any:
    _record(ctx)
    _work(ctx)
    by = dict(ctx.get("by", {}))
    by[step().node_id] = os.getpid()  # who ran it: a stale result accepted would show here
    return {**ctx, "by": by}


for _name in ("s0", "s1", "s2", "s3", "s4", "s5", "after", "on_time", "late"):
    activity(_name)(_task)


@activity
def inc(ctx: Any) -> Any:
    _record(ctx)
    _work(ctx)
    return {**ctx, "n": ctx.get("n", 0) + 1}


@activity
def more(ctx: Any) -> bool:
    _record(ctx)
    return bool(ctx["n"] < ctx["target"])


@activity
def big(ctx: Any) -> Any:
    _record(ctx)
    return {**ctx, "pad": "x" * int(ctx["big"])}


@activity
def deep(ctx: Any) -> Any:
    _record(ctx)
    value: Any = 0
    for _ in range(int(ctx["deep"])):
        value = [value]
    return {**ctx, "deep": value}


@activity
def take(ctx: Any) -> Any:
    _record(ctx)
    return {**ctx["context"], "signal": ctx["signal"]}


@activity
def refuse(ctx: Any) -> Any:
    _record(ctx)
    raise NonRetryable("refused on purpose")


@activity
def gate(ctx: Any) -> Any:
    """Closed (fails for good) until the file named by WIGGLE_FAULT_FIXED exists: the
    "handler fixed" of a bulk retry scenario."""
    _record(ctx)
    if not os.path.exists(os.environ.get("WIGGLE_FAULT_FIXED", "/nonexistent")):
        raise NonRetryable("the gate is closed")
    return ctx
