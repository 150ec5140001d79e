"""When a local run reports: the flush half of the local-run loop, as pure functions.

The handback rule (`wiggle.traversal`) says where a run must stop; this module says when a run
that goes on must first send what it has buffered (a non-final AdvanceRun), and which stops are
decided at run time rather than by the graph. Workers use it to drive their runs, and the
conformance runner uses it to judge the AdvanceRun calls a worker made
(docs/worker-protocol.md, "Local runs"; vectors in `spec/conformance/localrun/`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from wiggle import traversal
from wiggle.expressions import NodeValue, evaluate_node
from wiggle.graph import Condition, ExecutionMode, Graph, Node, SetValues, Task

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_MAX_PAYLOAD_BYTES",
    "REQUEST_HEADROOM",
    "RUNTIME_HANDBACKS",
    "Chain",
    "Flush",
    "RuntimeHandback",
    "default_max_request_bytes",
    "flush_after",
    "over_request_limit",
    "through_expressions",
    "worker_steps",
]

#: LOCAL_ASYNC results buffered before a run flushes anyway.
DEFAULT_BATCH_SIZE = 64
#: What a worker assumes when a server does not state its limits (Task fields left 0).
DEFAULT_MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
#: Room kept below max_request_bytes for the fields that change between calls (seq, final,
#: the handback reason): a batch is sized without them.
REQUEST_HEADROOM = 1024


class Flush(StrEnum):
    """Why a run that goes on sends its buffer first (a non-final AdvanceRun)."""

    STEP = "step"  # LOCAL_SYNC reports every step before the next one starts
    CHECKPOINT = "checkpoint"  # LOCAL_ASYNC: the step just run is a checkpoint task
    BATCH_FULL = "batch_full"  # LOCAL_ASYNC: the buffer holds the batch size
    SIZE = "size"  # LOCAL_ASYNC: the next result would push the request over the limit


class RuntimeHandback(StrEnum):
    """Handbacks the graph does not decide: the worker's own state between two steps."""

    SHUTDOWN = "shutdown"  # the worker is draining
    LEASE_BUDGET = "lease_budget"  # too little of the lease is left to start another step
    UNKNOWN_ACTIVITY = "unknown_activity"  # the worker has no handler for the next step


RUNTIME_HANDBACKS = frozenset(r.value for r in RuntimeHandback)


def flush_after(mode: ExecutionMode, node: Node, buffered: int, batch_size: int) -> Flush | None:
    """After a successful step at `node` that the run goes on from, with `buffered` results
    in the buffer (that step's included): why to flush now, or None to keep buffering.

    A run that stops at this step never flushes first: its final AdvanceRun carries the step.
    """
    if mode is ExecutionMode.LOCAL_SYNC:
        return Flush.STEP
    if isinstance(node, Task) and node.checkpoint:
        return Flush.CHECKPOINT
    if buffered >= max(1, batch_size):
        return Flush.BATCH_FULL
    return None


def default_max_request_bytes(max_payload_bytes: int) -> int:
    """The request limit a server derives from its payload limit (room for a few payloads)."""
    return 4 * max_payload_bytes + 1024 * 1024


def over_request_limit(request_bytes: int, max_request_bytes: int) -> bool:
    """Whether a batch of this encoded size must not be sent as one request: the buffer is
    flushed before the result that would make it so is added."""
    return request_bytes > max_request_bytes - REQUEST_HEADROOM


@dataclass
class Chain:
    """The expression nodes a run went through after a worker step (docs/worker-protocol.md,
    "Expression nodes in a run"): each node's value in order, the move after the last one,
    and the context then. `failed`: the last value is an error and the run ends there."""

    values: list[tuple[str, NodeValue]] = field(default_factory=list)
    move: traversal.Move | None = None
    context: Any = None
    failed: bool = False


def through_expressions(
    graph: Graph,
    move: traversal.Move,
    context: Any,
    instance: Mapping[str, Any],
    worker_queues: Collection[str],
) -> Chain:
    """Evaluate the condition and set nodes `move` leads to, one after another, until the
    token reaches another kind of node or ends; what a local run does after each worker step."""
    chain = Chain(move=move, context=context)
    while move.handback is None and isinstance(
        node := graph.nodes[move.next_node or ""], Condition | SetValues
    ):
        value = evaluate_node(node, context, dict(instance))
        chain.values.append((node.id, value))
        if value.error is not None:
            chain.failed = True
            break
        if value.predicate is None:
            context = value.context
        move = traversal.advance(
            graph,
            node.id,
            worker_queues,
            predicate_value=value.predicate,
            loop_counts=move.loop_counts,
        )
    chain.move, chain.context = move, context
    return chain


def worker_steps(graph: Graph, node_ids: Collection[str]) -> int:
    """How many of `node_ids` are worker steps: a batch size does not count expressions."""
    return sum(not isinstance(graph.nodes[n], Condition | SetValues) for n in node_ids)
