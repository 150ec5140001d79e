"""The flow and graph JSON Schemas and the validators built from them (once per process).

The schemas ship as package data (`wiggle/compiler/schema/`), a byte-identical copy of
`spec/schema/`; a unit test fails when the two drift.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, validators  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "flow_schema",
    "flow_validator",
    "forget_valid_steps",
    "graph_validator",
    "load_schema",
    "step_keys",
]


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
        present = [i for i, (key, _) in enumerate(step_keys()) if key in instance]
        return present[0] if len(present) == 1 else None
    if title == "Node" and isinstance(instance.get("kind"), str):
        return _node_kinds().get(instance["kind"])
    return None


#: Steps known valid, by their JSON text: an editor checks the same flow after every change,
#: and most steps of it are what they were. Only verdicts without errors are kept, so every
#: error is still found, and worded, by the validator itself.
_VALID_STEPS: dict[str, None] = {}
#: How much JSON text is kept at most (all of it forgotten at once past that): a server that
#: registers flows for months keeps a few megabytes, not every step it ever saw.
_VALID_STEPS_CHARS = 8 << 20
_kept_chars = 0


def forget_valid_steps() -> None:
    """Forget the steps known valid (benchmarks of a first compile)."""
    global _kept_chars
    _VALID_STEPS.clear()
    _kept_chars = 0


def _step_alternatives() -> Any:
    """The flow schema's oneOf of a step (the very list the validator walks)."""
    return flow_schema()["$defs"]["step"]["oneOf"]


def _fingerprint(instance: Any) -> str | None:
    try:
        return json.dumps(instance, sort_keys=True, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


def _remember(key: str) -> None:
    global _kept_chars
    if _kept_chars + len(key) > _VALID_STEPS_CHARS:
        forget_valid_steps()
    _VALID_STEPS[key] = None
    _kept_chars += len(key)


def _one_of(validator: Any, one_of: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # Every step alternative requires its own block key (every node alternative its own
    # `kind`), so only the one named can match: checking it alone gives the same verdict
    # without validating each step nine times, and its errors are the ones worth reporting.
    index = _discriminated(schema, instance)
    if index is None:
        yield from _ONE_OF(validator, one_of, instance, schema)
        return
    key = None
    if one_of is _step_alternatives():
        text = _fingerprint(instance)
        key = None if text is None else f"{index}:{text}"
        if key is not None and key in _VALID_STEPS:
            return
    errors = list(validator.descend(instance, one_of[index], schema_path=index))
    if key is not None and not errors:
        _remember(key)
    yield from errors


_StrictValidator = validators.extend(_Validator, validators={"oneOf": _one_of}, type_checker=_TYPES)


@functools.cache
def flow_schema() -> dict[str, Any]:
    """The flow format's JSON Schema, parsed once (callers must not change it)."""
    return load_schema("flow")


@functools.cache
def flow_validator() -> Any:
    return _StrictValidator(flow_schema())


@functools.cache
def graph_validator() -> Any:
    return _StrictValidator(load_schema("graph"))


@functools.cache
def step_keys() -> tuple[tuple[str, str], ...]:
    """(block key, $defs name) of each alternative of a step, in the schema's oneOf order."""
    defs = load_schema("flow")["$defs"]
    out = []
    for alt in defs["step"]["oneOf"]:
        name = alt["$ref"].rsplit("/", 1)[1]
        out.append((defs[name]["required"][0], name))
    return tuple(out)


@functools.cache
def step_options() -> frozenset[str]:
    """Every key some kind of step accepts besides its block key (id, queue, retry, ...)."""
    defs = load_schema("flow")["$defs"]
    blocks = {key for key, _ in step_keys()}
    return (
        frozenset(key for _, name in step_keys() for key in defs[name].get("properties", {}))
        - blocks
    )


@functools.cache
def _node_kinds() -> dict[str, int]:
    """Graph node kind → index of its alternative in the graph schema's node oneOf."""
    defs = load_schema("graph")["$defs"]
    refs = [alt["$ref"].rsplit("/", 1)[1] for alt in defs["node"]["oneOf"]]
    return {defs[name]["properties"]["kind"]["const"]: i for i, name in enumerate(refs)}
