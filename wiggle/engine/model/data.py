"""Pure helpers over context data: JSON pointers and RFC 3339 instants."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from wiggle.jsonvalue import type_name

__all__ = ["MISSING", "parse_instant_ms", "resolve_pointer", "type_name"]

MISSING: Any = object()


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or MISSING when the path does not exist."""
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        return MISSING
    cur = doc
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict):
            if part not in cur:
                return MISSING
            cur = cur[part]
        elif isinstance(cur, list):
            if (
                not part.isdigit()
                or (part != "0" and part.startswith("0"))
                or int(part) >= len(cur)
            ):
                return MISSING
            cur = cur[int(part)]
        else:
            return MISSING
    return cur


def parse_instant_ms(value: Any) -> int | None:
    """Milliseconds since the epoch of an RFC 3339 instant (with an offset), else None."""
    if not isinstance(value, str) or "T" not in value.upper():
        return None
    text = value.strip()
    if text[-1:] in ("z", "Z"):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        return None  # RFC 3339 requires an offset; a local time is ambiguous
    return int(dt.timestamp() * 1000)
