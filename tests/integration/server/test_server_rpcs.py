"""Every RPC over a real loopback socket and a real Engine (SQLite and PostgreSQL), through the
raw stub where the wire matters and through `Client` where the typed surface does."""

from __future__ import annotations

import time

import grpc
import orjson
import pytest

from wiggle import errors
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle.client import Definition, Deployment, Instance, InstanceStatus, Started
from wiggle.compiler import load_flow


def _code(exc: grpc.RpcError) -> str:
    return dict(exc.trailing_metadata() or ()).get("wiggle-error-code", "")


def _poll(stub, queues=("default",), max_tasks=10, wait_ms=5_000):
    request = pb.PollTasksRequest(
        worker_id="w1", queues=list(queues), max_tasks=max_tasks, wait_ms=wait_ms
    )
    return list(stub.PollTasks(request, timeout=30).tasks)


# -- definitions --------------------------------------------------------------------------------


def test_register_and_get_definition(client, stub, flows):
    first = client.deploy(flows["greet"])
    assert isinstance(first, Deployment)
    assert first.name == "greet" and first.version.startswith("sha256:") and first.created
    again = client.deploy(load_flow(flows["greet"]))  # the compiled form: same version
    assert again == Deployment("greet", first.version, False)

    definition = client.get_definition("greet")
    assert isinstance(definition, Definition)
    assert definition.version == first.version
    assert definition.canonical == load_flow(flows["greet"]).canonical
    assert definition.graph["name"] == "greet"
    assert client.get_definition("greet", first.version).version == first.version

    reply = stub.RegisterDefinition(pb.RegisterDefinitionRequest(graph=definition.canonical))
    assert (reply.name, reply.version, reply.created) == ("greet", first.version, False)


def test_deploy_a_file(client, flows, tmp_path):
    path = tmp_path / "greet.yaml"
    path.write_bytes(flows["greet"])
    assert client.deploy(path).name == "greet"
    assert client.deploy(str(path)).created is False


def test_unknown_definition_is_not_found(client, stub):
    with pytest.raises(grpc.RpcError) as exc:
        stub.GetDefinition(pb.GetDefinitionRequest(name="nope"))
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND
    assert _code(exc.value) == "DEFINITION_NOT_FOUND"
    with pytest.raises(errors.DefinitionNotFound) as typed:
        client.get_definition("nope")
    assert typed.value.name == "nope"


def test_bad_flow_is_invalid_argument_with_every_diagnostic(client, stub):
    bad = b"wiggle: 1\nname: Bad Name\nsteps: []\n"
    with pytest.raises(grpc.RpcError) as exc:
        stub.RegisterDefinition(pb.RegisterDefinitionRequest(source=bad, filename="bad.yaml"))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _code(exc.value) == "FLOW_INVALID"
    with pytest.raises(errors.FlowError) as typed:
        client.deploy(bad, filename="bad.yaml")
    assert typed.value.diagnostics
    assert all(d.file == "bad.yaml" for d in typed.value.diagnostics)
    assert all(d.line > 0 for d in typed.value.diagnostics)


def test_register_needs_a_definition(stub):
    with pytest.raises(grpc.RpcError) as exc:
        stub.RegisterDefinition(pb.RegisterDefinitionRequest())
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT


# -- instances ----------------------------------------------------------------------------------


def test_start_describe_and_list(client, flows):
    client.deploy(flows["greet"])
    started = client.start("greet", {"name": "ada"}, instance_id="order-1")
    assert isinstance(started, Started)
    assert started == Started("order-1", started.version, True, False)
    assert client.start("greet", {"name": "ada"}, instance_id="order-1").created is False

    view = client.describe("order-1", events=True)
    assert isinstance(view, Instance)
    assert view.status is InstanceStatus.RUNNING
    assert view.flow == "greet" and view.context == {"name": "ada"}
    assert view.execution_mode == "SERVER"
    assert [t.node_id for t in view.tokens if t.state == "READY"] == ["hello"]

    client.start("greet", {"name": "bob"}, instance_id="order-2")
    listed = client.list_instances(flow="greet")
    assert {i.instance_id for i in listed} == {"order-1", "order-2"}
    assert listed[0].tokens == [] and listed[0].events == []
    page = client.list_instances(flow="greet", limit=1)
    assert len(page) == 1 and page.next_page_token
    rest = client.list_instances(flow="greet", limit=1, page_token=page.next_page_token)
    assert [i.instance_id for i in [*page, *rest]] == [i.instance_id for i in listed]
    assert rest.next_page_token == ""
    assert client.list_instances(status="COMPLETED") == []


