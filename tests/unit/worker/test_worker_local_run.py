"""The local-run driver against a recording fake stub: which AdvanceRun batches, in what order."""

from __future__ import annotations

import grpc
import orjson
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.worker import NonRetryable, Registry, step
from wiggle.worker._heartbeat import Lease, LeaseKeeper
from wiggle.worker._local_run import run_task

pytestmark = pytest.mark.timeout(20)


def linear(mode: str, n: int = 3, *, checkpoint: str = "", other_queue: str = "") -> str:
    lines = [f"wiggle: 1\nname: lin\nexecution: {mode}\nsteps:"]
    for i in range(n):
        name = f"s{i}"
        lines.append(f"  - task: {name}")
        if name == checkpoint:
            lines.append("    checkpoint: true")
        if name == other_queue:
            lines.append("    queue: other")
    return "\n".join(lines) + "\n"


def counting_registry(
    n: int, executed: list[str], *, fail_at: str = "", non_retryable: bool = False
):
    reg = Registry()
    for i in range(n):
        name = f"s{i}"

        def fn(ctx, name=name):
            executed.append(name)
            if name == fail_at:
                raise (NonRetryable if non_retryable else RuntimeError)(f"{name} broke")
            return {**ctx, name: step().attempt}

        reg.register(fn, name)
    return reg


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_linear_run_batches(harness, mode):
    executed: list[str] = []
    h = harness(linear(mode, 3), counting_registry(3, executed))
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s1", "s2"]
    if mode == "LOCAL_SYNC":
        assert h.stub.batches() == [(["s0"], False, ""), (["s1"], False, ""), (["s2"], True, "end")]
    else:
        assert h.stub.batches() == [(["s0", "s1", "s2"], True, "end")]
    last = h.stub.requests("AdvanceRun")[-1]
    assert orjson.loads(last.steps[-1].context) == {"s0": 1, "s1": 1, "s2": 1}
    assert {r.task_id for r in h.stub.requests("AdvanceRun")} == {"t-1"}
    assert {r.lease for r in h.stub.requests("AdvanceRun")} == {"lease-1"}
    assert not h.stub.requests("CompleteTask")


def test_sync_step_is_reported_before_the_next_one_runs(harness):
    seen_reports: list[int] = []
    h = None
    reg = Registry()

    for name in ("s0", "s1", "s2"):

        def fn(ctx, name=name):
            seen_reports.append(len(h.stub.requests("AdvanceRun")))
            return ctx

        reg.register(fn, name)
    h = harness(linear("LOCAL_SYNC", 3), reg)
    run_task(h.env, h.task(ctx={}))
    assert seen_reports == [0, 1, 2]


def test_async_checkpoint_flushes_right_after_the_checkpoint_step(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 4, checkpoint="s1"), counting_registry(4, executed))
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "s1"], False, ""), (["s2", "s3"], True, "end")]


def test_async_flushes_when_the_buffer_reaches_the_batch_size(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 5), counting_registry(5, executed), batch=2)
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [
        (["s0", "s1"], False, ""),
        (["s2", "s3"], False, ""),
        (["s4"], True, "end"),
    ]


@pytest.mark.parametrize("non_retryable", [False, True])
def test_async_failure_flushes_prefix_and_failure_together(harness, non_retryable):
    executed: list[str] = []
    reg = counting_registry(4, executed, fail_at="s2", non_retryable=non_retryable)
    h = harness(linear("LOCAL_ASYNC", 4), reg)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s1", "s2"]
    assert h.stub.batches() == [(["s0", "s1", "s2"], True, "step_failed")]
    failure = h.stub.requests("AdvanceRun")[0].steps[2]
    assert failure.WhichOneof("outcome") == "failure"
    assert failure.failure.message == "s2 broke"
    assert failure.failure.non_retryable is non_retryable


def test_sync_failure_is_one_final_batch_after_the_flushed_prefix(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 4), counting_registry(4, executed, fail_at="s1"))
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0"], False, ""), (["s1"], True, "step_failed")]


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_queue_change_hands_back(harness, mode):
    executed: list[str] = []
    h = harness(linear(mode, 3, other_queue="s2"), counting_registry(3, executed))
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s1"]
    assert h.stub.batches()[-1] == (
        ["s1"] if mode == "LOCAL_SYNC" else ["s0", "s1"],
        True,
        "other_queue",
    )


