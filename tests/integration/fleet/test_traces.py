"""One OpenTelemetry trace per instance, across the server and workers in four languages.

A real OTLP/gRPC receiver (wiggle.tracing.receiver) runs in the test; the server (in-process)
and one worker process per language export to it, tracing turned on by the standard OTEL_*
variables alone. Each language's worker serves a queue of its own; a flow per mode runs
`append`, then `fail_times` (failing its first attempt, retried after 10 ms), then `append` on
that queue. The spans must show: one trace (the caller's when the start carried a
traceparent, else the one derived from the instance id), every step attempt once with the
derived span id under the instance span (the retried step twice, its second attempt linked to
the first), the attributes, and the server's spans (start, retry timer, end) in the same trace.
The mixed-fleet flow hops between the four queues in one trace.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.waiting import wait_until
from wiggle.client import Client
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig
from wiggle.tracecontext import instance_span_id, step_span_id, trace_id_for
from wiggle.tracing.receiver import Receiver, Span, render

LANGUAGES = ("py", "go", "java", "ts")
MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")
RETRY = {"max_attempts": 3, "backoff": "fixed", "initial": "10ms"}
CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def otel_env(endpoint: str, service: str) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export within 50 ms, not the default 5 s
    }


class Traced:
    """The receiver, a tracing server over SQLite and one worker process per language."""

    def __init__(self, tmp: Path, commands: dict[str, list[str]]) -> None:
        self.receiver = Receiver().start()
        endpoint = f"http://{self.receiver.address}"
        with pytest.MonkeyPatch.context() as mp:
            for key, value in otel_env(endpoint, "wiggle-server").items():
                mp.setenv(key, value)
            self.engine = Engine(f"sqlite:///{tmp / 'traced.db'}")
            self.server = Server(self.engine, ServerConfig(address="127.0.0.1:0", grace_s=1.0))
            self.address = f"127.0.0.1:{self.server.start()}"
        self.client = Client(self.address)
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        for language in LANGUAGES:
            env = {
                **os.environ,
                **otel_env(endpoint, f"worker-{language}"),
                "WIGGLE_ADDRESS": self.address,
                "WIGGLE_QUEUES": language,
                "WIGGLE_CONCURRENCY": "4",
            }
            log = (tmp / f"worker-{language}.log").open("ab")
            self.procs.append(
                subprocess.Popen(
                    commands[language],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            log.close()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.client.close()
        self.server.stop(grace=0.5)
        self.engine.close()
        self.receiver.stop()

    def run(self, flow: dict[str, Any], input: Any, traceparent: str = "") -> str:
        self.client.deploy(load_flow(json.dumps(flow).encode()))
        started = self.client.start(flow["name"], input, traceparent=traceparent)

        def finished() -> Any:
            view = self.client.describe(started.instance_id)
            return view if view.status.finished else None

        view = wait_until(finished, 60, f"{started.instance_id} to finish")
        assert view.status == "COMPLETED", view.reason
        return started.instance_id

    def spans_of(self, trace_id: str, instance_id: str, *, steps: int) -> list[Span]:
        """The trace's spans of the instance once its steps' spans and its end arrived."""

        def done(spans: list[Span]) -> bool:
            mine = [s for s in spans if s.attributes.get("wiggle.instance.id") == instance_id]
            return sum(1 for s in mine if s.name.startswith("step ")) >= steps and any(
                s.name == "end COMPLETED" for s in mine
            )

        spans = self.receiver.wait_for(done, 30)
        mine = [s for s in spans if s.attributes.get("wiggle.instance.id") == instance_id]
        assert {s.trace_id for s in mine} == {trace_id}, render(mine)
        return mine


@pytest.fixture(scope="module")
def traced(
    tmp_path_factory: pytest.TempPathFactory,
    go_worker_binary: Path,
    java_worker_jar: Path,
    typescript_worker_script: Path,
) -> Iterator[Traced]:
    commands = {
        "py": [sys.executable, str(Path(__file__).with_name("fleet_python_worker.py"))],
        "go": [str(go_worker_binary)],
        "java": ["java", "-jar", str(java_worker_jar)],
        "ts": ["node", str(typescript_worker_script)],
    }
    stack = Traced(tmp_path_factory.mktemp("traced"), commands)
    try:
        yield stack
    finally:
        stack.close()


def retried_flow(name: str, mode: str, queue: str) -> dict[str, Any]:
    steps = [
        {"task": "append", "id": "a", "queue": queue},
        {"task": "fail_times", "id": "b", "queue": queue, "retry": RETRY},
        {"task": "append", "id": "c", "queue": queue},
    ]
    return {"wiggle": 1, "name": name, "execution": mode, "steps": steps}


def check_steps(spans: list[Span], instance_id: str, service: str, mode: str) -> None:
    """One span per attempt (b twice), each with its derived id under the instance span."""
    steps = [s for s in spans if s.name.startswith("step ")]
    attempts = sorted(
        (s.attributes["wiggle.node.id"], s.attributes["wiggle.step.attempt"]) for s in steps
    )
    assert attempts == [("a", 1), ("b", 1), ("b", 2), ("c", 1)], render(spans)
    root = instance_span_id(instance_id)
    by_key = {}
    for s in steps:
        a = s.attributes
        by_key[(a["wiggle.node.id"], a["wiggle.step.attempt"])] = s
        assert s.service == service, render(spans)
        assert s.parent_span_id == root, render(spans)
        assert s.span_id == step_span_id(
            instance_id, a["wiggle.task.id"], a["wiggle.node.id"], a["wiggle.step.attempt"], {}
        )
        assert a["wiggle.instance.id"] == instance_id
        assert a["wiggle.execution.mode"] == mode
        assert a["wiggle.activity"] == ("fail_times" if a["wiggle.node.id"] == "b" else "append")
        assert a["wiggle.flow.version"].startswith("sha256:")
    failed = by_key[("b", 1)]
    assert failed.error and failed.attributes["wiggle.step.outcome"] == "failed"
    assert failed.attributes["error.type"], failed.attributes
    assert by_key[("b", 2)].attributes["wiggle.step.outcome"] == "completed"
    # The retry links to the attempt before it; a chained step to the step before it.
    assert (failed.trace_id, failed.span_id) in by_key[("b", 2)].links
    if mode != "SERVER":
        b2 = by_key[("b", 2)]
        assert (b2.trace_id, b2.span_id) in by_key[("c", 1)].links


def check_server(spans: list[Span], instance_id: str, parent: str) -> None:
    """The server's start (the instance span), the retry's timer and the end."""
    server = [s for s in spans if s.service == "wiggle-server"]
    names = {s.name for s in server}
    start = [s for s in server if s.span_id == instance_span_id(instance_id)]
    assert len(start) == 1 and start[0].name.startswith("start "), render(spans)
    assert start[0].parent_span_id == parent
    assert "timer b" in names and "end COMPLETED" in names, render(spans)
    for s in server:
        if s is not start[0]:
            assert s.parent_span_id == instance_span_id(instance_id), render(spans)


@pytest.mark.parametrize("language", LANGUAGES)
def test_each_mode_is_one_trace(traced: Traced, language: str) -> None:
    for mode in MODES:
        # The SERVER run continues a caller's trace; the local runs get the derived one.
        caller = CALLER if mode == "SERVER" else ""
        flow = retried_flow(f"traced-{language}-{mode.lower()}", mode, language)
        iid = traced.run(flow, {"fail_times": {"b": 1}}, traceparent=caller)
        trace_id = caller.split("-")[1] if caller else trace_id_for(iid)
        spans = traced.spans_of(trace_id, iid, steps=4)
        check_steps(spans, iid, f"worker-{language}", mode)
        check_server(spans, iid, caller.split("-")[2] if caller else "")
        if language == "py":  # the worker's log line of the failed attempt names its span
            (failed,) = [s for s in spans if s.error and s.name == "step fail_times"]
            log = (traced.tmp / "worker-py.log").read_text()
            assert f"trace_id={trace_id} span_id={failed.span_id}" in log, log[-2000:]


def test_a_mixed_fleet_is_one_trace(traced: Traced) -> None:
    queues = (*LANGUAGES, "py")
    steps = [{"task": "append", "id": f"s{n}", "queue": q} for n, q in enumerate(queues)]
    flow = {"wiggle": 1, "name": "traced-mixed", "execution": "LOCAL_SYNC", "steps": steps}
    iid = traced.run(flow, {})
    spans = traced.spans_of(trace_id_for(iid), iid, steps=len(steps))
    served = {
        s.attributes["wiggle.node.id"]: s.service for s in spans if s.name.startswith("step ")
    }
    assert served == {f"s{n}": f"worker-{q}" for n, q in enumerate(queues)}, render(spans)
    handbacks = [s for s in spans if s.name == "handback other_queue"]
    assert len(handbacks) == 4, render(spans)
    assert {s.parent_span_id for s in spans if s.service != "wiggle-server"} == {
        instance_span_id(iid)
    }
