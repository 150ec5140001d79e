"""The instance filter language: `FIELD OP VALUE` conditions, all of which must hold.

One grammar for every surface: `wiggle list --where`, the `--filter` of bulk actions and
migration plans, the console's search box and the client API, which sends the conditions as
text so the server parses them once, here. Pure: no I/O, no engine.

    status=FAILED            flow=order-fulfilment     version=f324e5a28a92 (a prefix)
    age>1h   age<=30m        node=authorise            reason~card declined
    id~A-10                  order=A-1002              total>=5000     vip=true

Fields: the built-in ones below, or a search attribute a flow declares (docs/flow-format.md).
Operators: `=` `!=` `>` `>=` `<` `<=` and `~` (contains, ignoring case). A value runs to the end
of the condition; `status` and `flow` take a comma-separated list with `=` and `!=`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from wiggle.errors import InvalidRequest

__all__ = [
    "BUILTIN_FIELDS",
    "MAX_CONDITIONS",
    "OPERATORS",
    "Condition",
    "parse_condition",
    "parse_filter",
]

#: Each built-in field and the operators it takes.
BUILTIN_FIELDS: dict[str, tuple[str, ...]] = {
    "id": ("=", "!=", "~"),
    "flow": ("=", "!="),
    "version": ("=", "!="),
    "status": ("=", "!="),
    "age": (">", ">=", "<", "<="),
    "node": ("=",),
    "reason": ("=", "~"),
}
#: Longest first, so `>=` is not read as `>` followed by `=...`.
OPERATORS = (">=", "<=", "!=", "=", ">", "<", "~")
#: At most this many conditions in one filter, and this long each.
MAX_CONDITIONS = 20
MAX_CONDITION_CHARS = 1000

_FIELD = re.compile(r"\s*([a-z][a-z0-9_]*)\s*(>=|<=|!=|=|>|<|~)\s*(.*?)\s*$", re.DOTALL)


@dataclass(frozen=True)
class Condition:
    """One `FIELD OP VALUE`; `value` is still text (its type depends on the field)."""

    field: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"


def parse_condition(text: str) -> Condition:
    """One condition; InvalidRequest with what is wrong and how it should look."""
    if len(text) > MAX_CONDITION_CHARS:
        raise InvalidRequest(f"filter condition is over {MAX_CONDITION_CHARS} characters")
    match = _FIELD.match(text)
    if match is None:
        raise InvalidRequest(
            f"filter condition {text[:80]!r} is not FIELD OP VALUE (for example status=FAILED, "
            "age>1h, order=A-1002); operators: " + " ".join(OPERATORS)
        )
    field, op, value = match.groups()
    if value == "":
        raise InvalidRequest(f"filter condition {text[:80]!r} has no value after {op!r}")
    allowed = BUILTIN_FIELDS.get(field)
    if allowed is not None and op not in allowed:
        raise InvalidRequest(
            f"filter condition {text[:80]!r}: {field} takes {' '.join(allowed)}, not {op}"
        )
    return Condition(field, op, value)


def parse_filter(texts: Iterable[str]) -> tuple[Condition, ...]:
    """Every condition of a filter, in order (blank entries ignored)."""
    conditions = tuple(parse_condition(t) for t in texts if t.strip())
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidRequest(f"a filter has at most {MAX_CONDITIONS} conditions")
    return conditions