def test_a_worker_serving_both_queues_keeps_going(harness):
    executed: list[str] = []
    h = harness(
        linear("LOCAL_ASYNC", 3, other_queue="s1"),
        counting_registry(3, executed),
        queues=("default", "other"),
    )
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "s1", "s2"], True, "end")]


BOUNDARIES = """
wiggle: 1
name: bounds
execution: LOCAL_ASYNC
steps:
  - task: s0
  - sleep: 1s
  - task: s1
"""


def test_a_sleep_is_a_handback(harness):
    executed: list[str] = []
    h = harness(BOUNDARIES, counting_registry(2, executed))
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0"], True, "sleep")]


def test_cancellation_seen_on_a_sync_report_abandons_the_run(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 3), counting_registry(3, executed))
    h.stub.answers["AdvanceRun"] = lambda r: pb.AdvanceRunResponse(
        instance_status=pb.InstanceStatus.CANCELLED, keep_going=False
    )
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0"]
    assert h.stub.batches() == [(["s0"], False, "")]


def test_keep_going_false_from_the_server_ends_the_run(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 3), counting_registry(3, executed))
    h.stub.answers["AdvanceRun"] = lambda r: pb.AdvanceRunResponse(
        instance_status=pb.InstanceStatus.RUNNING, keep_going=False
    )
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0"]


class RecordingKeeper(LeaseKeeper):
    """A keeper that only remembers the lease it holds; tests call beat() by hand."""

    held: Lease | None = None

    def hold(self, lease):
        self.held = lease


def test_a_heartbeat_seeing_cancellation_abandons_the_run_without_flushing(harness):
    executed: list[str] = []
    reg = Registry()
    h = None

    def s0(ctx):
        executed.append("s0")
        h.stub.answers["Heartbeat"] = lambda r: pb.HeartbeatResponse(
            instance_status=pb.InstanceStatus.CANCELLED
        )
        h.env.keeper.beat(h.env.keeper.held)  # a heartbeat falls due during the step
        return ctx

    reg.register(s0, "s0")
    reg.register(lambda ctx: executed.append("s1") or ctx, "s1")
    h = harness(linear("LOCAL_ASYNC", 2), reg)
    h.env.keeper = RecordingKeeper(h.env.rpc)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0"]
    assert h.stub.batches() == []
    assert [r.task_id for r in h.stub.requests("Heartbeat")] == ["t-1"]


def test_drain_hands_back_at_the_next_step_boundary_with_the_buffer(harness):
    executed: list[str] = []
    reg = Registry()
    h = None

    def make(name):
        def fn(ctx):
            executed.append(name)
            if name == "s1":
                h.env.draining.set()  # the worker's stop(drain=True) lands during s1
            return ctx

        return fn

    for i in range(4):
        reg.register(make(f"s{i}"), f"s{i}")
    h = harness(linear("LOCAL_ASYNC", 4), reg)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s1"]
    assert h.stub.batches() == [(["s0", "s1"], True, "shutdown")]


def test_abort_drops_the_buffer_like_a_crash(harness):
    executed: list[str] = []
    reg = Registry()
    h = None

    def s0(ctx):
        executed.append("s0")
        h.env.aborted.set()
        return ctx

    reg.register(s0, "s0")
    reg.register(lambda ctx: ctx, "s1")
    h = harness(linear("LOCAL_ASYNC", 2), reg)
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == []


def test_lease_budget_spent_hands_back(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 3), counting_registry(3, executed))
    # A lease that has less than a quarter of its length left when the first step ends.
    task = h.task(ctx={}, timeout_ms=60_000)
    task.lease_expires_at_ms = task.lease_expires_at_ms - 50_000
    run_task(h.env, task)
    assert h.stub.batches() == [(["s0"], True, "lease_budget")]


def test_unimplemented_advance_run_falls_back_to_complete_task(harness, rpc_error):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 3), counting_registry(3, executed), advance_supported=None)

    def unimplemented(r):
        raise rpc_error(grpc.StatusCode.UNIMPLEMENTED, "no AdvanceRun here")

    h.stub.answers["AdvanceRun"] = unimplemented
    run_task(h.env, h.task(ctx={}))
    # No probing: the run buffered as usual; the refused batch's first step (the one the lease is
    # on) goes as CompleteTask, the rest is dropped and runs again as SERVER tasks.
    assert executed == ["s0", "s1", "s2"]
    assert h.stub.batches() == [(["s0", "s1", "s2"], True, "end")]
    [complete] = h.stub.requests("CompleteTask")
    assert orjson.loads(complete.result) == {"s0": 1}
    assert h.env.advance_run_supported is False
    # Later LOCAL tasks go straight to SERVER mode.
    run_task(h.env, h.task("s1", ctx={"s0": 1}))
    assert len(h.stub.requests("AdvanceRun")) == 1
    assert len(h.stub.requests("CompleteTask")) == 2


