"""Starting instances, many per transaction (group commit's unit of work for StartInstance).

A batch reads the versions it needs and the caller-chosen ids that already exist in two
statements, then builds every new instance in memory (its row, its first token driven to its
first park, an eager task when asked) and writes them all with the batch's other rows in one
statement. A start that is refused (no such flow, input rejected) is refused before it changes
anything, so it spoils nothing for the others.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select

from wiggle.errors import DefinitionNotFound, InstanceExists, WiggleError
from wiggle.graph import Graph

from ..model.types import EagerRequest, InstanceStatus, Json, StartResult, resolve_mode
from ..store import schema as s
from .drive import place
from .eager import lease_ready
from .search import write_initial
from .tx import Inst, Tx, dumps, loads, new_id

__all__ = ["StartRequest", "apply_starts"]

_d = s.definitions
_i = s.instances


@dataclass(frozen=True)
class StartRequest:
    flow: str
    input: Json
    version: str | None = None
    instance_id: str | None = None
    eager: EagerRequest | None = None
    started_by: str | None = None  # the person starting it (a credential's name), if any
    traceparent: str | None = None  # W3C trace context, already checked (wiggle.tracecontext)
    tracestate: str | None = None


def _newest(tx: Tx, names: Sequence[str]) -> dict[str, str]:
    """The newest registered version of each name (one statement for the batch)."""
    newest = tx.db.cached(
        "newest_versions",
        lambda: (
            select(_d.c.name, _d.c.version)
            .where(_d.c.name.in_(bindparam("names", expanding=True)))
            .order_by(_d.c.name, _d.c.seq.desc())
        ),
    )
    found: dict[str, str] = {}
    for name, version in tx.conn.execute(newest, {"names": list(names)}):
        found.setdefault(name, version)
    return found


def _pinned(tx: Tx, pairs: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Which (name, version) pairs are registered."""
    if not pairs:
        return set()
    versions = [v for _, v in pairs]
    rows = tx.conn.execute(select(_d.c.name, _d.c.version).where(_d.c.version.in_(versions))).all()
    return {(name, version) for name, version in rows} & pairs


@dataclass(frozen=True)
class _Known:
    """An instance a caller-chosen id already names: a start of the same flow and input is a
    no-op answered with it; anything else is a conflict."""

    version: str
    flow: str
    input: str | None  # JSON text (None: started before schema 2 kept inputs)


def _existing(tx: Tx, ids: Sequence[str]) -> dict[str, _Known]:
    """Caller-chosen instance ids that exist already."""
    if not ids:
        return {}
    rows = tx.conn.execute(
        select(_i.c.id, _i.c.version, _i.c.flow, _i.c.input).where(_i.c.id.in_(list(ids)))
    ).all()
    return {ident: _Known(version, flow, text) for ident, version, flow, text in rows}


def apply_starts(
    tx: Tx,
    requests: Sequence[StartRequest],
    check_input: Callable[[Graph, Json], None],
    default_mode: Any,
) -> list[StartResult | WiggleError]:
    """Start each request's instance in `tx`; each gets its result or the error refusing it."""
    # The first statement: on PostgreSQL the transaction's BEGIN goes with it.
    tx.now = int(tx.db.first_rows(tx.conn, f"SELECT {tx.db.now_sql}", {})[0][0])
    newest = _newest(tx, sorted({r.flow for r in requests if not r.version}))
    pinned = _pinned(tx, {(r.flow, r.version) for r in requests if r.version})
    known = _existing(tx, sorted({r.instance_id for r in requests if r.instance_id}))
    out: list[StartResult | WiggleError] = []
    for r in requests:
        try:
            out.append(_start_one(tx, r, newest, pinned, known, check_input, default_mode))
        except WiggleError as exc:  # refused before anything changed
            out.append(exc)
    return out


def _again(r: StartRequest, known: _Known) -> StartResult:
    """A start naming an existing instance: the same flow and input is the same start."""
    if known.flow != r.flow:
        raise InstanceExists(
            f"instance id {r.instance_id!r} already belongs to an instance of flow "
            f"{known.flow!r}, not {r.flow!r}; choose another id"
        )
    if known.input is not None and loads(known.input) != r.input:
        raise InstanceExists(
            f"instance id {r.instance_id!r} already belongs to an instance of {r.flow!r} "
            "started with another input; choose another id (starting the same flow with the "
            "same input again is a no-op)"
        )
    return StartResult(r.instance_id or "", known.version, False)


def _start_one(
    tx: Tx,
    r: StartRequest,
    newest: dict[str, str],
    pinned: set[tuple[str, str]],
    known: dict[str, _Known],
    check_input: Callable[[Graph, Json], None],
    default_mode: Any,
) -> StartResult:
    version = r.version if (r.version and (r.flow, r.version) in pinned) else None
    if not r.version:
        version = newest.get(r.flow)
    if version is None:
        raise DefinitionNotFound(r.flow, r.version)
    graph = tx.graph_of(tx.conn, version)
    check_input(graph, r.input)
    if r.instance_id is not None and r.instance_id in known:
        return _again(r, known[r.instance_id])
    ident = r.instance_id or new_id()
    # A second start of this id in the same batch finds it.
    known[ident] = _Known(version, graph.name, dumps(r.input))
    mode = resolve_mode(graph, default_mode)
    inst = Inst(
        ident,
        ident,
        graph.name,
        version,
        InstanceStatus.RUNNING,
        mode,
        graph,
        None,
        None,
        started_by=r.started_by or None,
        traceparent=r.traceparent or None,
        tracestate=(r.tracestate or None) if r.traceparent else None,
    )
    tx.instances[ident] = inst
    tx.new_instance(inst.row(r.input, tx.now))
    by = {"started_by": inst.started_by} if inst.started_by else {}
    tx.event(ident, "instance_started", "", 0, version=version, mode=mode.value, **by)
    write_initial(tx, inst, r.input)
    root = tx.new_token(inst, graph.start, r.input)
    place(tx, inst, root)
    task = lease_ready(tx, inst, r.eager) if r.eager is not None else None
    return StartResult(ident, version, True, task)
