"""wiggle.embedded.Engine: a node and a worker in the test's process, on SQLite and PostgreSQL.

Each test runs flows in every mode through the embedded engine's own calls (no socket), and
checks what a user relies on: the result, the modes' durability (a SERVER or LOCAL_SYNC step is
committed before the next runs, seen from a second connection of the database), signals and
cancels, the errors of a remote server, and remote workers and clients joining over `listen`.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import textwrap
import threading
from typing import Any

import pytest

from wiggle.client import Client
from wiggle.embedded import Engine
from wiggle.engine import Engine as Core
from wiggle.errors import DefinitionNotFound, InstanceExists, InstanceNotFound, InvalidRequest
from wiggle.worker import Registry, Worker

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")

CHAIN = """\
wiggle: 1
name: chain
execution: {mode}
steps:
  - {{task: first, id: a}}
  - {{task: second, id: b}}
  - {{task: third, id: c}}
"""

APPROVAL = """\
wiggle: 1
name: approval
execution: {mode}
steps:
  - {{task: first, id: a}}
  - await: approved
    apply: merge
  - {{task: third, id: c}}
"""


def _flow(template: str, mode: str) -> bytes:
    return textwrap.dedent(template.format(mode=mode)).encode()


def _registry(seen: dict[str, Any]) -> Registry:
    registry = Registry()

    @registry.activity("first")
    def first(ctx: dict[str, Any]) -> dict[str, Any]:
        return {**ctx, "trail": [*ctx.get("trail", []), "a"]}

    @registry.activity("second")
    def second(ctx: dict[str, Any]) -> dict[str, Any]:
        probe = seen.get("probe")
        if probe is not None:
            seen["committed before b"] = probe()
        return {**ctx, "trail": [*ctx["trail"], "b"]}

    @registry.activity("third")
    def third(ctx: dict[str, Any]) -> dict[str, Any]:
        return {**ctx, "trail": [*ctx["trail"], "c"]}

    @registry.activity("merge")
    def merge(given: dict[str, Any]) -> dict[str, Any]:
        return {**given["context"], **given["signal"]}

    return registry


@pytest.mark.parametrize("mode", MODES)
def test_a_flow_runs_to_its_result_with_no_socket_open(database_url: str, mode: str) -> None:
    with Engine(database_url, activities=_registry({})) as wiggle:
        deployed = wiggle.deploy(_flow(CHAIN, mode))
        assert deployed.created
        results = [wiggle.run("chain", {"n": i}, timeout=30) for i in range(5)]
        assert wiggle.address is None and wiggle.server.port == 0
        assert wiggle._stub.calls > 0  # the worker's and the client's calls went in-process
    for i, result in enumerate(results):
        assert (result.status, result.context) == ("COMPLETED", {"n": i, "trail": ["a", "b", "c"]})
        assert result.execution_mode == mode


@pytest.mark.parametrize("mode", ["SERVER", "LOCAL_SYNC"])
def test_each_step_is_committed_before_the_next_one_runs(database_url: str, mode: str) -> None:
    # The second step's handler looks through a connection of its own (another Engine on the
    # database): the first step's completion must be committed already.
    seen: dict[str, Any] = {}
    with Engine(database_url, activities=_registry(seen)) as wiggle:
        wiggle.deploy(_flow(CHAIN, mode))
        other = Core(database_url)
        try:

            def completed_steps() -> list[str]:
                view = other.describe("probed", include_events=True)
                return [e.node_id for e in view.events if e.kind == "step_completed"]

            seen["probe"] = completed_steps
            wiggle.start("chain", {}, instance_id="probed")
            result = wiggle.wait("probed", timeout=30)
        finally:
            other.close()
    assert result.status == "COMPLETED"
    assert seen["committed before b"] == ["a"]


@pytest.mark.parametrize("mode", MODES)
def test_a_signal_and_a_cancel_reach_the_instance(database_url: str, mode: str) -> None:
    with Engine(database_url, activities=_registry({})) as wiggle:
        wiggle.deploy(_flow(APPROVAL, mode))
        first = wiggle.start("approval", {"order": 1})
        second = wiggle.start("approval", {"order": 2})
        wiggle.signal(first.instance_id, "approved", {"by": "ana"})
        done = wiggle.wait(first.instance_id, timeout=30)
        assert wiggle.cancel(second.instance_id, "changed my mind") == "CANCELLED"
        cancelled = wiggle.describe(second.instance_id)
    assert done.status == "COMPLETED"
    assert done.context == {"order": 1, "trail": ["a", "c"], "by": "ana"}
    assert (cancelled.status, cancelled.reason) == ("CANCELLED", "cancelled: changed my mind")


def test_errors_are_those_a_server_answers(tmp_path: Any) -> None:
    with Engine(f"sqlite:///{tmp_path / 'w.db'}", activities=_registry({})) as wiggle:
        with pytest.raises(DefinitionNotFound, match="nope"):
            wiggle.start("nope", {})
        with pytest.raises(InstanceNotFound):
            wiggle.describe("no-such-instance")
        wiggle.deploy(_flow(APPROVAL, "SERVER"))
        started = wiggle.start("approval", {})
        with pytest.raises(InvalidRequest, match="approved"):
            wiggle.signal(started.instance_id, "aproved", {})  # misspelt: refused, names it
        assert wiggle.describe(started.instance_id).status == "RUNNING"


def test_starting_an_id_again_is_a_no_op_and_with_another_input_refused(tmp_path: Any) -> None:
    with Engine(f"sqlite:///{tmp_path / 'w.db'}", activities=_registry({})) as wiggle:
        wiggle.deploy(_flow(CHAIN, "LOCAL_SYNC"))
        first = wiggle.start("chain", {"n": 1}, instance_id="order-1")
        again = wiggle.start("chain", {"n": 1}, instance_id="order-1")
        with pytest.raises(InstanceExists, match="another input"):
            wiggle.start("chain", {"n": 2}, instance_id="order-1")
        result = wiggle.wait("order-1", timeout=30)
    assert (first.created, again.created) == (True, False)
    assert result.context == {"n": 1, "trail": ["a", "b", "c"]}


@pytest.mark.parametrize("mode", MODES)
def test_remote_workers_and_clients_join_over_listen(database_url: str, mode: str) -> None:
    # No worker in the embedded process: a worker elsewhere (here: over a loopback socket)
    # runs every step, and a client elsewhere starts and reads the instance.
    with Engine(database_url, worker=False, listen="127.0.0.1:0") as node:
        assert node.address is not None and node.worker is None
        node.deploy(_flow(CHAIN, mode))
        remote = Worker(node.address, registry=_registry({}), tls=False)
        remote.start()
        try:
            with Client(node.address) as client:
                started = client.start("chain", {"n": 7})
                result = node.wait(started.instance_id, timeout=30)
                seen_remotely = client.describe(started.instance_id)
        finally:
            remote.stop()
    assert result.context == {"n": 7, "trail": ["a", "b", "c"]}
    assert seen_remotely.status == "COMPLETED"


def test_two_embedded_nodes_share_a_database(postgres_database_url: str) -> None:
    # Each is one more node of the database: instances started on one may run on the other's
    # worker, and both see every instance.
    with (
        Engine(postgres_database_url, activities=_registry({})) as one,
        Engine(postgres_database_url, activities=_registry({})) as two,
    ):
        one.deploy(_flow(CHAIN, "LOCAL_SYNC"))
        ids = [one.start("chain", {"n": i}).instance_id for i in range(10)]
        results = [two.wait(i, timeout=30) for i in ids]
    assert [r.context["n"] for r in results] == list(range(10))
    assert {r.status for r in results} == {"COMPLETED"}


def test_close_ends_the_workers_open_poll_on_the_node(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An idle worker waits in a long poll (10 s) on its own thread. Stopping it asks the node to
    # end that poll (EndPolls), as a worker over gRPC does; before, close() waited the poll out.
    from wiggle.server._service import WiggleService

    waiting = threading.Event()
    long_poll = WiggleService._long_poll

    def noted(self: WiggleService, *args: Any) -> Any:
        waiting.set()  # the poll is open on the node, and waits there
        return long_poll(self, *args)

    monkeypatch.setattr(WiggleService, "_long_poll", noted)
    wiggle = Engine(f"sqlite:///{tmp_path / 'w.db'}", activities=_registry({}))
    stub = wiggle._stub
    assert waiting.wait(30)
    wiggle.close()
    assert stub.counts["EndPolls"] >= 1


def test_close_drains_a_running_step(tmp_path: Any) -> None:
    # close() lets a step that is running finish and be reported, as a server's worker drains.
    registry = Registry()
    began, finish = threading.Event(), threading.Event()

    @registry.activity("slow")
    def slow(ctx: dict[str, Any]) -> dict[str, Any]:
        began.set()
        finish.wait(10)
        return {"done": True}

    url = f"sqlite:///{tmp_path / 'w.db'}"
    wiggle = Engine(url, activities=registry)
    wiggle.deploy(b"wiggle: 1\nname: slow\nsteps:\n  - task: slow\n")
    started = wiggle.start("slow", {})
    assert began.wait(10)
    threading.Timer(0.3, finish.set).start()
    wiggle.close()
    with Engine(url, worker=False) as again:
        assert again.describe(started.instance_id).status == "COMPLETED"


@pytest.mark.parametrize("mode", MODES)
def test_a_go_worker_joins_an_embedded_node(
    postgres_database_url: str, go_worker: str, tmp_path: Any, mode: str
) -> None:
    # The app's node runs step a itself and opens a port; the Go SDK's conformance worker
    # (its `append` activity) serves the `pricing` queue from a process of its own.
    flow = textwrap.dedent(
        f"""\
        wiggle: 1
        name: priced
        execution: {mode}
        steps:
          - {{task: first, id: a}}
          - {{task: append, id: b, queue: pricing}}
        """
    ).encode()
    with Engine(postgres_database_url, activities=_registry({}), listen="127.0.0.1:0") as node:
        node.deploy(flow)
        assert node.address is not None
        env = {
            **os.environ,
            "WIGGLE_ADDRESS": node.address,
            "WIGGLE_QUEUES": "pricing",
            "WIGGLE_CONFORMANCE_TRACE": str(tmp_path / "trace.jsonl"),
        }
        env.pop("WIGGLE_AUTH_TOKEN", None)
        go = subprocess.Popen(shlex.split(go_worker), env=env)
        try:
            results = [node.run("priced", {"n": i}, timeout=60) for i in range(3)]
        finally:
            go.terminate()
            go.wait(timeout=30)
    assert [r.context for r in results] == [{"n": i, "trail": ["a", "b"]} for i in range(3)]
    ran = [json.loads(line) for line in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert sorted(line["node_id"] for line in ran) == ["b", "b", "b"]  # b ran in Go, a here
