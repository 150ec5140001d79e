"""The WiggleAdmin service over a real loopback server: retry, reset, bulk actions and search,
through `wiggle.client.Client`; refusals as their classes and status codes; who may call it."""

from __future__ import annotations

import subprocess
import sys
import time

import grpc
import pytest

from wiggle import errors
from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle._proto.wiggle.v1 import admin_pb2_grpc as apb_grpc
from wiggle.client import Client
from wiggle.server._credentials import token_digest

pytestmark = pytest.mark.timeout(120)

ORDER = b"""
wiggle: 1
name: order
search:
  order: /order_id
  total: {pointer: /total, type: number}
steps:
  - task: charge
  - task: ship
"""


def _serve_once(client: Client, engine, activity_results) -> None:
    """Play a worker for every READY task: `activity_results(task)` returns the result, or an
    Exception to fail it (non-retryably)."""
    from wiggle.engine import StepFailure

    for task in engine.poll(["default"], "test-worker", 100):
        out = activity_results(task)
        if isinstance(out, Exception):
            engine.fail(task.task_id, task.lease, StepFailure(str(out), non_retryable=True))
        else:
            engine.complete(task.task_id, task.lease, out)


def _until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.01)


@pytest.fixture
def stack(engine, start_server):
    server = start_server(engine)
    with Client(server.address, retry_for=0) as client:
        client.deploy(ORDER)
        yield client, engine


def test_retry_reset_and_search_through_the_client(stack):
    client, engine = stack
    iid = client.start("order", {"order_id": "A-1", "total": 10}, instance_id="o-1").instance_id
    broken = [True]

    def act(task):
        if task.activity == "charge" and broken[0]:
            return ValueError("card declined")
        return {**task.input, task.activity: True}

    _serve_once(client, engine, act)
    assert client.describe(iid).status == "FAILED"
    assert [i.instance_id for i in client.list_instances(where=["order=A-1"])] == [iid]
    assert [i.instance_id for i in client.list_instances(where=["reason~declined"])] == [iid]
    (listed,) = client.list_instances(where=["total>=10"])
    assert listed.search == {"order": "A-1", "total": 10}
    assert listed.input == {"order_id": "A-1", "total": 10}
    broken[0] = False
    repaired = client.retry(iid)
    assert (repaired.status, repaired.nodes) == ("RUNNING", ["charge"])
    for _ in range(2):
        _serve_once(client, engine, act)
    assert client.describe(iid).status == "COMPLETED"
    reset = client.reset(iid, "ship")
    assert reset.status == "RUNNING"
    _serve_once(client, engine, act)
    done = client.describe(iid, events=True)
    assert done.status == "COMPLETED"
    assert [e.kind for e in done.events].count("instance_reset") == 1


def test_refusals_arrive_as_their_classes(stack):
    client, _engine = stack
    iid = client.start("order", {"order_id": "A-2"}).instance_id
    with pytest.raises(errors.RepairRefused, match="only a FAILED instance can be retried"):
        client.retry(iid)
    with pytest.raises(errors.InvalidRequest, match="never reached node 'ship'"):
        client.reset(iid, "ship")
    with pytest.raises(errors.InvalidRequest, match="has no node 'nope'"):
        client.reset(iid, "nope")
    with pytest.raises(errors.InstanceNotFound):
        client.retry("no-such-instance")
    with pytest.raises(errors.BatchNotFound):
        client.get_batch("no-such-batch")
    with pytest.raises(errors.InvalidRequest, match="matches no instance"):
        client.start_bulk("retry", ["status=FAILED"])
    with pytest.raises(errors.InvalidRequest, match="is not FIELD OP VALUE"):
        client.list_instances(where=["order"])
    with pytest.raises(errors.InvalidRequest, match="nor a search attribute"):
        client.preview_bulk(["colour=red"])
    with pytest.raises(errors.InvalidRequest, match="rate"):
        client.start_bulk("cancel", ["flow=order"], rate_per_s=-1)
    # A preview for an action refuses what starting it would (it counted the matches before).
    with pytest.raises(errors.InvalidRequest, match=r"can be reset to 'nope'.*has no node"):
        client.preview_bulk(["flow=order"], "reset", {"node": "nope"})
    assert client.preview_bulk(["flow=order"], "reset", {"node": "ship"}).matched == 1


