"""Why a token is where it is: one plain sentence per live token, from plain facts.

`explain` is pure: `describe` gathers the facts (the token row, its graph node, the workers
recently seen, a few events) and this module only words them. docs/operations.md lists every
sentence; `wiggle status`, the console and `Token.explanation` on the wire all show these words.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from wiggle.graph import Await, ForEach, Fork, Join, Node, Predicate, Task

from ..model.types import TokenState, WorkerSeen

__all__ = ["Facts", "explain", "format_duration", "format_instant"]


@dataclass(frozen=True)
class Facts:
    """What one sentence needs to know about a token."""

    state: TokenState
    node: Node | None  # None: the node is not in the graph (never for a healthy instance)
    attempt: int = 1
    queue: str = ""
    activity: str = ""
    lease_owner: str = ""
    lease_expires_at_ms: int = 0
    wake_at_ms: int = 0
    wait_kind: str = ""
    ready_at_ms: int = 0
    branch: str = ""
    child_instance_id: str = ""
    child_flow: str = ""
    since_ms: int = 0  # when the token reached its node, as far as the event log tells (0: ?)
    last_error: str = ""  # the message of the step's last failed attempt
    branches_total: int = 0  # a fork / for_each token: its branches
    branches_pending: tuple[str, ...] = ()  # ... and those not finished yet


def format_instant(ms: int) -> str:
    """`2025-03-01T12:00:05Z`: UTC, to the second."""
    at = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(ms: int) -> str:
    """`850 ms`, `42 s`, `5 min 3 s`, `2 h 5 min`, `3 d 4 h`."""
    ms = max(ms, 0)
    if ms < 1000:
        return f"{ms} ms"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    m, s = divmod(s, 60)
    if m < 60:
        return f"{m} min {s} s" if s else f"{m} min"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(h, 24)
    return f"{d} d {h} h" if h else f"{d} d"


def _when(ms: int, _now_ms: int) -> str:
    """An instant as the sentences show it. Absolute on purpose: the same instance described
    twice reads the same (a caller adds "3 s ago" if it wants to)."""
    return format_instant(ms)


def _quote(items: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _max_attempts(node: Node | None) -> int | None:
    if isinstance(node, Task | Predicate | Join):
        return node.retry.max_attempts
    if isinstance(node, Await) and node.apply is not None:
        return node.apply.retry.max_attempts
    return None


def _attempt(f: Facts) -> str:
    most = _max_attempts(f.node)
    return f"attempt {f.attempt}" + (f" of {most}" if most is not None else "")


def _ready(f: Facts, workers: Sequence[WorkerSeen], now_ms: int, window_ms: int) -> str:
    q, a = f.queue, f.activity
    head = f"READY on queue `{q}` since {_when(f.ready_at_ms, now_ms)}"
    on_queue = [w for w in workers if q in w.queues]
    live = [w for w in on_queue if now_ms - w.last_poll_ms <= window_ms]
    if not live:
        text = f"{head}: no worker has polled `{q}` in the last {format_duration(window_ms)}"
        if on_queue:
            last = max(on_queue, key=lambda w: w.last_poll_ms)
            text += f" (last: {last.worker_id} at {format_instant(last.last_poll_ms)})"
        return text
    able = [w for w in live if not w.activities or a in w.activities]
    if not able:
        names = _quote(sorted(w.worker_id for w in live))
        return f"{head}: the workers polling `{q}` do not have activity `{a}` ({names})"
    n = len(able)
    return f"{head}: waiting for a free slot on the {n} worker{'s' if n > 1 else ''} polling `{q}`"


def _leased(f: Facts, now_ms: int) -> str:
    text = (
        f"leased by worker {f.lease_owner or '?'} until {_when(f.lease_expires_at_ms, now_ms)}: "
        f"running `{f.activity}` ({_attempt(f)})"
    )
    if f.lease_expires_at_ms and f.lease_expires_at_ms < now_ms:
        text += "; the lease has expired and the step will be handed out again"
    return text


def _waiting(f: Facts, now_ms: int) -> str:
    if f.wait_kind == "retry":
        error = f", last error: {f.last_error}" if f.last_error else ""
        return f"retrying after backoff until {_when(f.wake_at_ms, now_ms)} ({_attempt(f)}{error})"
    if f.wait_kind == "sleep":
        return f"sleeping until {_when(f.wake_at_ms, now_ms)}"
    if f.wait_kind == "child":
        flow = f" (flow `{f.child_flow}`)" if f.child_flow else ""
        return f"waiting for child instance {f.child_instance_id}{flow} to finish"
    if f.wait_kind == "held":
        return (
            f"for_each item {f.branch} is held back by max_concurrency: it starts when an "
            "earlier item finishes"
        )
    return f"waiting ({f.wait_kind or 'no reason recorded'})"


def _awaiting(f: Facts, now_ms: int) -> str:
    node = f.node
    if not isinstance(node, Await):
        return "waiting for a signal"
    since = f" since {_when(f.since_ms, now_ms)}" if f.since_ms else ""
    text = f"waiting for signal `{node.signal}`{since}"
    if node.timeout_ms is None or not f.wake_at_ms:
        return text + " (no deadline)"
    then = (
        "then the flow goes on without it"
        if node.on_timeout == node.next
        else "then the on_timeout steps"
    )
    return text + f" (deadline {_when(f.wake_at_ms, now_ms)}, {then})"


def _joined(f: Facts) -> str:
    node = f.node
    pending = len(f.branches_pending)
    if isinstance(node, ForEach):
        return f"waiting for {pending} of {f.branches_total} `for_each` items"
    if isinstance(node, Fork):
        names = _quote(list(f.branches_pending))
        return f"waiting for {pending} of {f.branches_total} parallel branches ({names})"
    where = f" at `{node.id}`" if node is not None else ""
    return f"branch {f.branch} finished{where}; waiting for the other branches to join"


def explain(f: Facts, workers: Sequence[WorkerSeen], now_ms: int, window_ms: int) -> str:
    """One sentence saying what the token waits for ("" for a DONE token).

    `workers` are those the server has recorded; a worker counts as polling when its last poll
    is at most `window_ms` old.
    """
    if f.state is TokenState.READY:
        return _ready(f, workers, now_ms, window_ms)
    if f.state is TokenState.LEASED:
        return _leased(f, now_ms)
    if f.state is TokenState.WAITING:
        return _waiting(f, now_ms)
    if f.state is TokenState.AWAITING:
        return _awaiting(f, now_ms)
    if f.state is TokenState.JOINED:
        return _joined(f)
    return ""
