"""The path an instance took, and the edges it took, read from its events and its graph.

The engine writes an event when a node is left (a step completed or failed, a timer fired, a
signal was consumed, a child finished) but none for the nodes a token passes without stopping
(a fork, a foreach, a sleep whose instant is past). `trace` walks the graph along the events:
each event says which way the token left its node (`wiggle.graph.out_edges`: next, true/back,
false/filtered, signal/on_timeout...), and the node it then enters is added to the path when it
is one that leaves no event of its own.

The path lists forks, foreaches, steps, predicates, combines, sleeps, awaits and subflows, in
the order they were passed (a step that failed for good included: the instance ended there);
never the end node. Outcomes that are not edges (a retry, retries
exhausted, a non-retryable failure, a lease that expired, a loop over its limit) are counted per
node beside the edges.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.graph import (
    Await,
    Condition,
    End,
    ForEach,
    Fork,
    Graph,
    Join,
    OutEdge,
    Predicate,
    SetValues,
    Sleep,
    Subflow,
    Task,
    out_edges,
)

__all__ = ["OUTCOMES", "Trace", "trace"]

#: Events that show a token at their node.
_ARRIVALS = ("step_completed", "step_failed", "signal_consumed", "timer_fired", "child_started")

#: Outcomes counted per node beside the edges.
OUTCOMES = ("retried", "exhausted", "failed", "lease_expired", "loop_limit")


@dataclass
class Trace:
    """What one instance did on its graph."""

    path: list[str] = field(default_factory=list)
    edges: Counter[str] = field(default_factory=Counter)  # OutEdge.key -> times taken
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (node, outcome)
    visited: set[str] = field(default_factory=set)  # every node reached, the end included


class _Walk:
    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.t = Trace()
        self.sleeping: Counter[str] = Counter()  # sleeps entered, not yet left
        self.bodies: set[str] = set()  # foreaches whose body edge was taken

    def edge(self, node_id: str, role: str) -> OutEdge:
        return next(e for e in out_edges(self.graph.nodes[node_id]) if e.role == role)

    def pass_node(self, node_id: str) -> None:
        self.t.path.append(node_id)
        self.t.visited.add(node_id)

    def take(self, edge: OutEdge) -> None:
        self.t.edges[edge.key] += 1
        self.enter(edge.target)

    def enter(self, node_id: str | None) -> None:
        """A token arrives at `node_id`: nodes that leave no event are passed here."""
        if node_id is None:
            return
        node = self.graph.nodes[node_id]
        self.t.visited.add(node_id)
        if isinstance(node, Fork):
            self.pass_node(node_id)
            for edge in out_edges(node):
                self.take(edge)
        elif isinstance(node, ForEach):
            self.pass_node(node_id)
        elif isinstance(node, Sleep):
            self.sleeping[node_id] += 1

    def arrived(self, node_id: str) -> None:
        """An event at `node_id`: a sleep entered just before it, with nothing of its own, was
        passed without waiting; a foreach's body was entered."""
        for sleep_id in [s for s, n in self.sleeping.items() if n > 0]:
            sleep = self.graph.nodes[sleep_id]
            assert isinstance(sleep, Sleep)
            if node_id in self._reached_from(sleep.next):
                self.sleeping[sleep_id] -= 1
                self.pass_node(sleep_id)
                self.take(self.edge(sleep_id, "next"))
        for block in self.graph.scopes.get(node_id, ()):
            each = self.graph.nodes[block]
            if isinstance(each, ForEach) and block not in self.bodies:
                self.bodies.add(block)
                self.t.edges[self.edge(block, "body").key] += 1

    def ended(self) -> None:
        """The instance completed: a sleep entered last, right before the end, was passed."""
        for sleep_id in [s for s, n in self.sleeping.items() if n > 0]:
            sleep = self.graph.nodes[sleep_id]
            if isinstance(sleep, Sleep) and isinstance(self.graph.nodes[sleep.next], End):
                self.sleeping[sleep_id] -= 1
                self.pass_node(sleep_id)
                self.take(self.edge(sleep_id, "next"))

    def _reached_from(self, node_id: str) -> set[str]:
        """`node_id`, and what a token reaches from it without an event (through forks)."""
        node = self.graph.nodes[node_id]
        if isinstance(node, Fork):
            return {node_id}.union(*(self._reached_from(n) for n in node.branches.values()))
        return {node_id}

    def step_completed(self, node_id: str, detail: Any, ends_in_loop_limit: bool) -> None:
        node = self.graph.nodes[node_id]
        if isinstance(node, Await):  # its apply ran: the signal edge was taken at consumption
            self.enter(node.next)
            return
        self.pass_node(node_id)
        if isinstance(node, Predicate | Condition):
            value = detail.get("predicate") if isinstance(detail, dict) else None
            if value is True and ends_in_loop_limit:
                self.t.outcomes[(node_id, "loop_limit")] += 1
            elif value is True:
                self.take(out_edges(node)[0])
            elif value is False:
                self.take(out_edges(node)[1])
        elif isinstance(node, Task | Join | SetValues):
            self.take(self.edge(node_id, "next"))

    def step_failed(self, node_id: str, attempt: int, detail: Any) -> None:
        node = self.graph.nodes[node_id]
        retry = node.apply.retry if isinstance(node, Await) and node.apply else None
        if isinstance(node, Task | Predicate | Join):
            retry = node.retry
        non_retryable = isinstance(detail, dict) and bool(detail.get("non_retryable"))
        if non_retryable or (retry is not None and attempt >= retry.max_attempts):
            # Failed for good: the instance ends here, and the path with this node.
            self.t.outcomes[(node_id, "failed" if non_retryable else "exhausted")] += 1
            if not isinstance(node, Await):
                self.pass_node(node_id)
        else:
            self.t.outcomes[(node_id, "retried")] += 1