def test_the_cli_preview_of_a_bulk_reset_refuses_a_node_no_instance_could_take(stack):
    client, _engine = stack
    client.start("order", {"order_id": "A-3"})
    address = client.address
    cli = [sys.executable, "-m", "wiggle", "reset", "--filter", "flow=order", "--address", address]
    bad = subprocess.run([*cli, "--to", "nope"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "no instance the filter matches can be reset to 'nope'" in bad.stderr
    good = subprocess.run([*cli, "--to", "ship"], capture_output=True, text=True, timeout=60)
    assert good.returncode == 0, good.stderr
    assert "reset to ship: the filter matches 1 instance(s)" in good.stdout


def test_the_status_codes_of_repair_refusals(stack, engine):
    client, _ = stack
    iid = client.start("order", {}).instance_id
    channel = grpc.insecure_channel(client.address)
    admin = apb_grpc.WiggleAdminStub(channel)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            admin.RetryInstance(apb.RetryInstanceRequest(instance_id=iid))
        assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError) as missing:
            admin.GetBatch(apb.GetBatchRequest(batch_id="nope"))
        assert missing.value.code() is grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as bad:
            admin.ResetInstance(apb.ResetInstanceRequest(instance_id=iid, node_id="x" * 300))
        assert bad.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    finally:
        channel.close()


def test_start_with_a_taken_id_is_a_conflict_unless_it_is_the_same_start(stack):
    client, _ = stack
    first = client.start("order", {"order_id": "A-3"}, instance_id="same")
    again = client.start("order", {"order_id": "A-3"}, instance_id="same")
    assert (first.created, again.created) == (True, False)
    with pytest.raises(errors.InstanceExists, match="started with another input"):
        client.start("order", {"order_id": "A-4"}, instance_id="same")
    client.deploy(b"wiggle: 1\nname: other\nsteps:\n  - task: x\n")
    with pytest.raises(errors.InstanceExists, match="belongs to an instance of flow 'order'"):
        client.start("other", {"order_id": "A-3"}, instance_id="same")


def test_a_cancelled_instance_keeps_the_context_it_reached(stack, engine):
    client, _ = stack
    iid = client.start("order", {"order_id": "A-5"}).instance_id
    for task in engine.poll(["default"], "w", 1):
        engine.complete(task.task_id, task.lease, {"order_id": "A-5", "charged": True})
    client.cancel(iid, "customer asked")
    view = client.describe(iid)
    assert view.status == "CANCELLED"
    assert view.context == {"order_id": "A-5", "charged": True}
    assert view.input == {"order_id": "A-5"}


def test_a_bulk_action_over_the_wire_records_who_asked(stack):
    client, engine = stack
    for n in range(3):
        client.start("order", {"order_id": f"B-{n}"})
    preview = client.preview_bulk(["flow=order", "order~B-"])
    assert (preview.matched, preview.by_status["RUNNING"]) == (3, 3)
    batch = client.start_bulk(
        "cancel",
        ["flow=order", "order~B-"],
        params={"reason": "test"},
        rate_per_s=1000,
        requested_by="alice",
    )
    assert batch.requested_by == "alice"

    def finished() -> bool:
        engine.tick()
        return client.get_batch(batch.batch_id).state == "DONE"

    _until(finished)
    done = client.get_batch(batch.batch_id)
    assert (done.done, done.skipped, done.failed) == (3, 0, 0)
    assert [b.batch_id for b in client.list_batches()] == [batch.batch_id]
    assert client.list_instances(where=["status=CANCELLED"]).__len__() == 3


CREDENTIALS = """
[[credential]]
name = "ops"
scopes = ["operator"]
token_sha256 = "{operator}"

[[credential]]
name = "frontend"
scopes = ["client"]
token_sha256 = "{client}"

[[credential]]
name = "worker"
scopes = ["worker:*"]
token_sha256 = "{worker}"

[[credential]]
name = "root"
scopes = ["admin"]
token_sha256 = "{admin}"
"""


def test_only_admin_and_operator_credentials_may_repair(engine, start_server, tmp_path):
    path = tmp_path / "credentials.toml"
    path.write_text(
        CREDENTIALS.format(
            operator=token_digest("t-operator"),
            client=token_digest("t-client"),
            worker=token_digest("t-worker"),
            admin=token_digest("t-admin"),
        )
    )
    server = start_server(engine, credentials=path)
    with Client(server.address, token="t-admin", retry_for=0) as root:
        root.deploy(ORDER)
        iid = root.start("order", {"order_id": "C-1"}).instance_id
    for token in ("t-client", "t-worker"):
        with Client(server.address, token=token, retry_for=0) as c:
            with pytest.raises(errors.PermissionDenied):
                c.retry(iid)
            with pytest.raises(errors.PermissionDenied):
                c.preview_bulk(["flow=order"])
            with pytest.raises(errors.PermissionDenied):
                c.start_bulk("cancel", ["flow=order"])
    with Client(server.address, token="t-operator", retry_for=0) as ops:
        with pytest.raises(errors.RepairRefused):
            ops.retry(iid)  # allowed to ask; refused only by the instance's state
        assert ops.preview_bulk(["flow=order"]).matched == 1
        batch = ops.start_bulk("cancel", ["flow=order"], requested_by="says someone else")
        assert batch.requested_by == "credential ops"  # the credential wins over the claim
        assert ops.describe(iid).status in ("RUNNING", "CANCELLED")
        with pytest.raises(errors.PermissionDenied):
            ops.deploy(ORDER)  # an operator repairs; it does not deploy
        with pytest.raises(errors.PermissionDenied):
            ops.start("order", {})
