"""Leases and the keeper that heartbeats them, over the fake stub."""

from __future__ import annotations

import time

import grpc
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.worker._heartbeat import Lease, LeaseKeeper
from wiggle.worker._rpc import Rpc

pytestmark = pytest.mark.timeout(20)


def now_ms() -> int:
    return int(time.time() * 1000)


def test_a_lease_measures_what_is_left_and_follows_renewals():
    lease = Lease("t", "l", now_ms() + 600, 600)
    assert 500 <= lease.remaining_ms() <= 600
    lease.renewed(now_ms() + 3_000, length_ms=3_000)  # the token moved to a node with 3 s
    assert lease.length_ms == 3_000 and lease.remaining_ms() > 2_500
    # A nonsense expiry (a clock far off) falls back to one lease length from now.
    lease.renewed(now_ms() - 50_000)
    assert 2_900 <= lease.remaining_ms() <= 3_000
    assert not lease.due(time.monotonic())
    assert lease.due(time.monotonic() + 1.0)  # a third of 3 s later


def test_the_keeper_beats_held_leases_about_three_times_a_lease(harness):
    stub = harness("wiggle: 1\nname: f\nsteps: [{task: a}]\n", None).stub
    keeper = LeaseKeeper(Rpc(stub))
    lease = Lease("t-1", "l-1", now_ms() + 300, 300)
    keeper.hold(lease)
    keeper.start()
    try:
        time.sleep(0.75)  # two and a half leases: a beat every 100 ms
        beats = len(stub.requests("Heartbeat"))
        assert 2 <= beats <= 9  # loose: a loaded machine may run the keeper late
        assert stub.requests("Heartbeat")[0].lease == "l-1"
        keeper.drop(lease)
        time.sleep(0.3)
        assert len(stub.requests("Heartbeat")) <= beats + 1
    finally:
        keeper.stop()


@pytest.mark.parametrize(
    ("answer", "lost"),
    [
        ("cancelled", True),
        (grpc.StatusCode.FAILED_PRECONDITION, True),
        (grpc.StatusCode.UNAVAILABLE, False),
        (grpc.StatusCode.INTERNAL, False),
    ],
)
def test_what_a_heartbeat_answer_does_to_the_lease(harness, rpc_error, answer, lost):
    stub = harness("wiggle: 1\nname: f\nsteps: [{task: a}]\n", None).stub

    def respond(request):
        if answer == "cancelled":
            return pb.HeartbeatResponse(instance_status=pb.InstanceStatus.CANCELLED)
        raise rpc_error(answer, "no")

    stub.answers["Heartbeat"] = respond
    lease = Lease("t-1", "l-1", now_ms() + 60_000, 60_000)
    LeaseKeeper(Rpc(stub)).beat(lease)
    assert lease.lost is lost
