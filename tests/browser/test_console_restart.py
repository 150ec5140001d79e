"""An open instance page outlives a restart of the Wiggle server behind the console.

Its live refresh used to stop for good at the first failed fetch: the page went on saying
RUNNING while the instance had completed. Now it says it is stale while it cannot refresh, keeps
trying, and shows the truth again once the server is back, with no reload. How soon is bounded
by design rather than timed here (a shared machine makes timings flaky): the page retries at
least every `data-max-retry-ms` (3 s) and the console's gRPC channel reconnects within 5 s
(wiggle/wire.py), so within about 10 s of the server's return.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from wiggle.client import Client
from wiggle.console import Backend, ConsoleServer, ConsoleSettings
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig
from wiggle.worker import Registry, Worker

pytestmark = pytest.mark.timeout(180)

WAIT = 30  # seconds: a generous bound for a loaded two-core machine, not an expected time

FLOW = b"""
wiggle: 1
name: relay
steps:
  - task: step_one
  - await: go
  - task: step_two
"""


@dataclass
class Restartable:
    engine: Engine
    server: Server
    port: int
    console_url: str

    def restart(self) -> None:
        self.server = Server(
            self.engine, ServerConfig(address=f"127.0.0.1:{self.port}", grace_s=0.2)
        )
        self.server.start()


@pytest.fixture
def restartable() -> Iterator[Restartable]:
    tmp = tempfile.mkdtemp(prefix="wiggle-restart-")
    engine = Engine(f"sqlite:///{tmp}/wiggle.db")
    server = Server(engine, ServerConfig(address="127.0.0.1:0", grace_s=0.2))
    port = server.start()
    address = f"127.0.0.1:{port}"
    registry = Registry()
    for name in ("step_one", "step_two"):
        registry.register(lambda ctx: ctx, name)
    worker = Worker(address, registry=registry, poll_wait_ms=500)
    worker.start()
    backend = Backend(address)
    console = ConsoleServer(backend, "127.0.0.1", 0, ConsoleSettings(refresh_ms=500))
    console.start()
    box = Restartable(engine, server, port, console.url)
    try:
        yield box
    finally:
        console.stop()
        backend.close()
        worker.stop()
        box.server.stop(grace=0.2)
        engine.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _stale(driver: Any) -> bool:
    return bool(driver.find_elements(By.CSS_SELECTOR, "#instance-live[data-stale]")) and bool(
        driver.find_elements(By.CSS_SELECTOR, "p.stale-note")
    )


def test_an_open_page_says_it_is_stale_and_recovers_after_a_server_restart(restartable, browser):
    box = restartable
    with Client(f"127.0.0.1:{box.port}", retry_for=20.0) as client:
        client.deploy(FLOW, filename="relay.yaml")
        instance_id = client.start("relay", {}).instance_id
        deadline_view = client.describe(instance_id)
        while not any(t.state == "AWAITING" for t in deadline_view.tokens):
            time.sleep(0.05)
            deadline_view = client.describe(instance_id)
        browser.get(f"{box.console_url}/instances/{instance_id}")
        wait = WebDriverWait(browser, WAIT)
        assert browser.find_element(By.ID, "status").text == "RUNNING"

        box.server.stop(grace=0.2)
        wait.until(_stale)
        note = browser.find_element(By.CSS_SELECTOR, "p.stale-note").text
        assert "Not up to date" in note and "cannot reach the Wiggle server" in note
        assert browser.find_element(By.ID, "status").text == "RUNNING"  # as last seen

        box.restart()
        client.signal(instance_id, "go", {})
        assert client.wait(instance_id, timeout=WAIT).status == "COMPLETED"
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "COMPLETED"))
        wait.until(lambda d: not _stale(d))
        assert browser.find_elements(By.ID, "signal-form") == []  # it ended: no signal, no cancel
        body = browser.find_element(By.TAG_NAME, "body")
        assert int(body.get_attribute("data-max-retry-ms")) <= 3000
