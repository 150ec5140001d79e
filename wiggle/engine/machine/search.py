"""Search attributes: named values of an instance's context, indexed to find it by them.

A flow declares them (`search:` in docs/flow-format.md); each committed transition that changes
a token's context writes the values that changed, in the same transaction. A value missing from
the context, or of the wrong type, is absent (no row). With parallel branches the value comes
from the context of the transition that last changed it.

Storage (`wiggle_search`): text for `string` and `bool` ("true" / "false"), a number for
`number` and `time` (milliseconds since the epoch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, select

from wiggle.graph import Graph, SearchAttribute, SearchType

from ..model.data import MISSING, parse_instant_ms, resolve_pointer
from ..model.types import Json, TokenState
from ..store import schema as s
from .tx import Inst, Tx

__all__ = [
    "MAX_TEXT",
    "Stored",
    "note_context_change",
    "refresh_search",
    "search_of",
    "stored_value",
    "values_of",
    "write_initial",
]

#: Longer strings are not indexed (the attribute is absent): a business key is short.
MAX_TEXT = 256

#: A stored value: (text, number), exactly one of them set.
Stored = tuple[str | None, float | None]


def stored_value(attr: SearchAttribute, value: Any) -> Stored | None:
    """How `value` is stored for `attr`, or None when it has no value of that type."""
    if value is MISSING or value is None:
        return None
    kind = attr.type
    if kind is SearchType.STRING:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            value = str(value)  # a numeric business key (order 1002) is found as "1002"
        if isinstance(value, str) and len(value) <= MAX_TEXT:
            return value, None
        return None
    if kind is SearchType.NUMBER:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return None, float(value)
        return None
    if kind is SearchType.BOOL:
        return ("true" if value else "false", None) if isinstance(value, bool) else None
    millis = parse_instant_ms(value)
    return None if millis is None else (None, float(millis))


def values_of(graph: Graph, context: Json) -> dict[str, Stored | None]:
    """Every declared attribute's stored value in `context` (None: absent)."""
    return {
        name: stored_value(attr, resolve_pointer(context, attr.pointer))
        for name, attr in graph.search.items()
    }


def write_initial(tx: Tx, inst: Inst, context: Json) -> None:
    """A new instance: the values its input has."""
    if inst.graph.search:
        present = {k: v for k, v in values_of(inst.graph, context).items() if v is not None}
        if present:
            tx.search_values(inst.id, present)


def note_context_change(tx: Tx, inst: Inst, before: Json, after: Json) -> None:
    """A transition replaced a token's context: write the attributes whose value changed."""
    if not inst.graph.search or before is after:
        return
    old = values_of(inst.graph, before)
    new = values_of(inst.graph, after)
    changed = {k: v for k, v in new.items() if old.get(k) != v}
    if changed:
        tx.search_values(inst.id, changed)


def refresh_search(tx: Tx, inst: Inst) -> None:
    """After a repair: every attribute from the context of the token that is live now (the
    one a reset placed, or any brought back by a retry)."""
    if not inst.graph.search:
        return
    live = [
        t for t in tx.tokens.values() if t.instance_id == inst.id and t.state is not TokenState.DONE
    ]
    if not live:
        return
    top = [t for t in live if t.parent_token_id is None]
    tx.search_values(inst.id, values_of(inst.graph, (top or live)[0].context))


def _shown(attr: SearchAttribute | None, text: str | None, number: float | None) -> Json:
    if text is not None:
        if attr is not None and attr.type is SearchType.BOOL:
            return text == "true"
        return text
    if number is None:
        return None
    if attr is not None and attr.type is SearchType.TIME:
        from datetime import UTC, datetime

        return (
            datetime.fromtimestamp(number / 1000, tz=UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z")
        )
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def search_of(
    conn: Connection, instance_ids: Sequence[str], graphs: Mapping[str, Graph]
) -> dict[str, dict[str, Json]]:
    """The search attribute values of these instances, as JSON values, by instance id.
    `graphs` maps instance id -> its graph (for the attributes' types)."""
    if not instance_ids:
        return {}
    w = s.search_values
    out: dict[str, dict[str, Json]] = {}
    for at in range(0, len(instance_ids), 500):
        chunk = list(instance_ids[at : at + 500])
        rows = conn.execute(
            select(w.c.instance_id, w.c.name, w.c.text_value, w.c.num_value).where(
                w.c.instance_id.in_(chunk)
            )
        )
        for instance_id, name, text, number in rows:
            graph = graphs.get(instance_id)
            attr = graph.search.get(name) if graph is not None else None
            out.setdefault(instance_id, {})[name] = _shown(attr, text, number)
    return out
