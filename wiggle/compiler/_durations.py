"""Duration strings (`250ms`, `30s`, `5m`, `2h`, `1d`) → integer milliseconds."""

from __future__ import annotations

import re

__all__ = ["DURATION_PATTERN", "MAX_DURATION_MS", "is_duration_syntax", "parse_duration"]

DURATION_PATTERN = r"^[0-9]+(ms|s|m|h|d)$"
_DURATION = re.compile(DURATION_PATTERN)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 365 * _UNIT_MS["d"]


def is_duration_syntax(text: str) -> bool:
    return _DURATION.match(text) is not None


def parse_duration(text: str) -> int:
    """Milliseconds of `text`; ValueError, worded for the user, when malformed or out of range."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(
            f"{text!r} is not a duration: write a whole number and a unit (250ms, 30s, 5m, 2h, 1d)"
        )
    unit = match.group(1)
    digits = text[: -len(unit)]
    # Past 12 digits every unit is beyond a year; refuse before building a giant int.
    ms = int(digits) * _UNIT_MS[unit] if len(digits) <= 12 else MAX_DURATION_MS + 1
    if ms <= 0:
        raise ValueError(f"duration {text!r} must be greater than zero")
    if ms > MAX_DURATION_MS:
        raise ValueError(f"duration {text!r} is longer than the maximum of 365d")
    return ms
