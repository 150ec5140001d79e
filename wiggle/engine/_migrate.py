"""Migrations at the engine: reading live instances into a plan, and applying (or rolling back)
one instance of a plan as an item of a durable batch (see _bulk).

Applying an instance, under its root's lock, in the transaction that marks its item DONE:
- refused (SKIPPED) when it ended, changed version, or moved since the plan was made (its
  fingerprint differs: re-plan it);
- deferred (its item stays PENDING and is tried again shortly) while a token of it is leased to
  a worker: a report is then never applied to a node that no longer exists, and the migration
  happens between two steps;
- otherwise each live token goes where the plan says (fenced on the state and node it was
  seen at), the instance and its tokens name the new version, step inputs follow renamed nodes,
  search values are recomputed, and `instance_migrated` is recorded. What it replaced is kept
  with the item (the pre-image), with the instance's fingerprint after the move.

A rollback restores the pre-image of an instance that has not moved since (same fingerprint as
right after the migration); one that has is listed (SKIPPED) with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, delete, select, update

from wiggle.errors import DefinitionNotFound, InvalidRequest, RepairRefused
from wiggle.filters import parse_filter
from wiggle.graph import Await, Graph, Join, Predicate, Sleep, Task
from wiggle.migration import (
    InstanceSnapshot,
    MapError,
    PlanError,
    TokenPos,
    fingerprint,
    make_plan,
    plan_instance,
    verify_plan,
)

from . import _schema as s
from ._bulk import ACTION_FUNCTIONS, Defer, Skip, create_batch
from ._data import MISSING, parse_instant_ms, resolve_pointer
from ._drive import load_instance
from ._filtering import filter_clauses
from ._instances import lock_instance
from ._search import values_of
from ._tx import TOKEN_COLUMNS, Inst, Tok, Tx, loads
from ._types import InstanceStatus, Json, TokenState

if TYPE_CHECKING:
    from ._engine import Engine

__all__ = ["apply_migration", "plan_migration", "resolve_version", "rollback_migration"]

_i = s.instances
_t = s.tokens
_d = s.definitions
_sig = s.signals
_bi = s.batch_items

#: The most instances one plan may cover (a plan travels in one message; split by filter).
MAX_PLANNED = 50_000


def resolve_version(conn: Connection, flow: str, text: str) -> str:
    """A deployed version of `flow` named in full, by the start of its digest, or `latest`
    (the one deployed last)."""
    digest = text.removeprefix("sha256:")
    rows = (
        conn.execute(select(_d.c.version).where(_d.c.name == flow).order_by(_d.c.seq.desc()))
        .scalars()
        .all()
    )
    if not rows:
        raise DefinitionNotFound(flow)
    if text == "latest":
        return str(rows[0])
    found = [v for v in rows if v.removeprefix("sha256:").startswith(digest)] if digest else []
    if len(found) != 1:
        known = ", ".join(v[:19] for v in rows)
        what = "matches no" if not found else "matches more than one"
        raise InvalidRequest(f"version {text[:80]!r} {what} version of {flow!r} ({known})")
    return str(found[0])


def _newest(conn: Connection, flow: str) -> str | None:
    return conn.execute(
        select(_d.c.version).where(_d.c.name == flow).order_by(_d.c.seq.desc()).limit(1)
    ).scalar()


def _positions(conn: Connection, ids: Sequence[str]) -> dict[str, list[TokenPos]]:
    out: dict[str, list[TokenPos]] = {i: [] for i in ids}
    for at in range(0, len(ids), 1000):
        chunk = list(ids[at : at + 1000])
        rows = conn.execute(
            select(
                _t.c.instance_id,
                _t.c.id,
                _t.c.node_id,
                _t.c.state,
                _t.c.parent_token_id,
                _t.c.wait_kind,
                _t.c.child_instance_id,
            )
            .where(_t.c.instance_id.in_(chunk), _t.c.state != TokenState.DONE.value)
            .order_by(_t.c.instance_id, _t.c.seq, _t.c.id)
        )
        for iid, tid, node, state, parent, wait_kind, child in rows:
            out[iid].append(TokenPos(tid, node, state, parent, wait_kind, child))
    return out


def _buffered(conn: Connection, ids: Sequence[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for at in range(0, len(ids), 1000):
        chunk = list(ids[at : at + 1000])
        rows = conn.execute(
            select(_sig.c.instance_id, _sig.c.name).where(
                _sig.c.instance_id.in_(chunk), _sig.c.consumed_at_ms.is_(None)
            )
        )
        for iid, name in rows:
            out.setdefault(iid, []).append(name)
    return out


def _snapshots(conn: Connection, rows: Sequence[Any], depth: int = 0) -> list[InstanceSnapshot]:
    """Snapshots of these (id, flow, version) instances and, recursively, their running
    children."""
    ids = [r[0] for r in rows]
    tokens = _positions(conn, ids)
    buffered = _buffered(conn, ids)
    kids: dict[str, list[Any]] = {}
    if depth < 8 and ids:
        for at in range(0, len(ids), 1000):
            for row in conn.execute(
                select(_i.c.id, _i.c.flow, _i.c.version, _i.c.parent_instance_id).where(
                    _i.c.parent_instance_id.in_(ids[at : at + 1000]),
                    _i.c.status == InstanceStatus.RUNNING.value,
                )
            ):
                kids.setdefault(row[3], []).append(row[:3])
    out = []
    for iid, flow, version in rows:
        children = _snapshots(conn, kids.get(iid, []), depth + 1) if kids.get(iid) else []
        out.append(
            InstanceSnapshot(
                iid,
                flow,
                version,
                tuple(tokens.get(iid, [])),
                tuple(sorted(buffered.get(iid, []))),
                tuple(children),
            )
        )
    return out


def plan_migration(
    eng: Engine,
    conn: Connection,
    flow: str,
    to: str,
    *,
    from_versions: Sequence[str] = (),
    where: Sequence[str] = (),
    mapping: Mapping[str, str] | None = None,
    timers: str = "keep",
    children: bool = False,
) -> dict[str, Any]:
    """The plan for the RUNNING instances of `flow` (on `from_versions`, matching `where`)."""
    target = resolve_version(conn, flow, to)
    froms = [resolve_version(conn, flow, v) for v in from_versions]
    conditions = parse_filter(where)
    clauses = filter_clauses(conn, conditions, eng.graph_of, eng.db.now_sql) if conditions else []
    q = select(_i.c.id, _i.c.flow, _i.c.version).where(
        _i.c.flow == flow,
        _i.c.status == InstanceStatus.RUNNING.value,
        *clauses,
    )
    if froms:
        q = q.where(_i.c.version.in_(froms))
    rows = conn.execute(q.order_by(_i.c.created_at_ms, _i.c.id).limit(MAX_PLANNED + 1)).all()
    if len(rows) > MAX_PLANNED:
        raise InvalidRequest(
            f"more than {MAX_PLANNED} live instances to plan; narrow them with --filter or "
            "--from and plan in parts"
        )
    if not [r for r in rows if r[2] != target]:
        raise InvalidRequest(
            f"flow {flow!r} has no live instance to move to {target[:19]}"
            + (" matching the filter" if where else "")
            + (" on the versions given" if froms else "")
        )
    now = int(conn.execute(select(eng.db.now)).scalar_one())
    from datetime import UTC, datetime

    created = datetime.fromtimestamp(now / 1000, tz=UTC).isoformat(timespec="seconds")
    try:
        return make_plan(
            flow,
            eng.graph_of(conn, target),
            _snapshots(conn, rows),
            graph_of=lambda v: eng.graph_of(conn, v),
            newest_of=lambda name: _graph_or_none(eng, conn, _newest(conn, name)),
            mapping=dict(mapping or {}),
            timers=timers,
            children=children,
            created_at=created.replace("+00:00", "Z"),
            where=list(where),
        )
    except (MapError, PlanError) as exc:
        raise InvalidRequest(str(exc)) from None


def _graph_or_none(eng: Engine, conn: Connection, version: str | None) -> Graph | None:
    return None if version is None else eng.graph_of(conn, version)


def apply_migration(
    eng: Engine,
    conn: Connection,
    plan: Any,
    *,
    limit: int = 0,
    rate_per_s: float,
    requested_by: str,
    skip_changed: bool = False,
) -> str:
    """Check a plan handed back and record the batch that applies it; returns the batch id."""
    try:
        doc = verify_plan(plan)
    except PlanError as exc:
        raise InvalidRequest(str(exc)) from None
    target = doc["to"]
    known = conn.execute(select(_d.c.name).where(_d.c.version == target)).scalar()
    if known != doc["flow"]:
        raise DefinitionNotFound(doc["flow"], target)
    entries = [e for e in doc["instances"] if e["outcome"] == "migrate"]
    ids = [e["instance_id"] for e in entries]
    now_at = _current(conn, ids)
    todo: list[tuple[str, Json]] = []
    changed: list[str] = []
    for e in entries:
        version, tokens = now_at.get(e["instance_id"], ("", []))
        if version == target:
            continue  # migrated already (by a canary, an earlier apply)
        if fingerprint(version, tokens) != e["fingerprint"]:
            changed.append(e["instance_id"])
            continue
        todo.append((e["instance_id"], e))
    if changed and not skip_changed:
        shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
        raise RepairRefused(
            f"{len(changed)} instance(s) of the plan moved or ended since it was made ({shown}): "
            "make a new plan (or apply with --skip-changed to leave them out)"
        )
    if limit > 0:
        todo = todo[:limit]
    if not todo:
        raise InvalidRequest(
            "nothing left to apply: every instance the plan moves is on the target version "
            "already, ended, or blocked"
        )
    params = {
        "plan": doc["hash"],
        "flow": doc["flow"],
        "to": target,
        "map": doc["map"],
        "timers": doc["timers"],
    }
    return create_batch(
        eng, conn, "migrate", params, doc.get("where", []), requested_by, rate_per_s, items=todo
    )


def rollback_migration(
    eng: Engine,
    conn: Connection,
    batch_id: str,
    *,
    rate_per_s: float,
    requested_by: str,
    plan_hash: str = "",
) -> str:
    """Record the batch that rolls back what migration batch `batch_id` applied (or, given
    `plan_hash`, every batch that applied that plan: a canary and the rest)."""
    from ._bulk import get_batch

    b = s.batches
    if plan_hash:
        ids = [
            row.id
            for row in conn.execute(
                select(b.c.id, b.c.params)
                .where(b.c.action == "migrate")
                .order_by(b.c.created_at_ms)
            )
            if loads(row.params).get("plan") == plan_hash
        ]
        if not ids:
            raise InvalidRequest(f"no migration batch applied plan {plan_hash[:19]}")
    else:
        ids = [batch_id]
    batch = get_batch(conn, ids[-1], items=0)
    if batch.action != "migrate":
        raise InvalidRequest(f"batch {batch_id[:40]!r} is a {batch.action}, not a migration")
    rows = conn.execute(
        select(_bi.c.instance_id, _bi.c.undo)
        .where(_bi.c.batch_id.in_(ids), _bi.c.state == "DONE", _bi.c.undo.is_not(None))
        .order_by(_bi.c.batch_id, _bi.c.seq)
    ).all()
    if not rows:
        raise InvalidRequest(f"migration {ids[-1][:40]!r} has applied nothing to roll back")
    params = {"migration": ids[-1], "to": batch.params["to"], "flow": batch.params["flow"]}
    items = [(iid, loads(undo)) for iid, undo in rows]
    return create_batch(
        eng, conn, "rollback", params, batch.filter, requested_by, rate_per_s, items=items
    )


def _current(conn: Connection, ids: Sequence[str]) -> dict[str, tuple[str, list[TokenPos]]]:
    """Each RUNNING instance's version and live tokens now."""
    versions: dict[str, str] = {}
    for at in range(0, len(ids), 1000):
        for iid, version in conn.execute(
            select(_i.c.id, _i.c.version).where(
                _i.c.id.in_(list(ids[at : at + 1000])),
                _i.c.status == InstanceStatus.RUNNING.value,
            )
        ):
            versions[iid] = version
    tokens = _positions(conn, list(versions))
    return {iid: (v, tokens.get(iid, [])) for iid, v in versions.items()}


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


