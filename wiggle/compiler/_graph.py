"""The canonical graph document as a networkx DiGraph, and checks on stored graph documents."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import networkx as nx

from wiggle.compiler._loader import SourceMap
from wiggle.compiler._messages import schema_diagnostics
from wiggle.compiler._schema import graph_validator
from wiggle.errors import Diagnostic
from wiggle.graph import HUMAN_SIGNAL_PREFIX

__all__ = ["graph_problems", "graph_to_nx", "out_edges"]


def out_edges(node: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(label, target) of each edge a node owns, in a fixed order."""
    kind = node["kind"]
    if kind == "fork":
        for name, first in node["branches"].items():
            yield f"branch:{name}", first
    if kind == "foreach":
        yield "body", node["body"]
    if kind in ("fork", "foreach"):
        yield "join", node["join"]
    if "next" in node:
        yield "next", node["next"]
    if node.get("alt") is not None:
        yield "alt", node["alt"]
    if node.get("on_timeout") is not None:
        yield "on_timeout", node["on_timeout"]


def graph_to_nx(document: dict[str, Any]) -> Any:
    """A DiGraph whose nodes carry the node dicts and whose edges carry a `label`.

    Two edges between the same pair of nodes (an await without on_timeout steps reaches its
    `next` both ways) become one edge: `label` is the first, `labels` lists all.
    """
    graph = nx.DiGraph(start=document["start"])
    for node_id, node in document["nodes"].items():
        graph.add_node(node_id, **node)
    for node_id, node in document["nodes"].items():
        for label, target in out_edges(node):
            if graph.has_edge(node_id, target):
                graph.edges[node_id, target]["labels"].append(label)
            else:
                graph.add_edge(node_id, target, label=label, labels=[label])
    return graph


def graph_problems(document: Any, source: SourceMap) -> list[Diagnostic]:
    """Schema errors of a canonical graph document, then dangling node references."""
    problems = schema_diagnostics(graph_validator(), document, source)
    if problems:
        # A stored graph has no lines to point at; the JSON pointer is the location.
        return [replace(d, message=f"{d.path or '/'}: {d.message}") for d in problems]
    nodes = document["nodes"]
    if document["start"] not in nodes:
        problems.append(source.diagnostic(("start",), f"start {document['start']!r} is not a node"))
    for node_id, node in nodes.items():
        for label, target in out_edges(node):
            if target not in nodes:
                problems.append(
                    source.diagnostic(
                        ("nodes", node_id), f"node {node_id!r}: {label} {target!r} is not a node"
                    )
                )
        if node["kind"] == "join" and nodes.get(node["fork"], {}).get("kind") not in (
            "fork",
            "foreach",
        ):
            problems.append(
                source.diagnostic(("nodes", node_id), f"join {node_id!r}: fork is not a fork")
            )
        if node["kind"] == "await" and ("human" in node) != (
            node["signal"] == HUMAN_SIGNAL_PREFIX + node_id
        ):
            # A human step's await takes `task:<its id>`, and no other await may take it.
            problems.append(
                source.diagnostic(
                    ("nodes", node_id),
                    f"await {node_id!r}: signal {node['signal']!r} "
                    + (
                        f"is not {HUMAN_SIGNAL_PREFIX + node_id!r}, a human step's"
                        if "human" in node
                        else "is a human step's, but the await has no `human`"
                    ),
                )
            )
    return problems
