"""Driving tokens through the graph: everything the server does between worker steps.

`place` moves a token onto a node and keeps going through the nodes the server handles itself
(condition and set, evaluated on the spot; fork, foreach, join arrival, sleep, await, subflow,
end) until the token parks: READY for a
worker, WAITING on a timer or a child, AWAITING a signal, JOINED at a barrier, or DONE. The
end of an instance (and what it means for its children and its parent) is `finish_instance`.

The token tree (below `fork`): a forking token parks JOINED at its fork (or foreach) with
`pending` set to its number of branches; each branch is a child token carrying the parent's id
and its branch key (branch name, list index or object key) and a copy of the context. A branch
that reaches the join parks JOINED there with its final context; a filtered branch ends DONE
with no result. Each arrival decrements the parent; the last one turns the parent into the
combine step at the join, with `{"context": <context at the fork>, "results": ...}`. Nesting
needs nothing more: a branch token may itself fork. for_each with `max_concurrency` writes the
elements over the limit as held (WAITING, wait_kind "held") and releases the next one, in order,
as each element finishes. Parking a token READY is `_park.make_ready`; a failed attempt is
`_failures.apply_failure`.

All of it runs under the root instance's lock, inside the caller's transaction.
"""

from __future__ import annotations

import datetime
from typing import Any

from sqlalchemy import select, update

from wiggle.expressions import (
    EXPRESSION_ERROR_TYPE,
    EvaluationError,
    evaluate_node,
    evaluate_value,
    failure_message,
)
from wiggle.graph import (
    Await,
    Condition,
    ForEach,
    Fork,
    Join,
    Node,
    Predicate,
    SetValues,
    Sleep,
    Subflow,
    Task,
)
from wiggle.traversal import Handback, successor

from ..model.data import MISSING, parse_instant_ms, resolve_pointer, type_name
from ..model.types import InstanceStatus, Json, TokenState, resolve_mode
from ..store import schema as s
from . import human as _human
from . import search as _search
from .park import load_instance, make_ready
from .tx import TOKEN_COLUMNS, Inst, Tok, Tx, loads, new_id

__all__ = [
    "arrive",
    "branch_filtered",
    "deliver",
    "evaluate",
    "fail_token_instance",
    "finish_instance",
    "foreach",
    "fork",
    "place",
    "start_child",
    "take_signal",
]


def place(tx: Tx, inst: Inst, tok: Tok) -> None:
    """Enter `tok.node_id` and drive on until the token parks (see the module docstring)."""
    graph = inst.graph
    while inst.status is InstanceStatus.RUNNING:
        node: Node = graph.nodes[tok.node_id]
        tx.entered(tok)
        if isinstance(node, Task | Predicate):
            tok.attempt = 1
            make_ready(tx, tok, node.queue, node.timeout_ms, activity=node.activity)
            return
        if isinstance(node, Condition | SetValues):
            if not evaluate(tx, inst, tok, node):
                return
            continue
        if isinstance(node, Join):
            tok.state = TokenState.JOINED
            tx.save(tok)
            arrive(tx, inst, tok.parent_token_id, tok)
            return
        if isinstance(node, Fork):
            fork(tx, inst, tok, node)
            return
        if isinstance(node, ForEach):
            foreach(tx, inst, tok, node)
            return
        if isinstance(node, Sleep):
            wake = _wake_at(tx, inst, tok, node)
            if wake is None:
                return  # the instance failed on a bad instant
            if wake <= tx.now:
                tok.node_id = node.next
                continue
            tok.state = TokenState.WAITING
            tok.wait_kind = "sleep"
            tok.wake_at_ms = wake
            tx.wakeups.timer_armed = True
            tx.trace_note(inst.id, "wait_began", node.id, tok.attempt)
            tx.save(tok)
            return
        if isinstance(node, Await):
            signal = take_signal(tx, inst.id, node.signal, tok)
            if signal is MISSING:
                tok.state = TokenState.AWAITING
                tok.wait_kind = None
                tok.wake_at_ms = None if node.timeout_ms is None else tx.now + node.timeout_ms
                if node.human is not None:
                    # A human step: its task is written in this transition (machine/human.py).
                    try:
                        _human.open_task(tx, inst, tok, node)
                    except _human.TaskValueError as exc:
                        message = f"step {node.id!r} failed: human task {node.id!r}: {exc}"
                        fail_token_instance(tx, inst, tok, message, retryable=False)
                        return
                tx.wakeups.timer_armed |= tok.wake_at_ms is not None
                tx.trace_note(inst.id, "wait_began", node.id, tok.attempt)
                tx.save(tok)
                return
            if deliver(tx, inst, tok, node, signal):
                return
            continue
        if isinstance(node, Subflow):
            start_child(tx, inst, tok, node)
            return
        # end: only a top-level token gets here (a branch always ends at its join)
        tok.state = TokenState.DONE
        tx.save(tok)
        finish_instance(tx, inst, InstanceStatus.COMPLETED, "", tok.context)
        return


