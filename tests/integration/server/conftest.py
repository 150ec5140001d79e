"""Fixtures for the server tests: a real loopback gRPC server, over a real Engine (on the
`database_url` fixture: SQLite and PostgreSQL) or over a small in-memory stand-in for the
transport-only tests (auth, limits, health, long-poll wake-ups, shutdown)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.engine import AdvanceResult, InstanceStatus, ReportKind, StartResult, TaskActivation
from wiggle.errors import InstanceNotFound, StaleLease
from wiggle.graph import ExecutionMode
from wiggle.server import Server, ServerConfig

GREET = b"""
wiggle: 1
name: greet
input: {type: object, required: [name]}
steps:
  - task: hello
  - task: bye
"""

GATE = b"""
wiggle: 1
name: gate
steps:
  - await: go
  - task: hello
"""


class FakeEngine:
    """Just enough of Engine for the transport tests: a task list and a condition to wait on."""

    def __init__(self) -> None:
        self.tasks: list[TaskActivation] = []
        self.cond = threading.Condition()
        self.polls = 0
        self.polled = threading.Condition()  # notified per poll (pollers wait on `cond`)
        self.closed = False
        self.timer_wake = threading.Event()
        self.failures: list[tuple[str, Any]] = []
        self.trace_context = False  # as Engine's: tasks carry no trace context unless traced

    def add_tasks(self, n: int, queue: str = "default") -> None:
        with self.cond:
            for i in range(n):
                self.tasks.append(
                    TaskActivation(
                        f"t{len(self.tasks)}-{i}",
                        "lease",
                        0,
                        "i1",
                        "greet",
                        "sha256:x",
                        "hello",
                        "hello",
                        queue,
                        1,
                        {"n": i},
                        ExecutionMode.SERVER,
                        {},
                        30_000,
                    )
                )
            self.cond.notify_all()

    def poll(self, queues: Any, worker_id: str, max_tasks: int, **kw: Any) -> list[TaskActivation]:
        with self.polled:
            self.polls += 1
            self.polled.notify_all()
        with self.cond:
            mine = [t for t in self.tasks if t.queue in queues][:max_tasks]
            for t in mine:
                self.tasks.remove(t)
            return mine

    def wait_polls(self, n: int, timeout: float = 10.0) -> None:
        """Until `n` polls have reached the engine (a long poll polls once, then waits)."""
        with self.polled:
            assert self.polled.wait_for(lambda: self.polls >= n, timeout), f"{self.polls} polls"

    def note_worker(self, note: Any) -> None:
        pass

    def wait_for_tasks(self, queues: Any, timeout_s: float, **kw: Any) -> None:
        with self.cond:
            self.cond.wait(timeout_s)

    def report(self, report: Any) -> AdvanceResult:
        if report.lease != "lease":
            raise StaleLease(report.task_id)
        if report.kind is ReportKind.FAIL:
            self.failures.append((report.task_id, report.failure))
        return AdvanceResult(InstanceStatus.RUNNING, 0, False)

    def start(self, flow: str, input: Any, **kw: Any) -> StartResult:
        return StartResult("i1", "sha256:x", True)

    def signal(self, instance_id: str, name: str, payload: Any) -> bool:
        return True

    def describe(self, instance_id: str, *, include_events: bool = False) -> Any:
        if instance_id == "boom":
            raise RuntimeError("database password is hunter2")  # must not reach the client
        raise InstanceNotFound(instance_id)

    def tick(self) -> int:
        return 0

    def next_wakeup_s(self) -> float:
        return 1.0

    def wait_for_timers(self, timeout_s: float) -> None:
        self.timer_wake.wait(timeout_s)
        self.timer_wake.clear()

    def wake(self) -> None:
        self.timer_wake.set()
        with self.cond:
            self.cond.notify_all()

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start a Server over an engine on an ephemeral loopback port; stopped after the test."""
    servers: list[Server] = []

    def start(engine: Any, **config: Any) -> Server:
        config.setdefault("address", "127.0.0.1:0")
        server = Server(engine, ServerConfig(**config))
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(grace=1.0)


@pytest.fixture
def fake_engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def stub_for() -> Iterator[Callable[..., Any]]:
    """A raw WiggleStub on a server (for requests the Client would never send)."""
    channels: list[grpc.Channel] = []

    def make(server: Server) -> Any:
        channel = grpc.insecure_channel(server.address)
        channels.append(channel)
        return pb_grpc.WiggleStub(channel)

    yield make
    for channel in channels:
        channel.close()


@pytest.fixture
def flows() -> dict[str, bytes]:
    return {"greet": GREET, "gate": GATE}


@pytest.fixture
def engine(database_url: str) -> Iterator[Any]:
    from wiggle.engine import Engine

    eng = Engine(database_url)
    yield eng
    eng.close()


@pytest.fixture
def server(engine: Any, start_server: Callable[..., Server]) -> Server:
    return start_server(engine)


@pytest.fixture
def client(server: Server) -> Iterator[Any]:
    from wiggle.client import Client

    with Client(server.address, retry_for=0.0) as c:
        yield c


@pytest.fixture
def stub(server: Server, stub_for: Callable[..., Any]) -> Any:
    return stub_for(server)
