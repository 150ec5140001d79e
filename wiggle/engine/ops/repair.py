"""Repair: retry a failed instance where it failed; reset an instance to a node it passed.

Both work on rows, not on a replayed history. When an instance ends, every token still live
keeps the state it was in (`halted`), and the token whose failure ended it is marked as such
(see `wiggle.engine.machine.drive.fail_token_instance`); a retry brings exactly those
tokens back, the failed step READY again with a fresh attempt count, everything else as it was
(completed branches keep their results, timers their deadlines). A reset ends every live token
and starts one at the chosen node with the input that node received the last time it
ran (`wiggle_step_inputs`).

Both run under the root instance's lock, like every transition. A token they end or bring back
loses its lease: a worker still running it has every later report refused (StaleLease), so
nothing it does after the repair is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select, update

from wiggle.errors import InvalidRequest, RepairRefused
from wiggle.graph import Await, End, Graph, Join, Predicate, Task

from ..machine.drive import finish_instance, place
from ..machine.park import load_instance, make_ready
from ..machine.search import refresh_search
from ..machine.tx import TOKEN_COLUMNS, Inst, Tok, Tx
from ..model.types import InstanceStatus, TokenState
from ..store import schema as s
from ..store.inputs import recorded_inputs
from .context import OpsContext
from .instances import lock_instance

__all__ = ["RepairResult", "reset", "reset_target_problem", "retry"]

_i = s.instances
_t = s.tokens


@dataclass(frozen=True)
class RepairResult:
    """What a retry or reset did: the instances it brought back to RUNNING (the one asked for
    first, then a parent or children brought back with it) and the nodes it restarted."""

    instance_id: str
    status: InstanceStatus
    instances: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)


def _label(inst: Inst) -> str:
    return f"instance {inst.id!r} ({inst.flow})"


# -- retry --------------------------------------------------------------------------------------


def retry(ctx: OpsContext, conn: Connection, instance_id: str, *, by: str = "") -> RepairResult:
    """Resume a FAILED instance where it failed (see the module docstring)."""
    tx, inst = lock_instance(ctx, conn, instance_id)
    if inst.status is not InstanceStatus.FAILED:
        raise RepairRefused(
            f"{_label(inst)} is {inst.status.value}; only a FAILED instance can be retried"
            + (" (reset moves a running or finished one to a node it passed)")
        )
    top = _failed_ancestor(tx, inst)
    revived: list[str] = []
    nodes: list[str] = []
    _revive(tx, top, by, revived, nodes)
    tx.finish()
    return RepairResult(instance_id, InstanceStatus.RUNNING, revived, nodes)


def _failed_ancestor(tx: Tx, inst: Inst) -> Inst:
    """A failed child failed its parent: retrying it retries the parent, which brings it back."""
    while inst.parent_instance_id is not None:
        parent = load_instance(tx, inst.parent_instance_id)
        if parent is None or parent.status is not InstanceStatus.FAILED:
            break
        waiting = tx.load_token(inst.parent_token_id or "")
        if waiting is None or waiting.halted != s.HALTED_FAILED:
            break
        inst = parent
    return inst


def _halted_tokens(tx: Tx, inst: Inst) -> list[Tok]:
    rows = tx.conn.execute(
        select(*TOKEN_COLUMNS)
        .where(_t.c.instance_id == inst.id, _t.c.halted.is_not(None))
        .order_by(_t.c.seq, _t.c.id)
    ).all()
    return [tx.adopt(r) for r in rows]


def _revive(tx: Tx, inst: Inst, by: str, revived: list[str], nodes: list[str]) -> None:
    """Bring back `inst` (FAILED, or CANCELLED with its failed parent) and its halted tokens."""
    halted = _halted_tokens(tx, inst)
    if not halted:
        raise RepairRefused(
            f"{_label(inst)} has no record of where it was when it ended (it ended before "
            "this server could record that, or was reset since); reset it to a node instead"
        )
    failed = [t for t in halted if t.halted in (s.HALTED_FAILED, s.HALTED_FINAL)]
    for tok in failed:
        if tok.halted == s.HALTED_FINAL:
            raise RepairRefused(
                f"{_label(inst)} failed at {tok.node_id!r} in a way a retry cannot mend "
                f"({_reason(tx, inst)}); reset it to an earlier node instead"
            )
    children: list[Inst] = []
    for tok in halted:
        if tok.child_instance_id and tok.wait_kind == "child":
            child = load_instance(tx, tok.child_instance_id)
            if child is None:
                continue
            if child.status is InstanceStatus.CANCELLED and tok.halted == s.HALTED_FAILED:
                raise RepairRefused(
                    f"{_label(inst)} failed because its subflow child {child.id!r} was "
                    f"cancelled; a retry does not undo a cancel: reset it to {tok.node_id!r} "
                    "to start a new child"
                )
            children.append(child)
    inst.status = InstanceStatus.RUNNING
    tx.reopen_instance(inst)
    revived.append(inst.id)
    tx.event(
        inst.id,
        "instance_retried",
        "",
        0,
        nodes=sorted({t.node_id for t in failed}),
        by=by,
    )
    for child in children:
        if child.status is not InstanceStatus.RUNNING:
            _revive(tx, child, by, revived, nodes)
    # Everything that was waiting or running comes back first; the failed step last, since
    # running it again may move the instance on (or fail it again) at once.
    for tok in halted:
        if tok not in failed:
            _restore(tx, tok)
    for tok in failed:
        nodes.append(tok.node_id)
        _rerun(tx, inst, tok)
    refresh_search(tx, inst)


def _reason(tx: Tx, inst: Inst) -> str:
    return str(tx.conn.execute(select(_i.c.reason).where(_i.c.id == inst.id)).scalar() or "")


def _unleased(tok: Tok) -> None:
    """The token forgets its lease: any report carrying it is refused from now on."""
    tok.halted = None
    tok.lease = None
    tok.lease_owner = None
    tok.lease_expires_at_ms = None
    tok.report_seq = 0
    tok.released_lease = None


def _restore(tx: Tx, tok: Tok) -> None:
    """A token that was live when its instance ended: back in the state it was in. A leased
    one is READY again with the same attempt (its worker's lease is gone)."""
    state = TokenState(tok.halted or TokenState.DONE.value)
    _unleased(tok)
    if state in (TokenState.READY, TokenState.LEASED):
        tok.state = TokenState.READY
        tok.ready_at_ms = tx.now
        tx.wakeups.task_ready(tok.queue or "default")
    else:
        tok.state = state
        if tok.wake_at_ms is not None:
            tx.wakeups.timer_armed = True
    tx.save(tok)


def _rerun(tx: Tx, inst: Inst, tok: Tok) -> None:
    """The token whose failure ended the instance: its step again, from attempt 1."""
    _unleased(tok)
    node = inst.graph.nodes[tok.node_id]
    if tok.child_instance_id and tok.wait_kind == "child":
        tok.state = TokenState.WAITING  # its child was brought back with it
        tx.save(tok)
        return
    worker_step = isinstance(node, Task | Predicate | Join) or (
        isinstance(node, Await) and node.apply is not None and tok.has_input
    )
    if worker_step and tok.activity is not None:
        tok.attempt = 1
        make_ready(
            tx,
            tok,
            tok.queue or "default",
            tok.timeout_ms,
            tok.input if tok.has_input else _missing(),
            activity=tok.activity,
        )
        return
    # A step the server drives (a sleep with a bad instant, a for_each over a non-list, a
    # subflow whose flow was not deployed): enter the node again, which checks it again.
    tok.state = TokenState.WAITING
    tok.wait_kind = None
    tok.wake_at_ms = None
    place(tx, inst, tok)


def _missing() -> Any:
    from ..model.data import MISSING

    return MISSING


# -- reset --------------------------------------------------------------------------------------


def reset_target_problem(graph: Graph, flow: str, node_id: str) -> str:
    """Why no instance of `graph` (named `flow` in the message) can be reset to `node_id`, or
    '' when a reset may target it (an instance must still have passed it)."""
    node = graph.nodes.get(node_id)
    if node is None:
        known = ", ".join(sorted(n for n, v in graph.nodes.items() if not isinstance(v, End)))
        return f"{flow} has no node {node_id[:200]!r}; its nodes: {known}"
    if isinstance(node, End):
        return f"{node_id!r} is the end of the flow, not a step to reset to"
    blocks = graph.scopes.get(node_id, ())
    if blocks:
        block = "parallel" if graph.nodes[blocks[0]].kind == "fork" else "for_each"
        return (
            f"node {node_id!r} is inside {block} block {blocks[0]!r}: "
            f"a reset rewinds the whole instance; reset to {blocks[0]!r} instead"
        )
    return ""


def reset(
    ctx: OpsContext, conn: Connection, instance_id: str, node_id: str, *, by: str = ""
) -> RepairResult:
    """Rewind an instance to `node_id`, which it passed, with the input the node last got."""
    tx, inst = lock_instance(ctx, conn, instance_id)
    graph = inst.graph
    if inst.status is InstanceStatus.CANCELLED:
        raise RepairRefused(
            f"{_label(inst)} was cancelled; a reset does not undo a cancel (start it again)"
        )
    if inst.parent_instance_id is not None and inst.status is not InstanceStatus.RUNNING:
        raise RepairRefused(
            f"{_label(inst)} is a subflow child of {inst.parent_instance_id!r} and has ended; "
            "reset the parent to its subflow step instead"
        )
    problem = reset_target_problem(graph, f"flow {inst.flow!r} ({inst.version[:19]})", node_id)
    if problem:
        raise InvalidRequest(problem)
    node = graph.nodes[node_id]
    row = recorded_inputs(conn, inst.id).get(node_id)
    if row is None:
        raise InvalidRequest(
            f"{_label(inst)} never reached node {node_id!r} (or reached it before this server "
            "recorded step inputs); reset to a node it passed"
        )
    ended = _end_live_tokens(tx, inst)
    tok = tx.new_token(inst, node_id, row.context, loop_counts=row.loop_counts)
    was = inst.status
    inst.status = InstanceStatus.RUNNING
    tx.reopen_instance(inst)
    tx.event(
        inst.id,
        "instance_reset",
        node_id,
        0,
        **{"from": ended, "to": node_id, "status_before": was.value, "by": by},
    )
    if isinstance(node, Join):
        # The combine step again, with the branch results it was given last time.
        tx.entered(tok, row.input)
        make_ready(tx, tok, node.queue, node.timeout_ms, row.input, activity=node.activity)
    else:
        place(tx, inst, tok)
    refresh_search(tx, inst)
    tx.finish()
    return RepairResult(instance_id, inst.status, [inst.id], [node_id])


def _end_live_tokens(tx: Tx, inst: Inst) -> list[str]:
    """End every live token (children they wait on are cancelled) and forget halted states:
    the reset point is the instance's only position from now on. Returns the nodes left."""
    tx.flush()
    rows = tx.conn.execute(
        select(*TOKEN_COLUMNS).where(
            _t.c.instance_id == inst.id, _t.c.state != TokenState.DONE.value
        )
    ).all()
    left: list[str] = []
    for row in rows:
        tok = tx.adopt(row)
        if tok.state is not TokenState.JOINED or isinstance(inst.graph.nodes[tok.node_id], Join):
            left.append(tok.node_id)
        if tok.child_instance_id and tok.wait_kind == "child":
            child = load_instance(tx, tok.child_instance_id)
            if child is not None and child.status is InstanceStatus.RUNNING:
                finish_instance(
                    tx,
                    child,
                    InstanceStatus.CANCELLED,
                    f"cancelled: parent instance {inst.id} was reset",
                    propagate=False,
                )
        _unleased(tok)
        tok.state = TokenState.DONE
        tx.save(tok)
    tx.flush()
    tx.conn.execute(
        update(_t).where(_t.c.instance_id == inst.id, _t.c.halted.is_not(None)).values(halted=None)
    )
    for tok in tx.tokens.values():
        if tok.instance_id == inst.id:
            tok.halted = None
    return sorted(set(left))
