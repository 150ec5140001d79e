"""Fork, for_each and join: the token tree.

A forking token parks JOINED at its fork (or foreach) with `pending` set to its number of
branches; each branch is a child token carrying the parent's id and its branch key (branch name,
list index or object key) and a copy of the context. A branch that reaches the join parks
JOINED there with its final context; a filtered branch ends DONE with no result. Each arrival
decrements the parent; the last one turns the parent into the combine step at the join, with
`{"context": <context at the fork>, "results": ...}`. Nesting needs nothing more: a branch
token may itself fork. for_each with `max_concurrency` writes the elements over the limit as
held (WAITING, wait_kind "held") and releases the next one, in order, as each element finishes.
"""

from __future__ import annotations

from sqlalchemy import select, update

from wiggle.graph import ForEach, Fork, Join

from . import _drive
from . import _schema as s
from ._data import MISSING, resolve_pointer, type_name
from ._tx import TOKEN_COLUMNS, Inst, Tok, Tx, loads
from ._types import InstanceStatus, Json, TokenState

__all__ = ["arrive", "branch_filtered", "foreach", "fork"]


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
        _drive.place(tx, inst, child)


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
        _drive.fail_token_instance(
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
        _drive.place(tx, inst, child)


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
        _drive.place(tx, inst, child)


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
    _drive.make_ready(
        tx, parent, join.queue, join.timeout_ms, combine_input, activity=join.activity
    )


def branch_filtered(tx: Tx, inst: Inst, tok: Tok) -> None:
    """A filter was false: the instance completes, or inside a branch that branch ends."""
    tok.state = TokenState.DONE
    tx.save(tok)
    if tok.parent_token_id is None:
        _drive.finish_instance(tx, inst, InstanceStatus.COMPLETED, "filtered", tok.context)
    else:
        tx.event(inst.id, "branch_filtered", tok.node_id, tok.attempt, branch=tok.branch)
        arrive(tx, inst, tok.parent_token_id, tok)
