"""Values as the console's pages write them: instants (in UTC, or in a schedule's zone),
lengths of time, "3 min ago", short versions, JSON."""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

import orjson

__all__ = ["ago", "duration", "format_ms", "pretty_json", "short_version", "zone", "zoned"]


def format_ms(ms: int) -> str:
    """Milliseconds since the epoch as `2025-01-31 12:00:03Z`; '' for 0."""
    if not ms:
        return ""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def zone(name: str) -> dt.tzinfo:
    """The IANA zone `name`; UTC for one this machine does not know (the offsets say so)."""
    try:
        return ZoneInfo(name)
    except Exception:
        return dt.UTC


def zoned(ms: int | None, zone_name: str) -> str:
    """An instant as RFC 3339 in the zone, with its offset, to the second: how a schedule's
    times are written (`2026-10-19T02:30:00+02:00`); '' for None."""
    if ms is None:
        return ""
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, zone(zone_name))
    except (OverflowError, ValueError, OSError):  # past the year 9999 in that zone
        return f"{ms} ms"
    return moment.isoformat(timespec="seconds")


def duration(ms: int) -> str:
    """A length of time as people say it: `850 ms`, `4.2 s`, `3 min 20 s`, `2 h 5 min`,
    `3 d 4 h`."""
    ms = max(0, int(ms))
    if ms < 1000:
        return f"{ms} ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f} s"
    s = ms // 1000
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    if s < 86400:
        return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")
    return f"{s // 86400} d" + (f" {s % 86400 // 3600} h" if s % 86400 // 3600 else "")


def ago(ms: int, now_ms: int) -> str:
    """`3 min ago`, `in 5 s`, `just now`; '' for 0."""
    if not ms:
        return ""
    delta = now_ms - ms
    if abs(delta) < 1000:
        return "just now"
    text = duration(abs(delta)).split(" ", 2)
    rounded = " ".join(text[:2])  # the largest unit only: "3 min", not "3 min 20 s"
    return f"{rounded} ago" if delta > 0 else f"in {rounded}"


def short_version(version: str) -> str:
    """`sha256:0123456789ab…` -> `0123456789ab`."""
    return version.removeprefix("sha256:")[:12]


def pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
