"""A real Wiggle server on a loopback port, over an Engine on each backend (`database_url`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.waiting import wait_until
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
        def finished() -> Any:
            view = self.client.describe(instance_id, events=True)
            return view if view.status.finished else None

        return wait_until(finished, timeout, f"{instance_id} to finish")


@pytest.fixture
def stack(database_url: str) -> Iterator[Stack]:
    with embedded_stack(database_url, grace_s=1.0) as embedded:
        stack = Stack(embedded.engine, embedded.server, embedded.address, embedded.client)
        try:
            yield stack
        finally:
            stack.server.stop(grace=0.5)  # a test may have replaced the server (a restart)


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., Any]:
    """tests.waiting.wait_until, for the tests here that take it as a fixture."""
    return wait_until
