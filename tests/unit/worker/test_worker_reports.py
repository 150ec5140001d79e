"""Reports under a lease, over the fake stub: numbered, resent with the same number, released
when given up, and checked against the server's limits before they are sent."""

from __future__ import annotations

import time

import grpc
import orjson
import pytest

from wiggle._limits import MAX_JSON_DEPTH
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.worker import Registry
from wiggle.worker._heartbeat import Lease
from wiggle.worker._local_run import hold_lease, run_task

pytestmark = pytest.mark.timeout(30)

LOOP = """
wiggle: 1
name: counter
execution: {mode}
steps:
  - loop:
      steps: [{{task: inc}}]
      while: more
      max_iterations: 50
"""


def loop_registry(until: int, executed: list[str]) -> Registry:
    reg = Registry()

    @reg.activity
    def inc(ctx):
        executed.append("inc")
        return {"n": ctx.get("n", 0) + 1}

    @reg.activity
    def more(ctx):
        executed.append("more")
        return ctx["n"] < until

    return reg


def linear(mode: str, n: int) -> str:
    steps = "\n".join(f"  - task: s{i}" for i in range(n))
    return f"wiggle: 1\nname: lin\nexecution: {mode}\nsteps:\n{steps}\n"


def sized_registry(n: int, size: int) -> Registry:
    reg = Registry()
    for i in range(n):
        reg.register(lambda ctx, i=i: {"step": i, "pad": "x" * size}, f"s{i}")
    return reg


def test_every_report_on_a_lease_is_numbered_from_one(harness):
    executed: list[str] = []
    h = harness(LOOP.format(mode="LOCAL_SYNC"), loop_registry(3, executed))
    run_task(h.env, h.task(ctx={}))
    assert [r.seq for r in h.stub.requests("AdvanceRun")] == [1, 2, 3, 4, 5, 6]


def test_a_server_step_reports_with_seq_one(harness):
    reg = Registry()
    reg.register(lambda ctx: {"ok": True}, "s0")
    h = harness(linear("SERVER", 1), reg)
    run_task(h.env, h.task(ctx={}))
    assert [r.seq for r in h.stub.requests("CompleteTask")] == [1]


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.INTERNAL,  # gRPC reports some stream resets so
        grpc.StatusCode.UNKNOWN,
    ],
)
def test_a_report_whose_answer_was_lost_is_resent_with_the_same_seq(harness, rpc_error, code):
    executed: list[str] = []
    h = harness(LOOP.format(mode="LOCAL_SYNC"), loop_registry(2, executed))
    lost: list[int] = []

    def flaky(request):
        if request.seq == 2 and not lost:
            lost.append(request.seq)
            raise rpc_error(code, "connection reset")
        return pb.AdvanceRunResponse(
            instance_status=pb.InstanceStatus.RUNNING,
            lease_expires_at_ms=int(time.time() * 1000) + 60_000,
            keep_going=not request.final,
        )

    h.stub.answers["AdvanceRun"] = flaky
    run_task(h.env, h.task(ctx={}))
    seqs = [r.seq for r in h.stub.requests("AdvanceRun")]
    assert seqs == [1, 2, 2, 3, 4]
    assert h.stub.batches()[1] == h.stub.batches()[2]  # the same report, sent again
    assert executed == ["inc", "more", "inc", "more"]
    assert not h.stub.requests("ReleaseTask")


def test_a_refused_report_releases_the_lease_at_once(harness, rpc_error):
    executed: list[str] = []
    h = harness(LOOP.format(mode="LOCAL_SYNC"), loop_registry(3, executed))

    def refuse_second(request):
        if request.seq == 2:
            raise rpc_error(grpc.StatusCode.INVALID_ARGUMENT, "off the graph", server=True)
        return pb.AdvanceRunResponse(
            instance_status=pb.InstanceStatus.RUNNING,
            lease_expires_at_ms=int(time.time() * 1000) + 60_000,
            keep_going=True,
        )

    h.stub.answers["AdvanceRun"] = refuse_second
    run_task(h.env, h.task(ctx={}))
    assert executed == ["inc", "more"]
    (released,) = h.stub.requests("ReleaseTask")
    # The refused report was not applied: the release takes its number.
    assert (released.task_id, released.lease, released.seq) == ("t-1", "lease-1", 2)


