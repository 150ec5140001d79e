"""RFC 8785 (JCS) canonical JSON: the bytes a flow's version is the SHA-256 of.

Keys are sorted by their UTF-16 code units, there is no insignificant whitespace, strings are
escaped exactly as ECMAScript's JSON.stringify does, and numbers use ECMAScript's shortest
round-trip form. Integers are written as they are; the loader already refused any beyond ±2^53,
which is where the two number forms would disagree.
"""

from __future__ import annotations

import hashlib
import math
from decimal import Decimal
from typing import Any

__all__ = ["canonical_json", "format_number", "version_of"]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
for _code in range(0x20):
    _ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")
_NEEDS_ESCAPE = frozenset(_ESCAPES)


def _string(text: str) -> str:
    if _NEEDS_ESCAPE.isdisjoint(text):
        return f'"{text}"'
    return '"' + "".join(_ESCAPES.get(c, c) for c in text) + '"'


def format_number(value: float) -> str:
    """ECMAScript Number.prototype.toString of a finite double (RFC 8785 §3.2.2.3)."""
    if not math.isfinite(value):
        raise ValueError(f"{value} has no JSON form")
    if value == 0:
        return "0"
    if value < 0:
        return "-" + format_number(-value)
    # repr is the shortest decimal that round-trips; read it as digits * 10**exp.
    sign_digits_exp = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, sign_digits_exp.digits)).rstrip("0")
    exp = int(sign_digits_exp.exponent) + len(sign_digits_exp.digits) - len(digits)
    # n: where the decimal point sits relative to the first digit (value = 0.digits * 10**n).
    n = len(digits) + exp
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    sign = "+" if n - 1 >= 0 else "-"
    head = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{head}e{sign}{abs(n - 1)}"


def _write(value: Any, out: list[str]) -> None:
    # Recursion is safe for compiled flows: the loader caps nesting at 64 levels.
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_number(value))
    elif isinstance(value, str):
        out.append(_string(value))
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, key in enumerate(sorted(value, key=lambda k: k.encode("utf-16-be"))):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise TypeError(f"{type(value).__name__} is not JSON data")


def canonical_json(value: Any) -> bytes:
    """The RFC 8785 bytes of `value` (dict, list, str, int, float, bool or None, nested)."""
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8")


def version_of(canonical: bytes) -> str:
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
