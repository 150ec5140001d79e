"""The instance list as its query string asks for it: the query checked (a message per value it
cannot use), the search box's conditions, a typed version resolved, the rows of a page sorted."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlencode

from wiggle.client import Instance
from wiggle.console._backend import STATUSES, InstanceFilter
from wiggle.console._forms import JsonInputError
from wiggle.console._text import short_version
from wiggle.overlay import failed_node

__all__ = [
    "SORTS",
    "ListQuery",
    "conditions_text",
    "failed_at",
    "list_query",
    "resolve_version",
    "sort_rows",
    "split_conditions",
]

_LOCAL_FORMAT = "%Y-%m-%dT%H:%M"
_FULL_VERSION = re.compile(r"^sha256:[0-9a-f]{64}$")
_SHORT_VERSION = re.compile(r"^(?:sha256:)?([0-9a-f]{4,64})$")
#: At most this many earlier pages are remembered for "previous page".
MAX_BACK = 100
#: Columns the list can be sorted by (within the page: the server pages newest first).
SORTS = ("started", "updated", "instance", "flow", "status", "step")
#: A word that starts a condition of the filter language (wiggle/filters.py): FIELD OP ...
_CONDITION_START = re.compile(r"^[a-z][a-z0-9_]*(?:>=|<=|!=|=|>|<|~)")
#: A word: a run of non-blanks that may hold "double-quoted text with blanks".
_WORD = re.compile(r'(?:[^\s"]+|"[^"]*")+|"[^"]*$')


def split_conditions(text: str) -> list[str]:
    """The search box's text as conditions: `status=FAILED age>1h reason~card declined` is
    three (a word that does not start FIELD OP belongs to the value before it);
    `reason~"x=1 y"` keeps the quoted text whole. JsonInputError for an unclosed quote."""
    conditions: list[str] = []
    for word in _WORD.findall(text):
        if word.count('"') % 2:
            raise JsonInputError(f"the search {text[:80]!r} has a quote that is not closed")
        if _CONDITION_START.match(word) or not conditions:
            conditions.append(word)
        else:
            conditions[-1] += " " + word
    out = []
    for c in conditions:
        head = _CONDITION_START.match(c)
        value = c[head.end() :] if head else c
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            c = c[: len(c) - len(value)] + value[1:-1]
        out.append(c)
    return out


def conditions_text(conditions: Sequence[str]) -> str:
    """Conditions as the search box takes them back (a value with blanks or an `=` quoted)."""
    words = []
    for c in conditions:
        head = _CONDITION_START.match(c)
        value = c[head.end() :] if head else ""
        if head and ('"' not in value) and (" " in value or _CONDITION_START.search(value)):
            c = c[: head.end()] + f'"{value}"'
        words.append(c)
    return " ".join(words)


def _parse_local(text: str) -> int | None:
    """A datetime-local form value (taken as UTC) as epoch ms; None for nonsense."""
    try:
        moment = dt.datetime.strptime(text[:16], _LOCAL_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000)


def _local(ms: int) -> str:
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime(_LOCAL_FORMAT)


@dataclass(frozen=True)
class ListQuery:
    """The instance list as its query string asks for it. `version` is what was typed (a full
    version or a prefix of its hex); `back` the page tokens of the earlier pages but the first."""

    flow: str = ""
    status: str = ""
    version: str = ""
    id_contains: str = ""
    where: tuple[str, ...] = ()  # the search box's conditions (filter language)
    since_ms: int = 0
    before_ms: int = 0
    page: str = ""
    back: tuple[str, ...] = ()
    page_size: int = 50
    sort: str = ""  # one of SORTS, "" for the server's order (newest first)
    descending: bool = True

    @property
    def page_number(self) -> int:
        return len(self.back) + 2 if self.page else 1

    def filter(self, version: str) -> InstanceFilter:
        """The backend's filter, with `version` resolved to a full one."""
        return InstanceFilter(
            flow=self.flow,
            status=self.status,
            version=version,
            id_contains=self.id_contains,
            where=self.where,
            started_after_ms=self.since_ms,
            started_before_ms=self.before_ms,
            page_token=self.page,
            page_size=self.page_size,
        )

    def params(self, **changes: Any) -> dict[str, str]:
        """Query parameters of this list (from its first page) with `changes` applied."""
        q = replace(self, page="", back=(), **changes)
        values = {
            "flow": q.flow,
            "status": q.status,
            "version": q.version,
            "q": q.id_contains,
            "where": conditions_text(q.where),
            "since": _local(q.since_ms),
            "before": _local(q.before_ms),
            "page_size": str(q.page_size) if q.page_size != 50 else "",
            "sort": q.sort,
            "dir": "" if not q.sort else ("desc" if q.descending else "asc"),
        }
        return {k: v for k, v in values.items() if v}

    def query(self, **changes: Any) -> str:
        """The query string of the first page of this list, with `changes` applied."""
        return urlencode(self.params(**changes))

    def next_query(self, next_token: str) -> str:
        back = (*self.back, self.page) if self.page else ()
        return urlencode({**self.params(), "page": next_token, "back": "~".join(back)})

    def previous_query(self) -> str:
        """The query string of the page before this one ('' on the first page)."""
        if not self.page:
            return ""
        if not self.back:
            return self.query()
        params = {**self.params(), "page": self.back[-1]}
        if self.back[:-1]:
            params["back"] = "~".join(self.back[:-1])
        return urlencode(params)

    def sort_query(self, column: str) -> str:
        """Sorted by `column`; the column it is sorted by already flips its direction."""
        descending = (
            not self.descending if self.sort == column else column in ("started", "updated")
        )
        params = {**self.params(sort=column, descending=descending)}
        if self.page:
            params["page"] = self.page
            if self.back:
                params["back"] = "~".join(self.back)
        return urlencode(params)

    def form(self) -> dict[str, str]:
        """The filter form's field values."""
        return {
            "flow": self.flow,
            "status": self.status,
            "version": self.version,
            "q": self.id_contains,
            "where": conditions_text(self.where),
            "since": _local(self.since_ms),
            "before": _local(self.before_ms),
            "page_size": str(self.page_size),
        }

    def bulk_conditions(self, version: str) -> tuple[list[str], str]:
        """This list's filter as conditions of the filter language, for a bulk action over it
        (`version` resolved to a full one), and '' or why it cannot be one."""
        if self.since_ms or self.before_ms:
            return [], (
                "a bulk action cannot take the start-time bounds: clear them and say age>2h "
                "or age<30m in the search instead"
            )
        conditions = [
            f"{name}{op}{value}"
            for name, op, value in (
                ("flow", "=", self.flow),
                ("status", "=", self.status),
                ("version", "=", version),
                ("id", "~", self.id_contains),
            )
            if value
        ]
        conditions += self.where
        if not conditions:
            return [], "filter the list first: a bulk action over every instance is refused"
        return conditions, ""


