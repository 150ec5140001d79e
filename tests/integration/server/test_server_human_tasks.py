"""Human tasks over the wire (docs/human-tasks.md, docs/admin-api.md): the credential is the
person (its groups from the credentials file), the `person` scope may act on its own tasks and
nothing else, an admin may act on any; a server without credentials takes who acts from the
request, as `wiggle task` sends it."""

from __future__ import annotations

import json

import pytest

from tests.waiting import wait_until
from wiggle import errors
from wiggle.cli import main
from wiggle.client import Client
from wiggle.engine import Engine, VirtualClock
from wiggle.server._credentials import token_digest

pytestmark = pytest.mark.timeout(120)

FLOW = b"""
wiggle: 1
name: invoice
steps:
  - human: approve
    title: Approve
    form: {type: object, properties: {approved: {type: boolean}}, required: [approved]}
    assignee: alice
    candidates: {groups: [finance]}
    into: decision
"""

CREDENTIALS = """
[[credential]]
name = "ops"
scopes = ["admin"]
token_sha256 = "{ops}"

[[credential]]
name = "alice"
scopes = ["person"]
token_sha256 = "{alice}"

[[credential]]
name = "frank"
scopes = ["person"]
groups = ["finance"]
token_sha256 = "{frank}"

[[credential]]
name = "mallory"
scopes = ["person"]
token_sha256 = "{mallory}"

[[credential]]
name = "carol"
scopes = ["client", "person"]
token_sha256 = "{carol}"

[[credential]]
name = "dave"
scopes = ["person"]
token_sha256 = "{dave}"
"""

FOUR_EYES = b"""
wiggle: 1
name: expense
steps:
  - human: approve
    title: Approve the expense
    form: {}
    candidates: {people: [carol, dave]}
    exclude: [starter]
    remind: [1h, 2h]
    into: decision
"""
HOUR = 3_600_000


@pytest.fixture
def secured(engine, start_server, tmp_path):
    path = tmp_path / "credentials.toml"
    path.write_text(
        CREDENTIALS.format(
            ops=token_digest("t-ops"),
            alice=token_digest("t-alice"),
            frank=token_digest("t-frank"),
            mallory=token_digest("t-mallory"),
            carol=token_digest("t-carol"),
            dave=token_digest("t-dave"),
        )
    )
    server = start_server(engine, credentials=path)
    with Client(server.address, token="t-ops", retry_for=0) as ops:
        ops.deploy(FLOW)
        yield server, ops


def _as(server, token: str) -> Client:
    return Client(server.address, token=token, retry_for=0)


def test_a_person_sees_and_answers_their_tasks_as_themselves(secured):
    server, ops = secured
    iid = ops.start("invoice", {}).instance_id
    with _as(server, "t-frank") as frank, _as(server, "t-mallory") as mallory:
        (task,) = frank.list_tasks()  # by the group the credentials file gives him
        assert (task.instance_id, task.state, task.candidate_groups) == (
            iid,
            "OPEN",
            ["finance"],
        )
        assert mallory.list_tasks() == []
        # Every task call of a person who is not a candidate is refused, reads included.
        with pytest.raises(errors.PermissionDenied, match="'mallory' may not act on human task"):
            mallory.complete_task(task.task_id, {"approved": True})
        with pytest.raises(errors.PermissionDenied):
            mallory.get_task(task.task_id)
        with pytest.raises(errors.PermissionDenied):
            mallory.claim_task(task.task_id)
        with pytest.raises(errors.PermissionDenied):
            mallory.unclaim_task(task.task_id)
        assert mallory.list_tasks(all_states=True) == []
        with pytest.raises(errors.PermissionDenied, match="acts on human tasks as itself"):
            mallory.complete_task(task.task_id, {"approved": True}, person="frank")
        with pytest.raises(errors.PermissionDenied, match="not a member of group 'finance'"):
            mallory.list_tasks(groups=["finance"])
        with pytest.raises(errors.PermissionDenied, match="as an admin"):
            mallory.list_tasks(admin=True)
        # The person scope reaches nothing else.
        with pytest.raises(errors.PermissionDenied):
            mallory.describe(iid)
        with pytest.raises(errors.PermissionDenied):
            mallory.reassign_task(task.task_id, "mallory")
        with pytest.raises(errors.InputRejected, match="at /approved: 'yes' is not of type"):
            frank.complete_task(task.task_id, {"approved": "yes"})
        got = frank.complete_task(task.task_id, {"approved": True}, request_id="r1")
        assert (got.completed, got.replayed, got.task.completed_by) == (True, False, "frank")
        again = frank.complete_task(task.task_id, {"approved": True}, request_id="r1")
        assert (again.completed, again.replayed) == (True, True)
    with (
        _as(server, "t-alice") as alice,
        pytest.raises(errors.Conflict, match="was completed by 'frank' at"),
    ):
        alice.complete_task(task.task_id, {"approved": False})
    assert ops.describe(iid).context == {"decision": {"approved": True}}
    shown = ops.get_task(task.task_id, admin=True)
    assert [(a.actor, a.action, a.request_id) for a in shown.actions] == [
        ("frank", "complete", "r1")
    ]


