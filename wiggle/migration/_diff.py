"""The difference between two versions of a flow, node by node and edge by edge. Pure.

Every node of either graph is classified (docs/migration.md, "What the diff says"):

    unchanged       the same node: kind, fields, edges and enclosing blocks
    changed         the same kind in the same blocks; `fields` says what differs
    moved           in other parallel / for_each blocks than before (fields may differ too)
    kind_changed    the id names another kind of node (a task became an await, ...)
    added, removed  in one graph only

Edges are (from, to, label) with the compiler's labels: next, alt, branch:<name>, body, join,
on_timeout.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

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
    SetValues,
    Sleep,
    Subflow,
    Task,
)

__all__ = ["Edge", "GraphDiff", "NodeChange", "diff_graphs", "edges_of", "node_fields"]

Edge = tuple[str, str, str]

#: Each dataclass field shown under the name a flow author knows it by.
_FIELD_NAMES = {
    "timeout_ms": "timeout",
    "duration_ms": "duration",
    "expression": "if",
    "until_expression": "until",
}
#: Fields that are edges (reported as edges; still listed among a node's changed fields).
_EDGE_FIELDS = {"next", "alt", "branches", "join", "body", "on_timeout"}


@dataclass(frozen=True)
class NodeChange:
    node_id: str
    change: str  # unchanged | changed | moved | kind_changed | added | removed
    old_kind: str = ""
    new_kind: str = ""
    fields: tuple[str, ...] = ()  # changed / moved: the fields that differ
    blocks_before: tuple[str, ...] = ()  # moved: the enclosing blocks, outermost first
    blocks_after: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node": self.node_id, "change": self.change}
        if self.old_kind:
            out["old_kind"] = self.old_kind
        if self.new_kind:
            out["new_kind"] = self.new_kind
        if self.fields:
            out["fields"] = list(self.fields)
        if self.change == "moved":
            out["blocks_before"] = list(self.blocks_before)
            out["blocks_after"] = list(self.blocks_after)
        return out


@dataclass(frozen=True)
class GraphDiff:
    flow: str
    old_version: str
    new_version: str
    nodes: tuple[NodeChange, ...]
    edges_added: tuple[Edge, ...]
    edges_removed: tuple[Edge, ...]

    def by_node(self) -> dict[str, NodeChange]:
        return {c.node_id: c for c in self.nodes}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.nodes:
            out[c.change] = out.get(c.change, 0) + 1
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "old_version": self.old_version,
            "new_version": self.new_version,
            "counts": self.counts(),
            "nodes": [c.as_json() for c in self.nodes],
            "edges_added": [list(e) for e in self.edges_added],
            "edges_removed": [list(e) for e in self.edges_removed],
        }

    def marks(self) -> dict[str, str]:
        """Each node of the new version that differs, by how (ADDED, CHANGED, MOVED,
        KIND_CHANGED): the states `wiggle render --diff` and the console draw it with."""
        marked = ("added", "changed", "moved", "kind_changed")
        return {c.node_id: c.change.upper() for c in self.nodes if c.change in marked}

    def caption(self) -> str:
        """The picture's caption: the version compared with, and the nodes removed."""
        removed = [c.node_id for c in self.nodes if c.change == "removed"]
        caption = f"compared with {self.old_version[:19]}"
        return caption + (" · removed: " + ", ".join(removed) if removed else "")

    def text(self) -> str:
        """For people: what changed, one line a node, then the edges."""
        lines = [f"{self.flow}: {self.old_version[:19]} -> {self.new_version[:19]}"]
        counts = self.counts()
        lines.append(
            "  "
            + ", ".join(
                f"{counts.get(k, 0)} {k.replace('_', ' ')}"
                for k in ("unchanged", "changed", "moved", "kind_changed", "added", "removed")
            )
        )
        for c in self.nodes:
            if c.change == "unchanged":
                continue
            what = c.change.replace("_", " ")
            if c.change == "kind_changed":
                what += f" ({c.old_kind} -> {c.new_kind})"
            elif c.change in ("added", "removed"):
                what += f" ({c.new_kind or c.old_kind})"
            if c.change == "moved":
                before = " > ".join(c.blocks_before) or "top level"
                after = " > ".join(c.blocks_after) or "top level"
                what += f" (from {before} to {after})"
            if c.fields:
                what += ": " + ", ".join(c.fields)
            lines.append(f"  {c.node_id}: {what}")
        for e in self.edges_removed:
            lines.append(f"  - edge {e[0]} -{e[2]}-> {e[1]}")
        for e in self.edges_added:
            lines.append(f"  + edge {e[0]} -{e[2]}-> {e[1]}")
        return "\n".join(lines)