def test_a_stale_report_does_not_release(harness, rpc_error):
    executed: list[str] = []
    h = harness(LOOP.format(mode="LOCAL_SYNC"), loop_registry(3, executed))

    def stale(request):
        raise rpc_error(grpc.StatusCode.FAILED_PRECONDITION, "stale lease", server=True)

    h.stub.answers["AdvanceRun"] = stale
    run_task(h.env, h.task(ctx={}))
    assert executed == ["inc"]
    assert not h.stub.requests("ReleaseTask")


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_task_received_while_draining_is_released_unrun(harness, mode):
    executed: list[str] = []
    h = harness(LOOP.format(mode=mode), loop_registry(3, executed))
    h.env.draining.set()
    run_task(h.env, h.task(ctx={}))
    assert executed == []
    (released,) = h.stub.requests("ReleaseTask")
    assert (released.seq, released.reason) == (1, "shutdown")
    assert not h.stub.requests("AdvanceRun") and not h.stub.requests("CompleteTask")


def test_async_flushes_before_a_batch_would_exceed_the_request_limit(harness):
    # Nine 2 MB contexts would make an 18 MB AdvanceRun; the server takes at most 5 MB.
    limit = 5 * 1024 * 1024
    h = harness(linear("LOCAL_ASYNC", 9), sized_registry(9, 2 * 1024 * 1024))
    run_task(h.env, h.task(ctx={}, max_payload_bytes=4 * 1024 * 1024, max_request_bytes=limit))
    requests = h.stub.requests("AdvanceRun")
    assert all(r.ByteSize() <= limit for r in requests), [r.ByteSize() for r in requests]
    flushed = [s.node_id for r in requests for s in r.steps]
    assert flushed == [f"s{i}" for i in range(9)]
    assert [r.final for r in requests] == [False] * (len(requests) - 1) + [True]
    assert [r.seq for r in requests] == list(range(1, len(requests) + 1))


def first_step_failure(h, mode: str) -> pb.StepFailure:
    """The failure the worker reported for the first step, s0: alone, and ending the run."""
    if mode == "SERVER":
        (req,) = h.stub.requests("FailTask")
        return req.failure
    (req,) = h.stub.requests("AdvanceRun")
    assert req.final and [s.node_id for s in req.steps] == ["s0"]
    return req.steps[0].failure


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
def test_a_result_over_the_payload_limit_fails_the_step_at_once(harness, mode):
    h = harness(linear(mode, 2), sized_registry(2, 5000))
    run_task(h.env, h.task(ctx={}, max_payload_bytes=4096))
    failure = first_step_failure(h, mode)
    assert failure.non_retryable
    assert "max_payload_bytes" in failure.message and "4096" in failure.message


def test_a_result_nested_too_deep_fails_the_step_at_once(harness):
    reg = Registry()
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    reg.register(lambda ctx: deep, "s0")
    reg.register(lambda ctx: ctx, "s1")
    h = harness(linear("LOCAL_ASYNC", 2), reg)
    run_task(h.env, h.task(ctx={}))
    (req,) = h.stub.requests("AdvanceRun")
    failure = req.steps[0].failure
    assert failure.non_retryable and str(MAX_JSON_DEPTH) in failure.message


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"])
@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 300, 2000])
def test_a_result_deeper_than_the_encoder_goes_fails_like_any_too_deep_one(harness, mode, levels):
    # orjson gives up past 254 levels ("Recursion limit reached", a TypeError). That result
    # used to be failed as retryable ("not JSON"), using up every attempt, where one 129-254
    # levels deep failed at once: every over-deep result must fail alike, non-retryably.
    reg = Registry()
    deep: object = 1
    for _ in range(levels):
        deep = [deep]
    reg.register(lambda ctx: deep, "s0")
    reg.register(lambda ctx: ctx, "s1")
    h = harness(linear(mode, 2), reg)
    run_task(h.env, h.task(ctx={}))
    failure = first_step_failure(h, mode)
    assert failure.non_retryable, failure.message
    assert f"the JSON depth limit is {MAX_JSON_DEPTH}" in failure.message