def test_unimplemented_failure_falls_back_to_fail_task(harness, rpc_error):
    executed: list[str] = []
    reg = counting_registry(2, executed, fail_at="s0")
    h = harness(linear("LOCAL_SYNC", 2), reg, advance_supported=None)
    h.stub.answers["AdvanceRun"] = lambda r: (_ for _ in ()).throw(
        rpc_error(grpc.StatusCode.UNIMPLEMENTED, "no AdvanceRun here")
    )
    run_task(h.env, h.task(ctx={}))
    [fail] = h.stub.requests("FailTask")
    assert fail.failure.message == "s0 broke" and not fail.failure.non_retryable
    assert not h.stub.requests("CompleteTask")


def test_a_fresh_worker_does_not_probe_the_server(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 4), counting_registry(4, executed), advance_supported=None)
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "s1", "s2", "s3"], True, "end")]
    assert h.env.advance_run_supported is True


def test_missing_definition_falls_back_to_server_mode(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 3), counting_registry(3, executed), publish=False)
    run_task(h.env, h.task(ctx={"x": 1}))
    assert executed == ["s0"]
    assert h.stub.batches() == []
    [complete] = h.stub.requests("CompleteTask")
    assert orjson.loads(complete.result) == {"x": 1, "s0": 1}
    # The failed fetch is remembered for a while: no GetDefinition per task.
    run_task(h.env, h.task("s1", ctx={}))
    assert len(h.stub.requests("GetDefinition")) == 1


def test_definition_is_fetched_once_per_version(harness):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 2), counting_registry(2, executed))
    run_task(h.env, h.task(ctx={}))
    run_task(h.env, h.task(ctx={}))
    assert len(h.stub.requests("GetDefinition")) == 1


def test_server_mode_reports_one_step(harness):
    executed: list[str] = []
    h = harness(
        linear("SERVER", 2), counting_registry(2, executed, fail_at="s1", non_retryable=True)
    )
    run_task(h.env, h.task(ctx={}, attempt=3))
    [complete] = h.stub.requests("CompleteTask")
    assert orjson.loads(complete.result) == {"s0": 3}
    run_task(h.env, h.task("s1", ctx={}))
    [fail] = h.stub.requests("FailTask")
    assert fail.failure.non_retryable and fail.failure.message == "s1 broke"
    assert executed == ["s0", "s1"]
    assert not h.stub.requests("GetDefinition")


def test_server_mode_predicate_sends_json_boolean(harness):
    reg = Registry()
    reg.register(lambda ctx: False, "ok")
    reg.register(lambda ctx: ctx, "s0")
    h = harness("wiggle: 1\nname: p\nsteps:\n  - filter: ok\n  - task: s0\n", reg)
    run_task(h.env, h.task(ctx={}, mode="SERVER"))
    assert h.stub.requests("CompleteTask")[0].result == b"false"


PREDICATES = """
wiggle: 1
name: preds
execution: LOCAL_ASYNC
steps:
  - task: s0
  - filter: keep
  - choice:
      - when: big
        steps: [{task: s1}]
    otherwise: [{task: s2}]
  - task: s3
"""


def test_predicates_route_locally_and_report_their_values(harness):
    executed: list[str] = []
    reg = counting_registry(4, executed)
    reg.register(lambda ctx: True, "keep")
    reg.register(lambda ctx: False, "big")
    h = harness(PREDICATES, reg)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s2", "s3"]
    [request] = h.stub.requests("AdvanceRun")
    assert [(s.node_id, s.WhichOneof("outcome")) for s in request.steps] == [
        ("s0", "context"),
        ("keep", "predicate"),
        ("big", "predicate"),
        ("s2", "context"),
        ("s3", "context"),
    ]
    assert [s.predicate for s in request.steps if s.WhichOneof("outcome") == "predicate"] == [
        True,
        False,
    ]
    # A predicate leaves the context alone: s2 saw s0's result.
    assert orjson.loads(request.steps[-1].context) == {"s0": 1, "s2": 1, "s3": 1}


