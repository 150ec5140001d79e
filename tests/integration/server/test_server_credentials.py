"""Named credentials with scopes, over a real engine: a worker credential touches its own queues
only (polls, reports, heartbeats, releases, batches), a client starts and reads but does not
deploy or cancel, an admin does everything, and the file is re-read without a restart."""

from __future__ import annotations

import functools
import logging
import time
from pathlib import Path

import grpc
import pytest
from sqlalchemy import event

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.client import Client
from wiggle.server import ServerConfig
from wiggle.server._credentials import token_digest

pytestmark = pytest.mark.timeout(120)

TWO_QUEUES = b"""
wiggle: 1
name: two
execution: LOCAL_SYNC
steps:
  - task: a1
    queue: qa
  - task: a2
    queue: qa
  - task: b1
    queue: qb
"""

CREDENTIALS = """
[[credential]]
name = "ops"
scopes = ["admin"]
token_sha256 = "{admin}"

[[credential]]
name = "frontend"
scopes = ["client"]
token_sha256 = "{client}"

[[credential]]
name = "worker-a"
scopes = ["worker:qa"]
token_file = "worker-a.token"

[[credential]]
name = "worker-b"
scopes = ["worker:qb,other"]
token_sha256 = "{worker_b}"
"""


@pytest.fixture
def secured(engine, start_server, tmp_path):
    (tmp_path / "worker-a.token").write_text("token-worker-a\n")
    path = tmp_path / "credentials.toml"
    path.write_text(
        CREDENTIALS.format(
            admin=token_digest("token-admin"),
            client=token_digest("token-client"),
            worker_b=token_digest("token-worker-b"),
        )
    )
    server = start_server(engine, credentials=path)
    channel = grpc.insecure_channel(server.address)
    stub = pb_grpc.WiggleStub(channel)
    with Client(server.address, token="token-admin", retry_for=0) as admin:
        admin.deploy(TWO_QUEUES)
    yield server, stub, path
    channel.close()