def test_a_result_exactly_at_the_depth_limit_passes(harness):
    reg = Registry()
    deep: object = 1
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    reg.register(lambda ctx: deep, "s0")
    h = harness(linear("SERVER", 1), reg)
    run_task(h.env, h.task(ctx={}))
    (req,) = h.stub.requests("CompleteTask")
    assert orjson.loads(req.result) == deep


def test_lease_time_is_measured_on_the_server_clock():
    # The server's clock runs an hour behind ours: only the difference it sent counts.
    server_now = int(time.time() * 1000) - 3_600_000
    lease = Lease("t", "l", server_now + 30_000, 30_000, server_now)
    assert 29_000 <= lease.remaining_ms() <= 30_000
    lease.renewed(server_now + 5_000, server_now)
    assert lease.length_ms == 5_000 and 4_000 <= lease.remaining_ms() <= 5_000


LONGER = """
wiggle: 1
name: longer
execution: LOCAL_SYNC
steps:
  - {task: s0, timeout: 1s}
  - {task: s1, timeout: 1h}
"""


def test_a_longer_next_step_renews_the_lease_by_its_timeout_first(harness):
    reg = Registry()
    reg.register(lambda ctx: ctx, "s0")
    reg.register(lambda ctx: ctx, "s1")
    h = harness(LONGER, reg)

    def renew(request):
        now = int(time.time() * 1000)
        return pb.AdvanceRunResponse(
            instance_status=pb.InstanceStatus.RUNNING,
            lease_expires_at_ms=now + 1_000,  # renewed by s0's own timeout (an old server)
            keep_going=not request.final,
            server_now_ms=now,
        )

    h.stub.answers["AdvanceRun"] = renew
    run_task(h.env, h.task(ctx={}, timeout_ms=1_000))
    beats = h.stub.requests("Heartbeat")
    assert [b.node_id for b in beats] == ["s1"]
    # Renewed for s1 before s1 starts (before s0's report, which the budget check precedes).
    order = [m for m, _ in h.stub.calls if m in ("AdvanceRun", "Heartbeat")]
    assert order == ["Heartbeat", "AdvanceRun", "AdvanceRun"]


def test_a_lease_lost_during_a_step_ends_the_run_without_a_size_flush(harness):
    # s1's result does not fit in the request beside s0's: a size flush of s0 would be due.
    # But the lease was lost while s1 ran (a heartbeat said so): no report at all may follow,
    # not even the non-final flush (docs/worker-protocol.md, "The loop").
    limit = 4096
    leases: list[Lease] = []
    reg = Registry()
    reg.register(lambda ctx: {"pad": "x" * 2500}, "s0")

    def lost_meanwhile(ctx):
        leases[0].lose("heartbeat refused: STALE_LEASE")
        return {"pad": "y" * 2500}

    reg.register(lost_meanwhile, "s1")
    reg.register(lambda ctx: ctx, "s2")
    h = harness(linear("LOCAL_ASYNC", 3), reg)
    task = h.task(ctx={}, max_payload_bytes=limit, max_request_bytes=limit)
    leases.append(hold_lease(h.env, task))
    run_task(h.env, task, leases[0])
    assert h.stub.requests("AdvanceRun") == [] and h.stub.requests("ReleaseTask") == []
