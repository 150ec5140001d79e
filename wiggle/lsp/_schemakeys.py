"""What a JSON Schema allows at a path of a document: the keys a mapping may have there and the
values a scalar may take, each with the schema's own words for it.

Walks `properties`, `patternProperties`, `additionalProperties`, `items` and `prefixItems`
through `$ref`, `oneOf`, `anyOf` and `allOf`. Where alternatives are offered (a step is one of
eleven blocks), the keys already written choose among them: a mapping that has `task` is offered
the task step's keys only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Offer", "keys_at", "values_at"]

Part = str | int
_MAX_DEPTH = 32


@dataclass(frozen=True)
class Offer:
    """A key or value a schema allows, with its description; `required` keys come first."""

    label: str
    detail: str = ""
    documentation: str = ""
    required: bool = False


def _lookup(root: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return {}
    node: Any = root
    for part in ref[1:].split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def _alternatives(root: dict[str, Any], node: Any, depth: int = 0) -> list[dict[str, Any]]:
    """`node` and what its $ref / oneOf / anyOf / allOf lead to, as plain schema mappings."""
    if not isinstance(node, dict) or depth > _MAX_DEPTH:
        return []
    found = [node]
    if "$ref" in node:
        found.extend(_alternatives(root, _lookup(root, node["$ref"]), depth + 1))
    for key in ("oneOf", "anyOf", "allOf"):
        for sub in node.get(key, ()):
            found.extend(_alternatives(root, sub, depth + 1))
    return found


def _children(root: dict[str, Any], alts: list[dict[str, Any]], part: Part) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for alt in alts:
        if isinstance(part, int):
            prefix = alt.get("prefixItems")
            if isinstance(prefix, list) and part < len(prefix):
                out.extend(_alternatives(root, prefix[part]))
            elif "items" in alt:
                out.extend(_alternatives(root, alt["items"]))
            continue
        properties = alt.get("properties", {})
        if part in properties:
            out.extend(_alternatives(root, properties[part]))
            continue
        for pattern, sub in alt.get("patternProperties", {}).items():
            if re.search(pattern, part):
                out.extend(_alternatives(root, sub))
        extra = alt.get("additionalProperties")
        if isinstance(extra, dict):
            out.extend(_alternatives(root, extra))
    return out


def _walk(root: dict[str, Any], path: Sequence[Part]) -> list[dict[str, Any]]:
    alts = _alternatives(root, root)
    for part in path:
        alts = _children(root, alts, part)
        if not alts:
            break
    return alts


def _words(node: dict[str, Any], root: dict[str, Any]) -> tuple[str, str]:
    """(title, description) of a property, from itself or what it refers to."""
    for alt in _alternatives(root, node):
        if alt.get("title") or alt.get("description"):
            return str(alt.get("title", "")), str(alt.get("description", ""))
    return "", ""


def keys_at(
    root: dict[str, Any], path: Sequence[Part], present: frozenset[str] = frozenset()
) -> list[Offer]:
    """The keys the mapping at `path` may have besides those `present`."""
    alts = [a for a in _walk(root, path) if "properties" in a]
    if not present and len(alts) > 1 and all(a.get("required") for a in alts):
        # Alternatives told apart by the key each requires first (a step's block): an empty
        # mapping is offered those keys, and the rest once one is chosen.
        alts = [
            {**a, "properties": {a["required"][0]: a["properties"].get(a["required"][0], {})}}
            for a in alts
        ]
    chosen = [a for a in alts if present and present <= set(a["properties"])]
    offers: dict[str, Offer] = {}
    for alt in chosen or alts:
        required = set(alt.get("required", ()))
        for key, sub in alt["properties"].items():
            if key in present or key == "$schema":
                continue
            title, description = _words(sub, root)
            earlier = offers.get(key)
            if earlier is None or (key in required and not earlier.required):
                offers[key] = Offer(key, title, description, key in required)
    return sorted(offers.values(), key=lambda o: (not o.required, o.label))


def values_at(root: dict[str, Any], path: Sequence[Part]) -> list[Offer]:
    """The scalar values the schema lists for the value at `path` (enums, consts, booleans)."""
    offers: dict[str, Offer] = {}
    for alt in _walk(root, path):
        title, description = str(alt.get("title", "")), str(alt.get("description", ""))
        values: list[Any] = list(alt.get("enum", ()))
        if "const" in alt:
            values.append(alt["const"])
        if alt.get("type") == "boolean":
            values.extend([True, False])
        for value in values:
            if isinstance(value, bool):
                label = "true" if value else "false"
            elif isinstance(value, str | int | float):
                label = str(value)
            else:
                continue
            offers.setdefault(label, Offer(label, title, description))
    return list(offers.values())
