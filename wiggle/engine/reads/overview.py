"""Read-only aggregates for operators: queues with work on them, where a version's instances
stand, and failures grouped alike (the console's queues, heat map and incidents pages); and for
a benchmark's check, how given instances ended and how often each of their steps completed.

Each is one or two grouped queries over indexes the engine already keeps; none writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, select

from wiggle.overlay import failed_node

from ..model.types import InstanceStatus, TokenState
from ..store import schema as s

__all__ = [
    "Ending",
    "Incident",
    "IncidentPage",
    "NodeCount",
    "QueueStats",
    "incidents",
    "node_counts",
    "queue_stats",
    "run_endings",
]

_i = s.instances
_t = s.tokens

#: Instance ids per IN list: well under every driver's parameter limit.
_CHUNK = 500
#: How many of the newest failed instances are read to name examples of each incident.
_EXAMPLES_FROM = 2000
_EXAMPLES_PER_INCIDENT = 5


@dataclass(frozen=True)
class QueueStats:
    """One queue with work on it."""

    queue: str
    ready: int
    oldest_ready_at_ms: int  # 0: nothing READY
    leased: int


@dataclass(frozen=True)
class NodeCount:
    """How many instances of a version stand at a node in a token state (or FAILED there)."""

    node_id: str
    state: str
    instances: int


@dataclass(frozen=True)
class Incident:
    """FAILED instances of one flow that failed at the same node for the same reason."""

    flow: str
    node_id: str
    reason: str
    instances: int
    first_failed_at_ms: int
    last_failed_at_ms: int
    instance_ids: tuple[str, ...]


@dataclass(frozen=True)
class IncidentPage:
    incidents: list[Incident]
    failed: int  # FAILED instances matching in all


def queue_stats(conn: Connection) -> list[QueueStats]:
    """Every queue holding READY or leased tasks, by name (the READY and lease indexes)."""
    ready = conn.execute(
        select(_t.c.queue, func.count(), func.min(_t.c.ready_at_ms))
        .where(_t.c.state == TokenState.READY.value)
        .group_by(_t.c.queue)
    ).all()
    leased = conn.execute(
        select(_t.c.queue, func.count())
        .where(_t.c.state == TokenState.LEASED.value)
        .group_by(_t.c.queue)
    ).all()
    found: dict[str, list[int]] = {}
    for queue, n, oldest in ready:
        found[queue or ""] = [int(n), int(oldest or 0), 0]
    for queue, n in leased:
        found.setdefault(queue or "", [0, 0, 0])[2] = int(n)
    return [QueueStats(q, *found[q]) for q in sorted(found)]


def node_counts(conn: Connection, version: str) -> list[NodeCount]:
    """Where the instances of `version` stand: RUNNING ones per node and live token state (each
    instance once per pair), FAILED ones at the node their reason names."""
    running = conn.execute(
        select(_t.c.node_id, _t.c.state, func.count(func.distinct(_t.c.instance_id)))
        .select_from(_t.join(_i, _i.c.id == _t.c.instance_id))
        .where(
            _i.c.version == version,
            _i.c.status == InstanceStatus.RUNNING.value,
            _t.c.state != TokenState.DONE.value,
        )
        .group_by(_t.c.node_id, _t.c.state)
    ).all()
    out = [NodeCount(node, state, int(n)) for node, state, n in running]
    failed: dict[str, int] = {}
    for reason, n in conn.execute(
        select(_i.c.reason, func.count())
        .where(_i.c.version == version, _i.c.status == InstanceStatus.FAILED.value)
        .group_by(_i.c.reason)
    ):
        node = failed_node(reason or "")
        if node:
            failed[node] = failed.get(node, 0) + int(n)
    out += [NodeCount(node, "FAILED", n) for node, n in failed.items()]
    return sorted(out, key=lambda c: (c.node_id, c.state))


def incidents(
    conn: Connection, flow: str, version: str, failed_after_ms: int, limit: int
) -> IncidentPage:
    """FAILED instances grouped by flow and reason (so by node too: the reason names it), the
    largest group first, each with its newest few instance ids."""
    where: list[Any] = [_i.c.status == InstanceStatus.FAILED.value]
    if flow:
        where.append(_i.c.flow == flow)
    if version:
        where.append(_i.c.version == version)
    if failed_after_ms:
        where.append(_i.c.updated_at_ms >= failed_after_ms)
    n = func.count().label("n")
    groups = conn.execute(
        select(
            _i.c.flow, _i.c.reason, n, func.min(_i.c.updated_at_ms), func.max(_i.c.updated_at_ms)
        )
        .where(*where)
        .group_by(_i.c.flow, _i.c.reason)
        .order_by(n.desc(), func.max(_i.c.updated_at_ms).desc())
        .limit(max(1, limit))
    ).all()
    examples: dict[tuple[str, str], list[str]] = {}
    for instance_id, f, reason in conn.execute(
        select(_i.c.id, _i.c.flow, _i.c.reason)
        .where(*where)
        .order_by(_i.c.created_at_ms.desc(), _i.c.id.desc())
        .limit(_EXAMPLES_FROM)
    ):
        ids = examples.setdefault((f, reason), [])
        if len(ids) < _EXAMPLES_PER_INCIDENT:
            ids.append(instance_id)
    total = conn.execute(select(func.count()).select_from(_i).where(*where)).scalar_one()
    found = [
        Incident(
            flow=f,
            node_id=failed_node(reason or ""),
            reason=reason or "",
            instances=int(count),
            first_failed_at_ms=int(first),
            last_failed_at_ms=int(last),
            instance_ids=tuple(examples.get((f, reason), ())),
        )
        for f, reason, count, first, last in groups
    ]
    return IncidentPage(found, int(total))


#: An instance as a check sees it: id, status, context (JSON text), reason.
Ending = tuple[str, str, str, str]


def run_endings(
    conn: Connection, instance_ids: Sequence[str]
) -> tuple[list[Ending], dict[tuple[str, str], int]]:
    """The given instances (those found), and the number of step_completed events of each
    (instance, node) they have."""
    e = s.events
    found: list[Ending] = []
    steps: dict[tuple[str, str], int] = {}
    for start in range(0, len(instance_ids), _CHUNK):
        chunk = list(instance_ids[start : start + _CHUNK])
        rows = conn.execute(
            select(_i.c.id, _i.c.status, _i.c.context, _i.c.reason).where(_i.c.id.in_(chunk))
        )
        found += [(r.id, r.status, r.context, r.reason) for r in rows]
        counts = conn.execute(
            select(e.c.instance_id, e.c.node_id, func.count())
            .where(e.c.kind == "step_completed", e.c.instance_id.in_(chunk))
            .group_by(e.c.instance_id, e.c.node_id)
        )
        for instance_id, node_id, n in counts:
            steps[(instance_id, node_id)] = int(n)
    return found, steps
