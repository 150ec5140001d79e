"""A flow as one execution mode runs it: the variant with that `execution`, and its queues."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wiggle.compiler import CompiledFlow

__all__ = ["MODES", "compiled_in_mode", "flow_queues"]

#: The execution modes a flow can run in, in the order every mode check runs them.
MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")


def compiled_in_mode(flow: CompiledFlow, mode: str) -> CompiledFlow:
    """`flow` with its `execution` set to `mode` (a variant with its own version hash)."""
    # Imported here: importing `wiggle.conformance`, as the Python conformance worker does,
    # loads this package and does not load the compiler.
    from wiggle.compiler import canonical_json, graph_from_canonical

    if flow.document.get("execution") == mode:
        return flow
    return graph_from_canonical(canonical_json({**flow.document, "execution": mode}))


def flow_queues(flows: Sequence[CompiledFlow]) -> set[str]:
    """Every queue a step of `flows` runs on (a for_each's `apply` too); `{"default"}` for
    none: the queues a worker must serve to run them."""
    queues: set[str] = set()
    for flow in flows:
        for node in flow.graph:
            for holder in (node, getattr(node, "apply", None)):
                queue = getattr(holder, "queue", None)
                if isinstance(queue, str):
                    queues.add(queue)
    return queues or {"default"}
