"""A real stack for the browser tests: an Engine on SQLite, the gRPC server, a Python worker,
the console on a loopback port, and Debian's Chromium driven by Selenium (chromedriver).

One stack and one browser serve the whole module (starting Chromium costs about a second);
each test starts its own instances, so the tests do not depend on one another. The stack runs
the shipped flows of definitions/ too (sleeps cut to milliseconds), with their handlers but
`reserve_stock`, so a declined order always cuts its shipping branch off before it ran.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.waiting import wait_until
from wiggle.client import Client, Instance
from wiggle.compiler import CompiledFlow, canonical_json, graph_from_canonical, load_flow_file
from wiggle.console import Backend, ConsoleServer, ConsoleSettings
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig
from wiggle.worker import NonRetryable, Registry, Worker, load_handlers

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "docs" / "console"
DEFINITIONS = ROOT / "definitions"
#: The pictures docs/console.md and README show; WIGGLE_UPDATE_SCREENSHOTS=1 refreshes them.
DOCUMENTED = (
    "instances",
    "instance",
    "instance-failed",
    "history",
    "flow",
    "incidents",
    "queues",
    "instance-reset",
    "instances-search",
    "bulk-preview",
    "batch",
    "migration-plan",
    "tasks",
    "task",
    "task-refused",
)
SHIPPED = ("order-fulfilment", "document-pipeline", "nightly-batch-item", "nightly-batch")
QUEUES = ("default", "orders", "documents", "batch")

# Waits for a signal between two steps; the page's graph shows the await as the current node.
APPROVAL = """
wiggle: 1
name: approval
input:
  type: object
  required: [amount]
  properties: {amount: {type: number}, note: {type: string}}
steps:
  - task: prepare
  - await: approve
    timeout: 1h
  - task: settle
"""

# A step that fails while its instance's key is in BROKEN (the outage), and runs once it is not
# (the fix); the key is a search attribute, so a bulk action can pick a test's own instances.
FLAKY = """
wiggle: 1
name: flaky
search:
  key: /key
steps:
  - task: fetch
  - task: store
"""
BROKEN: set[str] = set()

# Version 2 of APPROVAL: an audit step after the settlement (deployed by the migration test).
APPROVAL_V2 = APPROVAL.replace("  - task: settle\n", "  - task: settle\n  - task: audit\n")

# A step that fails at once, with an error message chosen by the input.
BREAKS = """
wiggle: 1
name: breaks
steps:
  - task: explode
"""


def _registry() -> Registry:
    reg = Registry()

    def prepare(ctx: Any) -> Any:
        return {**ctx, "prepared": True}

    def settle(ctx: Any) -> Any:
        return {**ctx, "settled": True}

    def explode(ctx: Any) -> Any:
        raise NonRetryable(str(ctx.get("message", "boom")))

    def fetch(ctx: Any) -> Any:
        if ctx.get("key") in BROKEN:
            raise NonRetryable(f"the store of {ctx.get('key')} is down")
        return {**ctx, "fetched": True}

    def store(ctx: Any) -> Any:
        return {**ctx, "stored": True}

    def audit(ctx: Any) -> Any:
        return {**ctx, "audited": True}

    reg.register(fetch, "fetch")
    reg.register(store, "store")
    reg.register(audit, "audit")
    reg.register(prepare, "prepare")
    reg.register(settle, "settle")
    reg.register(explode, "explode")
    for handlers in ("order_fulfilment", "document_pipeline", "nightly_batch"):
        for act in load_handlers(DEFINITIONS / "handlers" / f"{handlers}.py"):
            if act.name != "reserve_stock":
                reg.register(act.fn, act.name)
    return reg


def shipped(stem: str) -> CompiledFlow:
    """A shipped definition; its `sleep: 1m` and the like cut to 10 ms."""
    flow = load_flow_file(DEFINITIONS / f"{stem}.yaml")
    doc = orjson.loads(flow.canonical)
    if not any(n["kind"] == "sleep" and n["duration_ms"] for n in doc["nodes"].values()):
        return flow  # the very version of the file: its page shows the file's description
    for node in doc["nodes"].values():
        if node["kind"] == "sleep" and node["duration_ms"] is not None:
            node["duration_ms"] = 10
    return graph_from_canonical(canonical_json(doc))


@dataclass
class Stack:
    engine: Engine
    server: Server
    client: Client
    console_url: str

    def wait(
        self, instance_id: str, ok: Callable[[Instance], bool], timeout: float = 20
    ) -> Instance:
        def reached() -> Instance | None:
            view = self.client.describe(instance_id)
            return view if ok(view) else None

        return wait_until(reached, timeout, f"instance {instance_id} in the state asked for")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    tmp = tempfile.mkdtemp(prefix="wiggle-console-")
    engine = Engine(f"sqlite:///{tmp}/wiggle.db")
    server = Server(engine, ServerConfig(address="127.0.0.1:0", grace_s=0.5))
    port = server.start()
    address = f"127.0.0.1:{port}"
    worker = Worker(address, registry=_registry(), queues=QUEUES, poll_wait_ms=1_000)
    worker.start()
    client = Client(address)
    client.deploy(APPROVAL.encode(), filename="approval.yaml")
    client.deploy(BREAKS.encode(), filename="breaks.yaml")
    client.deploy(FLAKY.encode(), filename="flaky.yaml")
    for stem in SHIPPED:
        engine.register(shipped(stem))
    backend = Backend(address)
    settings = ConsoleSettings(refresh_ms=500, flows_dir=str(DEFINITIONS))
    console = ConsoleServer(backend, "127.0.0.1", 0, settings)
    console.start()
    try:
        yield Stack(engine, server, client, console.url)
    finally:
        console.stop()
        backend.close()
        client.close()
        worker.stop()
        server.stop(grace=0.2)
        engine.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="wiggle-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    # The page's console messages (a failed fetch of a missing favicon shows there).
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    # Selenium Manager would try to download a driver: the Debian one is given explicitly.
    os.environ.setdefault("SE_AVOID_STATS", "true")
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.implicitly_wait(0)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(driver: Any, name: str) -> None:
    """Every run writes docs/console/latest/NAME.png (ignored by git); the committed pictures
    README and docs/console.md show (docs/console/NAME.png, DOCUMENTED) are replaced only with
    WIGGLE_UPDATE_SCREENSHOTS=1, so a test run leaves the checkout clean."""
    latest = SCREENSHOTS / "latest"
    latest.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(latest / f"{name}.png"))
    if name in DOCUMENTED and os.environ.get("WIGGLE_UPDATE_SCREENSHOTS") == "1":
        shutil.copyfile(latest / f"{name}.png", SCREENSHOTS / f"{name}.png")


@pytest.fixture
def shot() -> Callable[[Any, str], None]:
    """Writes a screenshot of the page to docs/console/NAME.png."""
    return screenshot


@pytest.fixture
def broken() -> set[str]:
    """The keys whose `flaky` instances fail at `fetch` (add one: an outage; remove it: the fix)."""
    return BROKEN


@pytest.fixture
def approval_v2() -> str:
    """APPROVAL with an audit step after the settlement, for a migration."""
    return APPROVAL_V2
