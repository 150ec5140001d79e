"""Schedules through the WiggleAdmin service over a real loopback server (docs/schedules.md,
docs/admin-api.md): apply, list, describe, pause, unpause, trigger and delete through
`wiggle.client.Client`; refusals as their classes and status codes; a schedule firing on the
server's own leader; who may call them."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import grpc
import pytest

from tests.hourly import minute_away
from tests.waiting import wait_until
from wiggle import errors
from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle._proto.wiggle.v1 import admin_pb2_grpc as apb_grpc
from wiggle.client import Client
from wiggle.server._credentials import token_digest
from wiggle.wire import ERROR_CODE_KEY

pytestmark = pytest.mark.timeout(120)

#: Waits for the server's own ticker: a few seconds at most, never a claim about speed.
FIRE_WAIT_S = 10.0

GATE = b"wiggle: 1\nname: gate\ninput: {type: object, required: [kind]}\nsteps:\n  - await: go\n"


def _hourly(minute: int) -> bytes:
    return f"""\
schedule: hourly
description: every hour
flow: gate
time_zone: Europe/Berlin
cron: "{minute} * * * *"
input: {{kind: hourly}}
""".encode()


@pytest.fixture
def minute() -> int:
    return minute_away(20)


@pytest.fixture
def hourly(minute: int) -> bytes:
    return _hourly(minute)


@pytest.fixture
def client(engine, start_server):
    server = start_server(engine)
    with Client(server.address, retry_for=0) as c:
        c.deploy(GATE)
        yield c


def _reason(exc: grpc.RpcError) -> str:
    return dict(exc.trailing_metadata() or ()).get(ERROR_CODE_KEY, "")


def test_apply_creates_then_answers_unchanged_then_the_fields_that_changed(client, minute, hourly):
    created = client.apply_schedule(hourly, filename="hourly.schedule.yaml")
    assert (created.name, created.created, created.changed) == ("hourly", True, [])
    assert created.next_due_ms is not None and created.next_due_ms % 3_600_000 == minute * 60_000
    # The next due time in the schedule's zone: Berlin is an hour or two ahead of UTC.
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT\d\d:{minute:02d}:00\+0[12]:00", created.next_due)
    local = datetime.fromisoformat(created.next_due)
    assert int(local.timestamp() * 1000) == created.next_due_ms

    again = client.apply_schedule(hourly, filename="hourly.schedule.yaml")
    assert (again.created, again.changed, again.unchanged) == (False, [], True)

    half = (minute + 30) % 60
    edited = _hourly(half).replace(b"hourly}", b"half}")
    changed = client.apply_schedule(edited)
    assert (changed.created, changed.changed) == (False, ["cron", "input"])
    assert changed.next_due_ms is not None and changed.next_due_ms % 3_600_000 == half * 60_000


def test_a_document_with_two_errors_is_refused_with_both_positions(client, server_stub):
    bad = b'schedule: broken\nflow: gate\ncron: "61 * * * *"\ntime_zone: Mars/Olympus\n'
    with pytest.raises(errors.FlowError) as caught:
        client.apply_schedule(bad, filename="broken.schedule.yaml")
    where = [(d.file, d.line, d.column) for d in caught.value.diagnostics]
    assert where == [("broken.schedule.yaml", 3, 7), ("broken.schedule.yaml", 4, 12)]
    assert "bad minute" in str(caught.value) and "Mars/Olympus" in str(caught.value)
    # On the wire: INVALID_ARGUMENT, FLOW_INVALID, every position in the message.
    with pytest.raises(grpc.RpcError) as raw:
        server_stub.ApplySchedule(apb.ApplyScheduleRequest(source=bad, filename="b.yaml"))
    assert raw.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert _reason(raw.value) == "FLOW_INVALID"
    assert "b.yaml:3:7" in raw.value.details() and "b.yaml:4:12" in raw.value.details()
    assert client.list_schedules() == []


def test_a_schedule_of_an_unregistered_flow_is_refused(client, server_stub):
    orphan = b"schedule: orphan\nflow: nowhere\ninterval: {every: 1h}\n"
    with pytest.raises(errors.DefinitionNotFound, match="nowhere"):
        client.apply_schedule(orphan)
    with pytest.raises(grpc.RpcError) as raw:
        server_stub.ApplySchedule(apb.ApplyScheduleRequest(source=orphan))
    assert raw.value.code() is grpc.StatusCode.NOT_FOUND
    assert _reason(raw.value) == "DEFINITION_NOT_FOUND"
    # An input the flow refuses (`kind` is required) is refused too, before anything is stored.
    with pytest.raises(errors.InputRejected):
        client.apply_schedule(b"schedule: bare\nflow: gate\ninterval: {every: 1h}\n")
    assert client.list_schedules() == []


def test_list_describe_pause_unpause(client, minute, hourly):
    client.apply_schedule(hourly)
    client.apply_schedule(b"schedule: daily\nflow: gate\ncron: '@daily'\ninput: {kind: d}\n")
    listed = client.list_schedules("gate")
    assert [s.name for s in listed] == ["daily", "hourly"]  # by name
    assert client.list_schedules("other") == []
    assert listed[0].upcoming == [] and listed[0].recent == []  # describe's alone
    assert listed[1].next_due_ms is not None and listed[1].time_zone == "Europe/Berlin"

    view = client.describe_schedule("hourly")
    assert (view.flow, view.time_zone, view.paused, view.fired) == (
        "gate",
        "Europe/Berlin",
        False,
        0,
    )
    assert view.document["description"] == "every hour"
    assert view.digest.startswith("sha256:")
    assert len(view.upcoming) == 10
    assert all(re.fullmatch(rf".*T\d\d:{minute:02d}:00\+0[12]:00", at) for at in view.upcoming)
    assert len(client.describe_schedule("hourly", upcoming=3).upcoming) == 3

    paused = client.pause_schedule("hourly", "maintenance window")
    assert (paused.paused, paused.note, paused.next_due_ms, paused.upcoming) == (
        True,
        "maintenance window",
        None,
        [],
    )
    assert client.describe_schedule("hourly").note == "maintenance window"
    unpaused = client.unpause_schedule("hourly")
    assert (unpaused.paused, unpaused.note) == (False, "")
    assert unpaused.next_due_ms is not None and len(unpaused.upcoming) == 10


def test_trigger_starts_an_instance_named_after_the_schedule_and_the_time(client, hourly):
    client.apply_schedule(hourly)
    before = datetime.now(UTC).replace(microsecond=0)
    fire = client.trigger_schedule("hourly")
    assert (fire.outcome, fire.triggered, fire.count) == ("STARTED", True, 1)
    assert fire.instance_id is not None
    stamp = re.fullmatch(r"hourly-(\d{8}T\d{6}Z)", fire.instance_id)
    assert stamp is not None
    at = datetime.strptime(stamp.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert int(at.timestamp() * 1000) == fire.nominal_ms and at >= before
    instance = client.describe(fire.instance_id)
    assert (instance.flow, instance.status, instance.input) == (
        "gate",
        "RUNNING",
        {"kind": "hourly"},
    )
    view = client.describe_schedule("hourly")
    assert view.fired == 1 and view.running_instance_id == fire.instance_id
    assert view.recent[0].instance_id == fire.instance_id and view.recent[0].triggered


def test_delete_leaves_the_instances(client, hourly):
    client.apply_schedule(hourly)
    fire = client.trigger_schedule("hourly")
    client.delete_schedule("hourly")
    assert client.list_schedules() == []
    assert client.describe(fire.instance_id).status == "RUNNING"
    with pytest.raises(errors.ScheduleNotFound):
        client.delete_schedule("hourly")


@pytest.mark.parametrize(
    ("method", "request_"),
    [
        ("DescribeSchedule", apb.DescribeScheduleRequest(name="ghost")),
        ("PauseSchedule", apb.PauseScheduleRequest(name="ghost")),
        ("UnpauseSchedule", apb.UnpauseScheduleRequest(name="ghost")),
        ("TriggerSchedule", apb.TriggerScheduleRequest(name="ghost")),
        ("DeleteSchedule", apb.DeleteScheduleRequest(name="ghost")),
    ],
)
def test_an_unknown_schedule_is_not_found(client, server_stub, method, request_):
    with pytest.raises(grpc.RpcError) as raw:
        getattr(server_stub, method)(request_)
    assert raw.value.code() is grpc.StatusCode.NOT_FOUND
    assert _reason(raw.value) == "SCHEDULE_NOT_FOUND"
    assert "ghost" in raw.value.details()


def test_the_client_raises_schedule_not_found_with_the_name(client):
    with pytest.raises(errors.ScheduleNotFound) as caught:
        client.describe_schedule("ghost")
    assert caught.value.name == "ghost"
    assert isinstance(caught.value, errors.NotFound)
    assert str(caught.value) == "no schedule named 'ghost' (wiggle schedule list shows them)"


def test_requests_are_checked_at_the_edge(client, server_stub):
    with pytest.raises(errors.InvalidRequest, match="not a schedule's name"):
        client.describe_schedule("Not A Name")
    with pytest.raises(errors.InvalidRequest, match="needs the schedule document"):
        client.apply_schedule(b"")
    with pytest.raises(errors.InvalidRequest, match="note has at most"):
        client.pause_schedule("hourly", "x" * 2001)


def test_a_document_over_the_payload_limit_is_refused(engine, start_server, hourly):
    server = start_server(engine, max_payload_bytes=1024)
    with Client(server.address, retry_for=0) as c:
        c.deploy(GATE)
        big = hourly + b"# " + b"x" * 2000 + b"\n"
        with pytest.raises(errors.PayloadTooLarge, match="over 1024 bytes"):
            c.apply_schedule(big)


def test_a_schedule_fires_on_the_servers_leader(client):
    """Every second, each fire its own instance, started by the server's ticker alone."""
    client.apply_schedule(
        b"schedule: tick\nflow: gate\ninterval: {every: 1s}\noverlap: allow_all\n"
        b"input: {kind: tick}\n"
    )

    def started() -> list[str]:
        view = client.describe_schedule("tick", recent=50)
        ids = [f.instance_id for f in view.recent if f.outcome == "STARTED" and f.instance_id]
        return ids if len(ids) >= 2 else []

    ids = wait_until(started, FIRE_WAIT_S, "two fires of a schedule due every second")
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"tick-\d{8}T\d{6}Z", i) for i in ids)
    for iid in ids[:2]:
        assert client.describe(iid).input == {"kind": "tick"}
    paused = client.pause_schedule("tick", "enough")
    assert paused.paused and paused.next_due_ms is None


def test_an_operator_may_manage_schedules_a_client_may_not(engine, start_server, tmp_path, hourly):
    creds = tmp_path / "credentials.toml"
    creds.write_text(
        "".join(
            f'[[credential]]\nname = "{name}"\nscopes = ["{scope}"]\n'
            f'token_sha256 = "{token_digest(name + "-token")}"\n\n'
            for name, scope in (("ops", "operator"), ("app", "client"), ("root", "admin"))
        )
    )
    server = start_server(engine, credentials=creds)
    with Client(server.address, token="root-token", retry_for=0) as root:
        root.deploy(GATE)
    with Client(server.address, token="ops-token", retry_for=0) as ops:
        assert ops.apply_schedule(hourly).created
        assert [s.name for s in ops.list_schedules()] == ["hourly"]
        assert ops.pause_schedule("hourly").paused
    with Client(server.address, token="app-token", retry_for=0) as app:
        with pytest.raises(errors.PermissionDenied):
            app.list_schedules()
        with pytest.raises(errors.PermissionDenied):
            app.trigger_schedule("hourly")


@pytest.fixture
def server_stub(client):
    channel = grpc.insecure_channel(client.address)
    try:
        yield apb_grpc.WiggleAdminStub(channel)
    finally:
        channel.close()
