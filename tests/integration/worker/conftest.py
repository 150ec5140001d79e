"""A real Wiggle server on a loopback port, over an Engine on each backend (`database_url`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from wiggle.client import Client
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.server import Server, embedded_stack


@dataclass
class Stack:
    engine: Engine
    server: Server
    address: str
    client: Client

    def deploy(self, source: str) -> Any:
        flow = load_flow(source.encode())
        self.client.deploy(flow)
        return flow

    def wait_finished(self, instance_id: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            view = self.client.describe(instance_id, events=True)
            if view.status.finished:
                return view
            assert time.monotonic() < deadline, (
                f"{instance_id} still {view.status} after {timeout}s"
            )
            time.sleep(0.05)


@pytest.fixture
def stack(database_url: str) -> Iterator[Stack]:
    with embedded_stack(database_url, grace_s=1.0) as embedded:
        stack = Stack(embedded.engine, embedded.server, embedded.address, embedded.client)
        try:
            yield stack
        finally:
            stack.server.stop(grace=0.5)  # a test may have replaced the server (a restart)


@pytest.fixture
def wait_until() -> Callable[..., None]:
    def wait(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, f"{what} not reached within {timeout}s"
            time.sleep(0.02)

    return wait