def list_query(params: Mapping[str, str]) -> tuple[ListQuery, list[str]]:
    """The list a query string asks for, and one message per value it cannot use (the page
    answers 400 with them rather than quietly showing something else)."""
    problems: list[str] = []
    status = params.get("status", "").strip().upper()
    if status and status not in STATUSES:
        problems.append(f"status {status[:40]!r} is not one of {', '.join(STATUSES)}")
        status = ""
    times: dict[str, int] = {}
    for key, label in (("since", "started since"), ("before", "started before")):
        text = params.get(key, "").strip()
        value = _parse_local(text) if text else 0
        if value is None:
            problems.append(f"{label} {text[:40]!r} is not a date and time like 2025-01-31T12:00")
            value = 0
        times[key] = value
    size_text = params.get("page_size", "").strip() or "50"
    size = int(size_text) if size_text.isdigit() else 0
    if not 1 <= size <= 200:
        problems.append(f"page size {size_text[:20]!r} is not a number from 1 to 200")
        size = 50
    version = params.get("version", "").strip()[:80]
    if version and not _FULL_VERSION.match(version) and not _SHORT_VERSION.match(version):
        problems.append(
            f"version {version!r} is neither sha256:<64 hex> nor the first hex digits of one"
        )
        version = ""
    sort = params.get("sort", "").strip()
    if sort and sort not in SORTS:
        problems.append(f"cannot sort by {sort[:40]!r}; sort by one of {', '.join(SORTS)}")
        sort = ""
    direction = params.get("dir", "").strip()
    if direction and direction not in ("asc", "desc"):
        problems.append(f"sort direction {direction[:20]!r} is not asc or desc")
        direction = ""
    where: list[str] = []
    try:
        where = split_conditions(params.get("where", "")[:4000])
    except JsonInputError as exc:
        problems.append(str(exc))
    if len(where) > 20:
        problems.append(f"the search has {len(where)} conditions; at most 20")
        where = []
    back = tuple(t for t in params.get("back", "")[: 200 * MAX_BACK].split("~") if t)
    query = ListQuery(
        flow=params.get("flow", "").strip()[:200],
        status=status,
        version=version,
        id_contains=params.get("q", "").strip()[:64],
        where=tuple(where),
        since_ms=times["since"],
        before_ms=times["before"],
        page=params.get("page", "")[:200],
        back=back[-MAX_BACK:] if params.get("page") else (),
        page_size=size,
        sort=sort,
        descending=direction != "asc" if direction else sort in ("", "started", "updated"),
    )
    return query, problems


def resolve_version(typed: str, versions: Sequence[str]) -> tuple[str, str]:
    """The full version `typed` names among `versions` (registered ones), and '' or a problem.
    A full version is taken as it is; a prefix of the hex (as the pages show it) must name
    exactly one."""
    if not typed or _FULL_VERSION.match(typed):
        return typed, ""
    match = _SHORT_VERSION.match(typed)
    prefix = "sha256:" + (match.group(1) if match else "")
    found = sorted({v for v in versions if v.startswith(prefix)})
    if len(found) == 1:
        return found[0], ""
    if not found:
        return "", f"no registered version starts with {typed!r}"
    shown = ", ".join(short_version(v) for v in found[:5])
    return "", f"version {typed!r} is ambiguous: it starts {shown}; type more of it"


def failed_at(view: Instance) -> str:
    """The node a FAILED instance failed at (the one its reason names); "" for any other."""
    return failed_node(view.reason) if view.status == "FAILED" else ""


def _step(view: Instance) -> str:
    """Where it is (RUNNING: the node of the token that moved last) or where it failed."""
    return view.current_node if view.status == "RUNNING" else failed_at(view)


def _row_key(column: str) -> Any:
    keys: dict[str, Any] = {
        "started": lambda r: (r.created_at_ms, r.instance_id),
        "updated": lambda r: (r.updated_at_ms, r.instance_id),
        "instance": lambda r: r.instance_id,
        "flow": lambda r: (r.flow, r.instance_id),
        "status": lambda r: (r.status, r.instance_id),
        "step": lambda r: (_step(r), r.instance_id),
    }
    return keys[column]


def sort_rows(rows: Sequence[Instance], column: str, descending: bool) -> list[Instance]:
    """The rows of one page in the order asked for ('' keeps the server's)."""
    if not column:
        return list(rows)
    return sorted(rows, key=_row_key(column), reverse=descending)