def test_start_errors(client, stub, flows):
    client.deploy(flows["greet"])
    with pytest.raises(errors.DefinitionNotFound):
        client.start("nope", {})
    with pytest.raises(grpc.RpcError) as exc:
        stub.StartInstance(pb.StartInstanceRequest(flow="nope"))
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as exc:
        stub.StartInstance(pb.StartInstanceRequest(flow="greet", input=b'{"name": '))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _code(exc.value) == "INVALID_REQUEST"
    with pytest.raises(grpc.RpcError) as exc:
        stub.StartInstance(pb.StartInstanceRequest(flow="greet", input=b'{"nom": 1}'))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _code(exc.value) == "INPUT_REJECTED"
    with pytest.raises(errors.InputRejected):
        client.start("greet", [1, 2])


def test_unknown_instance_is_not_found(client, stub):
    for call in (
        lambda: client.describe("ghost"),
        lambda: client.signal("ghost", "go"),
        lambda: client.cancel("ghost"),
    ):
        with pytest.raises(errors.InstanceNotFound) as typed:
            call()
        assert typed.value.instance_id == "ghost"
    with pytest.raises(grpc.RpcError) as exc:
        stub.DescribeInstance(pb.DescribeInstanceRequest(instance_id="ghost"))
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND
    assert _code(exc.value) == "INSTANCE_NOT_FOUND"


def test_signal_is_buffered_then_delivered(client, stub, flows):
    client.deploy(flows["gate"])
    early = client.start("gate", {"n": 1}).instance_id
    assert client.signal(early, "go", {"ok": True}) in (True, False)
    late = client.start("gate", {"n": 2}).instance_id
    # The start already parked the token at the await: the signal is taken at once.
    assert client.signal(late, "go") is True
    tasks = _poll(stub)
    assert sorted(orjson.loads(t.input)["n"] for t in tasks) == [1, 2]


def test_a_misspelled_signal_is_refused_naming_what_the_instance_awaits(client, stub, flows):
    """The user story: a signal name no await takes was buffered with exit 0 and the instance
    waited out its deadline. Now it is refused, and nothing is stored."""
    client.deploy(flows["gate"])
    iid = client.start("gate", None).instance_id
    with pytest.raises(errors.SignalNotAwaited) as typed:
        client.signal(iid, "Go", {"ok": True})
    assert typed.value.awaited == ("go",) and typed.value.name == "Go"
    assert "can never receive signal 'Go': it awaits 'go'" in str(typed.value)
    with pytest.raises(grpc.RpcError) as exc:
        stub.SignalInstance(pb.SignalInstanceRequest(instance_id=iid, name="Go"))
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _code(exc.value) == "SIGNAL_NOT_AWAITED"
    kinds = [e.kind for e in client.describe(iid, events=True).events]
    assert "signal_received" not in kinds
    assert client.signal(iid, "go") is True


def test_cancel(client, flows):
    client.deploy(flows["gate"])
    iid = client.start("gate", None).instance_id
    assert client.cancel(iid, "no longer needed") is InstanceStatus.CANCELLED
    view = client.describe(iid)
    assert view.status is InstanceStatus.CANCELLED
    assert "no longer needed" in view.reason
    with pytest.raises(errors.InstanceNotRunning) as exc:
        client.signal(iid, "go")
    assert exc.value.instance_id == iid


# -- tasks ---------------------------------------------------------------------------------------


def test_poll_complete_to_the_end(client, stub, flows):
    client.deploy(flows["greet"])
    iid = client.start("greet", {"name": "ada"}).instance_id
    (task,) = _poll(stub)
    assert (task.instance_id, task.node_id, task.activity, task.attempt) == (
        iid,
        "hello",
        "hello",
        1,
    )
    assert orjson.loads(task.input) == {"name": "ada"}
    assert task.execution_mode == pb.SERVER and task.lease and task.lease_expires_at_ms > 0
    reply = stub.CompleteTask(
        pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b'{"step": 1}')
    )
    assert reply.instance_status == pb.RUNNING
    (task,) = _poll(stub)
    assert task.node_id == "bye" and orjson.loads(task.input) == {"step": 1}
    stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b"2"))
    view = client.wait(iid, timeout=10, events=True)
    assert view.status is InstanceStatus.COMPLETED and view.context == 2
    kinds = [e.kind for e in view.events]
    assert "step_completed" in kinds


def test_many_tasks_per_poll(client, stub, flows):
    client.deploy(flows["greet"])
    for i in range(7):
        client.start("greet", {"name": f"n{i}"})
    first = _poll(stub, max_tasks=5)
    assert len(first) == 5
    assert len(_poll(stub, max_tasks=5)) == 2


