"""Filter conditions (wiggle.filters) as SQL over `wiggle_instances`.

Built-in fields read the instance row (and, for `node`, its tokens); any other field is a search
attribute, whose type comes from the flows that declare it: a name no deployed flow declares,
or one declared with different types by the flows the filter can match, is refused.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, exists, func, literal_column, not_, or_, select

from wiggle.compiler._durations import parse_duration
from wiggle.errors import InvalidRequest
from wiggle.filters import BUILTIN_FIELDS, Condition
from wiggle.graph import Graph, SearchType

from ..machine.search import MAX_TEXT
from ..model.data import parse_instant_ms
from ..model.types import InstanceStatus, TokenState
from ..store import schema as s

__all__ = ["declared_search", "filter_clauses"]

_i = s.instances
_t = s.tokens
_w = s.search_values
_d = s.definitions

_HEX = re.compile(r"^[0-9a-f]{4,64}$")


def declared_search(
    conn: Connection, graph_of: Callable[[Connection, str], Graph], flows: Sequence[str] = ()
) -> dict[str, dict[SearchType, list[str]]]:
    """Attribute name -> type -> the flows declaring it with that type (among `flows`, or
    every deployed flow when empty)."""
    q = select(_d.c.name, _d.c.version)
    if flows:
        q = q.where(_d.c.name.in_(list(flows)))
    out: dict[str, dict[SearchType, list[str]]] = {}
    for name, version in conn.execute(q):
        for attr in graph_of(conn, version).search.values():
            users = out.setdefault(attr.name, {}).setdefault(attr.type, [])
            if name not in users:
                users.append(name)
    return out


def filter_clauses(
    conn: Connection,
    conditions: Sequence[Condition],
    graph_of: Callable[[Connection, str], Graph],
    now_sql: str,
    *,
    with_status: bool = True,
) -> list[Any]:
    """WHERE clauses over `wiggle_instances` for every condition (InvalidRequest if one is
    wrong). `with_status` False leaves the status conditions out (counts per status)."""
    flows = [
        f.strip()
        for c in conditions
        if c.field == "flow" and c.op == "="
        for f in c.value.split(",")
        if f.strip()
    ]
    search: dict[str, dict[SearchType, list[str]]] | None = None
    clauses: list[Any] = []
    for c in conditions:
        if c.field == "status" and not with_status:
            continue
        if c.field in BUILTIN_FIELDS:
            clauses.append(_builtin(c, now_sql))
            continue
        if search is None:
            search = declared_search(conn, graph_of, flows)
        clauses.append(_search_clause(c, search, flows))
    return clauses


def _listed(c: Condition) -> list[str]:
    return [v.strip() for v in c.value.split(",") if v.strip()]


def _builtin(c: Condition, now_sql: str) -> Any:
    if c.field == "id":
        if c.op == "~":
            return _i.c.id.contains(c.value, autoescape=True)
        return _i.c.id == c.value if c.op == "=" else _i.c.id != c.value
    if c.field == "flow":
        names = _listed(c)
        return _i.c.flow.in_(names) if c.op == "=" else _i.c.flow.not_in(names)
    if c.field == "version":
        return _version(c)
    if c.field == "status":
        statuses = []
        for name in _listed(c):
            try:
                statuses.append(InstanceStatus(name.upper()).value)
            except ValueError:
                raise InvalidRequest(
                    f"filter {str(c)[:80]!r}: {name[:40]!r} is not a status "
                    f"({', '.join(InstanceStatus)})"
                ) from None
        return _i.c.status.in_(statuses) if c.op == "=" else _i.c.status.not_in(statuses)
    if c.field == "age":
        try:
            ms = parse_duration(c.value)
        except ValueError as exc:
            raise InvalidRequest(f"filter {str(c)[:80]!r}: {exc}") from None
        cutoff: Any = literal_column(now_sql) - ms
        created = _i.c.created_at_ms
        # Older than the duration means created before the cutoff.
        return {">": created < cutoff, ">=": created <= cutoff, "<": created > cutoff}.get(
            c.op, created >= cutoff
        )
    if c.field == "node":
        live = or_(
            _t.c.state != TokenState.DONE.value,
            _t.c.halted.in_([s.HALTED_FAILED, s.HALTED_FINAL]),
        )
        return exists(select(1).where(_t.c.instance_id == _i.c.id, _t.c.node_id == c.value, live))
    # reason
    if c.op == "=":
        return _i.c.reason == c.value
    return func.lower(_i.c.reason).contains(c.value.lower(), autoescape=True)


def _version(c: Condition) -> Any:
    """A full version, or the start of its hex digest (as lists and the console show it)."""
    text = c.value.strip()
    if text.startswith("sha256:"):
        text = text[len("sha256:") :]
    if not _HEX.match(text):
        raise InvalidRequest(
            f"filter {str(c)[:80]!r}: a version is sha256:<hex> or at least its first 4 hex digits"
        )
    match = (
        _i.c.version == f"sha256:{text}"
        if len(text) == 64
        else _i.c.version.startswith(f"sha256:{text}", autoescape=True)
    )
    return match if c.op == "=" else not_(match)


def _search_clause(
    c: Condition, declared: dict[str, dict[SearchType, list[str]]], flows: Sequence[str]
) -> Any:
    types = declared.get(c.field)
    if not types:
        where = f" by flow {', '.join(flows)}" if flows else " by any deployed flow"
        raise InvalidRequest(
            f"filter {str(c)[:80]!r}: {c.field!r} is not a built-in field "
            f"({', '.join(BUILTIN_FIELDS)}) nor a search attribute declared{where}"
        )
    if len(types) > 1:
        seen = "; ".join(f"{t.value} in {', '.join(f)}" for t, f in types.items())
        raise InvalidRequest(
            f"filter {str(c)[:80]!r}: search attribute {c.field!r} has different types ({seen});"
            " add flow=NAME to the filter"
        )
    (kind,) = types
    column, value = _typed(c, kind)
    ops = {
        "=": column == value,
        "!=": column == value,  # negated below: no value equal to it (absent included)
        ">": column > value,
        ">=": column >= value,
        "<": column < value,
        "<=": column <= value,
    }
    if c.op == "~":
        if kind is not SearchType.STRING:
            raise InvalidRequest(f"filter {str(c)[:80]!r}: ~ (contains) needs a string attribute")
        cond = func.lower(_w.c.text_value).contains(str(value).lower(), autoescape=True)
    else:
        if kind is SearchType.BOOL and c.op not in ("=", "!="):
            raise InvalidRequest(f"filter {str(c)[:80]!r}: a bool attribute takes = or !=")
        cond = ops[c.op]
    found = exists(select(1).where(_w.c.instance_id == _i.c.id, _w.c.name == c.field, cond))
    return not_(found) if c.op == "!=" else found


def _typed(c: Condition, kind: SearchType) -> tuple[Any, Any]:
    text = c.value
    if kind is SearchType.STRING:
        if len(text) > MAX_TEXT:
            raise InvalidRequest(f"filter on {c.field!r}: a value is at most {MAX_TEXT} characters")
        return _w.c.text_value, text
    if kind is SearchType.BOOL:
        if text not in ("true", "false"):
            raise InvalidRequest(f"filter {str(c)[:80]!r}: {c.field} is a bool: true or false")
        return _w.c.text_value, text
    if kind is SearchType.NUMBER:
        try:
            return _w.c.num_value, float(text)
        except ValueError:
            raise InvalidRequest(f"filter {str(c)[:80]!r}: {c.field} is a number") from None
    millis = parse_instant_ms(text)
    if millis is None:
        raise InvalidRequest(
            f"filter {str(c)[:80]!r}: {c.field} is a time: an RFC 3339 instant such as "
            "2026-12-01T09:00:00Z"
        )
    return _w.c.num_value, float(millis)
