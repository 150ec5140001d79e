"""`/metrics` of a real worker (SQLite and PostgreSQL): scraped over HTTP, parsed as the
Prometheus exposition format."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from wiggle.worker import Registry, Worker

FLOW = """
wiggle: 1
name: chain
execution: {mode}
steps:
  - task: inc
  - task: inc
    id: again
  - task: inc
    id: third
"""


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _registry() -> Registry:
    reg = Registry()
    reg.register(lambda ctx: {"n": ctx["n"] + 1}, "inc")
    return reg


def test_a_local_run_is_one_run_of_three_steps(stack):
    stack.deploy(FLOW.format(mode="LOCAL_ASYNC"))
    with Worker(stack.address, registry=_registry(), metrics_address="127.0.0.1:0") as worker:
        iid = stack.client.start("chain", {"n": 0}).instance_id
        assert stack.wait_finished(iid).context == {"n": 3}
        got = scrape(worker.metrics_port)
    assert got[("wiggle_worker_steps_total", (("outcome", "completed"),))] == 3
    assert got[("wiggle_worker_local_run_steps_count", ())] == 1
    assert got[("wiggle_worker_local_run_steps_sum", ())] == 3
    assert got[("wiggle_worker_handbacks_total", (("reason", "end"),))] == 1
    assert got[("wiggle_worker_poll_seconds_count", (("outcome", "tasks"),))] >= 1


def test_server_mode_steps_are_runs_of_one(stack):
    stack.deploy(FLOW.format(mode="SERVER"))
    with Worker(stack.address, registry=_registry(), metrics_address="127.0.0.1:0") as worker:
        iid = stack.client.start("chain", {"n": 0}).instance_id
        assert stack.wait_finished(iid).context == {"n": 3}
        got = scrape(worker.metrics_port)
    assert got[("wiggle_worker_steps_total", (("outcome", "completed"),))] == 3
    assert got[("wiggle_worker_local_run_steps_count", ())] == 3
    assert got[("wiggle_worker_local_run_steps_sum", ())] == 3


def test_no_metrics_address_no_endpoint(stack):
    with Worker(stack.address, registry=_registry()) as worker:
        assert worker.metrics_port == 0 and worker.metrics is None
