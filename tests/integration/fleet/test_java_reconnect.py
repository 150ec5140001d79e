"""The Java worker rides out a server restart: it backs off while the server is gone, says so
once, and serves the restarted server (same address, same database) without being restarted.
Then SIGTERM: it drains and exits 0, as a service stopped on purpose does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

from tests.waiting import wait_until
from wiggle.client import Client
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig

FLOW = {
    "wiggle": 1,
    "name": "java-reconnect",
    "execution": "LOCAL_ASYNC",
    "steps": [{"task": "append", "id": "a"}, {"task": "inc", "id": "b"}],
}


def run_one(address: str) -> None:
    client = Client(address)
    try:
        started = client.start("java-reconnect", {})
        wait_until(
            lambda: client.describe(started.instance_id).status.finished, 60, "the instance's end"
        )
        view = client.describe(started.instance_id)
        assert view.status == "COMPLETED", view.reason
        assert view.context == {"trail": ["a"], "n": 1}
    finally:
        client.close()


def test_the_java_worker_serves_a_restarted_server(tmp_path: Path, java_worker_jar: Path) -> None:
    serves_a_restarted_server(tmp_path, ["java", "-jar", str(java_worker_jar)])


def serves_a_restarted_server(tmp_path: Path, worker_command: list[str]) -> None:
    """A conformance worker started with `worker_command` completes an instance, sees the server
    go (once), and completes another on the restarted server without a restart of its own."""
    url = f"sqlite:///{tmp_path / 'reconnect.db'}"
    engine = Engine(url)
    server = Server(engine, ServerConfig(address="127.0.0.1:0", grace_s=0.5))
    address = f"127.0.0.1:{server.start()}"
    client = Client(address)
    client.deploy(load_flow(json.dumps(FLOW).encode()))
    client.close()

    log_path = tmp_path / "worker.log"
    log = log_path.open("wb")
    # At info level the workers log their stop (the TypeScript worker logs warnings only by
    # default).
    env = {
        **os.environ,
        "WIGGLE_ADDRESS": address,
        "WIGGLE_CONFORMANCE_TRACE": "",
        "WIGGLE_LOG_LEVEL": "info",
    }
    worker = subprocess.Popen(
        worker_command,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    second: Server | None = None
    try:
        run_one(address)
        server.stop(grace=0.5)
        engine.close()
        wait_until(lambda: "unreachable" in log_path.read_text(), 60, "the worker to notice")

        engine = Engine(url)
        second = Server(engine, ServerConfig(address=address, grace_s=0.5))
        second.start()
        run_one(address)
        wait_until(lambda: "reachable again" in log_path.read_text(), 60, "the worker to say so")

        os.killpg(worker.pid, signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, log_path.read_text()
        assert "stopped" in log_path.read_text()
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(timeout=30)
        log.close()
        if second is not None:
            second.stop(grace=0.5)
        engine.close()
