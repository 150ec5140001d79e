"""Each execution mode end to end: a Worker over a real loopback server, on both backends."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from wiggle.worker import NonRetryable, Registry, Worker, step

pytestmark = pytest.mark.timeout(90)

MODES = ["SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"]

PIPELINE = """
wiggle: 1
name: pipeline
execution: {mode}
steps:
  - task: validate
  - filter: in_stock
  - choice:
      - when: big
        steps: [{{task: big_order}}]
    otherwise: [{{task: small_order}}]
  - loop:
      steps: [{{task: bump}}]
      while: again
      max_iterations: 10
  - parallel:
      a: [{{task: branch_a}}]
      b: [{{task: branch_b}}, {{task: branch_b2, queue: other}}]
    combine: merge
  - task: capture
    checkpoint: true
  - sleep: 10ms
  - task: notify
"""


def pipeline_registry(executed: Counter[str], lock: threading.Lock) -> Registry:
    reg = Registry()

    def track(name: str) -> None:
        with lock:
            executed[name] += 1

    def task(name: str):
        def fn(ctx):
            track(name)
            return {**ctx, "trail": [*ctx.get("trail", []), name]}

        return fn

    for name in (
        "validate",
        "big_order",
        "small_order",
        "branch_a",
        "branch_b",
        "branch_b2",
        "notify",
    ):
        reg.register(task(name), name)

    @reg.activity
    def in_stock(ctx):
        track("in_stock")
        return ctx["qty"] <= 10

    @reg.activity
    def big(ctx):
        track("big")
        return ctx["qty"] > 5

    @reg.activity
    def bump(ctx):
        track("bump")
        return {**ctx, "n": ctx.get("n", 0) + 1}

    @reg.activity
    def again(ctx):
        track("again")
        return ctx["n"] < 3

    @reg.activity
    def merge(payload):
        track("merge")
        results = payload["results"]
        return {**payload["context"], "branches": sorted(results)}

    @reg.activity
    def capture(ctx):
        track("capture")
        info = step()
        return {
            **ctx,
            "captured": f"{info.node_id}@{info.attempt}",
            "mode": str(info.execution_mode),
        }

    return reg


@pytest.mark.parametrize("mode", MODES)
def test_pipeline_completes_identically_in_every_mode(stack, mode):
    executed: Counter[str] = Counter()
    reg = pipeline_registry(executed, threading.Lock())
    flow = stack.deploy(PIPELINE.format(mode=mode))
    with Worker(stack.address, queues=("default", "other"), registry=reg, poll_wait_ms=1000):
        started = stack.client.start(flow.name, {"qty": 7}, version=flow.version)
        view = stack.wait_finished(started.instance_id)
    assert view.status == "COMPLETED", view.reason
    ctx = view.context
    assert ctx["n"] == 3
    assert ctx["branches"] == ["a", "b"]
    assert ctx["trail"] == ["validate", "big_order", "notify"]
    assert ctx["captured"] == "capture@1"
    assert ctx["mode"] == mode
    assert executed == Counter(
        validate=1,
        in_stock=1,
        big=1,
        big_order=1,
        bump=3,
        again=3,
        branch_a=1,
        branch_b=1,
        branch_b2=1,
        merge=1,
        capture=1,
        notify=1,
    )
    kinds = Counter(e.kind for e in view.events)
    assert kinds["step_completed"] == sum(executed.values())
    if mode != "SERVER":
        assert kinds["handed_back"] >= 1


@pytest.mark.parametrize("mode", MODES)
def test_filtered_and_failed_instances(stack, mode):
    reg = Registry()
    reg.register(lambda ctx: ctx, "validate")
    reg.register(lambda ctx: False, "in_stock")

    @reg.activity
    def charge(ctx):
        raise NonRetryable("card reported stolen")

    filtered = stack.deploy(
        f"wiggle: 1\nname: filt\nexecution: {mode}\n"
        "steps: [{task: validate}, {filter: in_stock}]\n"
    )
    failing = stack.deploy(
        f"wiggle: 1\nname: fail\nexecution: {mode}\nsteps: [{{task: validate}}, {{task: charge}}]\n"
    )
    with Worker(stack.address, registry=reg, poll_wait_ms=1000):
        a = stack.client.start(filtered.name, {}, version=filtered.version)
        b = stack.client.start(failing.name, {}, version=failing.version)
        va = stack.wait_finished(a.instance_id)
        vb = stack.wait_finished(b.instance_id)
    assert (va.status, va.reason) == ("COMPLETED", "filtered")
    assert vb.status == "FAILED" and "card reported stolen" in vb.reason


@pytest.mark.parametrize("mode", ["LOCAL_SYNC", "LOCAL_ASYNC"])
def test_retry_after_a_failed_local_step(stack, mode):
    attempts: list[int] = []
    reg = Registry()
    reg.register(lambda ctx: {**ctx, "a": 1}, "first")

    @reg.activity
    def flaky(ctx):
        attempts.append(step().attempt)
        if step().attempt < 3:
            raise RuntimeError("not yet")
        return {**ctx, "b": step().attempt}

    reg.register(lambda ctx: {**ctx, "c": 1}, "last")
    flow = stack.deploy(
        f"wiggle: 1\nname: retry\nexecution: {mode}\nsteps:\n  - task: first\n"
        "  - task: flaky\n    retry: {max_attempts: 3, initial: 10ms}\n  - task: last\n"
    )
    with Worker(stack.address, registry=reg, poll_wait_ms=1000):
        started = stack.client.start(flow.name, {}, version=flow.version)
        view = stack.wait_finished(started.instance_id)
    assert view.status == "COMPLETED", view.reason
    assert view.context == {"a": 1, "b": 3, "c": 1}
    assert attempts == [1, 2, 3]


@pytest.mark.parametrize("mode", MODES)
def test_eager_start_runs_the_first_task_without_a_poll(stack, mode):
    reg = Registry()
    reg.register(lambda ctx: {**ctx, "one": True}, "one")
    reg.register(lambda ctx: {**ctx, "two": True}, "two")
    flow = stack.deploy(
        f"wiggle: 1\nname: eager\nexecution: {mode}\nsteps: [{{task: one}}, {{task: two}}]\n"
    )
    with Worker(stack.address, registry=reg, poll_wait_ms=1000) as worker:
        started = stack.client.start(flow.name, {}, version=flow.version, worker=worker)
        view = stack.wait_finished(started.instance_id)
    assert started.eager
    assert view.status == "COMPLETED" and view.context == {"one": True, "two": True}


def test_eager_start_falls_back_when_no_slot_is_free(stack):
    reg = Registry()
    gate = threading.Event()
    reg.register(lambda ctx: gate.wait(10) and ctx, "block")
    reg.register(lambda ctx: {**ctx, "ran": True}, "one")
    blocker = stack.deploy("wiggle: 1\nname: blocker\nsteps: [{task: block}]\n")
    flow = stack.deploy("wiggle: 1\nname: eager2\nsteps: [{task: one}]\n")
    with Worker(stack.address, registry=reg, concurrency=1, poll_wait_ms=200) as worker:
        first = stack.client.start(blocker.name, {}, version=blocker.version, worker=worker)
        assert first.eager
        second = stack.client.start(flow.name, {}, version=flow.version, worker=worker)
        assert not second.eager  # the only slot is busy: an ordinary start
        gate.set()
        assert stack.wait_finished(second.instance_id).context == {"ran": True}
        assert stack.wait_finished(first.instance_id).status == "COMPLETED"


def test_a_non_boolean_predicate_fails_alike_in_every_mode(stack):
    reg = Registry()
    reg.register(lambda ctx: ctx, "validate")
    reg.register(lambda ctx: "yes", "in_stock")
    reasons = {}
    with Worker(stack.address, registry=reg, poll_wait_ms=500):
        for mode in MODES:
            flow = stack.deploy(
                f"wiggle: 1\nname: nb-{mode.lower().replace('_', '-')}\nexecution: {mode}\n"
                "steps: [{task: validate}, {filter: in_stock}]\n"
            )
            started = stack.client.start(flow.name, {}, version=flow.version)
            view = stack.wait_finished(started.instance_id)
            assert view.status == "FAILED"
            reasons[mode] = view.reason
    assert len(set(reasons.values())) == 1, reasons
    assert "in_stock" in reasons["SERVER"]
