"""`to_dot`: a graph (and optionally a live instance's node states) as Graphviz DOT text."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from html import escape

from wiggle.graph import Await, Condition, ExecutionMode, Graph, Node, Predicate

from ._dotwriter import DotWriter, Html, quote
from ._labels import full_text, node_label
from ._layout import Edge, Group, Layout, analyse
from ._states import InstanceStates, NodeHighlight, highlights
from ._styles import (
    DIM,
    FONT,
    TIMEOUT_COLOUR,
    UNTAKEN_COLOUR,
    kind_attrs,
    lane_fill,
    pair_colour,
)

__all__ = ["START", "CoverageMarks", "filtered_id", "to_dot"]


@dataclass(frozen=True)
class CoverageMarks:
    """What the scenarios took (`wiggle test --coverage`): edges by key, nodes by id. The
    diagram marks every other edge as untaken and fades every other node."""

    taken: frozenset[str]
    visited: frozenset[str]


# Pseudo-node ids. Real node ids cannot contain ':' (docs/graph.md), so these never clash.
START = "::start"
_PAIR_KINDS = ("fork", "join", "foreach")
_EDGE_COLOUR = "#555555"


def filtered_id(predicate_id: str) -> str:
    """The pseudo-node a filter's false edge points at (the token ends there)."""
    return f"{predicate_id}::filtered"


def _title(graph: Graph, caption: str = "") -> Html:
    details = [graph.version[:19] + "…" if len(graph.version) > 19 else graph.version]
    if graph.execution is not ExecutionMode.DEFAULT:
        details.append(graph.execution.value)
    small = escape(" · ".join(d for d in details if d), quote=False)
    extra = f'<BR/><FONT POINT-SIZE="9">{escape(caption, quote=False)}</FONT>' if caption else ""
    return Html(
        f'<B>{escape(graph.name, quote=False)}</B><BR/><FONT POINT-SIZE="9">{small}</FONT>{extra}'
    )


def _look(node: Node) -> str:
    """Which shape and style a node takes: its kind's, but a human step's await has its own."""
    if isinstance(node, Await) and node.human is not None:
        return "human"
    return node.kind


def _node_attrs(node: Node, layout: Layout, lit: dict[str, NodeHighlight] | None) -> dict[str, str]:
    highlight = lit.get(node.id) if lit is not None else None
    attrs = kind_attrs(_look(node))
    attrs["label"] = Html(node_label(node, highlight.text if highlight else ""))
    attrs["tooltip"] = full_text(node)
    if node.kind in _PAIR_KINDS:
        colour = pair_colour(layout.pair_index[node.id])
        attrs["color"] = attrs["fillcolor"] = colour
    if lit is not None:
        if highlight is not None:
            attrs.update(fillcolor=highlight.fill, fontcolor="#000000", penwidth="2.5")
        else:  # not reached (yet) by this instance: recede
            attrs.update(fontcolor=DIM, fillcolor="#ffffff")
            if node.kind not in _PAIR_KINDS:
                attrs["color"] = DIM
    return attrs


def _edge_attrs(edge: Edge, graph: Graph, layout: Layout) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if edge.label:
        attrs["label"] = edge.label
    target = graph.nodes.get(edge.target) if edge.target is not None else None
    if edge.role in ("branch", "body"):
        colour = pair_colour(layout.pair_index[edge.source])
        attrs.update(color=colour, fontcolor=colour, penwidth="1.5")
    elif target is not None and target.kind == "join":
        attrs["color"] = pair_colour(layout.pair_index[target.id])
    elif edge.role == "back":
        # Drawn against the flow and left out of ranking, so the loop body still reads top-down.
        attrs.update(style="dashed", constraint="false", color=_EDGE_COLOUR)
    elif edge.role == "on_timeout":
        attrs.update(style="dashed", color=TIMEOUT_COLOUR, fontcolor=TIMEOUT_COLOUR)
    elif edge.role == "filtered":
        attrs.update(style="dashed", color=DIM, fontcolor=DIM)
    return attrs


def _untaken(attrs: dict[str, str], edge: Edge) -> dict[str, str]:
    """An edge no scenario took: red, dashed and said so."""
    label = f"{edge.label} · untaken" if edge.label else "untaken"
    return {
        **attrs,
        "color": UNTAKEN_COLOUR,
        "fontcolor": UNTAKEN_COLOUR,
        "style": "dashed",
        "penwidth": "2",
        "label": label,
    }


def _unvisited(attrs: dict[str, str], node: Node) -> dict[str, str]:
    attrs = {**attrs, "fontcolor": DIM}
    if node.kind not in _PAIR_KINDS:
        attrs.update(color=DIM, fillcolor="#ffffff")
    return attrs


