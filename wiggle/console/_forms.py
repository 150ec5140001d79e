"""What is typed into the console's forms: JSON (checked against the flow's input schema) and
the signal names a flow's awaits offer the signal form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from jsonschema.validators import validator_for  # type: ignore[import-untyped,unused-ignore]

__all__ = ["JsonInputError", "awaited_signals", "parse_json_input", "schema_problems"]


class JsonInputError(ValueError):
    """Text typed into a form that is not the JSON it should be."""


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
