"""Pure helpers of the pages: query strings to filters, times and JSON to text, the signal
names a flow can receive, input checks against a flow's schema."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import orjson
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

from wiggle.console._backend import STATUSES, InstanceFilter

__all__ = [
    "JsonInputError",
    "awaited_signals",
    "filter_from_query",
    "filter_query",
    "format_ms",
    "parse_json_input",
    "pretty_json",
    "schema_problems",
    "short_version",
]

_LOCAL_FORMAT = "%Y-%m-%dT%H:%M"


class JsonInputError(ValueError):
    """Text typed into a form that is not the JSON it should be."""


def format_ms(ms: int) -> str:
    """Milliseconds since the epoch as `2025-01-31 12:00:03Z`; '' for 0."""
    if not ms:
        return ""
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + "Z"


def _parse_local(text: str) -> int:
    """A datetime-local form value (taken as UTC) as epoch ms; 0 for '' or nonsense."""
    if not text:
        return 0
    try:
        moment = dt.datetime.strptime(text[:16], _LOCAL_FORMAT).replace(tzinfo=dt.UTC)
    except ValueError:
        return 0
    return int(moment.timestamp() * 1000)


def _local(ms: int) -> str:
    if not ms:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime(_LOCAL_FORMAT)


def filter_from_query(query: Mapping[str, str]) -> InstanceFilter:
    """The instance filter a query string asks for; unknown values are dropped, not errors."""
    status = query.get("status", "").upper()
    try:
        size = max(1, min(200, int(query.get("page_size", "50"))))
    except ValueError:
        size = 50
    return InstanceFilter(
        flow=query.get("flow", "").strip()[:200],
        status=status if status in STATUSES else "",
        version=query.get("version", "").strip()[:80],
        id_contains=query.get("q", "").strip()[:64],
        started_after_ms=_parse_local(query.get("since", "")),
        started_before_ms=_parse_local(query.get("before", "")),
        page_token=query.get("page", "")[:200],
        page_size=size,
    )


def filter_query(query: InstanceFilter, **changes: str) -> str:
    """The query string of `query` (without its page unless given), with `changes` applied."""
    params = {
        "flow": query.flow,
        "status": query.status,
        "version": query.version,
        "q": query.id_contains,
        "since": _local(query.started_after_ms),
        "before": _local(query.started_before_ms),
    }
    params.update(changes)
    return urlencode({k: v for k, v in params.items() if v})


def form_values(query: InstanceFilter) -> dict[str, str]:
    """The filter form's field values."""
    return {
        "flow": query.flow,
        "status": query.status,
        "version": query.version,
        "q": query.id_contains,
        "since": _local(query.started_after_ms),
        "before": _local(query.started_before_ms),
    }


def short_version(version: str) -> str:
    """`sha256:0123456789ab…` -> `0123456789ab`."""
    return version.removeprefix("sha256:")[:12]


def pretty_json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def parse_json_input(text: str, what: str) -> Any:
    """The JSON value typed into a form field; '' is null."""
    if not text.strip():
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise JsonInputError(f"{what} is not valid JSON: {exc}") from None


def schema_problems(schema: Mapping[str, Any] | None, value: Any) -> list[str]:
    """Every way `value` fails the flow's input schema, as `path: message` lines."""
    if not schema:
        return []
    cls = validator_for(schema)
    validator = cls(schema)
    problems = []
    for error in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path)):
        path = "/" + "/".join(str(p) for p in error.absolute_path)
        problems.append(f"{path}: {error.message}")
    return problems


def awaited_signals(canonical: Mapping[str, Any]) -> list[str]:
    """The signal names the flow's awaits receive, in node order, each once."""
    names: list[str] = []
    for node in canonical.get("nodes", {}).values():
        signal = node.get("signal") if node.get("kind") == "await" else None
        if isinstance(signal, str) and signal not in names:
            names.append(signal)
    return names
