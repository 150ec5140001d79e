"""Deliberately broken conformance workers: the Python worker with one protocol rule broken.

`python tests/conformance/broken_worker.py FLAW` patches one thing in the Python worker, then
serves the conformance activities exactly as `python -m wiggle.conformance` does. The negative
controls (test_negative_controls.py) run the corpus against each and require it to fail: a judge
that cannot fail is no judge.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

FLAWS: dict[str, str] = {
    "never-chains": "runs every LOCAL task as one SERVER step (CompleteTask), never AdvanceRun",
    "async-flushes-only-at-the-end": "LOCAL_ASYNC buffers the whole run: no checkpoint, batch "
    "or size flush",
    "ignores-checkpoint": "LOCAL_ASYNC does not flush after a checkpoint step",
    "keeps-running-after-lease-lost": "never notices that its lease is lost",
    "starts-late-after-lease-lost": "never notices that its lease is lost, and (as a starved "
    "process would) is seconds late into every append step",
    "predicate-as-context": "reports a predicate's boolean as a JSON true/false context",
    "resends-without-seq": "numbers no report (seq 0), and resends a report of unknown fate so",
    "never-resends": "gives a report up when its answer is lost, instead of resending it",
    "resends-with-a-new-seq": "resends a report whose answer was lost under the next seq",
    "exits-without-handing-back": "on SIGTERM stops at once: no hand-back, no ReleaseTask",
    "skips-result-limits": "sends results over the payload or depth limit to the server",
    "retries-results-too-deep-to-encode": "fails a result too deep for its JSON encoder as "
    "retryable 'not JSON' (the defect found by a fault probe)",
    "keeps-refused-tasks": "gives up a task whose report was refused without releasing it",
    "cancels-its-poll": "on a drain cancels its open poll instead of ending it with EndPolls",
    "runs-tasks-received-while-draining": "runs a task that arrives during a drain instead of "
    "releasing it",
    "hands-back-at-expressions": "stops a local run in front of a condition or set node "
    "(a final AdvanceRun) instead of evaluating it and going on",
}


#: How late the starved worker (starts-late-after-lease-lost) is into each append step.
STARVED_S = 5.0


def _reports(flaw: str) -> Callable[..., Any]:
    """send_report (wiggle.worker._reporting) with its numbering or its resends broken."""
    import time

    from wiggle.worker import _reporting as rep
    from wiggle.worker._rpc import RpcFailed

    def call(rpc: Any, lease: Any, method: str, request: Any, **retry: Any) -> Any:
        timeout = rep._attempt_timeout(rpc, lease)
        return rpc.call(method, request, timeout=timeout, **retry)

    def send(rpc: Any, lease: Any, method: str, request: Any) -> Any:
        if flaw == "resends-without-seq":
            request.seq = 0
            window = rep.retry_window(lease)
            return call(rpc, lease, method, request, retry_for=window, retry_on=rep.UNKNOWN_FATE)
        for _ in range(20):
            seq = lease.next_seq()
            request.seq = seq
            try:
                response = call(rpc, lease, method, request, retry_on=frozenset())
            except RpcFailed as exc:
                if flaw == "never-resends" or exc.code not in rep.UNKNOWN_FATE:
                    raise
                lease.ack(seq)  # taken for applied: the resend gets the next number
                time.sleep(0.1)
                continue
            lease.ack(seq)
            return response
        raise RpcFailed(method, None, "gave up")

    return send


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
    elif flaw == "starts-late-after-lease-lost":
        import time

        from wiggle.conformance import _activities

        _heartbeat.Lease.lost = property(lambda self: False)  # type: ignore[assignment,method-assign]
        original_trace = _activities._trace

        def late(name: str, path: str | None = None) -> None:
            # Started with lease enough left, then not scheduled for a while: its trace line,
            # which is what shows the step ran, lands seconds after the step began.
            if name == "append":
                time.sleep(STARVED_S)
            original_trace(name, path)

        _activities._trace = late
    elif flaw == "predicate-as-context":
        original_result = _local_run._step_result

        def as_context(node_id: str, outcome: Any) -> Any:
            if outcome.failure is None and outcome.predicate is not None:
                from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

                value = b"true" if outcome.predicate else b"false"
                return pb.StepResult(node_id=node_id, context=value)
            return original_result(node_id, outcome)

        _local_run._step_result = as_context
    elif flaw in ("resends-without-seq", "never-resends", "resends-with-a-new-seq"):
        from wiggle.worker import _reporting

        _reporting.send_report = _local_run.send_report = _reports(flaw)
    elif flaw == "exits-without-handing-back":
        from wiggle.worker import Worker

        original_stop = Worker.stop
        Worker.stop = lambda self, drain=True: original_stop(self, drain=False)  # type: ignore[method-assign]
    elif flaw == "skips-result-limits":
        _local_run.check_result = lambda outcome, max_payload_bytes: outcome
    elif flaw == "retries-results-too-deep-to-encode":
        from wiggle.worker import _activities

        _activities.json_depth_over = lambda value, limit=0: False
    elif flaw == "keeps-refused-tasks":
        from wiggle.worker import _reporting

        _reporting.release = lambda rpc, lease, reason: False  # refused() gives up silently
    elif flaw == "cancels-its-poll":
        from wiggle.worker._poller import Poller

        Poller._end_polls = lambda self, call: False  # type: ignore[method-assign]
    elif flaw == "runs-tasks-received-while-draining":
        original_run = _local_run.run_task

        def ignoring_the_drain(env: Any, task: Any, lease: Any = None) -> None:
            if env.draining.is_set():
                env = replace(env, draining=threading.Event())  # as if it were not draining
            original_run(env, task, lease)

        _local_run.run_task = ignoring_the_drain
        from wiggle.worker import _worker

        _worker.run_task = ignoring_the_drain  # type: ignore[attr-defined]
    elif flaw == "hands-back-at-expressions":
        from wiggle.graph import Condition, SetValues
        from wiggle.localrun import Chain
        from wiggle.traversal import Handback

        def stops_there(graph: Any, move: Any, context: Any, *_: Any) -> Chain:
            # As a worker that knows no expression kinds treats them: like another queue's step.
            if move.handback is None and isinstance(
                graph.nodes.get(move.next_node or ""), Condition | SetValues
            ):
                move = replace(move, handback=Handback.OTHER_QUEUE)
            return Chain(move=move, context=context)

        _local_run.through_expressions = stops_there
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
