"""Deliberately broken conformance workers: the Python worker with one protocol rule broken.

`python tests/conformance/broken_worker.py FLAW` patches one thing in the Python worker, then
serves the conformance activities exactly as `python -m wiggle.conformance` does. The negative
controls (test_negative_controls.py) run the corpus against each and require it to fail: a judge
that cannot fail is no judge.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

FLAWS: dict[str, str] = {
    "never-chains": "runs every LOCAL task as one SERVER step (CompleteTask), never AdvanceRun",
    "async-flushes-only-at-the-end": "LOCAL_ASYNC buffers the whole run: no checkpoint, batch "
    "or size flush",
    "ignores-checkpoint": "LOCAL_ASYNC does not flush after a checkpoint step",
    "keeps-running-after-lease-lost": "never notices that its lease is lost",
    "predicate-as-context": "reports a predicate's boolean as a JSON true/false context",
}


def _break(flaw: str) -> None:
    from wiggle.graph import ExecutionMode, Task
    from wiggle.localrun import Flush
    from wiggle.worker import _heartbeat, _local_run

    original_flush: Callable[..., Any] = _local_run.flush_after
    if flaw == "never-chains":
        _local_run._local_graph = lambda env, task: None
    elif flaw == "async-flushes-only-at-the-end":

        def at_the_end(mode: ExecutionMode, node: Any, buffered: int, batch: int) -> Any:
            return Flush.STEP if mode is ExecutionMode.LOCAL_SYNC else None

        _local_run.flush_after = at_the_end  # type: ignore[assignment]
        _local_run.LocalRun._over_request_limit = lambda self, result: False  # type: ignore[method-assign]
    elif flaw == "ignores-checkpoint":

        def no_checkpoints(mode: ExecutionMode, node: Any, buffered: int, batch: int) -> Any:
            if isinstance(node, Task) and node.checkpoint:
                return Flush.BATCH_FULL if buffered >= batch else None
            return original_flush(mode, node, buffered, batch)

        _local_run.flush_after = no_checkpoints  # type: ignore[assignment]
    elif flaw == "keeps-running-after-lease-lost":
        _heartbeat.Lease.lost = property(lambda self: False)  # type: ignore[assignment,method-assign]
    elif flaw == "predicate-as-context":
        original_result = _local_run._step_result

        def as_context(node_id: str, outcome: Any) -> Any:
            if outcome.failure is None and outcome.predicate is not None:
                from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

                value = b"true" if outcome.predicate else b"false"
                return pb.StepResult(node_id=node_id, context=value)
            return original_result(node_id, outcome)

        _local_run._step_result = as_context
    else:
        raise SystemExit(f"unknown flaw {flaw!r}; one of {', '.join(FLAWS)}")


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: broken_worker.py FLAW ({', '.join(FLAWS)})", file=sys.stderr)
        return 2
    _break(sys.argv[1])
    from wiggle.conformance.__main__ import main as serve

    return serve()


if __name__ == "__main__":
    sys.exit(main())
