"""The limits every edge checks (server and worker alike), as small pure functions.

One JSON depth limit for every value that enters the system (a start input, a signal payload, a
step result), one rule per kind of identifier, and `quote`, which bounds how much of an
offending value an error message repeats: an error message travels in a gRPC header, and a
header that grows with the input can break the very call that reports the problem.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "MAX_ACTIVITIES",
    "MAX_ID_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_NAME_CHARS",
    "MAX_QUEUES",
    "MAX_QUOTE_CHARS",
    "MAX_REASON_CHARS",
    "bytes_may_nest_over",
    "depth_problem",
    "identifier_problem",
    "json_depth_over",
    "quote",
    "too_deep",
]

#: Nested arrays and objects a JSON value may have (a scalar is depth 0, `[]` depth 1).
MAX_JSON_DEPTH = 128
#: Instance ids: 1-64 characters of [A-Za-z0-9._:-] (the column is 64 characters wide).
MAX_ID_CHARS = 64
#: Flow names, signal names, queues, activities and worker ids.
MAX_NAME_CHARS = 200
#: A cancel reason or a handback reason.
MAX_REASON_CHARS = 2000
#: The queues one request may name (a poll, an eager dispatch), and the activities.
MAX_QUEUES = 100
MAX_ACTIVITIES = 1000
#: The most of an offending value an error message quotes.
MAX_QUOTE_CHARS = 80

_INSTANCE_ID = re.compile(r"[A-Za-z0-9._:-]+")
# As the flow schema's `flowName` pattern (spec/schema/flow.schema.json).
_FLOW_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def quote(value: str, most: int = MAX_QUOTE_CHARS) -> str:
    """`repr` of at most `most` characters of `value`, saying how long it really was."""
    if len(value) <= most:
        return repr(value)
    return f"{value[:most]!r}... ({len(value)} characters)"


def json_depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `value` (decoded JSON) nests arrays / objects deeper than `limit`.

    Iterative, so a hostile value cannot exhaust the Python stack; it stops at the first branch
    found too deep.
    """
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        if depth > limit:
            return True
        stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return False


def bytes_may_nest_over(data: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """A cheap pre-check on encoded JSON: False means it cannot nest deeper than `limit` (it
    has no more opening brackets than that); True means `json_depth_over` must decide."""
    return data.count(b"[") + data.count(b"{") > limit


def depth_problem(what: str, value: Any, encoded: bytes | None = None) -> str | None:
    """A message naming the depth limit when `value` breaks it, else None."""
    if encoded is not None and not bytes_may_nest_over(encoded):
        return None
    if not json_depth_over(value):
        return None
    return too_deep(what)


def too_deep(what: str) -> str:
    """The message for a value nested deeper than the limit."""
    return (
        f"{what} nests arrays and objects more than {MAX_JSON_DEPTH} levels deep "
        f"(the JSON depth limit is {MAX_JSON_DEPTH})"
    )


def identifier_problem(kind: str, value: str) -> str | None:
    """Why `value` is not a valid identifier of `kind`, or None when it is.

    Kinds: "instance id", "flow name", and any other name (signal, queue, activity, worker id).
    """
    if kind == "instance id":
        if not 1 <= len(value) <= MAX_ID_CHARS:
            return f"an instance id has 1 to {MAX_ID_CHARS} characters; got {len(value)}"
        if not _INSTANCE_ID.fullmatch(value):
            return f"instance id {quote(value)} may only contain letters, digits and . _ : -"
        return None
    if not value:
        return f"the {kind} is empty"
    if len(value) > MAX_NAME_CHARS:
        return f"a {kind} has at most {MAX_NAME_CHARS} characters; got {len(value)}"
    if kind == "flow name" and not _FLOW_NAME.fullmatch(value):
        return (
            f"flow name {quote(value)} may only contain lower-case letters, digits and . _ -, "
            "starting with a letter or digit"
        )
    return None
