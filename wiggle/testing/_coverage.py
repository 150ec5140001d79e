"""Path coverage: which nodes and edges of each flow the scenarios took.

An edge is one of `wiggle.graph.out_edges` (a choice arm's true and false, a filter's true and
filtered, an await's signal and on_timeout, a loop's back edge and its exit, a fork's branches,
a foreach's body, every next). Coverage is the share of edges taken at least once, by any
scenario in any mode; nodes are counted alike. Outcomes that are not edges (retried, retries
exhausted, failed non-retryably, lease expired, loop over its limit) are listed beside them.

The report is one JSON document (`wiggle test --coverage` writes it) that `wiggle render FLOW
--coverage REPORT` reads to draw the flow with its untaken edges marked:

    {"wiggle_coverage": 1,
     "flows": {"<name>": {"version": "sha256:...", "file": "...",
                          "edges": {"<edge key>": <times taken>, ...},
                          "nodes": {"<node id>": <0 or 1>, ...},
                          "outcomes": {"<node> <outcome>": <times>, ...},
                          "edges_taken": n, "edges_total": n, "percent": 0..100}}}
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wiggle.graph import End, Graph, out_edges

from ._trace import Trace

__all__ = ["COVERAGE_FORMAT", "Coverage", "FlowCoverage", "read_coverage"]

COVERAGE_FORMAT = 1


@dataclass
class FlowCoverage:
    """The coverage of one flow (its version as written in its file, before any mode)."""

    graph: Graph
    file: str = ""
    edges: Counter[str] = field(default_factory=Counter)
    visited: set[str] = field(default_factory=set)
    outcomes: Counter[str] = field(default_factory=Counter)

    def add(self, trace: Trace) -> None:
        self.edges.update(trace.edges)
        self.visited |= trace.visited
        for (node, outcome), n in trace.outcomes.items():
            self.outcomes[f"{node} {outcome}"] += n

    def all_edges(self) -> list[str]:
        return [
            e.key
            for node_id in sorted(self.graph.nodes)
            for e in out_edges(self.graph.nodes[node_id])
        ]

    def untaken(self) -> list[str]:
        return [key for key in self.all_edges() if not self.edges.get(key)]

    def counted_nodes(self) -> list[str]:
        return sorted(n.id for n in self.graph if not isinstance(n, End))

    @property
    def percent(self) -> float:
        edges = self.all_edges()
        if not edges:
            return 100.0
        return 100.0 * (len(edges) - len(self.untaken())) / len(edges)

    def document(self) -> dict[str, Any]:
        edges = self.all_edges()
        return {
            "version": self.graph.version,
            "file": self.file,
            "edges": {key: self.edges.get(key, 0) for key in edges},
            "nodes": {n: int(n in self.visited) for n in self.counted_nodes()},
            "outcomes": dict(sorted(self.outcomes.items())),
            "edges_taken": len(edges) - len(self.untaken()),
            "edges_total": len(edges),
            "percent": round(self.percent, 1),
        }


class Coverage:
    """Coverage of every flow the scenarios ran, by flow name."""

    def __init__(self) -> None:
        self.flows: dict[str, FlowCoverage] = {}

    def flow(self, graph: Graph, file: str = "") -> FlowCoverage:
        got = self.flows.get(graph.name)
        if got is None:
            got = self.flows[graph.name] = FlowCoverage(graph, file)
        elif file and not got.file:
            got.file = file
        return got

    def add(self, flow_name: str, trace: Trace) -> None:
        if flow_name in self.flows:
            self.flows[flow_name].add(trace)

    def document(self) -> dict[str, Any]:
        return {
            "wiggle_coverage": COVERAGE_FORMAT,
            "flows": {name: self.flows[name].document() for name in sorted(self.flows)},
        }

    def lines(self) -> Iterable[str]:
        """One line per flow, then its untaken edges."""
        width = max((len(n) for n in self.flows), default=0)
        for name in sorted(self.flows):
            cov = self.flows[name]
            edges, nodes = cov.all_edges(), cov.counted_nodes()
            taken = len(edges) - len(cov.untaken())
            seen = sum(n in cov.visited for n in nodes)
            yield (
                f"{name:<{width}}  edges {taken}/{len(edges)} ({cov.percent:.0f}%)  "
                f"nodes {seen}/{len(nodes)}"
            )
            for key in cov.untaken():
                yield f"{'':<{width}}    untaken: {key}"

    def lowest(self) -> float:
        return min((c.percent for c in self.flows.values()), default=100.0)


def read_coverage(path: str, flow: str) -> Mapping[str, Any]:
    """The coverage of `flow` in a report file; ValueError, worded for the user, when the file
    is not a coverage report or has no such flow."""
    try:
        with open(path, "rb") as handle:
            doc = json.loads(handle.read())
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("wiggle_coverage") != COVERAGE_FORMAT:
        raise ValueError(f"{path} is not a coverage report of `wiggle test --coverage`")
    flows = doc.get("flows") or {}
    if flow not in flows:
        known = ", ".join(sorted(flows)) or "none"
        raise ValueError(f"{path} has no coverage of flow {flow!r} (it covers: {known})")
    got: Mapping[str, Any] = flows[flow]
    return got