def as_(token: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {token}"),)


def code(exc: grpc.RpcError) -> str:
    return dict(exc.trailing_metadata() or ()).get("wiggle-error-code", "")


def denied(call, request, token: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as exc:
        call(request, metadata=as_(token), timeout=30)
    return exc.value


def poll(stub, token: str, queue: str) -> pb.Task:
    request = pb.PollTasksRequest(worker_id="w", queues=[queue], max_tasks=1, wait_ms=5_000)
    (task,) = stub.PollTasks(request, metadata=as_(token), timeout=30).tasks
    return task


def start(stub, token: str = "token-client") -> str:
    reply = stub.StartInstance(pb.StartInstanceRequest(flow="two"), metadata=as_(token))
    return reply.instance_id  # type: ignore[no-any-return]


def run_a(task: pb.Task) -> pb.AdvanceRunRequest:
    """Both qa steps run locally, then handed back (the next step is qb's)."""
    return pb.AdvanceRunRequest(
        task_id=task.task_id,
        lease=task.lease,
        steps=[
            pb.StepResult(node_id="a1", context=b"{}"),
            pb.StepResult(node_id="a2", context=b"{}"),
        ],
        final=True,
        handback_reason="other_queue",
        seq=1,
    )


def test_a_worker_credential_cannot_poll_another_queue(secured):
    _, stub, _ = secured
    start(stub)
    exc = denied(
        stub.PollTasks, pb.PollTasksRequest(worker_id="w", queues=["qb"]), "token-worker-a"
    )
    assert exc.code() is grpc.StatusCode.PERMISSION_DENIED
    assert code(exc) == "PERMISSION_DENIED"
    assert "'worker-a'" in exc.details() and "'qb'" in exc.details()
    # Nor its own queue and another together, nor the default queue by leaving queues out.
    both = pb.PollTasksRequest(worker_id="w", queues=["qa", "qb"])
    assert (
        denied(stub.PollTasks, both, "token-worker-a").code() is grpc.StatusCode.PERMISSION_DENIED
    )
    default = pb.PollTasksRequest(worker_id="w")
    assert (
        denied(stub.PollTasks, default, "token-worker-a").code()
        is grpc.StatusCode.PERMISSION_DENIED
    )
    assert poll(stub, "token-worker-a", "qa").node_id == "a1"


def test_a_worker_credential_cannot_report_on_another_queues_task(secured):
    _, stub, _ = secured
    instance_id = start(stub)
    a = poll(stub, "token-worker-a", "qa")
    stub.AdvanceRun(run_a(a), metadata=as_("token-worker-a"))
    b = poll(stub, "token-worker-b", "qb")
    before = stub.DescribeInstance(
        pb.DescribeInstanceRequest(instance_id=instance_id, include_events=True),
        metadata=as_("token-client"),
    )
    forged = pb.CompleteTaskRequest(task_id=b.task_id, lease=b.lease, result=b'"forged"', seq=1)
    refusal = "credential 'worker-a' (worker:qa) may not report on a task of queue 'qb'"
    for call, request in (
        (stub.CompleteTask, forged),
        (stub.FailTask, pb.FailTaskRequest(task_id=b.task_id, lease=b.lease, seq=1)),
        (stub.ReleaseTask, pb.ReleaseTaskRequest(task_id=b.task_id, lease=b.lease, seq=1)),
        (stub.Heartbeat, pb.HeartbeatRequest(task_id=b.task_id, lease=b.lease)),
        (
            stub.AdvanceRun,
            pb.AdvanceRunRequest(
                task_id=b.task_id,
                lease=b.lease,
                steps=[pb.StepResult(node_id="b1", context=b"{}")],
                final=True,
                seq=1,
            ),
        ),
    ):
        exc = denied(call, request, "token-worker-a")
        assert exc.code() is grpc.StatusCode.PERMISSION_DENIED, exc.details()
        assert code(exc) == "PERMISSION_DENIED"
        assert exc.details() == refusal
    # In a batch, the report is refused as its own call would have been (the batch itself
    # answers: one report's refusal spoils no other).
    reply = stub.ReportBatch(
        pb.ReportBatchRequest(reports=[pb.TaskReport(complete=forged)]),
        metadata=as_("token-worker-a"),
        timeout=30,
    )
    (answer,) = reply.answers
    assert answer.error.status_code == grpc.StatusCode.PERMISSION_DENIED.value[0]
    assert (answer.error.error_code, answer.error.message) == ("PERMISSION_DENIED", refusal)
    # Nothing changed: no event, and the lease is worker-b's still.
    after = stub.DescribeInstance(
        pb.DescribeInstanceRequest(instance_id=instance_id, include_events=True),
        metadata=as_("token-client"),
    )
    assert after.events == before.events and after.tokens == before.tokens
    stub.CompleteTask(
        pb.CompleteTaskRequest(task_id=b.task_id, lease=b.lease, result=b'{"ok": 1}', seq=1),
        metadata=as_("token-worker-b"),
    )
    view = stub.DescribeInstance(
        pb.DescribeInstanceRequest(instance_id=instance_id), metadata=as_("token-client")
    )
    assert view.status == pb.InstanceStatus.COMPLETED and view.context == b'{"ok":1}'


def test_a_worker_credential_reports_in_batches_on_its_own_queue(secured):
    _, stub, _ = secured
    instance_id = start(stub)
    a = poll(stub, "token-worker-a", "qa")
    reply = stub.ReportBatch(
        pb.ReportBatchRequest(reports=[pb.TaskReport(advance=run_a(a))]),
        metadata=as_("token-worker-a"),
        timeout=30,
    )
    (answer,) = reply.answers
    assert answer.WhichOneof("answer") == "advance", answer
    assert poll(stub, "token-worker-b", "qb").instance_id == instance_id


def test_a_batch_cannot_carry_steps_of_another_queue(secured):
    _, stub, _ = secured
    start(stub)
    a = poll(stub, "token-worker-a", "qa")
    batch = pb.AdvanceRunRequest(
        task_id=a.task_id,
        lease=a.lease,
        steps=[
            pb.StepResult(node_id="a1", context=b"{}"),
            pb.StepResult(node_id="a2", context=b"{}"),
            pb.StepResult(node_id="b1", context=b'"forged"'),
        ],
        final=True,
        seq=1,
    )
    exc = denied(stub.AdvanceRun, batch, "token-worker-a")
    assert exc.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "step of queue 'qb'" in exc.details()


def _statements_on(engine, task_id: str, call) -> list[tuple[bool, str]]:
    """The statements `call()` sends that name `task_id` (read-only transaction?, SQL)."""
    seen: list[tuple[bool, str]] = []

    def spy(conn, cursor, statement, parameters, context, executemany):
        if task_id in repr(parameters):
            seen.append((bool(conn.get_execution_options().get("wiggle_read")), statement))

    event.listen(engine.db.sa, "before_cursor_execute", spy)
    try:
        call()
    finally:
        event.remove(engine.db.sa, "before_cursor_execute", spy)
    return seen


def test_a_worker_credentials_report_costs_no_extra_read(secured, engine):
    """The queue is checked inside the report's own transaction: a report under a worker
    credential sends exactly the statements an admin's does, and no read of its own."""
    _, stub, _ = secured
    counted = {}
    for token in ("token-worker-a", "token-admin"):
        start(stub)
        task = poll(stub, token, "qa")
        call = functools.partial(stub.AdvanceRun, run_a(task), metadata=as_(token), timeout=30)
        counted[token] = _statements_on(engine, task.task_id, call)
    worker, admin = counted["token-worker-a"], counted["token-admin"]
    assert [read for read, _ in worker] == [False] * len(worker), worker
    assert len(worker) == len(admin), (worker, admin)


def test_what_a_client_may_and_may_not_do(secured):
    server, stub, _ = secured
    instance_id = start(stub)
    with Client(server.address, token="token-client", retry_for=0) as client:
        assert client.describe(instance_id).status == "RUNNING"
        assert client.get_definition("two").name == "two"
        with pytest.raises(errors.PermissionDenied):
            client.deploy(TWO_QUEUES)
        with pytest.raises(errors.PermissionDenied):
            client.cancel(instance_id)
    assert (
        denied(
            stub.PollTasks, pb.PollTasksRequest(worker_id="w", queues=["qa"]), "token-client"
        ).code()
        is grpc.StatusCode.PERMISSION_DENIED
    )
    eager = pb.StartInstanceRequest(flow="two")
    eager.eager.worker_id = "w"
    eager.eager.queues.append("qa")
    assert denied(stub.StartInstance, eager, "token-client").code() is (
        grpc.StatusCode.PERMISSION_DENIED
    )
    # A worker credential reads nothing of the instances.
    exc = denied(
        stub.DescribeInstance, pb.DescribeInstanceRequest(instance_id=instance_id), "token-worker-a"
    )
    assert exc.code() is grpc.StatusCode.PERMISSION_DENIED
    with Client(server.address, token="token-admin", retry_for=0) as admin:
        assert admin.cancel(instance_id) == "CANCELLED"


def test_unknown_and_missing_tokens_are_unauthenticated(secured):
    _, stub, _ = secured
    for metadata in (as_("nope"), (("authorization", "token-admin"),), ()):
        with pytest.raises(grpc.RpcError) as exc:
            stub.ListInstances(pb.ListInstancesRequest(), metadata=metadata, timeout=30)
        assert exc.value.code() is grpc.StatusCode.UNAUTHENTICATED
        assert code(exc.value) == "UNAUTHENTICATED"


def _retry_until(fn, what: str, timeout: float = 15.0):
    """Call `fn` until it stops raising: the server re-reads its credentials on its own."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not seen within {timeout} s") from None
            time.sleep(0.1)


def test_the_file_is_reloaded_without_a_restart(secured, caplog):
    _, stub, path = secured
    request = pb.PollTasksRequest(worker_id="w", queues=["qc"], wait_ms=0)
    assert denied(stub.PollTasks, request, "token-new").code() is grpc.StatusCode.UNAUTHENTICATED
    text = path.read_text()
    path.write_text(
        text
        + '\n[[credential]]\nname = "new"\nscopes = ["worker:qc"]\n'
        + f'token_sha256 = "{token_digest("token-new")}"\n'
    )
    _retry_until(lambda: stub.PollTasks(request, metadata=as_("token-new"), timeout=30), "reload")

    # A broken file keeps the credentials as they were (and the log says why).
    caplog.set_level(logging.ERROR, logger="wiggle.server")
    path.write_text(text + "\n[[credential]]\nname = 'broken'\nscopes = ['wizard']\n")

    def broken_file_seen() -> None:
        stub.PollTasks(request, metadata=as_("token-new"), timeout=30)
        if not any("keeping the current credentials" in r.getMessage() for r in caplog.records):
            raise grpc.RpcError()

    _retry_until(broken_file_seen, "the broken file")
    stub.ListInstances(pb.ListInstancesRequest(), metadata=as_("token-admin"), timeout=30)

    # Taking a credential out revokes it.
    path.write_text(text)

    def refused_now() -> None:
        try:
            stub.PollTasks(request, metadata=as_("token-new"), timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() is grpc.StatusCode.UNAUTHENTICATED
            return
        raise grpc.RpcError()

    _retry_until(refused_now, "revocation")


def test_one_shared_token_still_works_as_admin(engine, start_server, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    server = start_server(engine, token_file=token_file)
    with Client(server.address, token="s3cret", retry_for=0) as client:
        assert client.deploy(TWO_QUEUES).name == "two"
        started = client.start("two", {})
        assert client.cancel(started.instance_id) == "CANCELLED"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[[credential]]\nname = 'x'\nscopes = ['wizard']\ntoken_sha256 = '" + "0" * 64 + "'\n",
            "unknown scope 'wizard'",
        ),
        ("[[credential]]\nname = 'x'\nscopes = ['client']\n", "needs a token"),
        (
            "[[credential]]\nname = 'x'\nscopes = ['client']\ntoken_file = 'missing'\n",
            "cannot read token file",
        ),
        ("[[credential]]\nname = 'x'\nscopes = ['client']\ntoken_sha256 = 'abc'\n", "64"),
        ("[[credential]\n", "not valid TOML"),
        ("[[credential]]\nname = 'x'\nscopes = ['client']\ntoken = 'plain'\n", "unknown key"),
        (
            "[[credential]]\nname = 'x'\nscopes = ['person']\ngroups = 'finance'\n"
            "token_sha256 = '" + "0" * 64 + "'\n",
            "`groups` must be a list of non-empty strings",
        ),
    ],
)
def test_a_bad_credentials_file_stops_the_server_from_starting(tmp_path, text, message):
    path = tmp_path / "credentials.toml"
    path.write_text(text)
    config = ServerConfig(address="127.0.0.1:0", credentials=path)
    with pytest.raises(errors.WiggleError, match=message):
        config.check()


def test_a_public_address_needs_credentials(tmp_path: Path):
    with pytest.raises(errors.WiggleError, match="without credentials"):
        ServerConfig(address="0.0.0.0:7233").check()
    (tmp_path / "c.toml").write_text("")
    ServerConfig(address="0.0.0.0:7233", credentials=tmp_path / "c.toml").check()
