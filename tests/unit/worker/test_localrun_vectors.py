"""Runs spec/conformance/localrun/ against the Python worker's local run, over a fake stub: the
same vectors every worker SDK runs (docs/worker-protocol.md, "Local runs")."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from tests.unit.worker.conftest import FakeRpcError, FakeStub
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.compiler import canonical_json, graph_from_canonical
from wiggle.graph import Await
from wiggle.worker import Registry, step
from wiggle.worker._definitions import DefinitionCache
from wiggle.worker._heartbeat import Lease
from wiggle.worker._local_run import RunEnv, run_task
from wiggle.worker._rpc import Rpc

VECTORS = Path(__file__).resolve().parents[3] / "spec" / "conformance" / "localrun"
FILES = sorted(VECTORS.glob("*.json"))


def _cases() -> list[Any]:
    params = []
    for path in FILES:
        doc = json.loads(path.read_text())
        for case in doc["cases"]:
            params.append(
                pytest.param(doc["graph"], case, id=f"{path.stem}: {case['description']}")
            )
    return params


def render(method: str, request: Any) -> str:
    """The vectors' notation: `advance a p=true c! / reason`, `complete a`, `fail a`."""
    if method == "AdvanceRun":
        parts = ["advance"]
        for s in request.steps:
            which = s.WhichOneof("outcome")
            if which == "predicate":
                parts.append(f"{s.node_id}={'true' if s.predicate else 'false'}")
            elif which == "failure":
                parts.append(f"{s.node_id}!")
            else:
                parts.append(s.node_id)
        if request.final:
            parts += ["/", request.handback_reason]
        return " ".join(parts)
    return {"CompleteTask": "complete", "FailTask": "fail"}[method] + " " + request.task_id


def test_the_vectors_are_not_empty() -> None:
    assert len(FILES) >= 3
    assert len(_cases()) >= 40


@pytest.mark.timeout(20)
@pytest.mark.parametrize(("graph_doc", "case"), _cases())
def test_vector(graph_doc: dict[str, Any], case: dict[str, Any]) -> None:
    compiled = graph_from_canonical(canonical_json(graph_doc))
    graph = compiled.graph
    stub = FakeStub(definitions={graph.version: compiled.canonical})
    rpc = Rpc(stub)
    outcomes = list(case["steps"])
    attempts: list[int] = []
    lease_box: list[Lease] = []
    env = RunEnv(
        rpc=rpc,
        registry=Registry(),
        queues=tuple(case["worker_queues"]),
        definitions=DefinitionCache(rpc),
        local_batch_size=case["batch_size"],
        advance_run_supported=None,
        draining=threading.Event(),
    )

    def after_step(n: int) -> None:
        what = case["after_step"].get(str(n))
        lease = lease_box[0]
        if what == "shutdown":
            env.draining.set()
        elif what == "lease_budget":  # a tenth of the lease left
            lease.renewed(int(time.time() * 1000) + lease.length_ms // 10)
        elif what == "lease_lost":
            lease.lose("the vector says so")

    def handler(ctx: Any) -> Any:
        attempts.append(step().attempt)
        n = len(attempts)
        kind, _, size = outcomes.pop(0).partition(" ")
        try:
            if kind == "fail":
                raise RuntimeError(f"planned failure {n}")
            if kind in ("true", "false"):
                return kind == "true"
            if kind == "not_boolean":
                return {"not": "a boolean"}
            assert kind == "ok", kind
            return "x" * (int(size) - 2) if size else {"step": n}
        finally:
            after_step(n)

    activities = case["worker_activities"]
    for node in graph.nodes.values():
        activity = node.apply.activity if isinstance(node, Await) and node.apply else None
        activity = activity or getattr(node, "activity", None)
        if activity and (activities is None or activity in activities):
            env.registry.register(handler, activity)
    if case["advance_run"] == "unimplemented":

        def unimplemented(request: Any) -> Any:
            raise FakeRpcError(grpc.StatusCode.UNIMPLEMENTED, "no AdvanceRun here")

        stub.answers["AdvanceRun"] = unimplemented

    start = graph.nodes[case["start"]]
    activity = start.apply.activity if isinstance(start, Await) and start.apply else start.activity  # type: ignore[union-attr]
    now = int(time.time() * 1000)
    task = pb.Task(
        task_id=case["start"],  # so that CompleteTask / FailTask render with the node's id
        lease="lease-1",
        lease_expires_at_ms=now + 60_000,
        server_now_ms=now,
        instance_id="i-1",
        flow=graph.name,
        version=graph.version,
        node_id=case["start"],
        activity=activity,
        queue=case["worker_queues"][0],
        attempt=case["attempt"],
        input=b"{}",
        execution_mode=pb.ExecutionMode.Value(case["mode"]),
        loop_counts=orjson.dumps(case["loop_counts"]),
        timeout_ms=60_000,
        max_request_bytes=case["max_request_bytes"],
    )
    lease = Lease(task.task_id, task.lease, task.lease_expires_at_ms, task.timeout_ms)
    lease_box.append(lease)
    run_task(env, task, lease)

    calls = [render(m, r) for m, r in stub.calls if m in ("AdvanceRun", "CompleteTask", "FailTask")]
    assert calls == case["expect"]
    assert not outcomes, f"steps the worker never ran: {outcomes}"
    if "expect_attempts" in case:
        assert attempts == case["expect_attempts"]
