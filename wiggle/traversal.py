"""The handback rule: after a worker step, where does the token go, and may the worker follow it?

This is the one piece of logic the server and every worker must agree on exactly
(docs/worker-protocol.md, "Local runs"), so it is pure: plain data in, plain data out, no
clock, no I/O. The server uses it to validate and apply AdvanceRun batches; a worker in a LOCAL
mode uses it to decide whether to keep chaining. Workers in other languages implement it against
the vectors in `spec/conformance/traversal/`.

The rule: after a task, combine or apply step the token moves to `next`; after a predicate to
`next` (true) or `alt` (false). The worker keeps going only while that node is a task or
predicate on a queue it serves and enough of its lease is left; every other case is a handback,
with a reason that is recorded in the instance's event log. A `condition` moves like a
predicate and a `set` like a task; neither is ever a handback: whoever holds the token
evaluates it on the spot (`wiggle.expressions.steps`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from wiggle.graph import Await, Condition, Graph, Join, Predicate, SetValues, Task

__all__ = [
    "Handback",
    "Move",
    "advance",
    "classify",
    "lease_budget_left",
    "successor",
]


class Handback(StrEnum):
    """Why a worker stops chaining and gives the token back to the server."""

    SLEEP = "sleep"  # next node is a timer
    FORK = "fork"  # next node fans out to parallel branches
    JOIN = "join"  # next node is a barrier across siblings
    FOREACH = "foreach"  # next node fans out over a collection
    AWAIT = "await"  # next node waits for a signal
    SUBFLOW = "subflow"  # next node starts a child instance
    OTHER_QUEUE = "other_queue"  # next step runs on a queue this worker does not serve
    END = "end"  # the token reached the end of the flow
    FILTERED = "filtered"  # a filter was false: the token ends (instance or branch)
    LOOP_LIMIT = "loop_limit"  # a loop's while was true once too often: the instance fails
    STEP_FAILED = "step_failed"  # the step raised: the server applies the retry policy
    LEASE_BUDGET = "lease_budget"  # too little lease left to start another step
    NOT_RUNNING = "not_running"  # the server says the instance is no longer RUNNING
    SHUTDOWN = "shutdown"  # the worker is draining before it exits


_BOUNDARY_KINDS: Mapping[str, Handback] = {
    "sleep": Handback.SLEEP,
    "fork": Handback.FORK,
    "join": Handback.JOIN,
    "foreach": Handback.FOREACH,
    "await": Handback.AWAIT,
    "subflow": Handback.SUBFLOW,
    "end": Handback.END,
}


@dataclass(frozen=True)
class Move:
    """Where a completed step sends its token.

    `next_node` is None when the token does not continue (`handback` is FILTERED or
    LOOP_LIMIT). `loop_counts` maps each active loop's `while` predicate to the number of times it
    has been true; it travels with the token.
    """

    next_node: str | None
    loop_counts: Mapping[str, int] = field(default_factory=dict)
    handback: Handback | None = None


def successor(
    graph: Graph,
    node_id: str,
    *,
    predicate_value: bool | None = None,
    loop_counts: Mapping[str, int] | None = None,
) -> Move:
    """The node a completed step at `node_id` leads to (handback only for FILTERED/LOOP_LIMIT).

    Raises ValueError when `node_id` is not a step a worker runs, or when a predicate's value is
    missing: both mean a caller bug or a worker reporting a path the graph does not have.
    """
    counts = dict(loop_counts or {})
    node = graph.nodes.get(node_id)
    if isinstance(node, Task | SetValues | Join | Await):
        if isinstance(node, Await) and node.apply is None:
            raise ValueError(f"await node {node_id!r} has no apply step to complete")
        return Move(node.next, counts)
    if not isinstance(node, Predicate | Condition):
        raise ValueError(f"node {node_id!r} is not a step a worker runs")
    if predicate_value is None:
        raise ValueError(f"predicate {node_id!r} needs a boolean result")
    if predicate_value:
        if node.max_iterations is not None:
            # The body already ran once per true result plus the first pass; one more true
            # result would start iteration max_iterations + 1.
            times_true = counts.get(node_id, 0) + 1
            if times_true >= node.max_iterations:
                return Move(None, counts, Handback.LOOP_LIMIT)
            counts[node_id] = times_true
        return Move(node.next, counts)
    if node.max_iterations is not None:
        counts.pop(node_id, None)  # the loop exits: a later entry starts counting afresh
    if node.alt is None:
        return Move(None, counts, Handback.FILTERED)
    return Move(node.alt, counts)


def classify(graph: Graph, next_node: str, worker_queues: Collection[str]) -> Handback | None:
    """None when a worker serving `worker_queues` may run `next_node` itself, else why not."""
    node = graph.nodes[next_node]
    boundary = _BOUNDARY_KINDS.get(node.kind)
    if boundary is not None:
        return boundary
    if isinstance(node, Condition | SetValues):
        return None  # evaluated where the token is: no queue, no lease
    assert isinstance(node, Task | Predicate)
    if node.queue not in worker_queues:
        return Handback.OTHER_QUEUE
    return None


def advance(
    graph: Graph,
    node_id: str,
    worker_queues: Collection[str],
    *,
    predicate_value: bool | None = None,
    loop_counts: Mapping[str, int] | None = None,
) -> Move:
    """`successor` then `classify`: the whole decision after one successful local step."""
    move = successor(graph, node_id, predicate_value=predicate_value, loop_counts=loop_counts)
    if move.next_node is None:
        return move
    return Move(move.next_node, move.loop_counts, classify(graph, move.next_node, worker_queues))


def lease_budget_left(remaining_ms: int, lease_ms: int) -> bool:
    """Whether enough lease remains to start another step locally.

    A worker hands back once less than a quarter of the lease length is left, so the server
    never has to reclaim a lease from a worker that is still making progress.
    """
    return remaining_ms * 4 >= lease_ms
