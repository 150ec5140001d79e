"""The worker's I/O seam: retries while unreachable, one log line per outage, the token."""

from __future__ import annotations

import logging

import grpc
import pytest

import wiggle.worker
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.wire import Backoff
from wiggle.worker._rpc import Rpc, RpcFailed

pytestmark = pytest.mark.timeout(20)


class Stub:
    def __init__(self, failures, error):
        self.failures = list(failures)
        self.error = error
        self.metadata = []

    def Heartbeat(self, request, *, timeout, metadata):
        self.metadata.append(metadata)
        if self.failures:
            raise self.error(self.failures.pop(0))
        return pb.HeartbeatResponse(instance_status=pb.InstanceStatus.RUNNING)


def test_backoff_doubles_up_to_its_cap():
    backoff = Backoff(initial=0.1, cap=0.4)
    delays = [backoff.next_delay() for _ in range(5)]
    assert 0.08 <= delays[0] <= 0.12
    assert all(d <= 0.4 * 1.2 for d in delays)
    assert delays[-1] >= 0.4 * 0.8
    backoff.reset()
    assert backoff.next_delay() <= 0.12


def test_unavailable_is_retried_and_logged_once_per_outage(rpc_error, caplog):
    caplog.set_level(logging.WARNING, logger="wiggle.worker")
    unavailable = grpc.StatusCode.UNAVAILABLE
    stub = Stub([unavailable, unavailable, unavailable], rpc_error)
    rpc = Rpc(stub, address="here:1", token="t0k")
    response = rpc.call("Heartbeat", pb.HeartbeatRequest(task_id="t"), retry_for=10)
    assert response.instance_status == pb.InstanceStatus.RUNNING
    messages = [r.getMessage() for r in caplog.records]
    assert sum("unreachable" in m for m in messages) == 1
    assert sum("reachable again" in m for m in messages) == 1
    assert all(md == (("authorization", "Bearer t0k"),) for md in stub.metadata)


def test_other_codes_fail_at_once_and_retries_end(rpc_error):
    stub = Stub([grpc.StatusCode.FAILED_PRECONDITION], rpc_error)
    with pytest.raises(RpcFailed) as caught:
        Rpc(stub).call("Heartbeat", pb.HeartbeatRequest(), retry_for=10)
    assert caught.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert len(stub.metadata) == 1 and stub.metadata[0] == ()

    down = Stub([grpc.StatusCode.UNAVAILABLE] * 100, rpc_error)
    with pytest.raises(RpcFailed) as caught:
        Rpc(down).call("Heartbeat", pb.HeartbeatRequest(), retry_for=0.3)
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert 2 <= len(down.metadata) < 10


def test_the_public_names_of_wiggle_worker():
    assert sorted(wiggle.worker.__all__) == [
        "Activity",
        "EagerSlot",
        "NonRetryable",
        "NotInActivity",
        "Registry",
        "StepInfo",
        "TlsConfig",
        "Worker",
        "activity",
        "default_registry",
        "load_handlers",
        "run_handler",
        "step",
    ]
    for name in wiggle.worker.__all__:
        assert getattr(wiggle.worker, name) is not None
