"""`/metrics` of a real server (SQLite and PostgreSQL), scraped over HTTP and parsed as the
Prometheus exposition format."""

from __future__ import annotations

import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

FLOW = b"""
wiggle: 1
name: metered
queue: m
steps:
  - task: a
    retry: {max_attempts: 3, backoff: fixed, initial: 1ms}
  - task: b
"""


def scrape(server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    url = f"http://127.0.0.1:{server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        assert answer.headers["Content-Type"].startswith("text/plain")
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _poll(stub, worker="w"):
    request = pb.PollTasksRequest(worker_id=worker, queues=["m"], max_tasks=5, wait_ms=5_000)
    return list(stub.PollTasks(request, timeout=30).tasks)


@pytest.fixture
def metered(engine, start_server, stub_for):
    server = start_server(engine, metrics_address="127.0.0.1:0")
    return server, stub_for(server)


def test_metrics_count_steps_failures_eager_polls_and_ready_tokens(metered, flows):
    server, stub = metered
    assert server.metrics_port > 0
    stub.RegisterDefinition(pb.RegisterDefinitionRequest(source=FLOW))
    stub.StartInstance(pb.StartInstanceRequest(flow="metered", input=b"{}"))
    stub.StartInstance(pb.StartInstanceRequest(flow="metered", input=b"{}"))
    before = scrape(server)
    assert before[("wiggle_ready_tokens", (("queue", "m"),))] == 2

    first, second = _poll(stub)
    stub.FailTask(
        pb.FailTaskRequest(task_id=first.task_id, lease=first.lease, failure={"message": "x"})
    )
    stub.CompleteTask(
        pb.CompleteTaskRequest(
            task_id=second.task_id,
            lease=second.lease,
            result=b"{}",
            next=pb.EagerDispatch(worker_id="w", queues=["m"]),
        )
    )
    # The same report again under a spent lease: refused as stale.
    with pytest.raises(Exception):  # noqa: B017 - grpc.RpcError; the count is what matters
        stub.CompleteTask(
            pb.CompleteTaskRequest(task_id=second.task_id, lease="not-the-lease", result=b"{}")
        )
    after = scrape(server)
    flow = (("flow", "metered"), ("mode", "SERVER"))
    assert after[("wiggle_steps_completed_total", flow)] == 1
    assert after[("wiggle_steps_failed_total", flow)] == 1
    assert after[("wiggle_eager_dispatch_total", (("kind", "next"), ("result", "hit")))] == 1
    assert after[("wiggle_stale_reports_refused_total", ())] == 1
    assert after[("wiggle_poll_wait_seconds_count", (("outcome", "tasks"),))] == 1
    assert after[("wiggle_transaction_seconds_count", (("kind", "write"),))] >= 3
    # Every call answered, by method and code (the two starts came before the metrics were
    # scraped: counted too).
    rpcs = {k[1]: v for k, v in after.items() if k[0] == "wiggle_rpcs_total"}
    assert rpcs[(("code", "OK"), ("method", "StartInstance"))] == 2
    assert rpcs[(("code", "OK"), ("method", "PollTasks"))] == 1
    assert rpcs[(("code", "OK"), ("method", "FailTask"))] == 1
    assert rpcs[(("code", "OK"), ("method", "CompleteTask"))] == 1
    assert rpcs[(("code", "FAILED_PRECONDITION"), ("method", "CompleteTask"))] == 1


def test_local_runs_count_batches_and_handbacks(metered):
    server, stub = metered
    flow = FLOW.replace(b"queue: m", b"queue: m\nexecution: LOCAL_ASYNC")
    stub.RegisterDefinition(pb.RegisterDefinitionRequest(source=flow))
    stub.StartInstance(pb.StartInstanceRequest(flow="metered", input=b"{}"))
    (task,) = _poll(stub)
    stub.AdvanceRun(
        pb.AdvanceRunRequest(
            task_id=task.task_id,
            lease=task.lease,
            steps=[pb.StepResult(node_id="a", context=b"{}")],
            final=True,
            handback_reason="shutdown",
        )
    )
    after = scrape(server)
    assert after[("wiggle_handbacks_total", (("reason", "shutdown"),))] == 1
    assert after[("wiggle_advance_run_steps_count", (("final", "true"),))] == 1
    assert after[("wiggle_advance_run_steps_sum", (("final", "true"),))] == 1
    mode = (("flow", "metered"), ("mode", "LOCAL_ASYNC"))
    assert after[("wiggle_steps_completed_total", mode)] == 1


def test_a_server_without_metrics_serves_none(server):
    assert server.metrics_port == 0 and server.metrics is None


def test_metrics_count_schedule_fires_skips_and_lateness(metered, engine):
    import time

    from wiggle.schedules import load_schedule

    server, stub = metered
    stub.RegisterDefinition(pb.RegisterDefinitionRequest(source=FLOW))
    # Every second; the first fire's instance waits at task a (nobody polls), so each later
    # fire is skipped for overlap.
    engine.apply_schedule(load_schedule("schedule: tick\nflow: metered\ninterval: {every: 1s}\n"))
    deadline = time.monotonic() + 20
    samples = scrape(server)
    while time.monotonic() < deadline:
        samples = scrape(server)
        if samples.get(
            ("wiggle_schedule_skips_total", (("reason", "overlap"), ("schedule", "tick")))
        ):
            break
        time.sleep(0.2)
    engine.pause_schedule("tick")
    assert samples[("wiggle_schedule_fires_total", (("schedule", "tick"),))] == 1
    assert (
        samples[("wiggle_schedule_skips_total", (("reason", "overlap"), ("schedule", "tick")))] >= 1
    )
    assert samples[("wiggle_schedule_lateness_seconds_count", ())] == 1
