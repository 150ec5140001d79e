"""Live-instance highlighting: what the engine reports per node, reduced to a colour and a line.

The renderer takes a mapping from node id to either one state string ("RUNNING") or counts per
state ({"RUNNING": 2, "DONE": 5}, as a for_each body has). States are the engine's token states
(READY, RUNNING, WAITING, AWAITING, JOINED, DONE) plus FAILED and CANCELLED; any other string is
shown as written, in a neutral colour, so a newer engine never breaks an older renderer.

`states_from_instance` computes that mapping for a described instance with `wiggle.overlay`, the
one computation `wiggle render --instance` and the console share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from wiggle.graph import Graph
from wiggle.overlay import node_states

from ._styles import STATE_COLOURS, STATE_PRIORITY, UNKNOWN_STATE_COLOUR

__all__ = [
    "STATES",
    "InstanceStates",
    "NodeHighlight",
    "highlights",
    "states_from_instance",
    "states_from_tokens",
]

#: The states a node can be drawn in (anything else is refused by `wiggle render --states`).
STATES: tuple[str, ...] = tuple(STATE_PRIORITY)

InstanceStates: TypeAlias = Mapping[str, str | Mapping[str, int]]


class Token(Protocol):
    """What the renderer reads of a token (the engine's TokenView has these and more)."""

    @property
    def node_id(self) -> str: ...

    @property
    def state(self) -> str: ...


def states_from_tokens(tokens: Iterable[Token]) -> dict[str, dict[str, int]]:
    """Token counts per node and state, ready for `render(..., instance=...)`."""
    counts: dict[str, dict[str, int]] = {}
    for token in tokens:
        per_node = counts.setdefault(token.node_id, {})
        state = str(token.state)
        per_node[state] = per_node.get(state, 0) + 1
    return counts


def states_from_instance(graph: Graph, view: Any) -> dict[str, dict[str, int]]:
    """What `view` (a client `Instance` described with its events) looks like on `graph`:
    `wiggle.overlay.node_states` of its status, reason, tokens and events."""
    return node_states(graph, str(view.status), view.reason, view.tokens, view.events)


@dataclass(frozen=True)
class NodeHighlight:
    fill: str
    text: str  # "RUNNING" or "RUNNING 2 · DONE 5"


def _dominant(states: list[str]) -> str:
    for state in STATE_PRIORITY:
        if state in states:
            return state
    return states[0]


def _one(value: str | Mapping[str, int]) -> NodeHighlight | None:
    if isinstance(value, str):
        state = value.upper()
        return NodeHighlight(STATE_COLOURS.get(state, UNKNOWN_STATE_COLOUR), state)
    counts = {state.upper(): n for state, n in value.items() if n > 0}
    if not counts:
        return None
    ordered = sorted(counts, key=lambda s: (s not in STATE_PRIORITY, _rank(s), s))
    text = " · ".join(f"{state} {counts[state]}" for state in ordered)
    dominant = _dominant(ordered)
    return NodeHighlight(STATE_COLOURS.get(dominant, UNKNOWN_STATE_COLOUR), text)


def _rank(state: str) -> int:
    return STATE_PRIORITY.index(state) if state in STATE_PRIORITY else len(STATE_PRIORITY)


def highlights(states: InstanceStates, node_ids: set[str]) -> dict[str, NodeHighlight]:
    """The highlight of every node in `node_ids` that has a state; ids the graph lacks are
    ignored (the caller may hold states for nodes of another version)."""
    out = {}
    for node_id, value in states.items():
        if node_id in node_ids and (highlight := _one(value)) is not None:
            out[node_id] = highlight
    return out
