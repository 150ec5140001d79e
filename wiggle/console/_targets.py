"""Which nodes an instance can be reset to, and why the others cannot: the instance page's node
picker (a list, and a click on the graph). Pure: the graph and what the instance recorded in, the
offer out. The engine decides (docs/operations.md, "Repairing what is running"); this only avoids
offering what it would refuse, and says why in the same terms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from wiggle.graph import End, Graph

__all__ = ["BulkResetNodes", "ResetOffer", "ResetTarget", "bulk_reset_nodes", "reset_offer"]


@dataclass(frozen=True)
class ResetTarget:
    node_id: str
    kind: str
    at_ms: int  # when a token last entered it
    context: Any  # what it received then: what a reset to it rewinds to


@dataclass(frozen=True)
class ResetOffer:
    """The nodes a reset may target (the order the instance last entered them) and, for every
    other node of the flow, why not; `refused` says why the instance cannot be reset at all."""

    targets: list[ResetTarget] = field(default_factory=list)
    why_not: dict[str, str] = field(default_factory=dict)
    refused: str = ""

    def target(self, node_id: str) -> ResetTarget | None:
        return next((t for t in self.targets if t.node_id == node_id), None)


def _block_note(graph: Graph, node_id: str) -> str:
    blocks = graph.scopes.get(node_id, ())
    if not blocks:
        return ""
    block = blocks[0]
    what = "parallel" if graph.nodes[block].kind == "fork" else "for_each"
    return f"inside {what} block {block}: reset to {block} instead (the whole block runs again)"


def reset_offer(
    graph: Graph,
    status: str,
    parent_instance_id: str,
    step_inputs: Mapping[str, Any],
) -> ResetOffer:
    """What the picker offers an instance of `graph` in `status` that recorded `step_inputs`
    (node id -> {"context", "at_ms"}, as DescribeInstance answers them)."""
    if status == "CANCELLED":
        return ResetOffer(refused="a cancelled instance is not reset (start it again)")
    if parent_instance_id and status != "RUNNING":
        return ResetOffer(
            refused=f"a subflow child that ended is not reset: reset its parent "
            f"{parent_instance_id} to its subflow step"
        )
    targets: list[ResetTarget] = []
    why_not: dict[str, str] = {}
    for node_id, node in graph.nodes.items():
        entry = step_inputs.get(node_id)
        note = _block_note(graph, node_id)
        if note:
            why_not[node_id] = note
        elif isinstance(node, End):
            why_not[node_id] = "the end of the flow is not a step to reset to"
        elif not isinstance(entry, Mapping):
            why_not[node_id] = "the instance has not reached it (a reset goes back, not ahead)"
        else:
            targets.append(
                ResetTarget(node_id, node.kind, int(entry.get("at_ms", 0)), entry.get("context"))
            )
    targets.sort(key=lambda t: (t.at_ms, t.node_id))
    return ResetOffer(targets, why_not)


@dataclass(frozen=True)
class BulkResetNodes:
    """The nodes of one flow version a bulk reset may name (by node id, the graph's order), and
    why each other node may not be named."""

    flow: str
    nodes: list[str]
    why_not: dict[str, str]

    def problem(self, node_id: str) -> str:
        """'' when a bulk reset may name `node_id`, else why not, as the form says it."""
        if node_id in self.nodes:
            return ""
        why = self.why_not.get(node_id)
        if why:
            return f"cannot reset to {node_id}: {why}"
        return f"flow {self.flow} has no node {node_id!r}: reset to one of {', '.join(self.nodes)}"


def bulk_reset_nodes(flow: str, graph: Graph) -> BulkResetNodes:
    """What a bulk reset over instances of `graph` may target: each instance is checked again
    when the batch reaches it (it must have passed the node); this rules out the nodes no
    instance could be reset to."""
    nodes: list[str] = []
    why_not: dict[str, str] = {}
    for node_id, node in graph.nodes.items():
        note = _block_note(graph, node_id)
        if note:
            why_not[node_id] = note
        elif isinstance(node, End):
            why_not[node_id] = "the end of the flow is not a step to reset to"
        else:
            nodes.append(node_id)
    return BulkResetNodes(flow, nodes, why_not)