def evaluate(tx: Tx, inst: Inst, tok: Tok, node: Condition | SetValues) -> bool:
    """The server evaluates an expression node inside the transition that reached it and
    records the value in the node's event. True: the token moved on (drive on); False: it
    ended (filtered, a loop's limit, or the expression failed the instance)."""
    value = evaluate_node(node, tok.context, {"id": inst.id, "flow": inst.flow})
    if value.error is not None:
        message = failure_message(value.error)
        tx.event(
            inst.id,
            "step_failed",
            node.id,
            1,
            message=message,
            error_type=EXPRESSION_ERROR_TYPE,
            non_retryable=True,
            **tok.where,
        )
        fail_token_instance(tx, inst, tok, f"step {node.id!r} failed: {message}", retryable=False)
        return False
    if isinstance(node, Condition):
        tx.event(inst.id, "step_completed", node.id, 1, predicate=value.predicate, **tok.where)
        move = successor(
            inst.graph, node.id, predicate_value=value.predicate, loop_counts=tok.loop_counts
        )
    else:
        tx.event(inst.id, "step_completed", node.id, 1, values=value.values, **tok.where)
        _search.note_context_change(tx, inst, tok.context, value.context)
        tok.context = value.context
        move = successor(inst.graph, node.id, loop_counts=tok.loop_counts)
    tok.loop_counts = dict(move.loop_counts)
    if move.handback is Handback.FILTERED:
        branch_filtered(tx, inst, tok)
        return False
    if move.handback is Handback.LOOP_LIMIT:
        assert isinstance(node, Condition)
        fail_token_instance(
            tx,
            inst,
            tok,
            f"loop {node.id!r} exceeded max_iterations {node.max_iterations}",
            retryable=False,
        )
        return False
    assert move.next_node is not None
    tok.node_id = move.next_node
    return True


def deliver(tx: Tx, inst: Inst, tok: Tok, node: Await, payload: Json) -> bool:
    """A signal reached an await. True: the token parked (apply step) or failed the instance
    (a human step's `into` met a context that is not an object); False: drive on."""
    if node.apply is not None:
        tok.attempt = 1
        make_ready(
            tx,
            tok,
            node.apply.queue,
            node.apply.timeout_ms,
            {"context": tok.context, "signal": payload},
            activity=node.apply.activity,
        )
        return True
    try:
        context = node.signalled(tok.context, payload)
    except ValueError as exc:
        fail_token_instance(tx, inst, tok, f"step {node.id!r} failed: {exc}")
        return True
    if context is not tok.context:  # a human step's answer went `into` the context
        _search.note_context_change(tx, inst, tok.context, context)
        tok.context = context
    tok.node_id = node.next
    tok.wake_at_ms = None
    return False


def take_signal(tx: Tx, instance_id: str, name: str, tok: Tok) -> Json:
    """Consume the oldest buffered signal `name` (FIFO per name), or MISSING."""
    sig = s.signals
    row = tx.conn.execute(
        select(sig.c.seq, sig.c.payload)
        .where(sig.c.instance_id == instance_id, sig.c.name == name, sig.c.consumed_at_ms.is_(None))
        .order_by(sig.c.seq)
        .limit(1)
    ).first()
    if row is None:
        return MISSING
    tx.conn.execute(
        update(sig)
        .where(sig.c.instance_id == instance_id, sig.c.seq == row.seq)
        .values(consumed_at_ms=tx.now, token_id=tok.id)
    )
    tx.event(instance_id, "signal_consumed", tok.node_id, 0, signal=name, seq=row.seq)
    return loads(row.payload)


