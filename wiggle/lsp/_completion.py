"""Completion: keys and values from the document's JSON Schema, names from the workspace.

In a flow: an activity where a step names one (task, filter, choice `when`, loop `while`,
combine, apply; predicates first where a predicate is wanted), a queue the workspace's flows
use, a flow name for `subflow`, and every key and enumerated value the flow schema allows where
the cursor is (a new step is offered the eleven blocks). In a scenario file: the node ids of the
flow under test in `path`, `visits`, `skips`, `waiting_at` and an event's `node`; its signals for
`signal`; its activities as keys of `activities` and `calls`. In a schedule: flow names for
`flow`. Works on text that does not parse: the cursor's place is read from the layout.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib import resources
from typing import Any

from lsprotocol import types

from wiggle.compiler import CompiledFlow, flow_schema
from wiggle.lsp._context import Cursor
from wiggle.lsp._flowdoc import ACTIVITY_KEYS
from wiggle.lsp._hover import NODE_LISTS
from wiggle.lsp._index import WorkspaceIndex
from wiggle.lsp._kinds import Kind
from wiggle.lsp._schemakeys import Offer, keys_at, values_at

__all__ = ["complete", "schema_of"]


@functools.cache
def _package_schema(package: str, name: str) -> dict[str, Any]:
    text = resources.files(package).joinpath("schema", name).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_of(kind: Kind) -> dict[str, Any] | None:
    if kind is Kind.FLOW:
        return flow_schema()
    if kind is Kind.SCENARIOS:
        return _package_schema("wiggle.testing", "scenario.schema.json")
    if kind is Kind.SCHEDULE:
        return _package_schema("wiggle.schedules", "schedule.schema.json")
    return None


def _item(
    label: str,
    kind: types.CompletionItemKind,
    edit_range: types.Range,
    *,
    detail: str = "",
    documentation: str = "",
    insert: str | None = None,
    rank: int = 1,
) -> types.CompletionItem:
    text = insert if insert is not None else label
    return types.CompletionItem(
        label=label,
        kind=kind,
        detail=detail or None,
        documentation=documentation or None,
        sort_text=f"{rank}{label}",
        filter_text=label,
        text_edit=types.TextEdit(range=edit_range, new_text=text),
    )


def complete(
    kind: Kind,
    cursor: Cursor,
    edit_range: types.Range,
    index: WorkspaceIndex,
    tested: CompiledFlow | None,
) -> list[types.CompletionItem]:
    """What may be written at `cursor`; `edit_range` is the word typed so far."""
    items: list[types.CompletionItem] = []

    def add(
        labels: Iterable[str], item_kind: types.CompletionItemKind, detail: str = "", rank: int = 1
    ) -> None:
        for label in sorted(set(labels)):
            items.append(_item(label, item_kind, edit_range, detail=detail, rank=rank))

    key = cursor.key
    if kind is Kind.FLOW and not cursor.at_key and key in ACTIVITY_KEYS:
        items.extend(_activities(index, edit_range, predicate=ACTIVITY_KEYS[key]))
    elif kind is Kind.FLOW and not cursor.at_key and key == "queue":
        add(index.queues(), types.CompletionItemKind.Value, "a queue the workspace's flows use")
    elif kind in (Kind.FLOW, Kind.SCHEDULE) and not cursor.at_key and key in ("subflow", "flow"):
        names = {e.name for e in index.flows() if e.name}
        add(names, types.CompletionItemKind.Module, "a flow of the workspace")
    elif kind is Kind.SCENARIOS and tested is not None:
        names, item_kind, detail = _scenario(cursor, tested)
        add(names, item_kind, detail)
    schema = schema_of(kind)
    if schema is not None and not items:
        path = cursor.path
        if cursor.at_key:
            offers = keys_at(schema, path, cursor.present)
            for offer in offers:
                items.append(_key_item(offer, edit_range))
        if not cursor.at_key or cursor.in_list:
            for offer in values_at(schema, path):
                items.append(
                    _item(
                        offer.label,
                        types.CompletionItemKind.EnumMember,
                        edit_range,
                        detail=offer.detail,
                        documentation=offer.documentation,
                    )
                )
    return items


def _key_item(offer: Offer, edit_range: types.Range) -> types.CompletionItem:
    return _item(
        offer.label,
        types.CompletionItemKind.Property,
        edit_range,
        detail=offer.detail,
        documentation=offer.documentation,
        insert=f"{offer.label}: ",
        rank=0 if offer.required else 1,
    )


def _activities(
    index: WorkspaceIndex, edit_range: types.Range, *, predicate: bool
) -> list[types.CompletionItem]:
    by_name: dict[str, list[tuple[str, str, str]]] = {}
    for path, reg in index.registrations():
        by_name.setdefault(reg.name, []).append((reg.language, reg.kind, path))
    items = []
    for name, where in sorted(by_name.items()):
        languages = ", ".join(sorted({lang for lang, _, _ in where}))
        fits = any((k == "predicate") == predicate for _, k, _ in where)
        what = "predicate" if any(k == "predicate" for _, k, _ in where) else "activity"
        detail = f"{what} ({languages})"
        docs = "\n".join(f"- {path}" for _, _, path in where)
        items.append(
            _item(
                name,
                types.CompletionItemKind.Function,
                edit_range,
                detail=detail,
                documentation=f"registered in:\n{docs}",
                rank=0 if fits else 1,
            )
        )
    return items


def _scenario(cursor: Cursor, flow: CompiledFlow) -> tuple[set[str], types.CompletionItemKind, str]:
    """What the flow under test offers at the cursor of a scenario file: (names, kind, detail)."""
    key = cursor.key
    nodes = flow.document["nodes"]
    value = not cursor.at_key or cursor.in_list
    if (key in NODE_LISTS and value) or (key == "node" and not cursor.at_key):
        ids = {n for n in nodes if n != "end"}
        return ids, types.CompletionItemKind.EnumMember, f"a node of {flow.name}"
    if key == "signal" and not cursor.at_key:
        signals = {n["signal"] for n in nodes.values() if n.get("kind") == "await"}
        return signals, types.CompletionItemKind.Event, f"a signal {flow.name} awaits"
    if cursor.at_key and not cursor.in_list and key in ("activities", "calls"):
        names = {n["activity"] for n in nodes.values() if "activity" in n}
        names |= {
            n["apply"]["activity"] for n in nodes.values() if isinstance(n.get("apply"), dict)
        }
        return names, types.CompletionItemKind.Function, f"an activity of {flow.name}"
    return set(), types.CompletionItemKind.Text, ""