def _detail(event: Any) -> Any:
    return event.detail if isinstance(event.detail, dict) else {}


def _loop_limit_next(events: Sequence[Any], i: int) -> bool:
    """Whether the event after `i` fails the instance for a loop over its max_iterations (the
    predicate's true result at `i` then led nowhere)."""
    if i + 1 >= len(events):
        return False
    later = events[i + 1]
    reason = str(_detail(later).get("reason", ""))
    return bool(later.kind == "instance_failed" and "exceeded max_iterations" in reason)


def trace(graph: Graph, events: Sequence[Any]) -> Trace:
    """The path, edges and outcomes of one instance of `graph` from its events (in order;
    anything with `kind`, `node_id`, `attempt` and `detail`, as the engine's EventView)."""
    walk = _Walk(graph)
    started = False
    for i, event in enumerate(events):
        kind, node_id = event.kind, event.node_id
        if kind == "instance_started" and not started:
            started = True
            walk.enter(graph.start)
            continue
        if kind == "instance_completed":
            walk.ended()
            continue
        if node_id not in graph.nodes or kind in ("step_started", "handed_back"):
            continue
        node = graph.nodes[node_id]
        if kind in _ARRIVALS:
            walk.arrived(node_id)
        detail = _detail(event)
        if kind == "step_completed":
            walk.step_completed(node_id, detail, _loop_limit_next(events, i))
        elif kind == "step_failed":
            walk.step_failed(node_id, event.attempt, detail)
        elif kind == "lease_expired":
            walk.t.outcomes[(node_id, "lease_expired")] += 1
        elif kind == "signal_consumed" and isinstance(node, Await):
            walk.pass_node(node_id)
            walk.t.edges[walk.edge(node_id, "signal").key] += 1
            if node.apply is None:
                walk.enter(node.next)
        elif kind == "timer_fired" and detail.get("timer") == "await_timeout":
            walk.pass_node(node_id)
            walk.take(walk.edge(node_id, "on_timeout"))
        elif kind == "timer_fired" and isinstance(node, Sleep) and walk.sleeping[node_id] > 0:
            walk.sleeping[node_id] -= 1
            walk.pass_node(node_id)
            walk.take(walk.edge(node_id, "next"))
        elif kind == "child_finished" and isinstance(node, Subflow):
            walk.pass_node(node_id)
            if detail.get("status") == "COMPLETED":
                walk.take(walk.edge(node_id, "next"))
    return walk.t