def _wake_at(tx: Tx, inst: Inst, tok: Tok, node: Sleep) -> int | None:
    if node.duration_ms is not None:
        return tx.now + node.duration_ms
    if node.until_expression is not None:
        return _wake_at_expression(tx, inst, tok, node)
    assert node.until is not None
    value = resolve_pointer(tok.context, node.until)
    if value is MISSING:
        problem = "is missing from the context"
    else:
        when = parse_instant_ms(value)
        if when is not None:
            return when
        problem = f"is {value!r}, not an RFC 3339 instant"
    fail_token_instance(tx, inst, tok, f"sleep {node.id!r}: {node.until} {problem}")
    return None


def sleep_instant_ms(node: Sleep, ctx: Any, instance: dict[str, Any]) -> int | str:
    """The instant an expression sleep wakes at (epoch ms), or why it has none."""
    assert node.until_expression is not None
    try:
        value = evaluate_value(node.until_expression, ctx, instance)
    except EvaluationError as exc:
        return failure_message(exc)
    when = parse_instant_ms(value) if isinstance(value, str) else None
    if when is None:
        return f"expression {node.until_expression!r} gave {value!r}, not an RFC 3339 instant"
    return when


def _wake_at_expression(tx: Tx, inst: Inst, tok: Tok, node: Sleep) -> int | None:
    when = sleep_instant_ms(node, tok.context, {"id": inst.id, "flow": inst.flow})
    if isinstance(when, int):
        # The instant the expression gave, in history: a reset or a migration that keeps the
        # timer never evaluates it again, and a reader sees why the sleep ends when it does.
        tx.event(inst.id, "timer_set", node.id, tok.attempt, until=_rfc3339_ms(when), **tok.where)
        return when
    fail_token_instance(tx, inst, tok, f"sleep {node.id!r}: {when}", retryable=False)
    return None


def _rfc3339_ms(ms: int) -> str:
    """`2025-03-01T12:00:05.250Z`: UTC, to the millisecond the timer keeps."""
    at = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def start_child(tx: Tx, inst: Inst, tok: Tok, node: Subflow) -> None:
    d = s.definitions
    q = select(d.c.version)
    if node.version is not None:
        q = q.where(d.c.version == node.version, d.c.name == node.flow)
    else:
        q = q.where(d.c.name == node.flow).order_by(d.c.seq.desc()).limit(1)
    version = tx.conn.execute(q).scalar()
    if version is None:
        pinned = f" at version {node.version}" if node.version else ""
        fail_token_instance(
            tx, inst, tok, f"subflow {node.id!r}: flow {node.flow!r}{pinned} is not registered"
        )
        return
    graph = tx.graph_of(tx.conn, version)
    child = Inst(
        id=new_id(),
        root_id=inst.root_id,
        flow=graph.name,
        version=version,
        status=InstanceStatus.RUNNING,
        mode=resolve_mode(graph, tx.default_mode),
        graph=graph,
        parent_instance_id=inst.id,
        parent_token_id=tok.id,
        started_by=inst.started_by,  # the tree's starter: four eyes holds across subflows
        traceparent=inst.traceparent,  # the tree is one trace (docs/observability.md)
        tracestate=inst.tracestate,
    )
    tx.instances[child.id] = child
    tx.conn.execute(s.instances.insert().values(child.row(tok.context, tx.now)))
    tok.state = TokenState.WAITING
    tok.wait_kind = "child"
    tok.child_instance_id = child.id
    tok.wake_at_ms = None
    tx.save(tok)
    tx.event(inst.id, "child_started", node.id, 0, child_instance_id=child.id, version=version)
    tx.event(child.id, "instance_started", "", 0, parent_instance_id=inst.id)
    _search.write_initial(tx, child, tok.context)
    root = tx.new_token(child, graph.start, tok.context)
    place(tx, child, root)


def fail_token_instance(
    tx: Tx, inst: Inst, tok: Tok, reason: str, *, retryable: bool = True
) -> None:
    """`tok` failed for good and takes its instance with it. The token is marked as the one
    that failed (`retry` runs its step again), or as beyond repair (`retryable` False)."""
    tok.state = TokenState.DONE
    tok.halted = s.HALTED_FAILED if retryable else s.HALTED_FINAL
    tx.save(tok)
    finish_instance(tx, inst, InstanceStatus.FAILED, reason, tok.context)


