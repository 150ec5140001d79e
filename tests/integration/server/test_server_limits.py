"""Every limit is a clear error at the edge, on both backends: JSON depth, identifier lengths and
characters, over-limit step results (a step failure, not a refused report), and error messages
that never grow with the input (they travel in gRPC headers)."""

from __future__ import annotations

import grpc
import orjson
import pytest

from wiggle._limits import MAX_JSON_DEPTH
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb

pytestmark = pytest.mark.timeout(120)

LIMIT = 64 * 1024  # the test servers' max_payload_bytes: big enough for the flows' contexts

WAIT = b"""
wiggle: 1
name: wait
steps:
  - await: go
    apply: take
  - task: after
"""

LOOPY = b"""
wiggle: 1
name: loopy
execution: LOCAL_ASYNC
steps:
  - task: first
  - task: second
"""


@pytest.fixture
def limited(engine, start_server, stub_for):
    server = start_server(engine, max_payload_bytes=LIMIT)
    stub = stub_for(server)
    for source in (WAIT, LOOPY):
        stub.RegisterDefinition(pb.RegisterDefinitionRequest(source=source))
    return stub


def _code(exc: grpc.RpcError) -> str:
    return dict(exc.trailing_metadata() or ()).get("wiggle-error-code", "")


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def refused(call, request) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as exc:
        call(request, timeout=30)
    return exc.value


def poll(stub, queue: str = "default") -> pb.Task:
    request = pb.PollTasksRequest(worker_id="w", queues=[queue], max_tasks=1, wait_ms=5_000)
    (task,) = stub.PollTasks(request, timeout=30).tasks
    return task


# -- JSON depth ---------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 254, 1_000, 5_000])
def test_a_start_input_nested_too_deep_is_invalid_argument(limited, depth):
    exc = refused(limited.StartInstance, pb.StartInstanceRequest(flow="wait", input=nested(depth)))
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert _code(exc) == "INVALID_REQUEST"
    assert f"more than {MAX_JSON_DEPTH} levels" in exc.details()


def test_a_start_input_at_the_depth_limit_is_accepted(limited):
    reply = limited.StartInstance(
        pb.StartInstanceRequest(flow="wait", input=nested(MAX_JSON_DEPTH)), timeout=30
    )
    assert reply.created


@pytest.mark.parametrize("buffered", [False, True])
def test_a_signal_nested_too_deep_is_refused_and_changes_nothing(limited, buffered):
    start = pb.StartInstanceRequest(flow="wait", input=nested(MAX_JSON_DEPTH))
    instance_id = limited.StartInstance(start, timeout=30).instance_id
    if buffered:  # a second await-less name would be refused; the same name is buffered
        limited.SignalInstance(
            pb.SignalInstanceRequest(instance_id=instance_id, name="go", payload=b"1"), timeout=30
        )
    deep = pb.SignalInstanceRequest(
        instance_id=instance_id, name="go", payload=nested(MAX_JSON_DEPTH + 1)
    )
    exc = refused(limited.SignalInstance, deep)
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert f"more than {MAX_JSON_DEPTH} levels" in exc.details()
    view = limited.DescribeInstance(
        pb.DescribeInstanceRequest(instance_id=instance_id, include_events=True), timeout=30
    )
    assert view.status == pb.InstanceStatus.RUNNING
    received = [e for e in view.events if e.kind == "signal_received"]
    assert len(received) == (1 if buffered else 0)


def test_a_step_result_nested_too_deep_fails_the_step_without_retry(limited):
    start = pb.StartInstanceRequest(flow="wait", input=b"{}")
    instance_id = limited.StartInstance(start, timeout=30).instance_id
    limited.SignalInstance(
        pb.SignalInstanceRequest(instance_id=instance_id, name="go", payload=b"{}"), timeout=30
    )
    task = poll(limited)
    limited.CompleteTask(
        pb.CompleteTaskRequest(
            task_id=task.task_id, lease=task.lease, result=nested(MAX_JSON_DEPTH + 1)
        ),
        timeout=30,
    )
    view = limited.DescribeInstance(pb.DescribeInstanceRequest(instance_id=instance_id))
    assert view.status == pb.InstanceStatus.FAILED
    assert f"more than {MAX_JSON_DEPTH} levels" in view.reason


# -- over-limit step results --------------------------------------------------------------------


def test_an_over_limit_result_fails_the_step_at_once_naming_the_limit(limited):
    start = pb.StartInstanceRequest(flow="wait", input=b"{}")
    instance_id = limited.StartInstance(start, timeout=30).instance_id
    limited.SignalInstance(
        pb.SignalInstanceRequest(instance_id=instance_id, name="go", payload=b"{}"), timeout=30
    )
    task = poll(limited)
    big = orjson.dumps({"pad": "x" * (2 * LIMIT)})
    reply = limited.CompleteTask(
        pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=big), timeout=30
    )
    assert reply.instance_status == pb.InstanceStatus.FAILED
    view = limited.DescribeInstance(pb.DescribeInstanceRequest(instance_id=instance_id))
    assert "max_payload_bytes" in view.reason and str(LIMIT) in view.reason
    assert task.max_payload_bytes == LIMIT and task.max_request_bytes > LIMIT