def _group_attrs(group: Group) -> dict[str, str]:
    colour = pair_colour(group.colour_index)
    if group.kind == "branch":
        return {"label": "", "style": "dashed,rounded", "color": colour}
    if group.kind == "loop":
        return {
            "label": "loop ↺",
            "labeljust": "l",
            "fontsize": "9",
            "style": "dashed,rounded",
            "color": "#888888",
            "fontcolor": "#666666",
        }
    return {"label": "", "style": "rounded", "color": colour, "penwidth": "1.5"}


def _placement(graph: Graph, layout: Layout) -> dict[str | None, list[str]]:
    """Drawn node ids (real and pseudo) per cluster key: a group's or lane's key, None = top."""
    placed: dict[str | None, list[str]] = defaultdict(list)
    for node_id in layout.order:
        if layout.lanes:
            key = f"lane:{layout.lane_of[node_id]}" if node_id in layout.lane_of else None
        else:
            key = layout.group_of.get(node_id)
        placed[key].append(node_id)
        node = graph.nodes[node_id]
        if isinstance(node, Predicate | Condition) and node.alt is None:
            placed[key].append(filtered_id(node_id))
    return placed


def _write_node(
    w: DotWriter,
    node_id: str,
    graph: Graph,
    layout: Layout,
    lit: dict[str, NodeHighlight] | None,
    coverage: CoverageMarks | None,
) -> None:
    if node_id.endswith("::filtered"):
        w.node(
            node_id, {"shape": "plaintext", "label": "filtered", "fontcolor": DIM, "fontsize": "9"}
        )
        return
    node = graph.nodes[node_id]
    attrs = _node_attrs(node, layout, lit)
    if coverage is not None and node_id not in coverage.visited and node.kind != "end":
        attrs = _unvisited(attrs, node)
    w.node(node_id, attrs)


def to_dot(
    graph: Graph,
    *,
    instance: InstanceStates | None = None,
    caption: str = "",
    coverage: CoverageMarks | None = None,
) -> str:
    """The diagram of `graph` as DOT text.

    With `instance` (node id -> state, or node id -> {state: token count}), nodes holding tokens
    are filled with their state's colour and list their states; the others are drawn faded.
    `caption`: a line under the title (what a diff removed, say). With `coverage`, edges no
    scenario took are drawn red and dashed, labelled untaken, and nodes none reached fade.
    """
    layout = analyse(graph)
    lit = highlights(instance, set(graph.nodes)) if instance is not None else None
    placed = _placement(graph, layout)
    w = DotWriter()
    w.open(f"digraph {quote(graph.name)}")
    w.defaults(
        "graph",
        {
            "rankdir": "TB",
            # Rank the whole graph at once: queue lanes interleave with server-side nodes (a
            # fork between two steps of one lane), which per-cluster ranking would fold upwards.
            "newrank": "true",
            "fontname": FONT,
            "label": _title(graph, caption),
            "labelloc": "t",
            "nodesep": "0.35",
            "ranksep": "0.4",
        },
    )
    w.defaults("node", {"fontname": FONT, "fontsize": "11", "margin": "0.12,0.06"})
    w.defaults(
        "edge", {"fontname": FONT, "fontsize": "9", "color": _EDGE_COLOUR, "arrowsize": "0.7"}
    )
    w.node(
        START,
        {
            "shape": "circle",
            "style": "filled",
            "fillcolor": "#000000",
            "label": "",
            "width": "0.18",
        },
    )
    for node_id in placed.get(None, []):
        _write_node(w, node_id, graph, layout, lit, coverage)
    if layout.lanes:
        for index, queue in enumerate(layout.lanes):
            w.open(f"subgraph {quote('cluster_lane:' + queue)}")
            w.attrs(
                {
                    "label": Html(
                        f'<FONT POINT-SIZE="10">queue <B>{escape(queue, quote=False)}</B></FONT>'
                    ),
                    "labeljust": "l",
                    "style": "filled,rounded",
                    "fillcolor": lane_fill(index),
                    "color": "#c8c8c8",
                }
            )
            for node_id in placed.get(f"lane:{queue}", []):
                _write_node(w, node_id, graph, layout, lit, coverage)
            w.close()
    else:
        children: dict[str | None, list[Group]] = defaultdict(list)
        for group in layout.groups:
            children[group.parent].append(group)

        def emit(parent: str | None) -> None:
            for group in children.get(parent, []):
                w.open(f"subgraph {quote('cluster_' + group.key)}")
                w.attrs(_group_attrs(group))
                for node_id in placed.get(group.key, []):
                    _write_node(w, node_id, graph, layout, lit, coverage)
                emit(group.key)
                w.close()

        emit(None)
    w.edge(START, graph.start, {})
    for edge in layout.edges:
        target = edge.target if edge.target is not None else filtered_id(edge.source)
        attrs = _edge_attrs(edge, graph, layout)
        if coverage is not None and edge.key not in coverage.taken:
            attrs = _untaken(attrs, edge)
        w.edge(edge.source, target, attrs)
    w.close()
    return w.text()