def test_stale_lease_is_failed_precondition(client, stub, flows):
    client.deploy(flows["greet"])
    client.start("greet", {"name": "ada"})
    (task,) = _poll(stub)
    for call in (
        lambda: stub.CompleteTask(
            pb.CompleteTaskRequest(task_id=task.task_id, lease="not-the-lease", result=b"1")
        ),
        lambda: stub.Heartbeat(pb.HeartbeatRequest(task_id=task.task_id, lease="nope")),
        lambda: stub.FailTask(
            pb.FailTaskRequest(task_id=task.task_id, lease="nope", failure=pb.StepFailure())
        ),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            call()
        assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert _code(exc.value) == "STALE_LEASE"
    # The real lease still works, once; then it is stale too.
    ok = pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease, result=b"{}")
    stub.CompleteTask(ok)
    with pytest.raises(grpc.RpcError) as exc:
        stub.CompleteTask(ok)
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION


def test_heartbeat_and_fail(client, stub, flows):
    client.deploy(flows["greet"])
    iid = client.start("greet", {"name": "ada"}).instance_id
    (task,) = _poll(stub)
    beat = stub.Heartbeat(pb.HeartbeatRequest(task_id=task.task_id, lease=task.lease))
    assert (
        beat.instance_status == pb.RUNNING and beat.lease_expires_at_ms >= task.lease_expires_at_ms
    )
    failure = pb.StepFailure(message="card stolen", non_retryable=True, error_type="NonRetryable")
    reply = stub.FailTask(
        pb.FailTaskRequest(task_id=task.task_id, lease=task.lease, failure=failure)
    )
    assert reply.instance_status == pb.FAILED
    view = client.describe(iid)
    assert view.status is InstanceStatus.FAILED and "card stolen" in view.reason


def test_advance_run(client, stub, flows):
    client.deploy(flows["greet"])
    iid = client.start("greet", {"name": "ada"}).instance_id
    (task,) = _poll(stub)
    steps = [
        pb.StepResult(node_id="hello", context=b'{"a": 1}'),
        pb.StepResult(node_id="bye", context=b'{"a": 2}'),
    ]
    reply = stub.AdvanceRun(
        pb.AdvanceRunRequest(
            task_id=task.task_id, lease=task.lease, steps=steps, final=True, handback_reason="END"
        )
    )
    assert reply.instance_status == pb.COMPLETED and not reply.keep_going
    assert client.describe(iid).context == {"a": 2}


def test_advance_run_errors(client, stub, flows):
    client.deploy(flows["greet"])
    client.start("greet", {"name": "ada"})
    (task,) = _poll(stub)

    def advance(*steps, lease=task.lease):
        return stub.AdvanceRun(
            pb.AdvanceRunRequest(task_id=task.task_id, lease=lease, steps=list(steps), final=True)
        )

    for steps, code in (
        ([pb.StepResult(node_id="hello", context=b"{bad")], "INVALID_REQUEST"),
        ([pb.StepResult(node_id="hello")], "INVALID_REQUEST"),
        ([pb.StepResult(node_id="elsewhere", context=b"{}")], "WRONG_PATH"),
    ):
        with pytest.raises(grpc.RpcError) as exc:
            advance(*steps)
        assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT, steps
        assert _code(exc.value) == code
    with pytest.raises(grpc.RpcError) as exc:
        advance(pb.StepResult(node_id="hello", context=b"{}"), lease="nope")
    assert _code(exc.value) == "STALE_LEASE"


def test_oversized_start_input(engine, start_server, flows):
    from wiggle.client import Client

    server = start_server(engine, max_payload_bytes=500)
    with Client(server.address) as client:
        client.deploy(flows["greet"])
        with pytest.raises(errors.PayloadTooLarge):
            client.start("greet", {"name": "x" * 1000})


def test_long_poll_wakes_on_a_start(client, stub, flows):
    import threading

    client.deploy(flows["greet"])
    got: list[list[pb.Task]] = []
    poller = threading.Thread(target=lambda: got.append(_poll(stub, wait_ms=20_000)))
    began = time.monotonic()
    poller.start()
    # The server records a polling worker as its long poll begins: then start the instance.
    deadline = time.monotonic() + 10
    while "w1" not in [w.worker_id for w in client.list_workers()[0]]:
        assert time.monotonic() < deadline, "the poll never reached the server"
        time.sleep(0.01)
    client.start("greet", {"name": "late"})
    poller.join(30)
    assert [len(tasks) for tasks in got] == [1]
    assert time.monotonic() - began < 10  # woken by the start, well before the 20 s wait


# -- report identity, release, EndPolls ---------------------------------------------------------