def finish_instance(
    tx: Tx,
    inst: Inst,
    status: InstanceStatus,
    reason: str,
    context: Json = MISSING,
    *,
    propagate: bool = True,
) -> None:
    """End an instance: every token DONE (timers and leases die with them), children
    cancelled, and the parent told (a completed child resumes it, any other end fails it)."""
    inst.status = status
    tx.end_instance(inst, reason, context, set_context=context is not MISSING)
    tx.event(inst.id, f"instance_{status.value.lower()}", "", 0, reason=reason)
    tx.wakeups.finished.append(inst.id)  # waiters on the instance wake after the commit
    # Tokens keep their lease: a worker reporting on one learns the instance status, while a
    # report with any other lease is still refused as stale.
    # Each live token keeps the state it halted in, so a retry brings back exactly these.
    held = False
    for tok in tx.tokens.values():
        if tok.instance_id == inst.id:
            held = True
            if tok.state is not TokenState.DONE:
                tok.halted = tok.state.value
                tok.state = TokenState.DONE
                tx.save(tok)
    # Without forks an instance has one token: when this transaction holds it, no other is
    # left to end (and without subflows there is no child): the common end costs no query.
    if inst.graph.branches or not held:
        tx.flush()
        t = s.tokens
        tx.conn.execute(
            update(t)
            .where(t.c.instance_id == inst.id, t.c.state != TokenState.DONE.value)
            .values(halted=t.c.state, state=TokenState.DONE.value)
        )
    children: list[str] = []
    if inst.graph.subflows:
        i = s.instances
        children = list(
            tx.conn.execute(
                select(i.c.id).where(
                    i.c.parent_instance_id == inst.id, i.c.status == InstanceStatus.RUNNING.value
                )
            )
            .scalars()
            .all()
        )
    for child_id in children:
        child = load_instance(tx, child_id)
        if child is not None and child.status is InstanceStatus.RUNNING:
            finish_instance(
                tx,
                child,
                InstanceStatus.CANCELLED,
                f"cancelled: parent instance {inst.id} is {status.value}",
                propagate=False,
            )
    if propagate and inst.parent_instance_id is not None:
        _tell_parent(tx, inst, status, reason, context)


def _tell_parent(tx: Tx, child: Inst, status: InstanceStatus, reason: str, context: Json) -> None:
    parent = load_instance(tx, child.parent_instance_id or "")
    if parent is None or parent.status is not InstanceStatus.RUNNING:
        return
    tok = tx.load_token(child.parent_token_id or "")
    if (
        tok is None
        or tok.state is not TokenState.WAITING
        or tok.wait_kind != "child"
        or tok.child_instance_id != child.id
    ):
        return
    node = parent.graph.nodes[tok.node_id]
    assert isinstance(node, Subflow)
    tx.event(
        parent.id, "child_finished", node.id, 0, child_instance_id=child.id, status=status.value
    )
    if status is InstanceStatus.COMPLETED:
        if context is not MISSING:
            _search.note_context_change(tx, parent, tok.context, context)
            tok.context = context
        tok.wait_kind = None
        tok.node_id = node.next
        place(tx, parent, tok)
        return
    fail_token_instance(
        tx,
        parent,
        tok,
        f"subflow {node.id!r}: child instance {child.id} ({child.flow}) is "
        f"{status.value}: {reason}",
    )


# -- the token tree: fork, for_each, join ------------------------------------------------------


def fork(tx: Tx, inst: Inst, tok: Tok, node: Fork) -> None:
    tok.state = TokenState.JOINED
    tok.pending = len(node.branches)
    tok.aux = {"shape": "branches"}
    tx.save(tok)
    children = [
        tx.new_token(
            inst,
            first,
            tok.context,  # contexts are never mutated in place: sharing is an isolated copy
            parent_token_id=tok.id,
            branch=name,
            seq=i,
            loop_counts=dict(tok.loop_counts),
        )
        for i, (name, first) in enumerate(node.branches.items())
    ]
    for child in children:
        place(tx, inst, child)


