"""The server's transport duties over a real loopback socket, with a stand-in engine: auth,
size limits, error mapping, health, reflection, long-poll wake-ups and graceful shutdown."""

from __future__ import annotations

import logging
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.client import Client
from wiggle.server import Server, ServerConfig, ServerConfigError

AUTH = (("authorization", "Bearer s3cret"),)


def _code(exc: grpc.RpcError) -> str:
    return dict(exc.trailing_metadata() or ()).get("wiggle-error-code", "")


def test_token_is_required_and_checked(fake_engine, start_server, stub_for):
    server = start_server(fake_engine, token="s3cret")
    stub = stub_for(server)
    request = pb.SignalInstanceRequest(instance_id="i1", name="go")
    with pytest.raises(grpc.RpcError) as missing:
        stub.SignalInstance(request)
    assert missing.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert _code(missing.value) == "UNAUTHENTICATED"
    with pytest.raises(grpc.RpcError) as wrong:
        stub.SignalInstance(request, metadata=(("authorization", "Bearer nope"),))
    assert wrong.value.code() is grpc.StatusCode.UNAUTHENTICATED
    assert stub.SignalInstance(request, metadata=AUTH).delivered

    with pytest.raises(errors.Unauthenticated):
        Client(server.address, token="nope", retry_for=0).signal("i1", "go")
    assert Client(server.address, token="s3cret").signal("i1", "go") is True


def test_health_is_exempt_from_auth_and_serving(fake_engine, start_server):
    server = start_server(fake_engine, token="s3cret")
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.address))
    for service in ("", "wiggle.v1.Wiggle"):
        reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_the_service(fake_engine, start_server):
    server = start_server(fake_engine)
    stub = reflection_pb2_grpc.ServerReflectionStub(grpc.insecure_channel(server.address))
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    (reply,) = list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    names = {s.name for s in reply.list_services_response.service}
    assert {"wiggle.v1.Wiggle", "grpc.health.v1.Health"} <= names


def test_reflection_needs_the_token_too(fake_engine, start_server):
    server = start_server(fake_engine, token="s3cret")
    stub = reflection_pb2_grpc.ServerReflectionStub(grpc.insecure_channel(server.address))
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    with pytest.raises(grpc.RpcError) as exc:
        list(stub.ServerReflectionInfo(iter([request]), timeout=5))
    assert exc.value.code() is grpc.StatusCode.UNAUTHENTICATED
    replies = list(stub.ServerReflectionInfo(iter([request]), timeout=5, metadata=AUTH))
    assert replies


@pytest.mark.parametrize("address", ["0.0.0.0:0", "[::]:0", "example.com:7233"])
def test_refuses_a_public_address_without_a_token(fake_engine, address):
    with pytest.raises(ServerConfigError, match="token"):
        Server(fake_engine, ServerConfig(address=address))


def test_bad_json_is_invalid_argument(fake_engine, start_server, stub_for):
    stub = stub_for(start_server(fake_engine))
    with pytest.raises(grpc.RpcError) as exc:
        stub.CompleteTask(pb.CompleteTaskRequest(task_id="t", lease="lease", result=b"{nope"))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _code(exc.value) == "INVALID_REQUEST"
    assert "not valid JSON" in exc.value.details()


def test_oversized_payload_is_resource_exhausted(fake_engine, start_server, stub_for):
    server = start_server(fake_engine, max_payload_bytes=1000)
    stub = stub_for(server)
    big = b'"' + b"x" * 2000 + b'"'
    # An over-limit step result is the step's failure, not a refused report.
    stub.CompleteTask(pb.CompleteTaskRequest(task_id="t", lease="lease", result=big))
    ((task_id, failure),) = fake_engine.failures
    assert task_id == "t" and failure.non_retryable
    assert "2002 bytes" in failure.message and "1000 bytes" in failure.message
    # Past the whole-message limit gRPC itself refuses it, with the same status code.
    huge = b'"' + b"x" * 8 * 1024 * 1024 + b'"'
    with pytest.raises(grpc.RpcError) as exc:
        stub.CompleteTask(pb.CompleteTaskRequest(task_id="t", lease="lease", result=huge))
    assert exc.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(errors.PayloadTooLarge):
        Client(server.address).signal("i1", "go", "x" * 2000)


def test_stale_lease_is_failed_precondition(fake_engine, start_server, stub_for):
    stub = stub_for(start_server(fake_engine))
    with pytest.raises(grpc.RpcError) as exc:
        stub.CompleteTask(pb.CompleteTaskRequest(task_id="t", lease="old", result=b"1"))
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert _code(exc.value) == "STALE_LEASE"


def test_unexpected_errors_are_internal_without_details(fake_engine, start_server, stub_for):
    server = start_server(fake_engine)
    with pytest.raises(grpc.RpcError) as exc:
        stub_for(server).DescribeInstance(pb.DescribeInstanceRequest(instance_id="boom"))
    assert exc.value.code() is grpc.StatusCode.INTERNAL
    assert "hunter2" not in exc.value.details()
    assert "Traceback" not in exc.value.details()
    with pytest.raises(errors.InstanceNotFound) as typed:
        Client(server.address).describe("missing")
    assert typed.value.instance_id == "missing"


