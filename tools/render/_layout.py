"""The structure a diagram shows, read off a graph: edges, pairs, groups and lanes.

Pure functions over `wiggle.graph.Graph`; nothing here knows about DOT. The diagram code asks this
module which edges to draw (and which of them close a loop), which fork/foreach and join belong
together, which nodes sit inside which branch or loop body, and which queue lane a node lives in.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from wiggle.graph import (
    Await,
    Condition,
    End,
    ForEach,
    Fork,
    Graph,
    Join,
    Node,
    Predicate,
    Task,
    out_edges,
)

from ._labels import short_expression

__all__ = ["Edge", "Group", "Layout", "analyse", "edges_of", "node_queue"]


@dataclass(frozen=True)
class Edge:
    """One drawn edge. `role` names what it means: next, true, false, branch, body, signal,
    on_timeout, back (a loop's repeat edge) or filtered (a filter's false, which ends the token)."""

    source: str
    target: str | None  # None for a filter's false edge: it ends the token, there is no node
    role: str
    label: str = ""
    key: str = ""  # wiggle.graph.OutEdge.key: how a coverage report names the edge


@dataclass(frozen=True)
class Group:
    """A region drawn as a cluster: a fork or foreach with its join, one branch, or a loop."""

    key: str  # unique, stable: "fork:<id>", "branch:<id>:<name>", "foreach:<id>", "loop:<id>"
    kind: str  # "fork" | "branch" | "foreach" | "loop"
    owner: str  # the fork, foreach or `while` predicate the group belongs to
    members: frozenset[str]
    colour_index: int  # the pair's colour (unused for loops)
    parent: str | None  # key of the smallest enclosing group


@dataclass(frozen=True)
class Layout:
    order: tuple[str, ...]  # node ids, depth-first from the start as the edges are listed
    edges: tuple[Edge, ...]
    pair_index: Mapping[str, int]  # fork/foreach/join id -> pair colour index
    groups: tuple[Group, ...]  # outer groups before inner ones
    group_of: Mapping[str, str]  # node id -> key of its innermost group (absent: top level)
    lanes: tuple[str, ...]  # queues in order of first use; empty when the flow uses one queue
    lane_of: Mapping[str, str]  # node id -> queue, for nodes a worker runs


def node_queue(node: Node) -> str | None:
    """The queue whose workers run `node`, if any: the server handles the other kinds."""
    if isinstance(node, Task | Predicate | Join):
        return node.queue
    if isinstance(node, Await) and node.apply is not None:
        return node.apply.queue
    return None


_LABELS = {"true": "true", "back": "true ↺", "false": "false", "filtered": "false", "body": "body"}
_LABELS.update(signal="signal", on_timeout="on_timeout")


def edges_of(node: Node) -> list[Edge]:
    """The edges to draw out of `node`, in a fixed order (the order shapes the layout): the
    graph's own (`wiggle.graph.out_edges`), labelled."""
    edges = [
        Edge(e.source, e.target, e.role, e.branch or _LABELS.get(e.role, ""), e.key)
        for e in out_edges(node)
    ]
    if isinstance(node, Condition):
        # The condition is drawn on the edge it decides (in full in the node's tooltip).
        text = short_expression(node.expression)
        edges = [
            replace(e, label=f"{text} ↺" if e.role == "back" else text)
            if e.role in ("true", "back")
            else e
            for e in edges
        ]
    if isinstance(node, Await) and node.human is not None:
        # A person answers a human task; the signal that carries the answer is plumbing.
        edges = [replace(e, label="answered") if e.role == "signal" else e for e in edges]
    return edges


def _successors(graph: Graph, node_id: str) -> Iterator[str]:
    """Every node `node_id` leads to, including a fork's or foreach's own join."""
    node = graph.nodes[node_id]
    for edge in edges_of(node):
        if edge.target is not None:
            yield edge.target
    if isinstance(node, Fork | ForEach):
        yield node.join


