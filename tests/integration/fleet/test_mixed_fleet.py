"""One flow, four queues, four worker languages at once.

A Python, a Go, a Java and a TypeScript worker (real processes, each serving the conformance
activities on one queue of its own) run the example flow of sdk/java/examples/mixed-fleet/, whose
steps hop between their queues: chains on one queue, a
checkpoint, a filter, a parallel whose branches and combine sit on different queues. The test
moves three of its steps to the queue `ts` (TS_STEPS: the end of a chain, a branch, the last
step), so the TypeScript worker joins the fleet. In each
execution mode the instance must end with the context a single Python worker serving all four
queues produces, every step must have run on the worker of its queue, and a SIGKILL of the Java
worker in the middle of a run is recovered by a restarted Java worker.

The Java worker is sdk/java's conformance worker jar, the Go worker sdk/go's, the TypeScript
worker sdk/typescript's conformance bin (all built when missing or stale: tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from tests.waiting import wait_until
from wiggle.client import Client
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "sdk/java/examples/mixed-fleet/fleet.yaml"
MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")
LANGUAGES = ("py", "go", "java", "ts")
SOLO = "solo-py,solo-go,solo-java,solo-ts"
#: The example's steps the TypeScript worker takes over.
TS_STEPS = {"g2", "r1", "p3"}


def flow(name: str, mode: str, prefix: str = "") -> str:
    """The documented example flow under another name and mode; `prefix` renames its queues (the
    single-worker reference run)."""
    doc = YAML(typ="safe").load(EXAMPLE.read_text())
    doc.update(name=name, execution=mode)

    def requeue(steps: list[dict[str, Any]]) -> None:
        for step in steps:
            if step.get("id") in TS_STEPS:
                step["queue"] = "ts"
            if "queue" in step:
                step["queue"] = prefix + step["queue"]
            for branch in step.get("parallel", {}).values():
                requeue(branch)

    requeue(doc["steps"])
    return json.dumps(doc)


def crash_flow(name: str, mode: str) -> str:
    """A Java chain with a slow step in the middle, where the Java worker is killed. The steps'
    3 s lease outlasts a JVM that is starting on a loaded machine (1 s once expired there between
    j1 and j2, and j1 ran a third time)."""
    fast = {"timeout": "3s", "retry": {"backoff": "fixed", "initial": "50ms", "max_attempts": 5}}
    steps = [
        {"task": "append", "id": "p1", "queue": "py"},
        {"task": "append", "id": "j1", "queue": "java", **fast},
        {"task": "hold", "id": "j2", "queue": "java", **fast},
        {"task": "append", "id": "j3", "queue": "java", **fast},
        {"task": "append", "id": "g1", "queue": "go"},
    ]
    return json.dumps({"wiggle": 1, "name": name, "execution": mode, "steps": steps})


def trace(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Fleet:
    """A server over SQLite and one worker process per language, each with its own trace."""

    def __init__(self, tmp: Path, go_binary: Path, java_jar: Path, ts_worker: Path) -> None:
        self.tmp = tmp
        self.engine = Engine(f"sqlite:///{tmp / 'fleet.db'}")
        self.server = Server(self.engine, ServerConfig(address="127.0.0.1:0", grace_s=1.0))
        self.address = f"127.0.0.1:{self.server.start()}"
        self.client = Client(self.address)
        self.commands = {
            "py": [sys.executable, str(Path(__file__).with_name("fleet_python_worker.py"))],
            "go": [str(go_binary)],
            "ts": ["node", str(ts_worker)],
            "java": ["java", "-jar", str(java_jar)],
        }
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for language in LANGUAGES:
            self.start(language)
        # The reference: one Python worker serving all three queues of the solo flows.
        self.start("py", queues=SOLO)

    def trace_path(self, language: str) -> Path:
        return self.tmp / f"trace-{language}.jsonl"

    def start(self, language: str, queues: str | None = None) -> subprocess.Popen[bytes]:
        env = {
            **os.environ,
            "WIGGLE_ADDRESS": self.address,
            "WIGGLE_QUEUES": queues or language,
            "WIGGLE_CONCURRENCY": "16",
            "WIGGLE_CONFORMANCE_TRACE": str(self.trace_path(queues or language)),
        }
        log = (self.tmp / f"worker-{language}.log").open("ab")
        proc = subprocess.Popen(
            self.commands[language],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        self.procs[queues or language] = proc
        return proc

    def kill(self, key: str) -> None:
        proc = self.procs.pop(key)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.client.close()
        self.server.stop(grace=0.5)
        self.engine.close()

    def run(self, source: str, input: Any, timeout: float = 60.0) -> Any:
        self.client.deploy(load_flow(source.encode()))
        name = json.loads(source)["name"]
        started = self.client.start(name, input)
        return self.wait(started.instance_id, timeout)

    def wait(self, instance_id: str, timeout: float) -> Any:
        def finished() -> Any:
            view = self.client.describe(instance_id)
            return view if view.status.finished else None

        return wait_until(finished, timeout, f"{instance_id} to finish")


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory,
    go_worker_binary: Path,
    java_worker_jar: Path,
    typescript_worker_script: Path,
) -> Iterator[Fleet]:
    fleet = Fleet(
        tmp_path_factory.mktemp("fleet"),
        go_worker_binary,
        java_worker_jar,
        typescript_worker_script,
    )
    try:
        yield fleet
    finally:
        fleet.close()


INPUT = {"limit": 10}
#: Long enough that the kill lands inside the slow step even on a loaded machine.
HOLD_MS = 2500


@pytest.mark.parametrize("mode", MODES)
def test_three_languages_end_like_one(fleet: Fleet, mode: str) -> None:
    view = fleet.run(flow(f"fleet-{mode.lower()}", mode), INPUT)
    assert view.status == "COMPLETED", view.reason

    # The reference: one Python worker serving all three queues (renamed, so the fleet's
    # workers never see its tasks).
    reference = fleet.run(flow(f"solo-{mode.lower()}", mode, prefix="solo-"), INPUT)
    assert reference.status == "COMPLETED", reference.reason
    assert view.context == reference.context
    # ... and is the context the example's README shows.
    fork = {"limit": 10, "trail": ["p1", "g1", "j1"], "n": 3}
    assert view.context == {
        "limit": 10,
        "trail": ["p1", "g1", "j1", "g3", "p3"],
        "n": 3,
        "results": {
            "left": {**fork, "trail": ["p1", "g1", "j1", "l1", "l2"]},
            "right": {**fork, "trail": ["p1", "g1", "j1", "r1"]},
        },
    }

    # Each step ran exactly once, on the worker of its queue.
    where = {
        language: Counter(
            line["node_id"]
            for line in trace(fleet.trace_path(language))
            if line["instance_id"] == view.instance_id
        )
        for language in LANGUAGES
    }
    assert where["py"] == Counter(["p1", "p2", "l1"])
    assert where["go"] == Counter(["g1", "g3"])
    assert where["java"] == Counter(["j1", "j2", "j3", "l2", "fan.join"])
    assert where["ts"] == Counter(["g2", "r1", "p3"])


@pytest.mark.parametrize("mode", MODES)
def test_a_killed_java_worker_is_recovered_by_a_restarted_one(fleet: Fleet, mode: str) -> None:
    source = crash_flow(f"fleet-crash-{mode.lower()}", mode)
    fleet.client.deploy(load_flow(source.encode()))
    started = fleet.client.start(f"fleet-crash-{mode.lower()}", {"hold_ms": HOLD_MS})
    java_trace = fleet.trace_path("java")

    def reached_hold() -> bool:
        return any(
            line["instance_id"] == started.instance_id and line["node_id"] == "j2"
            for line in trace(java_trace)
        )

    wait_until(reached_hold, 60, "the Java worker starting the slow step")
    fleet.kill("java")
    fleet.start("java")

    view = fleet.wait(started.instance_id, timeout=90)
    assert view.status == "COMPLETED", view.reason
    assert view.context == {"hold_ms": HOLD_MS, "trail": ["p1", "j1", "j2", "j3", "g1"]}
    runs = Counter(
        line["node_id"] for line in trace(java_trace) if line["instance_id"] == started.instance_id
    )
    # The crash contract: the step in flight ran again; in LOCAL_ASYNC so did the unflushed
    # step before it (j1 was buffered, not reported, when the worker died).
    assert runs == Counter({"j1": 2 if mode == "LOCAL_ASYNC" else 1, "j2": 2, "j3": 1}), runs