def test_long_poll_wakes_when_a_task_appears(fake_engine, start_server, stub_for):
    stub = stub_for(start_server(fake_engine))
    threading.Timer(0.3, fake_engine.add_tasks, (1,)).start()
    began = time.monotonic()
    reply = stub.PollTasks(
        pb.PollTasksRequest(worker_id="w", queues=["default"], max_tasks=8, wait_ms=20_000)
    )
    assert len(reply.tasks) == 1
    assert time.monotonic() - began < 10  # woken by the task, not by the 20 s wait
    assert fake_engine.polls <= 5  # and not by polling in a loop


def test_poll_hands_out_many_tasks_per_call(fake_engine, start_server, stub_for):
    stub = stub_for(start_server(fake_engine))
    fake_engine.add_tasks(10)
    reply = stub.PollTasks(pb.PollTasksRequest(worker_id="w", queues=["default"], max_tasks=4))
    assert len(reply.tasks) == 4
    assert reply.tasks[0].execution_mode == pb.SERVER
    reply = stub.PollTasks(pb.PollTasksRequest(worker_id="w", queues=["default"], max_tasks=100))
    assert len(reply.tasks) == 6


def test_poll_answers_empty_after_wait_ms(fake_engine, start_server, stub_for):
    stub = stub_for(start_server(fake_engine))
    began = time.monotonic()
    reply = stub.PollTasks(pb.PollTasksRequest(worker_id="w", queues=["other"], wait_ms=300))
    assert len(reply.tasks) == 0
    assert 0.25 < time.monotonic() - began < 15  # after its wait, and not forever


def test_graceful_shutdown_ends_polls_and_reports_not_serving(fake_engine, start_server, stub_for):
    server = start_server(fake_engine, grace_s=5.0)
    stub = stub_for(server)
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(server.address))
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=10)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    result: dict[str, object] = {}

    def poll() -> None:
        began = time.monotonic()
        reply = stub.PollTasks(pb.PollTasksRequest(worker_id="w", queues=["q"], wait_ms=20_000))
        result["tasks"], result["took"] = len(reply.tasks), time.monotonic() - began

    poller = threading.Thread(target=poll)
    poller.start()
    fake_engine.wait_polls(1)  # the poll is in the server, about to wait
    stopper = threading.Thread(target=server.stop)
    stopper.start()
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    poller.join(10)
    stopper.join(10)
    assert result == {"tasks": 0, "took": result["took"]}
    assert result["took"] < 5  # answered (empty) at shutdown, well before its 20 s
    assert server.wait(0)
    with pytest.raises(grpc.RpcError) as exc:
        stub.SignalInstance(pb.SignalInstanceRequest(instance_id="i", name="n"), timeout=2)
    assert exc.value.code() is grpc.StatusCode.UNAVAILABLE


def test_waiting_polls_leave_threads_for_reports(fake_engine, start_server, stub_for):
    server = start_server(fake_engine, max_workers=4)  # at most 3 waiting polls
    stub = stub_for(server)
    request = pb.PollTasksRequest(worker_id="w", queues=["default"], wait_ms=20_000)
    waiting = [stub.PollTasks.future(request) for _ in range(3)]
    fake_engine.wait_polls(3)  # all three hold their threads now
    with pytest.raises(grpc.RpcError) as exc:
        stub.PollTasks(request, timeout=5)
    assert exc.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "long polls" in exc.value.details()
    # The fourth thread still serves everything else at once.
    assert stub.SignalInstance(pb.SignalInstanceRequest(instance_id="i", name="n"), timeout=5)
    fake_engine.add_tasks(3)
    assert sum(len(f.result(timeout=10).tasks) for f in waiting) == 3


def test_a_database_away_is_not_logged_per_poll(fake_engine, start_server, stub_for, caplog):
    """Recording a polling worker fails while the database is away (a failover): the ticker
    says that once; each poll saying it again made a line per poll per worker."""
    caplog.set_level(logging.WARNING, logger="wiggle.server")
    stub = stub_for(start_server(fake_engine))
    request = pb.PollTasksRequest(worker_id="w", queues=["default"], max_tasks=1)

    def away(note: object) -> None:
        raise errors.Unavailable("the database is unavailable: connection refused")

    fake_engine.note_worker = away
    for _ in range(5):
        stub.PollTasks(request)
    assert not [r for r in caplog.records if r.name == "wiggle.server"]

    def broken(note: object) -> None:
        raise RuntimeError("a bug")

    fake_engine.note_worker = broken
    for _ in range(5):
        stub.PollTasks(request)
    fake_engine.note_worker = lambda note: None
    stub.PollTasks(request)
    said = [r.getMessage() for r in caplog.records if r.name == "wiggle.server"]
    assert len(said) == 2, said  # once when it starts, once when it is over
    assert said[0].startswith("could not record polling workers (RuntimeError: worker w: a bug")
    assert said[1].startswith("recording polling workers again after")