def test_an_over_limit_step_in_a_batch_fails_that_step_after_the_prefix(limited):
    instance_id = limited.StartInstance(
        pb.StartInstanceRequest(flow="loopy", input=b"{}"), timeout=30
    ).instance_id
    task = poll(limited)
    big = orjson.dumps({"pad": "x" * (2 * LIMIT)})
    reply = limited.AdvanceRun(
        pb.AdvanceRunRequest(
            task_id=task.task_id,
            lease=task.lease,
            steps=[
                pb.StepResult(node_id="first", context=b'{"a": 1}'),
                pb.StepResult(node_id="second", context=big),
            ],
            final=True,
            handback_reason="end",
        ),
        timeout=30,
    )
    assert reply.instance_status == pb.InstanceStatus.FAILED
    view = limited.DescribeInstance(
        pb.DescribeInstanceRequest(instance_id=instance_id, include_events=True)
    )
    completed = [e.node_id for e in view.events if e.kind == "step_completed"]
    assert completed == ["first"]
    assert "max_payload_bytes" in view.reason
    assert not [e for e in view.events if e.kind == "step_retried"]


# -- identifiers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_id", "why"),
    [
        ("x" * 65, "1 to 64 characters"),
        ("has space", "letters, digits"),
        ("slash/y", "letters, digits"),
        ("é", "letters, digits"),
    ],
)
def test_a_bad_instance_id_is_invalid_argument(limited, instance_id, why):
    exc = refused(
        limited.StartInstance, pb.StartInstanceRequest(flow="wait", instance_id=instance_id)
    )
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert why in exc.details()
    for call, request in (
        (limited.DescribeInstance, pb.DescribeInstanceRequest(instance_id=instance_id)),
        (limited.CancelInstance, pb.CancelInstanceRequest(instance_id=instance_id)),
        (
            limited.SignalInstance,
            pb.SignalInstanceRequest(instance_id=instance_id, name="go"),
        ),
    ):
        assert refused(call, request).code() is grpc.StatusCode.INVALID_ARGUMENT


def test_an_instance_id_of_64_characters_is_fine(limited):
    instance_id = "a.b_c:d-" * 8
    reply = limited.StartInstance(
        pb.StartInstanceRequest(flow="wait", instance_id=instance_id), timeout=30
    )
    assert reply.instance_id == instance_id


@pytest.mark.parametrize("length", [201, 10_000, 100_000])
def test_a_huge_flow_name_is_a_short_clear_error(limited, length):
    # Echoed whole, the name would overflow the header limit: "Stream removed" at the client.
    exc = refused(limited.StartInstance, pb.StartInstanceRequest(flow="f" * length))
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert "at most 200 characters" in exc.details()
    assert len(exc.details()) < 500
    exc = refused(limited.GetDefinition, pb.GetDefinitionRequest(name="f" * length))
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("call", "request_"),
    [
        ("SignalInstance", pb.SignalInstanceRequest(instance_id="i", name="n" * 201)),
        ("CancelInstance", pb.CancelInstanceRequest(instance_id="i", reason="r" * 2001)),
        ("PollTasks", pb.PollTasksRequest(worker_id="w" * 201, queues=["q"])),
        ("PollTasks", pb.PollTasksRequest(worker_id="w", queues=["q" * 201])),
        ("PollTasks", pb.PollTasksRequest(worker_id="w", queues=["q"], activities=["a" * 201])),
        ("CompleteTask", pb.CompleteTaskRequest(task_id="t" * 65, lease="l", result=b"1")),
        ("Heartbeat", pb.HeartbeatRequest(task_id="t", lease="l" * 65)),
        ("PollTasks", pb.PollTasksRequest(worker_id="w", queues=[f"q{n}" for n in range(10_000)])),
        (
            "PollTasks",
            pb.PollTasksRequest(worker_id="w", queues=["q"], activities=["a"] * 1001),
        ),
        (
            "StartInstance",
            pb.StartInstanceRequest(
                flow="f", eager=pb.EagerDispatch(worker_id="w", queues=["q"] * 101)
            ),
        ),
    ],
    ids=[
        "signal",
        "reason",
        "worker",
        "queue",
        "activity",
        "task",
        "lease",
        "10000-queues",
        "1001-activities",
        "eager-queues",
    ],
)
def test_every_identifier_is_bounded(limited, call, request_):
    exc = refused(getattr(limited, call), request_)
    assert exc.code() is grpc.StatusCode.INVALID_ARGUMENT, exc.details()
    assert _code(exc) == "INVALID_REQUEST"


def test_a_long_failure_message_is_cut_not_refused(limited):
    instance_id = limited.StartInstance(
        pb.StartInstanceRequest(flow="loopy", input=b"{}"), timeout=30
    ).instance_id
    task = poll(limited)
    failure = pb.StepFailure(message="m" * 50_000, non_retryable=True)
    limited.FailTask(
        pb.FailTaskRequest(task_id=task.task_id, lease=task.lease, failure=failure), timeout=30
    )
    view = limited.DescribeInstance(pb.DescribeInstanceRequest(instance_id=instance_id))
    assert view.status == pb.InstanceStatus.FAILED
    assert 2_000 <= len(view.reason) < 2_200