def test_a_resent_report_gets_the_first_answer_over_the_wire(client, stub, flows):
    client.deploy(flows["greet"])
    started = client.start("greet", {"name": "x"})
    (task,) = _poll(stub)
    assert task.server_now_ms > 0
    assert task.lease_expires_at_ms - task.server_now_ms == task.timeout_ms
    assert task.max_payload_bytes > 0 and task.max_request_bytes > task.max_payload_bytes
    step = pb.StepResult(node_id="hello", context=b'{"name": "x", "hi": 1}')
    request = pb.AdvanceRunRequest(task_id=task.task_id, lease=task.lease, steps=[step], seq=1)
    first = stub.AdvanceRun(request)
    again = stub.AdvanceRun(request)  # as if the first answer had been lost
    assert first.keep_going and again.keep_going
    assert again.lease_expires_at_ms == first.lease_expires_at_ms
    assert again.server_now_ms >= first.server_now_ms > 0
    view = client.describe(started.instance_id, events=True)
    assert [e.node_id for e in view.events if e.kind == "step_completed"] == ["hello"]
    with pytest.raises(grpc.RpcError) as exc:
        stub.AdvanceRun(
            pb.AdvanceRunRequest(task_id=task.task_id, lease=task.lease, steps=[step], seq=5)
        )
    assert exc.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert _code(exc.value) == "REPORT_OUT_OF_ORDER"


def test_release_task_makes_the_task_ready_again_with_the_same_attempt(client, stub, flows):
    client.deploy(flows["greet"])
    client.start("greet", {"name": "x"})
    (task,) = _poll(stub)
    release = pb.ReleaseTaskRequest(
        task_id=task.task_id, lease=task.lease, seq=1, reason="shutdown"
    )
    assert stub.ReleaseTask(release).instance_status == pb.RUNNING
    assert stub.ReleaseTask(release).instance_status == pb.RUNNING  # a resend is harmless
    (again,) = _poll(stub)
    assert (again.task_id, again.attempt) == (task.task_id, 1)
    assert again.lease != task.lease


def test_end_polls_ends_a_workers_open_poll_at_once(stub, server):
    request = pb.PollTasksRequest(
        worker_id="draining", queues=["default"], max_tasks=1, wait_ms=30_000
    )
    future = stub.PollTasks.future(request, timeout=60)
    deadline = time.monotonic() + 10
    ended = 0
    while not ended and time.monotonic() < deadline:  # until the poll is open on the server
        ended = stub.EndPolls(pb.EndPollsRequest(worker_id="draining")).ended
    assert ended == 1
    assert list(future.result(timeout=5).tasks) == []
    assert stub.EndPolls(pb.EndPollsRequest(worker_id="draining")).ended == 0


def test_a_poll_takes_only_tasks_of_the_activities_it_lists(client, stub, flows):
    client.deploy(flows["greet"])
    client.start("greet", {"name": "x"})
    request = pb.PollTasksRequest(
        worker_id="w1", queues=["default"], max_tasks=5, wait_ms=0, activities=["bye"]
    )
    assert list(stub.PollTasks(request).tasks) == []
    request.activities.append("hello")
    (task,) = stub.PollTasks(request).tasks
    assert task.activity == "hello"


def test_report_batch_answers_each_report_in_order(client, stub, flows):
    client.deploy(flows["greet"])
    for name in ("a", "b"):
        client.start("greet", {"name": name})
    first, second = _poll(stub)
    done = pb.CompleteTaskRequest(
        task_id=first.task_id, lease=first.lease, result=b'{"name": "a", "hi": 1}', seq=1
    )
    advance = pb.AdvanceRunRequest(
        task_id=second.task_id,
        lease=second.lease,
        seq=1,
        steps=[pb.StepResult(node_id="hello", context=b'{"name": "b"}')],
    )
    stale = pb.FailTaskRequest(task_id=first.task_id, lease="nope", seq=1)
    request = pb.ReportBatchRequest(
        reports=[
            pb.TaskReport(complete=done),
            pb.TaskReport(advance=advance),
            pb.TaskReport(fail=stale),
            pb.TaskReport(),
            pb.TaskReport(complete=done),  # the same report twice: answered, applied once
        ]
    )
    answers = list(stub.ReportBatch(request).answers)
    assert [a.WhichOneof("answer") for a in answers] == [
        "task",
        "advance",
        "error",
        "error",
        "task",
    ]
    assert answers[0].task.instance_status == pb.RUNNING
    assert answers[1].advance.keep_going and answers[1].advance.server_now_ms > 0
    assert answers[2].error.error_code == "STALE_LEASE"
    assert answers[2].error.status_code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert answers[3].error.error_code == "INVALID_REQUEST"
    assert answers[4].task.instance_status == pb.RUNNING
    again = list(stub.ReportBatch(pb.ReportBatchRequest(reports=request.reports[:2])).answers)
    assert [a.WhichOneof("answer") for a in again] == ["task", "advance"]  # a resent batch
    view = client.describe(first.instance_id, events=True)
    assert [e.node_id for e in view.events if e.kind == "step_completed"] == ["hello"]