def _timer(tx: Tx, tok: Tok, node: Any, timer: str) -> None:
    if timer in ("", "keep"):
        return
    if timer == "drop":
        tok.wake_at_ms = None
        return
    wake: int | None = None
    if isinstance(node, Sleep):
        if node.duration_ms is not None:
            wake = tx.now + node.duration_ms
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
    _timer(tx, tok, node, timer)
    tx.save(tok)


def _switch_version(tx: Tx, inst: Inst, version: str, mapping: Mapping[str, str]) -> None:
    old_graph = inst.graph
    tx.conn.execute(update(_i).where(_i.c.id == inst.id).values(version=version))
    inst.version = version
    inst.graph = tx.graph_of(tx.conn, version)
    si = s.step_inputs
    for old, new in mapping.items():
        if old == new:
            continue
        tx.conn.execute(delete(si).where(si.c.instance_id == inst.id, si.c.node_id == new))
        tx.conn.execute(
            update(si).where(si.c.instance_id == inst.id, si.c.node_id == old).values(node_id=new)
        )
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
    buffered = sorted(set(_buffered(tx.conn, [inst.id]).get(inst.id, [])))
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


def _migrate(
    eng: Engine, conn: Connection, iid: str, params: dict[str, Json], detail: Json, by: str
) -> tuple[str, Json]:
    tx, _ = lock_instance(eng, conn, iid)
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


def _rollback(
    eng: Engine, conn: Connection, iid: str, params: dict[str, Json], detail: Json, by: str
) -> str:
    tx, _ = lock_instance(eng, conn, iid)
    _restore(tx, detail, params)
    tx.finish()
    return f"rolled back to {str(detail['version'])[:19]}"


ACTION_FUNCTIONS["migrate"] = _migrate
ACTION_FUNCTIONS["rollback"] = _rollback