def _depth_first(graph: Graph) -> list[str]:
    seen: set[str] = set()
    order: list[str] = []
    stack = [graph.start] if graph.start in graph.nodes else []
    while stack:
        node_id = stack.pop()
        if node_id in seen or node_id not in graph.nodes:
            continue
        seen.add(node_id)
        order.append(node_id)
        stack.extend(reversed(list(_successors(graph, node_id))))
    # Unreachable nodes cannot come out of the compiler, but a hand-written graph may have them;
    # draw them anyway, after the rest.
    order.extend(sorted(set(graph.nodes) - seen))
    return order


def _reach(graph: Graph, first: str, stop: str) -> frozenset[str] | None:
    """Nodes reachable from `first` without passing `stop`; None if the walk escapes to the end
    (then the region is not well nested and is better not drawn as a cluster)."""
    seen: set[str] = set()
    stack = [first]
    while stack:
        node_id = stack.pop()
        if node_id == stop or node_id in seen:
            continue
        node = graph.nodes.get(node_id)
        if node is None or isinstance(node, End):
            return None
        seen.add(node_id)
        stack.extend(_successors(graph, node_id))
    return frozenset(seen)


def _groups(graph: Graph, order: list[str], pair_index: Mapping[str, int]) -> list[Group]:
    found: list[tuple[str, str, str, frozenset[str]]] = []  # key, kind, owner, members
    for node_id in order:
        node = graph.nodes[node_id]
        if isinstance(node, Fork):
            branches = {
                name: _reach(graph, first, node.join) for name, first in node.branches.items()
            }
            if all(members is not None for members in branches.values()):
                region = {node.id, node.join}.union(*(m for m in branches.values() if m))
                found.append((f"fork:{node.id}", "fork", node.id, frozenset(region)))
                for name, members in branches.items():
                    assert members is not None
                    found.append((f"branch:{node.id}:{name}", "branch", node.id, members))
        elif isinstance(node, ForEach):
            body = _reach(graph, node.body, node.join)
            if body is not None:
                found.append(
                    (f"foreach:{node.id}", "foreach", node.id, body | {node.id, node.join})
                )
        elif isinstance(node, Predicate | Condition) and node.max_iterations is not None:
            body = _reach(graph, node.next, node.id)
            if body is not None:
                found.append((f"loop:{node.id}", "loop", node.id, body | {node.id}))
    # Largest first, so every group's parent is placed before it; the sort is stable, so equal
    # sizes keep document order.
    found.sort(key=lambda group: -len(group[3]))
    groups: list[Group] = []
    for key, kind, owner, members in found:
        parent = None
        # The last superset seen is the smallest. Equal member sets happen (a branch that is only
        # a loop); the one met first in the document is the outer one.
        for candidate in groups:
            if members <= candidate.members:
                parent = candidate.key
        groups.append(Group(key, kind, owner, members, pair_index.get(owner, 0), parent))
    return groups


def analyse(graph: Graph) -> Layout:
    """Everything the diagram needs to know about `graph`'s structure."""
    order = _depth_first(graph)
    pair_index: dict[str, int] = {}
    for node_id in order:
        node = graph.nodes[node_id]
        if isinstance(node, Fork | ForEach):
            pair_index[node.id] = pair_index[node.join] = len(pair_index) // 2
    edges = tuple(edge for node_id in order for edge in edges_of(graph.nodes[node_id]))
    groups = _groups(graph, order, pair_index)
    group_of: dict[str, str] = {}
    for group in groups:  # outer groups first: inner ones overwrite
        for member in group.members:
            group_of[member] = group.key
    lane_of = {
        node_id: queue
        for node_id in order
        if (queue := node_queue(graph.nodes[node_id])) is not None
    }
    lanes = tuple(dict.fromkeys(lane_of.values()))
    if len(lanes) < 2:
        lanes, lane_of = (), {}
    return Layout(tuple(order), edges, pair_index, tuple(groups), group_of, lanes, lane_of)
