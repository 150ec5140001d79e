"""JSON Schema errors → Diagnostics a person can act on, each at the offending key or value.

jsonschema reports in its own terms (`oneOf`, `additionalProperties`); we narrow each error to
the alternative the author meant and word it in the flow format's terms, one per location.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema.exceptions import (  # type: ignore[import-untyped,unused-ignore]
    ValidationError,
    best_match,
)

from wiggle.compiler._loader import Path, SourceMap
from wiggle.compiler._schema import step_keys, step_options
from wiggle.errors import Diagnostic

__all__ = ["schema_diagnostics"]


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
        # A step with exactly one block key was validated against that block alone (see
        # _schema._one_of), so this error means zero or several keys: say that, not 9 reasons.
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
        if not meant:
            yield error  # the wrong type for every alternative: one message lists them all
            return
        match = best_match(error.context)
        if match is not None:
            yield from _leaves(match)
            return
    yield error


_NAME_HINT = "use letters, digits, '_', '.' and '-', starting with a letter, digit or '_'"
_PATTERN_HINTS = {
    "duration": "write a whole number and a unit: 250ms, 30s, 5m, 2h or 1d",
    "JSON pointer": "write '' for the whole context or /a/0/b, with '~' only as ~0 or ~1",
    "flow name": "use lower-case letters, digits, '.', '_' and '-', starting with a letter/digit",
    "version pin": "write 'sha256:' and 64 lower-case hex digits",
    "activity name": _NAME_HINT,
    "node id": _NAME_HINT,
    "context key": "use letters, digits and '_', starting with a letter or '_'",
}


def _noun(title: str) -> str:
    """A schema title as a noun mid-sentence: "Flow name" → "flow name", "JSON pointer" kept."""
    return title if title[1:2].isupper() else title[:1].lower() + title[1:]


def _message(error: ValidationError) -> str:
    """What is wrong, in the words of the flow format rather than of JSON Schema."""
    kind = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    title = _noun(str(schema.get("title", "value")))
    if _is_step_choice(error):
        names = ", ".join(k for k, _ in step_keys())
        if isinstance(error.instance, dict):
            present = [k for k, _ in step_keys() if k in error.instance]
            if present:
                return f"a step has exactly one block key; found {', '.join(present)}"
            unknown = _bad_block_key(error)
            if unknown is not None:
                return f"{_unknown_block(unknown)}; a step needs one block key: one of {names}"
            return f"a step needs one block key: one of {names}"
        return f"a step must be a mapping with one block key ({names})"
    if (
        kind == "not"
        and isinstance(error.instance, dict)
        and {"if", "when"} <= error.instance.keys()
    ):
        return "a choice arm has `when` (a predicate activity) or `if` (an expression), not both"
    if kind == "pattern":
        if title == "flow name" and error.path and error.path[-1] == "subflow":
            return f"no flow can be named {error.instance!r}: {_PATTERN_HINTS[title]}"
        hint = _PATTERN_HINTS.get(title, f"it must match {error.validator_value}")
        return f"{error.instance!r} is not a valid {title}: {hint}"
    if kind in ("oneOf", "anyOf") and error.context:
        expected = []
        for sub in error.context:
            if sub.validator == "type" and not sub.relative_path:
                names = sub.validator_value
                for name in names if isinstance(names, list) else [names]:
                    if name not in expected:
                        expected.append(name)
        if expected:
            wanted = " or ".join(expected)
            return f"{title} must be of type {wanted}, not {_json_type(error.instance)}"
    if kind == "type":
        expected = error.validator_value
        expected_text = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{title} must be of type {expected_text}, not {_json_type(error.instance)}"
    if kind == "enum":
        options = ", ".join(str(v) for v in error.validator_value)
        return f"{error.instance!r} is not a valid {title}: expected one of {options}"
    if kind == "const":
        return f"{title} must be {error.validator_value!r}"
    if kind == "minItems" and error.validator_value == 1:
        return f"{title} must not be empty"
    if kind == "minProperties":
        return f"{title} must not be empty"
    return f"{title}: {error.message}"


def _bad_block_key(error: ValidationError) -> str | None:
    """A step without a block key: the first key that is no step option (a misspelled block)."""
    if not (_is_step_choice(error) and isinstance(error.instance, dict)):
        return None
    blocks = {k for k, _ in step_keys()}
    if any(k in blocks for k in error.instance):
        return None
    return next((k for k in error.instance if k not in step_options()), None)


def _unknown_block(key: str) -> str:
    """`unknown block 'tsk' (did you mean 'task'?)`."""
    blocks = [k for k, _ in step_keys()]
    close = difflib.get_close_matches(key, blocks, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown block {key!r}{hint}"


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


def _unknown_keys(error: ValidationError) -> Iterator[tuple[str, str]]:
    allowed = set(error.schema.get("properties", {}))
    known = ", ".join(sorted(allowed))
    for key in error.instance:
        if key not in allowed:
            yield key, f"unknown key {key!r} (expected one of: {known})"


def _missing_keys(error: ValidationError) -> Iterator[tuple[str, str]]:
    for key in error.validator_value:
        if key not in error.instance:
            if key in ("when", "if") and "steps" in error.instance:
                # A choice arm without its condition: either spelling would do.
                yield (
                    key,
                    "a choice arm needs `when` (a predicate activity) or `if` (an expression)",
                )
                continue
            hint = " (there is no implicit join)" if key == "combine" else ""
            yield key, f"missing required key {key!r}{hint}"


_PER_KEY: dict[str, Callable[[ValidationError], Iterator[tuple[str, str]]]] = {
    "additionalProperties": _unknown_keys,
    "required": _missing_keys,
}


def schema_diagnostics(validator: Any, value: Any, source: SourceMap) -> list[Diagnostic]:
    """Every schema error of `value`, each located in the source and worded for a person."""
    seen: set[tuple[Path, str]] = set()
    out: list[Diagnostic] = []
    for top in validator.iter_errors(value):
        for error in _leaves(top):
            path: Path = tuple(error.absolute_path)
            if isinstance(error.instance, dict) and error.validator in _PER_KEY:
                # One diagnostic per offending key, at the key, however jsonschema grouped them.
                for key, message in _PER_KEY[error.validator](error):
                    if ((*path, key), message) not in seen:
                        seen.add(((*path, key), message))
                        at_key = error.validator == "additionalProperties"
                        where = (*path, key) if at_key else path
                        out.append(source.diagnostic(where, message, at_key=at_key))
                continue
            message = _message(error)
            if (path, message) not in seen:
                seen.add((path, message))
                bad = _bad_block_key(error)  # point at the misspelled key itself
                if bad is not None:
                    out.append(source.diagnostic((*path, bad), message, at_key=True))
                else:
                    out.append(source.diagnostic(path, message))
    return out
