"""The console and `wiggle render --instance` draw every instance alike, and draw it true.

Instances in every state the issue lists (a failed step, a retrying one, a for_each held by
`max_concurrency`, a subflow, a sleep, a loop of several iterations, a branch cut off by a
cancel, an await that timed out) and the shipped flows it names run on a real server over SQLite
and PostgreSQL. For each, the node states the console's instance page draws (the `data-counts`
of its graph) must equal those `wiggle render --instance` writes into its DOT, and both must be
what the instance did.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from wiggle.cli import main
from wiggle.client import Client, Instance
from wiggle.compiler import (
    CompiledFlow,
    canonical_json,
    graph_from_canonical,
    load_flow,
    load_flow_file,
)
from wiggle.console import Backend, create_app
from wiggle.server import embedded_stack
from wiggle.worker import Registry, Worker, load_handlers

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "definitions"

FLOWS = {
    "retrying": """
wiggle: 1
name: retrying
steps:
  - task: flaky
    retry: {max_attempts: 3, backoff: fixed, initial: 1h}
  - task: after
""",
    "held": """
wiggle: 1
name: held
steps:
  - task: prepare
  - for_each: /items
    max_concurrency: 2
    steps:
      - task: slow
        queue: nobody
    combine: gather
""",
    "sleeping": """
wiggle: 1
name: sleeping
steps:
  - task: prepare
  - sleep: 1h
  - task: after
""",
    "parent": """
wiggle: 1
name: parent
steps:
  - task: prepare
  - subflow: child
  - task: after
""",
    "child": """
wiggle: 1
name: child
steps:
  - await: go
  - task: after
""",
    "looping": """
wiggle: 1
name: looping
steps:
  - loop:
      steps:
        - task: count
      while: below_three
      max_iterations: 10
  - task: after
""",
    "cut": """
wiggle: 1
name: cut
steps:
  - task: prepare
  - parallel:
      left: [{task: after}, {await: go}]
      right: [{task: slow, queue: nobody}]
    combine: gather
""",
    "late": """
wiggle: 1
name: late
steps:
  - task: prepare
  - await: go
    timeout: 50ms
    on_timeout:
      - task: escalate
  - task: after