def test_an_admin_lists_every_task_and_reassigns(secured):
    server, ops = secured
    ops.start("invoice", {})
    assert ops.list_tasks() == []  # "ops" is not named on the task
    (task,) = ops.list_tasks(admin=True)
    moved = ops.reassign_task(task.task_id, "mallory")
    assert moved.task.assignee == "mallory"
    with _as(server, "t-mallory") as mallory:
        claimed = mallory.claim_task(task.task_id)
        assert (claimed.task.state, claimed.task.claimed_by) == ("CLAIMED", "mallory")
        with (  # alice is no longer the assignee
            _as(server, "t-alice") as alice,
            pytest.raises(
                errors.PermissionDenied, match=r"may not act on human task .*: not theirs"
            ),
        ):
            alice.complete_task(task.task_id, {"approved": True})
        with (  # frank is a candidate, but the task is claimed
            _as(server, "t-frank") as frank,
            pytest.raises(errors.PermissionDenied, match="claimed by 'mallory'"),
        ):
            frank.complete_task(task.task_id, {"approved": True})
        assert mallory.unclaim_task(task.task_id).task.state == "OPEN"


def test_the_task_commands_on_a_server_without_credentials(engine, start_server, capsys):
    server = start_server(engine)
    with Client(server.address, retry_for=0) as c:
        c.deploy(FLOW)
        iid = c.start("invoice", {}).instance_id
    at = ["--address", server.address]
    assert main(["task", "list", "--as", "frank", "--group", "finance", "--json", *at]) == 0
    (task,) = json.loads(capsys.readouterr().out)["tasks"]
    assert (task["instance_id"], task["node_id"]) == (iid, "approve")
    assert main(["task", "claim", task["task_id"], "--as", "alice", *at]) == 0
    assert capsys.readouterr().out.strip() == f"{task['task_id']} claimed: CLAIMED"
    answer = ["task", "complete", task["task_id"], '{"approved": false}', "--as", "alice"]
    assert main([*answer, *at]) == 0
    assert capsys.readouterr().out.strip() == f"{task['task_id']} completed"
    late = ["task", "complete", task["task_id"], "{}", "--as", "frank", "--group", "finance"]
    assert main([*late, *at]) == 1
    assert "was completed by 'alice'" in capsys.readouterr().err
    # Someone it was never for learns nothing of it, not even that it was completed.
    assert main(["task", "complete", task["task_id"], "{}", "--as", "mallory", *at]) == 1
    assert capsys.readouterr().err.strip().endswith(": not theirs")
    assert main(["task", "show", task["task_id"], "--admin", *at]) == 0
    shown = capsys.readouterr().out
    assert "state     COMPLETED by alice" in shown
    assert "alice  claim" in shown and "alice  complete" in shown
    with Client(server.address, retry_for=0) as c:
        assert c.describe(iid).context == {"decision": {"approved": False}}


def test_the_starting_credential_is_the_starter_a_task_excludes(secured, capsys):
    server, ops = secured
    ops.deploy(FOUR_EYES)
    with _as(server, "t-carol") as carol, _as(server, "t-dave") as dave:
        iid = carol.start("expense", {}).instance_id
        assert carol.describe(iid).started_by == "carol"
        assert [i.started_by for i in carol.list_instances(flow="expense")] == ["carol"]
        (task,) = dave.list_tasks()
        assert task.excluded == ["carol"]
        assert carol.list_tasks() == []
        with pytest.raises(errors.PermissionDenied, match=r"four eyes: they started the inst"):
            carol.complete_task(task.task_id, {"ok": True})
        assert dave.complete_task(task.task_id, {"ok": True}).completed
    assert main(["status", iid, "--address", server.address, "--token", "t-ops"]) == 0
    assert "by carol" in next(
        line for line in capsys.readouterr().out.splitlines() if line.startswith("started")
    )
    # An instance started by the admin credential excludes that credential's person.
    other = ops.start("expense", {}).instance_id
    (task,) = ops.list_tasks(admin=True, instance_id=other)
    assert task.excluded == ["ops"]


@pytest.fixture
def clocked(database_url):
    clock = VirtualClock()
    engine = Engine(database_url, leader_ttl_s=5.0, clock=clock)
    try:
        yield engine, clock
    finally:
        engine.close()


def test_a_reminder_reaches_the_task_view_and_wiggle_task_show(clocked, start_server, capsys):
    """The server's ticker records a reminder once the clock reaches it (a server without
    credentials: no person started the instance, so nobody is excluded)."""
    engine, clock = clocked
    server = start_server(engine)
    with Client(server.address, retry_for=0) as c:
        c.deploy(FOUR_EYES)
        iid = c.start("expense", {}).instance_id
        assert c.describe(iid).started_by == ""
        (task,) = c.list_tasks(admin=True)
        assert task.excluded == []
        assert (task.reminded_count, task.last_reminded_at_ms) == (0, None)
        assert task.next_remind_at_ms == task.created_at_ms + HOUR
        clock.advance(HOUR)

        def reminded():
            got = c.get_task(task.task_id, admin=True)
            return got if got.reminded_count else None

        shown = wait_until(reminded, what="the first reminder recorded by the server's ticker")
        assert shown.last_reminded_at_ms == task.created_at_ms + HOUR
        assert shown.next_remind_at_ms == task.created_at_ms + 2 * HOUR
        (event,) = [e for e in c.describe(iid, events=True).events if e.kind.endswith("reminded")]
        assert event.detail["reminder"] == 1 and event.detail["people"] == ["carol", "dave"]
    assert main(["task", "show", task.task_id, "--admin", "--address", server.address]) == 0
    out = capsys.readouterr().out
    assert "reminded  once (last 2026-01-01T01:00:00Z); next 2026-01-01T02:00:00Z" in out