def test_a_false_filter_hands_back_filtered(harness):
    executed: list[str] = []
    reg = counting_registry(4, executed)
    reg.register(lambda ctx: False, "keep")
    h = harness(PREDICATES, reg)
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "keep"], True, "filtered")]


LOOP = """
wiggle: 1
name: loop
execution: LOCAL_ASYNC
steps:
  - loop:
      steps: [{task: s0}]
      while: again
      max_iterations: 3
  - task: s1
"""


def test_loop_counts_start_from_the_task_and_trip_the_limit(harness):
    executed: list[str] = []
    reg = counting_registry(2, executed)
    reg.register(lambda ctx: True, "again")
    h = harness(LOOP, reg)
    run_task(h.env, h.task(ctx={}, loop_counts={"again": 1}))
    # Counts arrive with the task: one more true, then the limit.
    assert h.stub.batches() == [(["s0", "again", "s0", "again"], True, "loop_limit")]


def test_loop_runs_until_false(harness):
    executed: list[str] = []
    reg = counting_registry(2, executed)
    answers = iter([True, False])
    reg.register(lambda ctx: next(answers), "again")
    h = harness(LOOP, reg)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0", "s0", "s1"]
    assert h.stub.batches() == [(["s0", "again", "s0", "again", "s1"], True, "end")]


def test_unreachable_server_is_retried_during_a_flush(harness, rpc_error):
    executed: list[str] = []
    h = harness(linear("LOCAL_ASYNC", 2), counting_registry(2, executed))
    failures = iter([True, True])

    def flaky(r):
        if next(failures, False):
            raise rpc_error(grpc.StatusCode.UNAVAILABLE, "connection refused")
        return pb.AdvanceRunResponse(instance_status=pb.InstanceStatus.RUNNING)

    h.stub.answers["AdvanceRun"] = flaky
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "s1"], True, "end")] * 3


def test_a_stale_lease_refusal_stops_the_run(harness, rpc_error):
    executed: list[str] = []
    h = harness(linear("LOCAL_SYNC", 3), counting_registry(3, executed))

    def stale(r):
        raise rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "stale lease")

    h.stub.answers["AdvanceRun"] = stale
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0"]


def test_a_run_learning_of_the_fallback_mid_step_reports_its_step_the_server_way(harness):
    """Another run got UNIMPLEMENTED while this one ran its first step: no AdvanceRun at all."""
    executed: list[str] = []
    reg = Registry()
    h = None

    def s0(ctx):
        executed.append("s0")
        h.env.advance_run_supported = False
        return {**ctx, "s0": 1}

    reg.register(s0, "s0")
    reg.register(lambda ctx: executed.append("s1") or ctx, "s1")
    h = harness(linear("LOCAL_ASYNC", 2), reg, advance_supported=None)
    run_task(h.env, h.task(ctx={}))
    assert executed == ["s0"]
    assert h.stub.batches() == []
    [complete] = h.stub.requests("CompleteTask")
    assert orjson.loads(complete.result) == {"s0": 1}


def test_a_predicate_returning_a_non_boolean_is_reported_for_the_server_to_fail(harness):
    executed: list[str] = []
    reg = counting_registry(4, executed)
    reg.register(lambda ctx: "yes", "keep")
    h = harness(PREDICATES, reg)
    run_task(h.env, h.task(ctx={}))
    assert h.stub.batches() == [(["s0", "keep"], True, "step_failed")]
    step_result = h.stub.requests("AdvanceRun")[0].steps[1]
    assert step_result.WhichOneof("outcome") == "context" and step_result.context == b'"yes"'


def test_server_mode_asks_for_next_with_its_activities(harness):
    executed: list[str] = []
    h = harness(linear("SERVER", 2), counting_registry(2, executed), queues=("default", "q2"))
    h.env.worker_id = "w-1"
    run_task(h.env, h.task(ctx={}))
    [complete] = h.stub.requests("CompleteTask")
    assert complete.HasField("next")
    assert complete.next.worker_id == "w-1"
    assert list(complete.next.queues) == ["default", "q2"]
    # The server leases a next task only for an activity the worker has (as PollTasks does).
    assert sorted(complete.next.activities) == ["s0", "s1"]