""",
}


def _registry() -> Registry:
    reg = Registry()

    def passthrough(ctx: Any) -> Any:
        return ctx

    def flaky(ctx: Any) -> Any:
        raise RuntimeError("the service is down")

    def count(ctx: Any) -> Any:
        return {**ctx, "n": ctx.get("n", 0) + 1}

    def below_three(ctx: Any) -> bool:
        return bool(ctx["n"] < 3)

    def gather(joined: Any) -> Any:
        return joined["context"]

    for name in ("prepare", "after", "escalate"):
        reg.register(passthrough, name)
    reg.register(flaky, "flaky")
    reg.register(count, "count")
    reg.register(below_three, "below_three")
    reg.register(gather, "gather")
    for handlers in ("order_fulfilment", "document_pipeline", "nightly_batch"):
        for act in load_handlers(DEFINITIONS / "handlers" / f"{handlers}.py"):
            # Without reserve_stock the shipping branch waits READY (a worker is handed only
            # the activities it has): the declined card cuts it off there, every time.
            if act.name != "reserve_stock":
                reg.register(act.fn, act.name)
    return reg


def _shipped(stem: str) -> CompiledFlow:
    """A shipped definition with its sleeps cut to 10 ms (the graph is otherwise the same)."""
    doc = json.loads(load_flow_file(DEFINITIONS / f"{stem}.yaml").canonical)
    for node in doc["nodes"].values():
        if node["kind"] == "sleep" and node["duration_ms"] is not None:
            node["duration_ms"] = 10
    return graph_from_canonical(canonical_json(doc))


def _sample(stem: str, **changes: Any) -> Any:
    return {**json.loads((DEFINITIONS / "samples" / f"{stem}.json").read_text()), **changes}


@dataclass(frozen=True)
class Case:
    label: str
    flow: str
    input: Any
    ready: Callable[[Instance], bool]
    then: Callable[[Client, str], None] | None = None
    expect: dict[str, dict[str, int]] | None = None


def _finished(v: Instance) -> bool:
    return v.status.finished


def _tokens(*states: tuple[str, str]) -> Callable[[Instance], bool]:
    wanted = sorted(states)

    def ready(v: Instance) -> bool:
        live = sorted((t.node_id, str(t.state)) for t in v.tokens if t.state != "DONE")
        return live == wanted

    return ready


CASES = [
    Case(
        "failed step (order-fulfilment, declined card)",
        "order-fulfilment",
        _sample("order-fulfilment", card="4000000000000002"),
        _finished,
        expect={
            "validate": {"DONE": 1},
            "in_stock": {"DONE": 1},
            "parallel-1": {"CANCELLED": 1},
            "authorise": {"FAILED": 1},
            "reserve_stock": {"CANCELLED": 1},
        },
    ),
    Case(
        "for_each with a filtered page (document-pipeline sample)",
        "document-pipeline",
        _sample("document-pipeline"),
        _finished,
        expect={
            "fetch_document": {"DONE": 1},
            "split_pages": {"DONE": 1},
            "for_each-1": {"DONE": 1},
            "ocr_page": {"DONE": 4},
            "page_has_text": {"DONE": 4},
            "classify_page": {"DONE": 3},
            "extract_fields": {"DONE": 3},
            "for_each-1.join": {"DONE": 1},
            "index_document": {"DONE": 1},
            "publish_document": {"DONE": 1},
            "end": {"DONE": 1},
        },
    ),
    Case(
        "sleep, for_each and subflow passed (nightly-batch sample)",
        "nightly-batch",
        _sample("nightly-batch"),
        _finished,
        expect={
            "plan_batch": {"DONE": 1},
            "sleep-1": {"DONE": 1},
            "snapshot_ledger": {"DONE": 1},
            "for_each-1": {"DONE": 1},
            "nightly-batch-item": {"DONE": 3},
            "for_each-1.join": {"DONE": 1},
            "sleep-2": {"DONE": 1},
            "reconcile_totals": {"DONE": 1},
            "publish_report": {"DONE": 1},
            "end": {"DONE": 1},
        },
    ),
    Case(
        "retrying",
        "retrying",
        {},
        _tokens(("flaky", "WAITING")),
        expect={"flaky": {"WAITING": 1}},
    ),
    Case(
        "for_each held by max_concurrency",
        "held",
        {"items": [1, 2, 3, 4]},
        _tokens(
            ("for_each-1", "JOINED"),
            ("slow", "READY"),
            ("slow", "READY"),
            ("slow", "WAITING"),
            ("slow", "WAITING"),
        ),
        expect={
            "prepare": {"DONE": 1},
            "for_each-1": {"JOINED": 1},
            "slow": {"READY": 2, "WAITING": 2},
        },
    ),
    Case(
        "sleeping",
        "sleeping",
        {},
        _tokens(("sleep-1", "WAITING")),
        expect={"prepare": {"DONE": 1}, "sleep-1": {"WAITING": 1}},
    ),
    Case(
        "subflow waiting on its child",
        "parent",
        {},
        _tokens(("child", "WAITING")),
        expect={"prepare": {"DONE": 1}, "child": {"WAITING": 1}},
    ),
    Case(
        "loop of three iterations",
        "looping",
        {},
        _finished,
        expect={
            "count": {"DONE": 3},
            "below_three": {"DONE": 3},
            "after": {"DONE": 1},
            "end": {"DONE": 1},
        },
    ),
    Case(
        "cancelled branch",
        "cut",
        {},
        _tokens(("parallel-1", "JOINED"), ("go", "AWAITING"), ("slow", "READY")),
        then=lambda client, iid: client.cancel(iid, "withdrawn"),
        expect={
            "prepare": {"DONE": 1},
            "parallel-1": {"CANCELLED": 1},
            "after": {"DONE": 1},
            "go": {"CANCELLED": 1},
            "slow": {"CANCELLED": 1},
        },
    ),
    Case(
        "await timed out",
        "late",
        {},
        _finished,
        expect={
            "prepare": {"DONE": 1},
            "go": {"DONE": 1},
            "escalate": {"DONE": 1},
            "after": {"DONE": 1},
            "end": {"DONE": 1},
        },
    ),
]


@pytest.fixture
def served(database_url: str) -> Iterator[tuple[Any, Backend]]:
    with embedded_stack(database_url) as stack:
        for stem in ("nightly-batch-item", "order-fulfilment", "document-pipeline"):
            stack.engine.register(_shipped(stem))
        stack.engine.register(_shipped("nightly-batch"))
        for name in ("child", *[n for n in FLOWS if n != "child"]):
            stack.engine.register(load_flow(FLOWS[name], f"{name}.yaml"))
        queues = ("default", "orders", "payments", "shipping", "documents", "batch")
        worker = Worker(stack.address, registry=_registry(), queues=queues, poll_wait_ms=200)
        worker.start()
        backend = Backend(stack.address)
        try:
            yield stack, backend
        finally:
            backend.close()
            worker.stop()


def _wait(client: Client, instance_id: str, ready: Callable[[Instance], bool]) -> None:
    deadline = time.monotonic() + 60
    while True:
        view = client.describe(instance_id)
        if ready(view):
            return
        assert time.monotonic() < deadline, f"{instance_id} never got there: {view.tokens}"
        time.sleep(0.05)


_G = re.compile(r"<g [^>]*\bclass=\"node[^\"]*\"[^>]*>")
_ATTR = re.compile(r'(data-node|data-counts)="([^"]*)"')


def console_states(page: str) -> dict[str, dict[str, int]]:
    """The node states the console's instance page draws: `data-counts` of each graph node."""
    out: dict[str, dict[str, int]] = {}
    for tag in _G.findall(page):
        attrs = {k: html.unescape(v) for k, v in _ATTR.findall(tag)}
        if attrs.get("data-counts"):
            pairs = (pair.split(":") for pair in attrs["data-counts"].split())
            out[attrs["data-node"]] = {state: int(n) for state, n in pairs}
    return out


