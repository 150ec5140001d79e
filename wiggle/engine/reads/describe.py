"""`describe`: one instance with its tokens, their contexts and why each one waits.

A read-only transaction. The instance row holds the start input while the instance runs and the
final context once it ended; the context a person wants to see while it runs is that of the
token that moved last, which the event log tells: every move logs an event at the node the token
left or reached, so the live token whose node (or a node leading to it) has the newest event is
the one that moved last. The same events date each token's arrival and name a retry's last error.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, select

from wiggle.errors import InstanceNotFound
from wiggle.graph import Await, ExecutionMode, Graph, Join, successors
from wiggle.tracecontext import derive

from ..machine.search import search_of
from ..machine.tx import TOKEN_COLUMNS, loads
from ..model.types import EventView, InstanceStatus, InstanceView, TokenState, TokenView, WorkerSeen
from ..store import schema as s
from ..store.inputs import recorded_inputs
from .explain import Facts, explain
from .workers import POLLING_WINDOW_MS, recent_workers

__all__ = ["RECENT_EVENTS", "describe", "predecessors", "step_inputs", "updated_at"]

_i = s.instances
_t = s.tokens
_e = s.events

#: How many of the newest events are read to date tokens and find the one that moved last.
RECENT_EVENTS = 500

_PREDECESSORS: dict[str, Mapping[str, frozenset[str]]] = {}


def predecessors(graph: Graph) -> Mapping[str, frozenset[str]]:
    """Node id -> the nodes with an edge to it (cached per version: versions are immutable)."""
    got = _PREDECESSORS.get(graph.version)
    if got is None:
        into: dict[str, set[str]] = {}
        for node in graph:
            for nxt in successors(node):
                into.setdefault(nxt, set()).add(node.id)
        got = _PREDECESSORS[graph.version] = {k: frozenset(v) for k, v in into.items()}
    return got


def _event(row: Any) -> EventView:
    return EventView(
        int(row.seq), int(row.at_ms), row.kind, row.node_id, row.attempt, loads(row.detail)
    )


def _read_events(
    conn: Connection, instance_id: str, everything: bool, recent: int = RECENT_EVENTS
) -> list[EventView]:
    shown = (_e.c.seq, _e.c.at_ms, _e.c.kind, _e.c.node_id, _e.c.attempt, _e.c.detail)
    q = select(*shown).where(_e.c.instance_id == instance_id)
    if everything:
        return [_event(r) for r in conn.execute(q.order_by(_e.c.seq))]
    rows = conn.execute(q.order_by(_e.c.seq.desc()).limit(recent)).all()
    return [_event(r) for r in reversed(rows)]


def _with_signal_payloads(
    conn: Connection, instance_id: str, events: list[EventView]
) -> list[EventView]:
    """Each `signal_received` event with the payload it brought (from the signals table), so a
    timeline can show it. Read only; events without a signal are returned as they are."""
    wanted = {
        ev.detail["seq"]: i
        for i, ev in enumerate(events)
        if ev.kind == "signal_received" and isinstance(ev.detail, dict) and "seq" in ev.detail
    }
    if not wanted:
        return events
    sig = s.signals
    rows = conn.execute(
        select(sig.c.seq, sig.c.payload).where(
            sig.c.instance_id == instance_id, sig.c.seq.in_(list(wanted))
        )
    )
    out = list(events)
    for seq, payload in rows:
        i = wanted[int(seq)]
        out[i] = replace(out[i], detail={**out[i].detail, "payload": loads(payload)})
    return out


def step_inputs(conn: Connection, instance_id: str) -> dict[str, Any]:
    """What each top-level node of the instance received the last time a token entered it
    (store/inputs.py): node id -> {"context", "at_ms"[, "input"]}."""
    out: dict[str, Any] = {}
    for node, recorded in sorted(recorded_inputs(conn, instance_id).items()):
        entry: dict[str, Any] = {"context": recorded.context, "at_ms": recorded.at_ms}
        if recorded.has_input:
            entry["input"] = recorded.input
        out[node] = entry
    return out


def updated_at(row_updated_ms: int, events: Sequence[EventView]) -> int:
    """When the instance last changed: its newest event (every move logs one), or the row's own
    time (written at the start and at the end) when that is newer."""
    return max(row_updated_ms, max((ev.at_ms for ev in events), default=0))


class _Clues:
    """What the event log says about the tokens: newest event per node, last error per node."""

    def __init__(self, events: Sequence[EventView]) -> None:
        self.newest: dict[str, EventView] = {}
        self.error: dict[str, str] = {}
        for ev in events:
            if ev.node_id:
                self.newest[ev.node_id] = ev
            if ev.kind == "step_failed" and isinstance(ev.detail, dict):
                self.error[ev.node_id] = str(ev.detail.get("message", ""))

    def arrival(self, node_id: str, preds: frozenset[str]) -> EventView | None:
        """The newest event at the node or at one leading to it."""
        found = [self.newest[n] for n in (node_id, *preds) if n in self.newest]
        return max(found, key=lambda e: e.seq) if found else None


def describe(
    conn: Connection,
    instance_id: str,
    include_events: bool,
    graph_of: Callable[[Connection, str], Graph],
    now_sql: Any,
) -> InstanceView:
    row = conn.execute(select(*_i.c, now_sql).where(_i.c.id == instance_id)).first()
    if row is None:
        raise InstanceNotFound(instance_id)
    m = row._mapping
    now = int(m["now_ms"])
    status = InstanceStatus(m["status"])
    graph = graph_of(conn, m["version"])
    preds = predecessors(graph)
    rows = conn.execute(
        select(*TOKEN_COLUMNS).where(_t.c.instance_id == instance_id).order_by(_t.c.seq, _t.c.id)
    ).all()
    live = [r for r in rows if r.state != TokenState.DONE.value]
    # The recent events explain the live tokens; with none live (an instance that ended with
    # every token done, what WaitInstance mostly reads) only the newest one counts (updated_at).
    events = _read_events(conn, instance_id, include_events, RECENT_EVENTS if live else 1)
    if include_events:
        events = _with_signal_payloads(conn, instance_id, events)
    clues = _Clues(events)
    children = conn.execute(
        select(_i.c.id, _i.c.flow)
        .where(_i.c.parent_instance_id == instance_id)
        .order_by(_i.c.created_at_ms, _i.c.id)
    ).all()
    child_flow = {c.id: c.flow for c in children}
    workers: list[WorkerSeen] = []
    if any(r.state == TokenState.READY.value for r in live):
        workers = recent_workers(conn)
    kids: dict[str, list[Any]] = {}
    for r in rows:
        if r.parent_token_id:
            kids.setdefault(r.parent_token_id, []).append(r)

    tokens: list[TokenView] = []
    moved_last: tuple[int, int, Any] | None = None  # (event seq, not a fork parent, row)
    for r in rows:
        node = graph.nodes.get(r.node_id)
        arrived = clues.arrival(r.node_id, preds.get(r.node_id, frozenset()))
        text = ""
        if r.state != TokenState.DONE.value:
            since = arrived.at_ms if arrived is not None else int(m["created_at_ms"])
            if isinstance(node, Await) and node.timeout_ms is not None and r.wake_at_ms:
                since = int(r.wake_at_ms) - node.timeout_ms  # exact: the deadline was set then
            branches = kids.get(r.id, [])
            facts = Facts(
                state=TokenState(r.state),
                node=node,
                attempt=r.attempt,
                queue=r.queue or "",
                activity=r.activity or "",
                lease_owner=r.lease_owner or "",
                lease_expires_at_ms=int(r.lease_expires_at_ms or 0),
                wake_at_ms=int(r.wake_at_ms or 0),
                wait_kind=r.wait_kind or "",
                ready_at_ms=int(r.ready_at_ms or 0),
                branch=r.branch or "",
                child_instance_id=r.child_instance_id or "",
                child_flow=child_flow.get(r.child_instance_id or "", ""),
                since_ms=since,
                last_error=clues.error.get(r.node_id, "") if r.wait_kind == "retry" else "",
                branches_total=len(branches),
                branches_pending=tuple(
                    b.branch or ""
                    for b in branches
                    if b.state != TokenState.JOINED.value and b.state != TokenState.DONE.value
                ),
            )
            text = explain(facts, workers, now, POLLING_WINDOW_MS)
            parked_parent = r.state == TokenState.JOINED.value and not isinstance(node, Join)
            rank = (arrived.seq if arrived is not None else -1, 0 if parked_parent else 1, r)
            if moved_last is None or rank[:2] > moved_last[:2]:
                moved_last = rank
        tokens.append(
            TokenView(
                token_id=r.id,
                node_id=r.node_id,
                state=TokenState(r.state),
                attempt=r.attempt,
                lease_owner=r.lease_owner or "",
                lease_expires_at_ms=int(r.lease_expires_at_ms or 0),
                wake_at_ms=int(r.wake_at_ms or 0),
                branch=r.branch or "",
                parent_token_id=r.parent_token_id or "",
                context=loads(r.context),
                queue=r.queue or "",
                activity=r.activity or "",
                wait_kind=r.wait_kind or "",
                child_instance_id=r.child_instance_id or "",
                ready_at_ms=int(r.ready_at_ms or 0),
                explanation=text,
            )
        )

    running = status is InstanceStatus.RUNNING
    stored = loads(m["context"])
    context, current = stored, ""
    if running and moved_last is not None:
        context, current = loads(moved_last[2].context), moved_last[2].node_id
    return InstanceView(
        instance_id=m["id"],
        flow=m["flow"],
        version=m["version"],
        status=status,
        context=context,
        reason=m["reason"],
        execution_mode=ExecutionMode(m["mode"]),
        parent_instance_id=m["parent_instance_id"] or "",
        created_at_ms=int(m["created_at_ms"]),
        updated_at_ms=updated_at(int(m["updated_at_ms"]), events),
        tokens=tokens,
        events=events if include_events else [],
        input=loads(m["input"]) if m["input"] is not None else (stored if running else None),
        child_instance_ids=[c.id for c in children],
        current_node=current,
        search=search_of(conn, [m["id"]], {m["id"]: graph}).get(m["id"], {})
        if graph.search
        else {},
        step_inputs=step_inputs(conn, instance_id) if include_events else {},
        started_by=m["started_by"] or "",
        trace_id=derive(m["root_id"], m["traceparent"] or "").trace_id,
    )
