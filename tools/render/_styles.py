"""How each part of a diagram looks: shapes per node kind, palettes and state colours.

Kept as data so the look can change without touching the structure code, and so the unit tests
can name the shape they expect for a kind instead of repeating a literal.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DEFAULT_FILL",
    "DIM",
    "FONT",
    "KIND_SHAPES",
    "LANE_FILLS",
    "PAIR_COLOURS",
    "STATE_COLOURS",
    "STATE_PRIORITY",
    "TIMEOUT_COLOUR",
    "UNKNOWN_STATE_COLOUR",
    "UNTAKEN_COLOUR",
    "kind_attrs",
    "lane_fill",
    "pair_colour",
]

FONT = "Helvetica,Arial,sans-serif"

# One shape per node kind. Fork and join are mirror-image trapezia (spreading out, gathering in)
# filled with their pair's colour; a sleep is an ellipse with a clock glyph (a circle would swell
# around a long `until` pointer); the hexagon is the flowchart "preparation" symbol used for loops
# over a collection; the end is a double circle as in most process notations.
KIND_SHAPES: Mapping[str, str] = {
    "task": "box",
    "predicate": "diamond",
    "condition": "diamond",
    "set": "box",
    "fork": "trapezium",
    "join": "invtrapezium",
    "foreach": "hexagon",
    "sleep": "ellipse",
    "await": "cds",
    "subflow": "box3d",
    "end": "doublecircle",
    # Not a kind of its own: an await that carries a human task (`human`) is drawn as a folder,
    # a card in a person's inbox, so a person's step stands out from a raw signal's wait.
    "human": "folder",
}

DEFAULT_FILL = "#ffffff"

# Extra attributes per kind beside the shape (fills for the pair kinds are set per pair).
_KIND_EXTRA: Mapping[str, Mapping[str, str]] = {
    "task": {"style": "rounded,filled", "fillcolor": DEFAULT_FILL},
    "predicate": {"style": "filled", "fillcolor": "#fff8e1"},
    # Expression nodes run no activity: dashed outlines tell them from a worker's steps.
    "condition": {"style": "filled,dashed", "fillcolor": "#fff8e1"},
    "set": {"style": "filled,dashed", "fillcolor": "#f1f8e9"},
    "fork": {"style": "filled", "fontcolor": "#ffffff"},
    "join": {"style": "filled", "fontcolor": "#ffffff"},
    "foreach": {"style": "filled", "fontcolor": "#ffffff"},
    "sleep": {"style": "filled", "fillcolor": "#eef3fb"},
    # The cds outline eats into its box, so the label needs more room than the default margin.
    "await": {"style": "filled", "fillcolor": "#f3e5f5", "margin": "0.25,0.1"},
    # The box3d face drawn along its top and right edges sits on the label: more room there.
    "subflow": {"style": "filled", "fillcolor": "#e8f5e9", "margin": "0.18,0.18"},
    "end": {"style": "filled", "fillcolor": "#eeeeee", "width": "0.3"},
    # The folder's tab along the top sits on the label: more room there.
    "human": {"style": "filled", "fillcolor": "#fce4ec", "margin": "0.18,0.14"},
}

# Fork/join and foreach/join pairs share one of these, in order of appearance; they are dark
# enough to carry white text on the filled fork and join nodes.
PAIR_COLOURS: tuple[str, ...] = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#e377c2",
    "#8c564b",
    "#17becf",
    "#7f7f7f",
)

# Queue lanes get light fills so the nodes inside stay readable.
LANE_FILLS: tuple[str, ...] = (
    "#f2f7fd",
    "#fdf5ec",
    "#f1faf1",
    "#f7f2fb",
    "#fdf1f6",
    "#f4f4f4",
)

TIMEOUT_COLOUR = "#b03a2e"
UNTAKEN_COLOUR = "#d62728"  # `wiggle render --coverage`: an edge no scenario took
DIM = "#a0a0a0"

# Live-instance highlighting: the engine's token states plus the outcomes a node can show.
STATE_COLOURS: Mapping[str, str] = {
    "FAILED": "#f4a6a6",
    "RUNNING": "#8ec5ff",
    "READY": "#fff3a0",
    "WAITING": "#d7c9f2",
    "AWAITING": "#f9cf9a",
    "JOINED": "#a9e4e0",
    "DONE": "#b9e6b0",
    "CANCELLED": "#d0d0d0",
    # `wiggle render --diff`: what a node is in the new version compared with the old one.
    "ADDED": "#b9e6b0",
    "CHANGED": "#fff3a0",
    "MOVED": "#f9cf9a",
    "KIND_CHANGED": "#f4a6a6",
}
UNKNOWN_STATE_COLOUR = "#e0e0e0"

# When a node holds tokens in several states, the first of these present picks its colour: what
# needs attention (a failure, work in flight) wins over what is settled.
STATE_PRIORITY: tuple[str, ...] = (
    "FAILED",
    "RUNNING",
    "READY",
    "WAITING",
    "AWAITING",
    "JOINED",
    "CANCELLED",
    "DONE",
)


def kind_attrs(kind: str) -> dict[str, str]:
    """The base attributes of a node of `kind` (or of the look "human", an await carrying a
    human task): its shape and the kind's fixed style."""
    return {"shape": KIND_SHAPES[kind], **_KIND_EXTRA[kind]}


def pair_colour(index: int) -> str:
    return PAIR_COLOURS[index % len(PAIR_COLOURS)]


def lane_fill(index: int) -> str:
    return LANE_FILLS[index % len(LANE_FILLS)]