_NODE = re.compile(r'^\s*"([^"]+)" \[.*label=<(.*)>, tooltip=')
_STATE_LINE = re.compile(r'<FONT POINT-SIZE="9"><B>([^<]*)</B></FONT>$')


def render_states(dot: str) -> dict[str, dict[str, int]]:
    """The node states `wiggle render --instance` wrote: the bold last line of each label."""
    out: dict[str, dict[str, int]] = {}
    for line in dot.splitlines():
        node = _NODE.match(line)
        if node is None:
            continue
        state_line = _STATE_LINE.search(node.group(2))
        if state_line is None:
            continue
        out[node.group(1)] = {
            state: int(n)
            for state, n in (part.split(" ") for part in html.unescape(state_line[1]).split(" · "))
        }
    return out


def test_the_console_draws_every_instance_as_wiggle_render_does(served, tmp_path, capsys):
    stack, backend = served
    page = TestClient(create_app(backend), base_url="http://127.0.0.1:8080")
    started = {case.label: stack.client.start(case.flow, case.input).instance_id for case in CASES}
    for case in CASES:
        instance_id = started[case.label]
        _wait(stack.client, instance_id, case.ready)
        if case.then is not None:
            case.then(stack.client, instance_id)
            _wait(stack.client, instance_id, _finished)
        answer = page.get(f"/instances/{instance_id}")
        assert answer.status_code == 200, case.label
        drawn = console_states(answer.text)
        out = tmp_path / f"{instance_id}.dot"
        argv = ["render", "--instance", instance_id, "--address", stack.address, "-o", str(out)]
        code = main(argv)
        assert code == 0, capsys.readouterr().err
        rendered = render_states(out.read_text())
        assert drawn == rendered, f"{case.label}: console {drawn} != render {rendered}"
        assert drawn == case.expect, f"{case.label}: drawn {drawn}"