def foreach(tx: Tx, inst: Inst, tok: Tok, node: ForEach) -> None:
    items = resolve_pointer(tok.context, node.items)
    if isinstance(items, list):
        entries: list[tuple[str, Json]] = [(str(i), v) for i, v in enumerate(items)]
        shape = "list"
    elif isinstance(items, dict):
        entries = list(items.items())
        shape = "object"
    else:
        what = "is missing from the context" if items is MISSING else f"is {type_name(items)}"
        fail_token_instance(
            tx, inst, tok, f"for_each {node.id!r}: {node.items} {what}, not a list or an object"
        )
        return
    tok.aux = {"shape": shape}
    if not entries:
        _combine(tx, inst, tok, [] if shape == "list" else {})
        return
    tok.state = TokenState.JOINED
    tok.pending = len(entries)
    tx.save(tok)
    limit = node.max_concurrency or len(entries)
    children = [
        tx.new_token(
            inst,
            node.body,
            value,
            parent_token_id=tok.id,
            branch=key,
            seq=i,
            loop_counts=dict(tok.loop_counts),
        )
        for i, (key, value) in enumerate(entries)
    ]
    # Held elements are written before any element runs: an element that finishes at once
    # releases the next held one, which must already be a row.
    for child in children[limit:]:
        child.wait_kind = "held"
    if len(children) > limit:
        tx.flush()
    for child in children[:limit]:
        place(tx, inst, child)


def arrive(tx: Tx, inst: Inst, parent_id: str | None, _branch: Tok | None) -> None:
    """A branch finished (arrived at the join, or filtered): count it, maybe combine."""
    assert parent_id is not None, "a top-level token cannot arrive at a join"
    parent = tx.load_token(parent_id)
    assert parent is not None
    parent.pending -= 1
    tx.save(parent)
    if parent.pending > 0:
        _release_held(tx, inst, parent)
        return
    tx.flush()
    t = s.tokens
    rows = tx.conn.execute(
        select(t.c.id, t.c.branch, t.c.context)
        .where(t.c.parent_token_id == parent.id, t.c.state == TokenState.JOINED.value)
        .order_by(t.c.seq)
    ).all()
    shape = (parent.aux or {}).get("shape", "branches")
    results: Json
    if shape == "list":
        results = [loads(r.context) for r in rows]
    else:
        results = {r.branch: loads(r.context) for r in rows}
    tx.conn.execute(
        update(t)
        .where(t.c.parent_token_id == parent.id, t.c.state == TokenState.JOINED.value)
        .values(state=TokenState.DONE.value)
    )
    for r in rows:
        known = tx.tokens.get(r.id)
        if known is not None:
            known.state = TokenState.DONE
    _combine(tx, inst, parent, results)


def _release_held(tx: Tx, inst: Inst, parent: Tok) -> None:
    """for_each with max_concurrency: start the next held element, if any."""
    tx.flush()
    t = s.tokens
    row = tx.conn.execute(
        select(*TOKEN_COLUMNS)
        .where(
            t.c.parent_token_id == parent.id,
            t.c.state == TokenState.WAITING.value,
            t.c.wait_kind == "held",
        )
        .order_by(t.c.seq)
        .limit(1)
    ).first()
    if row is not None:
        child = tx.adopt(row)
        child.wait_kind = None
        place(tx, inst, child)


def _combine(tx: Tx, inst: Inst, parent: Tok, results: Json) -> None:
    """Every branch is in: the fork token becomes the combine step at the join."""
    node = inst.graph.nodes[parent.node_id]
    assert isinstance(node, Fork | ForEach)
    join = inst.graph.nodes[node.join]
    assert isinstance(join, Join)
    parent.node_id = join.id
    parent.attempt = 1
    parent.pending = 0
    combine_input = {"context": parent.context, "results": results}
    tx.entered(parent, combine_input)
    make_ready(tx, parent, join.queue, join.timeout_ms, combine_input, activity=join.activity)


def branch_filtered(tx: Tx, inst: Inst, tok: Tok) -> None:
    """A filter was false: the instance completes, or inside a branch that branch ends."""
    tok.state = TokenState.DONE
    tx.save(tok)
    if tok.parent_token_id is None:
        finish_instance(tx, inst, InstanceStatus.COMPLETED, "filtered", tok.context)
    else:
        tx.event(inst.id, "branch_filtered", tok.node_id, tok.attempt, branch=tok.branch)
        arrive(tx, inst, tok.parent_token_id, tok)
