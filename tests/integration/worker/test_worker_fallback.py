"""Falling back to SERVER behaviour, and riding out a server restart."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

import grpc
import pytest

from tests.waiting import count_poll_retries
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.server import Server, ServerConfig
from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(90)

FLOW = (
    "wiggle: 1\nname: fb\nexecution: {mode}\n"
    "steps: [{{task: one}}, {{task: two}}, {{task: three}}]\n"
)


class Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        super().__init__(code.name)
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "refused by the test"


class CountingStub:
    """The real stub, counting calls, with chosen methods refused with a chosen status."""

    def __init__(self, channel: grpc.Channel, refuse: dict[str, grpc.StatusCode]) -> None:
        self._stub = pb_grpc.WiggleStub(channel)
        self._refuse = refuse
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._stub, name)
        if name == "PollTasks":
            return real  # the poller needs the real multi-callable (futures)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name in self._refuse:
                raise Refused(self._refuse[name])
            return real(*args, **kwargs)

        return call


def registry() -> Registry:
    reg = Registry()
    for name in ("one", "two", "three"):
        reg.register(lambda ctx, name=name: {**ctx, name: True}, name)
    return reg


@pytest.mark.parametrize(
    ("mode", "refused"),
    [
        ("LOCAL_SYNC", "GetDefinition"),
        ("LOCAL_ASYNC", "GetDefinition"),
        ("LOCAL_SYNC", "AdvanceRun"),
        ("LOCAL_ASYNC", "AdvanceRun"),
    ],
)
def test_local_tasks_run_as_server_steps_when_local_runs_are_impossible(stack, mode, refused):
    code = (
        grpc.StatusCode.NOT_FOUND if refused == "GetDefinition" else grpc.StatusCode.UNIMPLEMENTED
    )
    flow = stack.deploy(FLOW.format(mode=mode))
    channel = grpc.insecure_channel(stack.address)
    stub = CountingStub(channel, {refused: code})
    try:
        with Worker(stack.address, registry=registry(), stub=stub, poll_wait_ms=500):
            ids = [
                stack.client.start(flow.name, {}, version=flow.version).instance_id
                for _ in range(3)
            ]
            views = [stack.wait_finished(i) for i in ids]
    finally:
        channel.close()
    for view in views:
        assert view.status == "COMPLETED", view.reason
        assert view.context == {"one": True, "two": True, "three": True}
    # Every step went through CompleteTask; AdvanceRun was tried at most by the runs already
    # under way when the first refusal came back (one per instance), never after.
    assert stub.calls["CompleteTask"] == 9
    assert stub.calls["AdvanceRun"] <= 3
    if refused == "GetDefinition":
        assert stub.calls["AdvanceRun"] == 0
        assert stub.calls["GetDefinition"] == 1  # the failure is remembered, not re-asked per task


def test_worker_reconnects_after_a_server_restart_and_logs_once(
    stack, database_url, caplog, monkeypatch
):
    flow = stack.deploy(FLOW.format(mode="LOCAL_SYNC"))
    port = int(stack.address.rsplit(":", 1)[1])
    caplog.set_level(logging.WARNING, logger="wiggle.worker")
    failed_polls = count_poll_retries(monkeypatch)
    with Worker(stack.address, registry=registry(), poll_wait_ms=300):
        first = stack.client.start(flow.name, {}, version=flow.version)
        assert stack.wait_finished(first.instance_id).status == "COMPLETED"
        stack.server.stop(grace=0.2)
        for _ in range(3):  # several poll attempts fail while the server is away
            assert failed_polls.acquire(timeout=30), "the worker stopped polling"
        restarted = Server(stack.engine, ServerConfig(address=f"127.0.0.1:{port}", grace_s=0.5))
        restarted.start()
        stack.server = restarted  # the fixture stops this one
        second = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(second.instance_id, timeout=30)
    assert view.status == "COMPLETED"
    down = [r for r in caplog.records if "unreachable" in r.getMessage()]
    back = [r for r in caplog.records if "reachable again" in r.getMessage()]
    assert len(down) == 1, [r.getMessage() for r in down]
    assert len(back) == 1
