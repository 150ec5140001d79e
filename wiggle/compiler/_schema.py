"""The flow and graph JSON Schemas, and schema errors turned into located, readable Diagnostics.

The schemas ship as package data (`wiggle/compiler/schema/`), a byte-identical copy of
`spec/schema/`; a unit test fails when the two drift. Validators are built once per process.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped]
from jsonschema.exceptions import (  # type: ignore[import-untyped]
    ValidationError,
    best_match,
)

from wiggle.compiler._loader import Path, SourceMap
from wiggle.errors import Diagnostic

__all__ = ["flow_validator", "graph_validator", "load_schema", "schema_diagnostics"]


def load_schema(name: str) -> dict[str, Any]:
    """The parsed `<name>.schema.json` from the package data."""
    text = (
        resources.files("wiggle.compiler")
        .joinpath("schema", f"{name}.schema.json")
        .read_text("utf-8")
    )
    doc: dict[str, Any] = json.loads(text)
    return doc


def _is_integer(_checker: Any, instance: Any) -> bool:
    # Draft 2020-12 counts 3.0 as an integer; a flow must write 3, so the hash never depends on
    # how a parser happened to type a number.
    return isinstance(instance, int) and not isinstance(instance, bool)


_Validator = Draft202012Validator
_TYPES = _Validator.TYPE_CHECKER.redefine("integer", _is_integer)
_ONE_OF = _Validator.VALIDATORS["oneOf"]


def _discriminated(schema: dict[str, Any], instance: Any) -> int | None:
    """The only oneOf alternative `instance` can match, when its block key or kind says so."""
    if not isinstance(instance, dict):
        return None
    title = schema.get("title")
    if title == "Step":
        present = [i for i, (key, _) in enumerate(_step_keys()) if key in instance]
        return present[0] if len(present) == 1 else None
    if title == "Node" and isinstance(instance.get("kind"), str):
        return _node_kinds().get(instance["kind"])
    return None


def _one_of(validator: Any, one_of: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # Every step alternative requires its own block key (every node alternative its own
    # `kind`), so only the one named can match: checking it alone gives the same verdict
    # without validating each step nine times, and its errors are the ones worth reporting.
    index = _discriminated(schema, instance)
    if index is None:
        yield from _ONE_OF(validator, one_of, instance, schema)
    else:
        yield from validator.descend(instance, one_of[index], schema_path=index)


_StrictValidator = validators.extend(_Validator, validators={"oneOf": _one_of}, type_checker=_TYPES)


@functools.cache
def flow_validator() -> Any:
    return _StrictValidator(load_schema("flow"))


@functools.cache
def graph_validator() -> Any:
    return _StrictValidator(load_schema("graph"))


@functools.cache
def _step_keys() -> tuple[tuple[str, str], ...]:
    """(block key, $defs name) of each alternative of a step, in the schema's oneOf order."""
    defs = load_schema("flow")["$defs"]
    out = []
    for alt in defs["step"]["oneOf"]:
        name = alt["$ref"].rsplit("/", 1)[1]
        out.append((defs[name]["required"][0], name))
    return tuple(out)


@functools.cache
def _node_kinds() -> dict[str, int]:
    """Graph node kind → index of its alternative in the graph schema's node oneOf."""
    defs = load_schema("graph")["$defs"]
    refs = [alt["$ref"].rsplit("/", 1)[1] for alt in defs["node"]["oneOf"]]
    return {defs[name]["properties"]["kind"]["const"]: i for i, name in enumerate(refs)}


def _is_step_choice(error: ValidationError) -> bool:
    return (
        error.validator == "oneOf"
        and error.schema is not None
        and error.schema.get("title") == "Step"
    )


def _alternatives(error: ValidationError) -> dict[int, list[ValidationError]]:
    groups: dict[int, list[ValidationError]] = {}
    for sub in error.context or ():
        groups.setdefault(sub.schema_path[0], []).append(sub)
    return groups


def _leaves(error: ValidationError) -> Iterator[ValidationError]:
    """The errors worth showing for `error`: a oneOf narrowed to the alternative meant."""
    if _is_step_choice(error):
        # The block key says which alternative the author meant; without exactly one, the
        # step-level message is the useful one.
        present = [
            k for k, _ in _step_keys() if isinstance(error.instance, dict) and k in error.instance
        ]
        if len(present) == 1:
            index = [k for k, _ in _step_keys()].index(present[0])
            for sub in _alternatives(error).get(index, ()):
                yield from _leaves(sub)
            return
        yield error
        return
    if error.validator in ("oneOf", "anyOf") and error.context:
        # Alternatives of another JSON type were never meant (a string is not a malformed
        # object); if one alternative is left, its errors are the ones to show.
        groups = _alternatives(error)
        meant = [
            errors
            for errors in groups.values()
            if not any(e.validator == "type" and not e.relative_path for e in errors)
        ]
        if len(meant) == 1:
            for sub in meant[0]:
                yield from _leaves(sub)
            return
        match = best_match(error.context)
        if match is not None:
            yield from _leaves(match)
            return
    yield error


def _message(error: ValidationError, source: SourceMap) -> tuple[str, bool]:
    """(message, located at the offending key rather than the value)."""
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    title = str(schema.get("title", "value")).lower()
    if _is_step_choice(error):
        names = ", ".join(k for k, _ in _step_keys())
        if isinstance(error.instance, dict):
            present = [k for k, _ in _step_keys() if k in error.instance]
            if present:
                return f"a step has exactly one block key; found {', '.join(present)}", False
            return f"a step needs one block key: one of {names}", False
        return f"a step must be a mapping with one block key ({names})", False
    if kind == "additionalProperties":
        return "", True  # handled per key by the caller
    if kind == "required":
        missing = str(error.message).split("'")[1] if "'" in error.message else "?"
        hint = " (there is no implicit join)" if missing == "combine" else ""
        return f"missing required key '{missing}'{hint}", False
    if kind == "pattern":
        return (
            f"{error.instance!r} is not a valid {title}: it must match {error.validator_value}",
            False,
        )
    if kind == "type":
        expected = error.validator_value
        expected_text = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{title} must be of type {expected_text}, not {_json_type(error.instance)}", False
    if kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        return f"{error.instance!r} is not a valid {title}: expected one of {options}", False
    if kind == "const":
        return f"{title} must be {error.validator_value!r}", False
    if kind == "minItems" and error.validator_value == 1:
        return f"{title} must not be empty", False
    if kind == "minProperties":
        return f"{title} must not be empty", False
    del source
    return f"{title}: {error.message}", False


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def schema_diagnostics(validator: Any, value: Any, source: SourceMap) -> list[Diagnostic]:
    """Every schema error of `value`, each located in the source and worded for a person."""
    seen: set[tuple[Path, str]] = set()
    out: list[Diagnostic] = []
    for top in validator.iter_errors(value):
        for error in _leaves(top):
            path: Path = tuple(error.absolute_path)
            if error.validator == "additionalProperties" and isinstance(error.instance, dict):
                allowed = (
                    set(error.schema.get("properties", {}))
                    if isinstance(error.schema, dict)
                    else set()
                )
                for key in error.instance:
                    if key not in allowed:
                        known = ", ".join(sorted(allowed))
                        msg = f"unknown key {key!r} (expected one of: {known})"
                        if ((*path, key), msg) not in seen:
                            seen.add(((*path, key), msg))
                            out.append(source.diagnostic((*path, key), msg, at_key=True))
                continue
            message, _ = _message(error, source)
            if (path, message) in seen:
                continue
            seen.add((path, message))
            out.append(source.diagnostic(path, message))
    return out
