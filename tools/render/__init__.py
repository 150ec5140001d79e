"""Graphviz diagrams of Wiggle flows and of live instances (installed as `wiggle_render`).

    to_dot(graph)                      DOT text: one shape per node kind, fork/join pairs in one
                                       colour and cluster, loop back edges dashed, one lane per
                                       queue when a flow uses several
    render(graph, "svg")               bytes of an svg / png / pdf (through Graphviz's `dot`) or dot
    render(graph, "svg", instance={"capture": "RUNNING", "print_label": {"DONE": 1}})
                                       the same with the instance's node states highlighted
    render(graph, "svg", instance=states_from_instance(graph, view))
                                       ... from a DescribeInstance answer with its events (the
                                       overlay of wiggle.overlay, as the console draws it)
    render(graph, "svg", coverage=CoverageMarks(taken, visited))
                                       the flow with the edges no scenario took marked
                                       (`wiggle test --coverage`)

`wiggle render FLOW -o OUT` is the command-line way in.
"""

from __future__ import annotations

from ._diagram import CoverageMarks, to_dot
from ._render import (
    FORMATS,
    GraphvizNotFound,
    RenderError,
    ensure_dot,
    format_for_path,
    render,
)
from ._states import STATES, InstanceStates, states_from_instance, states_from_tokens

__all__ = [
    "FORMATS",
    "STATES",
    "CoverageMarks",
    "GraphvizNotFound",
    "InstanceStates",
    "RenderError",
    "ensure_dot",
    "format_for_path",
    "render",
    "states_from_instance",
    "states_from_tokens",
    "to_dot",
]
