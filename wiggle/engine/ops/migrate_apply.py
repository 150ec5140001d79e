"""Applying one instance of a migration plan, and rolling one back: the `migrate` and
`rollback` actions (see actions) of the batches migrate records, worked through by
bulk_runner.

Applying an instance, under its root's lock, in the transaction that marks its item DONE:
- refused (SKIPPED) when it ended, changed version, or is blocked where it is now;
- deferred (its item stays PENDING and is tried again shortly) while a token of it is leased to
  a worker: a report is then never applied to a node that no longer exists, and the migration
  happens between two steps; an instance that moved since the plan is planned again where it
  is, by the same rules;
- otherwise each live token goes where the plan says (fenced on the state and node it was
  seen at), the instance and its tokens name the new version, step inputs follow renamed nodes,
  search values are recomputed, and `instance_migrated` is recorded. What it replaced is kept
  with the item (the pre-image), with the instance's fingerprint after the move.

A rollback restores the pre-image of an instance that has not moved since (same fingerprint as
right after the migration); one that has is SKIPPED with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select, update

from wiggle.graph import Await, Graph, Join, Predicate, Sleep, Task
from wiggle.migration import TokenPos, fingerprint, plan_instance

from ..machine.drive import sleep_instant_ms
from ..machine.human import ensure_tasks
from ..machine.park import load_instance
from ..machine.search import values_of
from ..machine.tx import TOKEN_COLUMNS, Inst, Tok, Tx
from ..model.data import MISSING, parse_instant_ms, resolve_pointer
from ..model.types import InstanceStatus, Json, TokenState
from ..store import schema as s
from ..store.inputs import recorded_inputs, snapshot_of
from .bulk import Defer, Skip
from .context import OpsContext
from .instances import lock_instance
from .migrate import buffered_signals

__all__ = ["migrate_one", "roll_back_one"]

_i = s.instances
_t = s.tokens


# -- one instance -------------------------------------------------------------------------------


def _pos(tok: Tok) -> TokenPos:
    return TokenPos(
        tok.id,
        tok.node_id,
        tok.state.value,
        tok.parent_token_id,
        tok.wait_kind,
        tok.child_instance_id,
    )


def _live(tx: Tx, inst: Inst) -> list[Tok]:
    rows = tx.conn.execute(
        select(*TOKEN_COLUMNS)
        .where(_t.c.instance_id == inst.id, _t.c.state != TokenState.DONE.value)
        .order_by(_t.c.seq, _t.c.id)
    ).all()
    return [tx.adopt(r) for r in rows]


def _timer(tx: Tx, tok: Tok, node: Any, timer: str, flow: str) -> None:
    if timer in ("", "keep"):
        return
    if timer == "drop":
        tok.wake_at_ms = None
        return
    wake: int | None = None
    if isinstance(node, Sleep):
        if node.duration_ms is not None:
            wake = tx.now + node.duration_ms
        elif node.until_expression is not None:
            # A restarted timer takes the new version's expression, as a pointer is read anew.
            found = sleep_instant_ms(node, tok.context, {"id": tok.instance_id, "flow": flow})
            wake = found if isinstance(found, int) else tx.now
        else:
            assert node.until is not None
            value = resolve_pointer(tok.context, node.until)
            wake = parse_instant_ms(value) if value is not MISSING else None
            wake = wake if wake is not None else tx.now
    elif isinstance(node, Await) and node.timeout_ms is not None:
        wake = tx.now + node.timeout_ms
    tok.wake_at_ms = wake
    tx.wakeups.timer_armed |= wake is not None


def _move(
    tx: Tx, tok: Tok, to: str, version: str, graph: Graph, timer: str, mapping: Mapping[str, str]
) -> None:
    """One token onto its node of the new version (fenced on where it was seen)."""
    tok.fence = {"state": tok.state.value, "node_id": tok.node_id}
    node = graph.nodes[to]
    tok.node_id = to
    tok.version = version
    tok.loop_counts = {mapping.get(k, k): v for k, v in tok.loop_counts.items()}
    runs = tok.state is TokenState.READY or (
        tok.state is TokenState.WAITING and tok.wait_kind == "retry"
    )
    if runs:
        # The step takes the new version's settings (queue, activity, timeout).
        if isinstance(node, Task | Predicate | Join):
            tok.queue, tok.activity, tok.timeout_ms = node.queue, node.activity, node.timeout_ms
        elif isinstance(node, Await) and node.apply is not None:
            apply = node.apply
            tok.queue, tok.activity, tok.timeout_ms = apply.queue, apply.activity, apply.timeout_ms
        if tok.state is TokenState.READY:
            tx.wakeups.task_ready(tok.queue or "default")
    _timer(tx, tok, node, timer, graph.name)
    tx.save(tok)


def _switch_version(tx: Tx, inst: Inst, version: str, mapping: Mapping[str, str]) -> None:
    old_graph = inst.graph
    tx.conn.execute(update(_i).where(_i.c.id == inst.id).values(version=version))
    inst.version = version
    inst.graph = tx.graph_of(tx.conn, version)
    if any(old != new for old, new in mapping.items()):
        # The nodes' inputs follow their renames (a reset to a renamed node starts from what it
        # received under its old name).
        tx.replace_inputs(inst.id, snapshot_of(recorded_inputs(tx.conn, inst.id), mapping))
    # Search values: the new version's attributes, from the context of a live token.
    gone = {name: None for name in old_graph.search if name not in inst.graph.search}
    live = [
        t for t in tx.tokens.values() if t.instance_id == inst.id and t.state is not TokenState.DONE
    ]
    values = values_of(inst.graph, live[0].context) if live and inst.graph.search else {}
    if gone or values:
        tx.search_values(inst.id, {**gone, **values})


def _migrate_one(tx: Tx, entry: Mapping[str, Any], params: Mapping[str, Any]) -> dict[str, Any]:
    inst = load_instance(tx, entry["instance_id"])
    target = entry["to"]
    if inst is None or inst.status is not InstanceStatus.RUNNING:
        raise Skip("it ended before the migration reached it")
    if inst.version == target:
        raise Skip(f"it is on {target[:19]} already")
    if inst.version != entry["from"]:
        raise Skip(f"it is on {inst.version[:19]} now, not {entry['from'][:19]}; re-plan it")
    tokens = _live(tx, inst)
    leased = [t for t in tokens if t.state is TokenState.LEASED]
    if leased:
        t = leased[0]
        raise Defer(
            f"waiting for the report of the step at {t.node_id!r} (leased to {t.lease_owner})"
        )
    mapping = dict(params.get("map") or {}) if entry.get("flow") == params.get("flow") else {}
    replanned = False
    if fingerprint(inst.version, [_pos(t) for t in tokens]) != entry["fingerprint"]:
        # It moved since the plan was made (typically: a step that was running reported,
        # which is what the migration waited for). The same rules, on where it is now.
        entry = _replan(tx, inst, tokens, entry, mapping, str(params.get("timers") or "keep"))
        replanned = True
    pre = [t.row() for t in tokens]
    by_id = {t.id: t for t in tokens}
    new_graph = tx.graph_of(tx.conn, target)
    was = inst.version
    for move in entry["moves"]:
        _move(
            tx,
            by_id[move["token_id"]],
            move["to"],
            target,
            new_graph,
            move.get("timer", ""),
            mapping,
        )
    _switch_version(tx, inst, target, mapping)
    ensure_tasks(tx, inst, tokens)  # a token now waiting at a human step gets its task
    moved = sum(1 for m in entry["moves"] if m["node"] != m["to"])
    tx.event(
        inst.id,
        "instance_migrated",
        "",
        0,
        **{
            "from": was,
            "to": target,
            "plan": params["plan"],
            "tokens": len(tokens),
            "moved": moved,
            "replanned": replanned,
        },
    )
    kids: list[dict[str, Any]] = []
    for child in entry.get("children", []):
        if child["outcome"] != "migrate":
            continue
        try:
            kids.append(_migrate_one(tx, child, params))
        except (Skip, Defer):
            continue  # the child stays on its version; the parent goes on
    post = fingerprint(target, [_pos(t) for t in tokens])
    return {
        "instance_id": inst.id,
        "version": was,
        "to": target,
        "tokens": pre,
        "post": post,
        "map": mapping,
        "children": kids,
    }


def _replan(
    tx: Tx,
    inst: Inst,
    tokens: Sequence[Tok],
    entry: Mapping[str, Any],
    mapping: Mapping[str, str],
    timers: str,
) -> dict[str, Any]:
    """A fresh entry for an instance that moved since the plan: applied if the rules let it
    migrate from where it is now, else skipped with the blockers."""
    buffered = sorted(set(buffered_signals(tx.conn, [inst.id]).get(inst.id, [])))
    fresh = plan_instance(
        inst.graph,
        tx.graph_of(tx.conn, entry["to"]),
        [_pos(t) for t in tokens],
        mapping=mapping,
        buffered_signals=buffered,
        timers=timers,
    )
    if fresh.blockers:
        raise Skip(
            "it moved since the plan was made and is blocked where it is now: "
            + "; ".join(f"[{b.rule}] {b.message}" for b in fresh.blockers[:2])
        )
    return {**entry, "moves": [m.as_json() for m in fresh.moves], "children": []}


def migrate_one(
    ctx: OpsContext, conn: Connection, iid: str, params: dict[str, Json], detail: Json, by: str
) -> tuple[str, Json]:
    tx, _ = lock_instance(ctx, conn, iid)
    undo = _migrate_one(tx, detail, params)
    tx.finish()
    kids = len(undo["children"])
    return f"migrated to {str(params['to'])[:19]}" + (
        f" with {kids} child(ren)" if kids else ""
    ), undo


def _restore(tx: Tx, undo: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    inst = load_instance(tx, undo["instance_id"])
    if inst is None or inst.status is not InstanceStatus.RUNNING:
        raise Skip("it ended since the migration; nothing to roll back")
    if inst.version != undo["to"]:
        raise Skip(f"it is on {inst.version[:19]} now, not the migrated version")
    tokens = _live(tx, inst)
    if fingerprint(inst.version, [_pos(t) for t in tokens]) != undo["post"]:
        raise Skip("it advanced since the migration (a token moved): not rolled back")
    by_id = {t.id: t for t in tokens}
    for row in undo["tokens"]:
        tok = by_id.get(row["id"])
        if tok is None:
            continue
        before = Tok.from_row(_Row(row))
        before.fence = {"state": tok.state.value, "node_id": tok.node_id}
        for name in tok.__dataclass_fields__:
            setattr(tok, name, getattr(before, name))
        if tok.state is TokenState.READY:
            tx.wakeups.task_ready(tok.queue or "default")
        if tok.wake_at_ms is not None:
            tx.wakeups.timer_armed = True
        tx.save(tok)
    inverse = {new: old for old, new in (undo.get("map") or {}).items()}
    _switch_version(tx, inst, undo["version"], inverse)
    ensure_tasks(tx, inst, tokens)
    tx.event(
        inst.id,
        "instance_migration_rolled_back",
        "",
        0,
        **{"from": undo["to"], "to": undo["version"], "migration": params["migration"]},
    )
    for child in undo.get("children", []):
        try:
            _restore(tx, child, params)
        except Skip:
            continue


class _Row:
    """A token row dict as `Tok.from_row` reads rows."""

    def __init__(self, row: Mapping[str, Any]) -> None:
        self._mapping = row


def roll_back_one(
    ctx: OpsContext, conn: Connection, iid: str, params: dict[str, Json], detail: Json, by: str
) -> str:
    tx, _ = lock_instance(ctx, conn, iid)
    _restore(tx, detail, params)
    tx.finish()
    return f"rolled back to {str(detail['version'])[:19]}"
