"""The input each top-level node received the last time a token entered it, kept for `reset`.

Since schema 10 the inputs ride on the event log: a transition that enters nodes writes them in
the `entered` column of the last event it logs for that instance (every move logs one), so a
step writes no row beyond the token update and the event it writes anyway. Before, every step
upserted a row of `wiggle_step_inputs` (its heap row and key cost a SERVER step a fifth more
WAL); that table is still read for what instances wrote before the upgrade.

The column holds `{"nodes": {node_id: entry}}`, an entry being `{"context", "loop_counts"[,
"input"][, "at_ms"]}` (without `at_ms`, the event's time). With `"replace": true` the nodes are
all the instance has from then on: a migration renames nodes that way (ops/migrate_apply.py).
The reader replays the table's rows, then each instance event's `entered` in log order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from sqlalchemy import Connection, select

from ..model.types import Json
from . import schema as s
from .rows import loads

__all__ = ["Entry", "RecordedInput", "entered_column", "recorded_inputs", "snapshot_of"]


@dataclass(frozen=True)
class Entry:
    """A node's input as a transition recorded it, its JSON already encoded (the context may
    change later in the same transition; the record is of the moment of entry)."""

    context: str
    loop_counts: str
    input: str | None = None


@dataclass(frozen=True)
class RecordedInput:
    """A node's input as read back: what a reset to that node starts from."""

    context: Json
    loop_counts: dict[str, int]
    at_ms: int
    input: Json = None
    has_input: bool = False

    def as_json(self) -> dict[str, Any]:
        """The entry as a snapshot carries it."""
        out: dict[str, Any] = {
            "context": self.context,
            "loop_counts": self.loop_counts,
            "at_ms": self.at_ms,
        }
        if self.has_input:
            out["input"] = self.input
        return out


def entered_column(
    entries: Mapping[str, Entry], replace: Mapping[str, RecordedInput] | None = None
) -> str:
    """The `entered` value of an event: `entries` (node id -> entry), on top of `replace` when
    this event replaces everything recorded before it."""
    nodes: dict[str, Any] = {}
    if replace is not None:
        nodes = {node: recorded.as_json() for node, recorded in replace.items()}
    for node, entry in entries.items():
        item: dict[str, Any] = {
            "context": orjson.Fragment(entry.context),
            "loop_counts": orjson.Fragment(entry.loop_counts),
        }
        if entry.input is not None:
            item["input"] = orjson.Fragment(entry.input)
        nodes[node] = item
    column: dict[str, Any] = {"nodes": nodes}
    if replace is not None:
        column["replace"] = True
    return orjson.dumps(column).decode()


def recorded_inputs(conn: Connection, instance_id: str) -> dict[str, RecordedInput]:
    """Node id -> the input it received last, for every top-level node the instance entered."""
    si = s.step_inputs
    out: dict[str, RecordedInput] = {}
    legacy = select(si.c.node_id, si.c.context, si.c.input, si.c.loop_counts, si.c.at_ms).where(
        si.c.instance_id == instance_id
    )
    for row in conn.execute(legacy):
        out[row.node_id] = RecordedInput(
            loads(row.context),
            loads(row.loop_counts),
            int(row.at_ms),
            None if row.input is None else loads(row.input),
            row.input is not None,
        )
    e = s.events
    logged = (
        select(e.c.at_ms, e.c.entered)
        .where(e.c.instance_id == instance_id, e.c.entered.is_not(None))
        .order_by(e.c.seq)
    )
    for r in conn.execute(logged):
        column = loads(r.entered)
        assert isinstance(column, dict)
        if column.get("replace"):
            out = {}
        for node, item in column["nodes"].items():
            out[node] = RecordedInput(
                item["context"],
                item["loop_counts"],
                int(item.get("at_ms", r.at_ms)),
                item.get("input"),
                "input" in item,
            )
    return out


def snapshot_of(
    recorded: Mapping[str, RecordedInput], renames: Mapping[str, str]
) -> dict[str, RecordedInput]:
    """What `recorded` becomes when nodes are renamed (old id -> new id): a node renamed to
    another takes its input, and one another node was renamed to loses its own."""
    targets = set(renames.values())
    kept = {n: v for n, v in recorded.items() if n not in renames and n not in targets}
    return {**kept, **{new: recorded[old] for old, new in renames.items() if old in recorded}}