def edges_of(node: Node) -> list[Edge]:
    """The node's outgoing edges, labelled as the compiler labels them."""
    out: list[Edge] = []
    if isinstance(node, Fork):
        out += [(node.id, first, f"branch:{name}") for name, first in node.branches.items()]
        out.append((node.id, node.join, "join"))
    elif isinstance(node, ForEach):
        out += [(node.id, node.body, "body"), (node.id, node.join, "join")]
    elif isinstance(node, Task | Join | Sleep | Subflow | SetValues):
        out.append((node.id, node.next, "next"))
    elif isinstance(node, Predicate | Condition):
        out.append((node.id, node.next, "next"))
        if node.alt is not None:
            out.append((node.id, node.alt, "alt"))
    elif isinstance(node, Await):
        out.append((node.id, node.next, "next"))
        if node.on_timeout is not None:
            out.append((node.id, node.on_timeout, "on_timeout"))
    return out


def node_fields(node: Node) -> dict[str, Any]:
    """The node's fields by their flow-format names (without its id and kind)."""
    out: dict[str, Any] = {}
    for f in fields(node):
        if f.name in ("id", "kind"):
            continue
        name = _FIELD_NAMES.get(f.name, f.name)
        if isinstance(node, Predicate) and name == "activity":
            name = "predicate"
        out[name] = getattr(node, f.name)
    return out


def _changed_fields(old: Node, new: Node) -> tuple[str, ...]:
    a, b = node_fields(old), node_fields(new)
    return tuple(sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k)))


def diff_graphs(old: Graph, new: Graph) -> GraphDiff:
    """Classify every node of both graphs and list the edges only one of them has."""
    changes: list[NodeChange] = []
    for node_id in _ordered(old, new):
        before, after = old.nodes.get(node_id), new.nodes.get(node_id)
        if before is None:
            assert after is not None
            changes.append(NodeChange(node_id, "added", new_kind=after.kind))
            continue
        if after is None:
            changes.append(NodeChange(node_id, "removed", old_kind=before.kind))
            continue
        if before.kind != after.kind:
            changes.append(
                NodeChange(node_id, "kind_changed", old_kind=before.kind, new_kind=after.kind)
            )
            continue
        blocks_before, blocks_after = old.scopes[node_id], new.scopes[node_id]
        changed = _changed_fields(before, after)
        if blocks_before != blocks_after:
            changes.append(
                NodeChange(
                    node_id,
                    "moved",
                    before.kind,
                    after.kind,
                    changed,
                    blocks_before,
                    blocks_after,
                )
            )
        elif changed:
            changes.append(NodeChange(node_id, "changed", before.kind, after.kind, changed))
        else:
            changes.append(NodeChange(node_id, "unchanged", before.kind, after.kind))
    old_edges = {e for n in old for e in edges_of(n)}
    new_edges = {e for n in new for e in edges_of(n)}
    return GraphDiff(
        flow=new.name,
        old_version=old.version,
        new_version=new.version,
        nodes=tuple(changes),
        edges_added=tuple(sorted(new_edges - old_edges)),
        edges_removed=tuple(sorted(old_edges - new_edges)),
    )


def _ordered(old: Graph, new: Graph) -> list[str]:
    """The new graph's nodes in its order, then the removed ones in the old order; the end
    node last."""
    ids = list(new.nodes)
    ids += [n for n in old.nodes if n not in new.nodes]
    end = [n for n in ids if isinstance((new.nodes.get(n) or old.nodes.get(n)), End)]
    return [n for n in ids if n not in end] + end
