"""How JSON values become CEL values and CEL results become JSON (docs/expressions.md).

A number's value decides its CEL type, never its spelling: an integral number within
±MAX_SAFE_INTEGER is an int (`4.0` included), any other number a double. The way back writes an
integral double within that range as an integer, so a result reads the same in every language
whatever its CEL type was. Pure: plain Python values in and out.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

from wiggle.expressions._profile import MAX_SAFE_INTEGER

__all__ = ["NotJson", "from_cel", "to_cel"]


class NotJson(ValueError):
    """A CEL result with no JSON form under the profile."""


def to_cel(value: Any) -> Any:
    """The CEL form of a JSON value (as orjson or json loads it)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else float(value)
    if isinstance(value, float):
        if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return int(value)
        return value
    if isinstance(value, list):
        return [to_cel(v) for v in value]
    if isinstance(value, dict):
        return {k: to_cel(v) for k, v in value.items()}
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def from_cel(value: Any) -> Any:
    """The JSON form of a CEL result; NotJson when it has none."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise NotJson(f"the integer {value} is outside ±(2^53 - 1): JSON cannot carry it exactly")
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise NotJson(f"the double {value} has no JSON form")
        if value.is_integer() and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return int(value)
        return value
    if isinstance(value, list):
        return [from_cel(v) for v in value]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise NotJson(f"a map key {k!r} is not a string; JSON object keys are")
            out[k] = from_cel(v)
        return out
    if isinstance(value, datetime.datetime):
        return format_timestamp(value)
    if isinstance(value, datetime.timedelta):
        return format_duration(value)
    if isinstance(value, bytes):
        raise NotJson("a bytes value has no JSON form (convert it with string())")
    raise NotJson(f"a {type(value).__name__} value has no JSON form")


def format_timestamp(value: datetime.datetime) -> str:
    """RFC 3339 in UTC with `Z`, the fraction (to microseconds) without trailing zeros."""
    utc = value.astimezone(datetime.UTC) if value.tzinfo else value
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def format_duration(value: datetime.timedelta) -> str:
    """Seconds with `s`, as CEL's duration() reads them: `90s`, `-1.5s`, `0.000001s`."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    whole, frac = divmod(abs(micros), 1_000_000)
    text = f"{sign}{whole}"
    if frac:
        text += f".{frac:06d}".rstrip("0")
    return text + "s"
