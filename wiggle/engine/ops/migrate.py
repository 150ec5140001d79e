"""Migrations at the engine: reading live instances into a plan, and recording the batches
that apply a plan (or roll one back); the per-instance work of those batches is _migrate_apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from wiggle.errors import DefinitionNotFound, InvalidRequest, RepairRefused
from wiggle.filters import parse_filter
from wiggle.graph import Graph
from wiggle.migration import (
    InstanceSnapshot,
    MapError,
    PlanError,
    TokenPos,
    fingerprint,
    make_plan,
    verify_plan,
)

from ..machine.tx import loads
from ..model.types import InstanceStatus, Json, TokenState
from ..reads.filtering import filter_clauses
from ..store import schema as s
from .bulk import create_batch
from .context import OpsContext

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


def buffered_signals(conn: Connection, ids: Sequence[str]) -> dict[str, list[str]]:
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
    buffered = buffered_signals(conn, ids)
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
    ctx: OpsContext,
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
    clauses = filter_clauses(conn, conditions, ctx.graph_of, ctx.db.now_sql) if conditions else []
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
    now = int(conn.execute(select(ctx.db.now)).scalar_one())
    from datetime import UTC, datetime

    created = datetime.fromtimestamp(now / 1000, tz=UTC).isoformat(timespec="seconds")
    try:
        return make_plan(
            flow,
            ctx.graph_of(conn, target),
            _snapshots(conn, rows),
            graph_of=lambda v: ctx.graph_of(conn, v),
            newest_of=lambda name: _graph_or_none(ctx, conn, _newest(conn, name)),
            mapping=dict(mapping or {}),
            timers=timers,
            children=children,
            created_at=created.replace("+00:00", "Z"),
            where=list(where),
        )
    except (MapError, PlanError) as exc:
        raise InvalidRequest(str(exc)) from None


def _graph_or_none(ctx: OpsContext, conn: Connection, version: str | None) -> Graph | None:
    return None if version is None else ctx.graph_of(conn, version)


def apply_migration(
    ctx: OpsContext,
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
        ctx, conn, "migrate", params, doc.get("where", []), requested_by, rate_per_s, items=todo
    )


def rollback_migration(
    ctx: OpsContext,
    conn: Connection,
    batch_id: str,
    *,
    rate_per_s: float,
    requested_by: str,
    plan_hash: str = "",
) -> str:
    """Record the batch that rolls back what migration batch `batch_id` applied (or, given
    `plan_hash`, every batch that applied that plan: a canary and the rest)."""
    from .bulk import get_batch

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
        ctx, conn, "rollback", params, batch.filter, requested_by, rate_per_s, items=items
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
