"""Driving tokens through the graph: everything the server does between worker steps.

`place` moves a token onto a node and keeps going through the nodes the server handles itself
(fork, foreach, join arrival, sleep, await, subflow, end) until the token parks: READY for a
worker, WAITING on a timer or a child, AWAITING a signal, JOINED at a barrier, or DONE. The
token tree of fork / for_each / join lives in `_forks`; the end of an instance (and what it
means for its children and its parent) in `finish_instance` here.

All of it runs under the root instance's lock, inside the caller's transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from wiggle.graph import (
    Await,
    ExecutionMode,
    ForEach,
    Fork,
    Join,
    Node,
    Predicate,
    Sleep,
    Subflow,
    Task,
)

from . import _forks, _search
from . import _schema as s
from ._data import MISSING, parse_instant_ms, resolve_pointer
from ._tx import Inst, Tok, Tx, dumps, loads, new_id
from ._types import InstanceStatus, Json, StepFailure, TokenState, resolve_mode

__all__ = [
    "apply_failure",
    "finish_instance",
    "load_instance",
    "make_ready",
    "place",
    "ready_again",
    "retry_of",
    "start_child",
]

_INSTANCE_COLUMNS = [c for c in s.instances.c]


def load_instance(tx: Tx, instance_id: str) -> Inst | None:
    if instance_id in tx.instances:
        return tx.instances[instance_id]
    row = tx.conn.execute(select(*_INSTANCE_COLUMNS).where(s.instances.c.id == instance_id)).first()
    return None if row is None else inst_from_row(tx, row._mapping)


def inst_from_row(tx: Tx, m: Any) -> Inst:
    inst = Inst(
        id=m["id"],
        root_id=m["root_id"],
        flow=m["flow"],
        version=m["version"],
        status=InstanceStatus(m["status"]),
        mode=ExecutionMode(m["mode"]),
        graph=tx.graph_of(tx.conn, m["version"]),
        parent_instance_id=m["parent_instance_id"],
        parent_token_id=m["parent_token_id"],
    )
    tx.instances[inst.id] = inst
    return inst


def make_ready(
    tx: Tx,
    tok: Tok,
    queue: str,
    timeout_ms: int,
    input: Json = MISSING,
    *,
    activity: str | None,
) -> None:
    tok.state = TokenState.READY
    tok.queue = queue
    tok.activity = activity
    tok.timeout_ms = timeout_ms
    tok.ready_at_ms = tx.now
    tok.wake_at_ms = None
    tok.wait_kind = None
    tok.lease = None
    tok.lease_owner = None
    tok.lease_expires_at_ms = None
    tok.has_input = input is not MISSING
    tok.input = input if tok.has_input else None
    tx.save(tok)
    tx.wakeups.task_ready(queue)


def ready_again(tx: Tx, tok: Tok) -> None:
    """The same step READY once more (a retry, a handback): queue, timeout and input kept."""
    queue = tok.queue or "default"
    make_ready(
        tx,
        tok,
        queue,
        tok.timeout_ms,
        tok.input if tok.has_input else MISSING,
        activity=tok.activity,
    )


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
        if isinstance(node, Join):
            tok.state = TokenState.JOINED
            tx.save(tok)
            _forks.arrive(tx, inst, tok.parent_token_id, tok)
            return
        if isinstance(node, Fork):
            _forks.fork(tx, inst, tok, node)
            return
        if isinstance(node, ForEach):
            _forks.foreach(tx, inst, tok, node)
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
            tx.save(tok)
            return
        if isinstance(node, Await):
            signal = take_signal(tx, inst.id, node.signal, tok)
            if signal is MISSING:
                tok.state = TokenState.AWAITING
                tok.wait_kind = None
                tok.wake_at_ms = None if node.timeout_ms is None else tx.now + node.timeout_ms
                tx.wakeups.timer_armed |= tok.wake_at_ms is not None
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


def deliver(tx: Tx, inst: Inst, tok: Tok, node: Await, payload: Json) -> bool:
    """A signal reached an await. True: the token parked (apply step); False: drive on."""
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
    )
    tx.instances[child.id] = child
    tx.conn.execute(
        s.instances.insert().values(
            id=child.id,
            root_id=child.root_id,
            flow=child.flow,
            version=version,
            status=child.status.value,
            context=dumps(tok.context),
            input=dumps(tok.context),
            reason="",
            mode=child.mode.value,
            parent_instance_id=inst.id,
            parent_token_id=tok.id,
            created_at_ms=tx.now,
            updated_at_ms=tx.now,
        )
    )
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


def retry_of(node: Node) -> Any:
    if isinstance(node, Await):
        assert node.apply is not None
        return node.apply.retry
    assert isinstance(node, Task | Predicate | Join)
    return node.retry


def apply_failure(tx: Tx, inst: Inst, tok: Tok, failure: StepFailure) -> None:
    """A failed attempt of the step at `tok.node_id`: retry after the backoff, or fail."""
    node = inst.graph.nodes[tok.node_id]
    retry = retry_of(node)
    tx.event(
        inst.id,
        "step_failed",
        tok.node_id,
        tok.attempt,
        message=failure.message,
        error_type=failure.error_type,
        non_retryable=failure.non_retryable,
        **({"branch": tok.branch} if tok.branch is not None else {}),
    )
    tok.lease_owner = None
    if failure.non_retryable or tok.attempt >= retry.max_attempts:
        tries = "" if failure.non_retryable else f" after {tok.attempt} attempt(s)"
        fail_token_instance(tx, inst, tok, f"step {tok.node_id!r} failed{tries}: {failure.message}")
        return
    delay = retry.delay_ms(tok.attempt)
    tok.attempt += 1
    tx.event(inst.id, "step_retried", tok.node_id, tok.attempt, delay_ms=delay)
    if delay <= 0:
        ready_again(tx, tok)
        return
    tok.state = TokenState.WAITING
    tok.wait_kind = "retry"
    tok.wake_at_ms = tx.now + delay
    tx.wakeups.timer_armed = True
    tok.lease = None
    tok.lease_expires_at_ms = None
    tx.save(tok)


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
