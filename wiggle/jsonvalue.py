"""JSON values as Wiggle keeps them: equality that tells 4 from 4.0, a short rendering, and
the words a message uses for a value's kind.

The conformance runner, the one-flow mode check and `wiggle test` all compare contexts and
show them in their messages; this is the one rule for both.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["json_equal", "show", "type_name"]


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as Wiggle keeps them (docs/worker-protocol.md, "JSON values"):
    an integer and a number written with a fraction are different (4 is not 4.0, as a worker must
    not turn one into the other), integers compare exactly at any size, and true is not 1 (as it
    is in Python). A value that is not JSON (a sentinel for "none read") equals only itself."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def show(value: Any, limit: int = 400) -> str:
    """`value` as compact JSON with sorted keys, cut to `limit` characters ("..." after)."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= limit else text[:limit] + "..."


def type_name(value: Any) -> str:
    """What a JSON value is, in the words every message and every SDK uses: null, a boolean,
    a number, a string, a list, an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
