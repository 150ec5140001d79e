"""Human tasks in the engine (docs/human-tasks.md): the task written when a token parks at a
human step, who may claim and answer it, the form's check, idempotent answers, races, N-of-M
approvals, and the task closing when its step moves on any other way. On SQLite and
PostgreSQL."""

from __future__ import annotations

import threading

import pytest
from engine_testkit import Fail, drain_batch, events_of
from sqlalchemy import func, select

from wiggle.compiler import load_flow
from wiggle.engine import InstanceStatus
from wiggle.engine.store import schema
from wiggle.errors import Conflict, InputRejected, InvalidRequest, PermissionDenied, TaskNotOpen

APPROVE = """
wiggle: 1
name: invoice
steps:
  - human: approve
    title: {expr: "'Approve invoice ' + ctx.ref"}
    instructions: Check the amount.
    form:
      type: object
      properties: {approved: {type: boolean}, comment: {type: string}}
      required: [approved]
    assignee: alice
    candidates:
      people: [bob, {expr: ctx.deputies}]
      groups: [finance]
    due: 1d
    timeout: 2d
    into: decision
"""

TWO_STEPS = """
wiggle: 1
name: four-eyes
steps:
  - human: check
    title: Check
    form: {}
    candidates: {people: [carol, dave]}
  - human: approve
    title: Approve
    form: {}
    candidates: {people: [carol, dave]}
    exclude: [last_actor]
    into: decision
"""

TWO_OF_THREE = """
wiggle: 1
name: board
steps:
  - human: vote
    title: Vote
    form: {type: boolean}
    candidates: {people: [ann, ben, cat]}
    approvals: 2
    into: votes
"""


def _start(engine, text: str, input_: object = None):
    flow = load_flow(text)
    engine.register(flow)
    started = engine.start(
        flow.name, {"ref": "INV-7", "deputies": ["dora", "dirk"]} if input_ is None else input_
    )
    (task,) = engine.list_tasks("", admin=True, instance_id=started.instance_id)
    return started.instance_id, task


def test_parking_at_a_human_step_writes_its_task_with_computed_values(engine):
    iid, task = _start(engine, APPROVE)
    assert task.node_id == "approve"
    assert task.state == "OPEN"
    assert task.title == "Approve invoice INV-7"
    assert task.instructions == "Check the amount."
    assert task.assignee == "alice"
    assert task.candidate_people == ("bob", "dora", "dirk")  # the list result expanded
    assert task.candidate_groups == ("finance",)
    assert task.approvals == 1
    assert task.due_at_ms == task.created_at_ms + 86_400_000
    assert task.deadline_at_ms == task.created_at_ms + 2 * 86_400_000
    assert task.form["required"] == ["approved"]
    created = events_of(engine.describe(iid, include_events=True), "human_task_created")
    assert [e.detail["task_id"] for e in created] == [task.task_id]


def test_a_computed_value_that_fails_fails_the_instance(engine):
    flow = load_flow(
        "wiggle: 1\nname: bad\nsteps:\n  - human: h\n    title: T\n    form: {}\n"
        "    assignee: {expr: ctx.who}\n"
    )
    engine.register(flow)
    started = engine.start("bad", {"who": 7})
    view = engine.describe(started.instance_id)
    assert view.status is InstanceStatus.FAILED
    assert "human task 'h': its assignee must be a string" in view.reason
    assert engine.list_tasks("", admin=True, instance_id=started.instance_id) == []


@pytest.mark.parametrize(
    ("person", "groups"),
    [("alice", ()), ("bob", ()), ("dirk", ()), ("frank", ("finance",))],
    ids=["assignee", "candidate", "computed-candidate", "group-member"],
)
def test_who_may_answer(engine, person, groups):
    iid, task = _start(engine, APPROVE)
    assert [t.task_id for t in engine.list_tasks(person, groups)] == [task.task_id]
    got = engine.complete_task(task.task_id, person, groups, {"approved": True})
    assert got.completed and got.task.state == "COMPLETED" and got.task.completed_by == person
    view = engine.describe(iid)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context["decision"] == {"approved": True}


def test_a_stranger_is_refused_and_sees_nothing_and_an_admin_may_answer(engine):
    iid, task = _start(engine, APPROVE)
    assert engine.list_tasks("mallory", ("sales",)) == []
    with pytest.raises(PermissionDenied) as refused:
        engine.complete_task(task.task_id, "mallory", ("sales",), {"approved": True})
    # Nothing of the task in the refusal: not who it is for, not its state.
    assert str(refused.value) == f"'mallory' may not act on human task {task.task_id!r}: not theirs"
    for act in (
        lambda: engine.show_task(task.task_id, "mallory"),
        lambda: engine.claim_task(task.task_id, "mallory", ("sales",)),
        lambda: engine.unclaim_task(task.task_id, "mallory", ("sales",)),
    ):
        with pytest.raises(PermissionDenied):
            act()
    assert engine.describe(iid).status is InstanceStatus.RUNNING
    got = engine.complete_task(task.task_id, "root", (), {"approved": False}, admin=True)
    assert got.completed
    assert engine.describe(iid).context["decision"] == {"approved": False}


def test_the_answer_is_checked_against_the_form(engine):
    iid, task = _start(engine, APPROVE)
    with pytest.raises(InputRejected) as refused:
        engine.complete_task(task.task_id, "alice", (), {"approved": "yes"})
    assert str(refused.value) == (
        f"answer rejected by the form of human task {task.task_id!r} ('approve') at "
        "/approved: 'yes' is not of type 'boolean'"
    )
    with pytest.raises(InputRejected, match="'approved' is a required property"):
        engine.complete_task(task.task_id, "alice", (), {})
    assert engine.show_task(task.task_id, "alice").state == "OPEN"
    assert engine.describe(iid).status is InstanceStatus.RUNNING


def test_a_request_id_makes_an_answer_idempotent(engine):
    iid, task = _start(engine, APPROVE)
    first = engine.complete_task(task.task_id, "bob", (), {"approved": True}, request_id="r1")
    again = engine.complete_task(task.task_id, "bob", (), {"approved": True}, request_id="r1")
    assert (first.completed, first.replayed) == (True, False)
    assert (again.completed, again.replayed) == (True, True)
    assert again.task.completed_by == "bob"
    view = engine.describe(iid, include_events=True)
    assert len(events_of(view, "human_task_completed")) == 1
    assert len(events_of(view, "signal_consumed")) == 1
    # Another request is refused: the task is no longer open, and says who answered it.
    with pytest.raises(TaskNotOpen, match=r"was completed by 'bob' at \d{4}-\d\d-\d\dT"):
        engine.complete_task(task.task_id, "alice", (), {"approved": False}, request_id="r2")
    # A request id is one person's.
    with pytest.raises(InvalidRequest, match=r"was used .* by 'bob'"):
        engine.complete_task(task.task_id, "alice", (), {"approved": False}, request_id="r1")
    actions = engine.show_task(task.task_id, "bob").actions
    assert [(a.actor, a.action, a.request_id) for a in actions] == [("bob", "complete", "r1")]


def test_a_claim_keeps_others_from_answering_until_it_is_released(engine):
    iid, task = _start(engine, APPROVE)
    claimed = engine.claim_task(task.task_id, "bob")
    assert (claimed.task.state, claimed.task.claimed_by) == ("CLAIMED", "bob")
    with pytest.raises(PermissionDenied, match="claimed by 'bob'"):
        engine.claim_task(task.task_id, "alice")
    with pytest.raises(PermissionDenied, match="claimed by 'bob'"):
        engine.complete_task(task.task_id, "alice", (), {"approved": True})
    with pytest.raises(PermissionDenied, match="only they or an admin"):
        engine.unclaim_task(task.task_id, "alice")
    assert engine.unclaim_task(task.task_id, "bob").task.state == "OPEN"
    with pytest.raises(PermissionDenied, match="only an admin may reassign"):
        engine.reassign_task(task.task_id, "zoe", "bob")
    moved = engine.reassign_task(task.task_id, "zoe", "root", admin=True)
    assert moved.task.assignee == "zoe"
    engine.complete_task(task.task_id, "zoe", (), {"approved": True})
    trail = engine.show_task(task.task_id, "", admin=True).actions
    assert [(a.actor, a.action) for a in trail] == [
        ("bob", "claim"),
        ("bob", "unclaim"),
        ("root", "reassign"),
        ("zoe", "complete"),
    ]
    kinds = [e.kind for e in engine.describe(iid, include_events=True).events]
    for kind in ("human_task_claimed", "human_task_unclaimed", "human_task_reassigned"):
        assert kind in kinds


def test_the_last_actor_is_excluded_from_the_next_task(engine):
    iid, check = _start(engine, TWO_STEPS, {})
    engine.complete_task(check.task_id, "carol", (), {"ok": True})
    (approve,) = engine.list_tasks("dave", instance_id=iid)
    assert approve.node_id == "approve"
    assert approve.excluded == ("carol",)
    assert engine.list_tasks("carol") == []  # she may not act on it, so it is not hers to see
    with pytest.raises(PermissionDenied, match="excluded from it"):
        engine.complete_task(approve.task_id, "carol", (), {"ok": True})
    engine.complete_task(approve.task_id, "dave", (), {"ok": True})
    assert engine.describe(iid).status is InstanceStatus.COMPLETED


def test_n_of_m_completes_when_enough_different_people_answered(engine):
    iid, task = _start(engine, TWO_OF_THREE, {})
    first = engine.complete_task(task.task_id, "ann", (), True)
    assert (first.completed, first.task.state) == (False, "OPEN")
    assert [a.by for a in first.task.approved] == ["ann"]
    with pytest.raises(Conflict, match="'ann' has already answered"):
        engine.complete_task(task.task_id, "ann", (), True)
    with pytest.raises(InvalidRequest, match="needs 2 approvals"):
        engine.claim_task(task.task_id, "ben")
    assert engine.describe(iid).status is InstanceStatus.RUNNING
    second = engine.complete_task(task.task_id, "cat", (), False)
    assert second.completed
    votes = engine.describe(iid).context["votes"]
    assert [(v["by"], v["answer"]) for v in votes] == [("ann", True), ("cat", False)]
    assert all(isinstance(v["at_ms"], int) for v in votes)
    with pytest.raises(TaskNotOpen, match="was completed by 'cat'"):
        engine.complete_task(task.task_id, "ben", (), True)


def test_a_passed_deadline_closes_the_task(clock, engine):
    iid, task = _start(engine, APPROVE)
    clock.advance(2 * 86_400_000 + 1)
    engine.tick()
    assert engine.describe(iid).status is InstanceStatus.COMPLETED  # on_timeout: on to the end
    assert engine.list_tasks("alice") == []
    assert engine.show_task(task.task_id, "alice").state == "EXPIRED"
    with pytest.raises(TaskNotOpen, match="its deadline passed at"):
        engine.complete_task(task.task_id, "alice", (), {"approved": True})
    assert "decision" not in engine.describe(iid).context


def test_a_cancel_closes_the_task(engine):
    iid, task = _start(engine, APPROVE)
    engine.cancel(iid, "no longer needed")
    assert engine.show_task(task.task_id, "bob").state == "CANCELLED"
    assert [t.task_id for t in engine.list_tasks("bob", states=["CANCELLED"])] == [task.task_id]
    with pytest.raises(TaskNotOpen, match="stopped waiting for it"):
        engine.complete_task(task.task_id, "bob", (), {"approved": True})
    with pytest.raises(TaskNotOpen):
        engine.claim_task(task.task_id, "bob")


def test_two_people_answering_at_once_one_wins(engine):
    iid, task = _start(engine, APPROVE)
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def answer(person: str) -> None:
        barrier.wait()
        try:
            outcomes[person] = engine.complete_task(task.task_id, person, (), {"approved": True})
        except Exception as exc:  # the outcome is what the test looks at
            outcomes[person] = exc

    threads = [threading.Thread(target=answer, args=(p,)) for p in ("alice", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    won = [p for p, o in outcomes.items() if not isinstance(o, Exception)]
    lost = [o for o in outcomes.values() if isinstance(o, Exception)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], TaskNotOpen)
    assert f"was completed by {won[0]!r}" in str(lost[0])
    view = engine.describe(iid, include_events=True)
    assert view.status is InstanceStatus.COMPLETED
    assert len(events_of(view, "human_task_completed")) == 1


def test_a_task_signal_is_refused_as_a_bare_signal(engine):
    iid, task = _start(engine, APPROVE)
    with pytest.raises(InvalidRequest, match="complete the task instead"):
        engine.signal(iid, "task:approve", {"approved": True})
    assert engine.show_task(task.task_id, "alice").state == "OPEN"


def test_prune_removes_the_tasks_with_their_instance(clock, engine):
    iid, task = _start(engine, APPROVE)
    engine.claim_task(task.task_id, "bob")
    engine.complete_task(task.task_id, "bob", (), {"approved": True})
    assert engine.describe(iid).status is InstanceStatus.COMPLETED
    clock.advance(10_000)
    assert engine.prune(1_000).instances == 1

    def count(conn, table):
        return conn.execute(select(func.count()).select_from(table)).scalar_one()

    assert engine.db.read(lambda c: count(c, schema.human_tasks)) == 0
    assert engine.db.read(lambda c: count(c, schema.human_task_actions)) == 0


def test_a_migration_to_another_human_step_closes_the_old_task_and_writes_a_new_one(engine):
    v1 = (
        "wiggle: 1\nname: mig\nsteps:\n"
        "  - human: review\n    title: Old\n    form: {}\n    assignee: alice\n    into: a\n"
    )
    iid, old = _start(engine, v1, {})
    v2 = load_flow(v1.replace("human: review", "human: approve").replace("Old", "New"))
    engine.register(v2)
    plan = engine.plan_migration("mig", v2.version, mapping={"review": "approve"})
    drain_batch(engine, engine.apply_migration(plan, rate_per_s=1000).batch_id)
    assert engine.show_task(old.task_id, "alice").state == "CANCELLED"
    (new,) = engine.list_tasks("alice", instance_id=iid)
    assert (new.node_id, new.title, new.version) == ("approve", "New", v2.version)
    with pytest.raises(TaskNotOpen):
        engine.complete_task(old.task_id, "alice", (), 1)
    engine.complete_task(new.task_id, "alice", (), 2)
    assert engine.describe(iid).context == {"a": 2}


BRANCHES = """
wiggle: 1
name: branches
steps:
  - parallel:
      ask:
        - human: approve
          title: Approve
          form: {}
          assignee: alice
      work:
        - task: boom
    combine: merge
"""


def test_a_retry_that_brings_the_waiting_token_back_reopens_its_task(make_driver):
    failing = {"on": True}

    def boom(ctx):
        if failing["on"]:
            raise Fail("down", non_retryable=True)
        return ctx

    d = make_driver({"boom": boom, "merge": lambda c: c["context"]})
    d.deploy(BRANCHES)
    iid = d.engine.start("branches", {}).instance_id
    d.run(iid)
    assert d.engine.describe(iid).status is InstanceStatus.FAILED
    (task,) = d.engine.list_tasks("", admin=True, states=["CANCELLED"], instance_id=iid)
    with pytest.raises(TaskNotOpen):
        d.engine.complete_task(task.task_id, "alice", (), 1)
    failing["on"] = False
    d.engine.retry(iid)
    d.run(iid, until=lambda v: not any(t.state.value == "READY" for t in v.tokens))
    assert d.engine.show_task(task.task_id, "alice").state == "OPEN"
    d.engine.complete_task(task.task_id, "alice", (), 1)
    assert d.run(iid).status is InstanceStatus.COMPLETED


def test_a_reset_to_the_step_writes_a_new_task_and_closes_the_old_one(engine):
    iid, first = _start(engine, APPROVE)
    engine.reset(iid, "approve")
    tasks = engine.list_tasks("", admin=True, states=[], instance_id=iid)
    assert [(t.task_id == first.task_id, t.state) for t in tasks] == [
        (True, "CANCELLED"),
        (False, "OPEN"),
    ]
    with pytest.raises(TaskNotOpen):
        engine.complete_task(first.task_id, "alice", (), {"approved": True})
    engine.complete_task(tasks[1].task_id, "alice", (), {"approved": True})
    assert engine.describe(iid).status is InstanceStatus.COMPLETED


def test_an_action_needs_a_person(engine):
    _, task = _start(engine, APPROVE)
    with pytest.raises(InvalidRequest, match="answering a human task needs the name"):
        engine.complete_task(task.task_id, "", (), {"approved": True}, admin=True)
    with pytest.raises(InvalidRequest, match="claiming a human task needs the name"):
        engine.claim_task(task.task_id, "", admin=True)
    assert engine.show_task(task.task_id, "alice").state == "OPEN"


FOUR_EYES = """
wiggle: 1
name: expense
steps:
  - human: approve
    title: Approve the expense
    form: {}
    candidates: {people: [carol, dave]}
    exclude: [starter]
    into: decision
"""


def test_the_starter_is_excluded_from_a_task_that_excludes_the_starter(engine):
    flow = load_flow(FOUR_EYES)
    engine.register(flow)
    iid = engine.start("expense", {}, started_by="carol").instance_id
    view = engine.describe(iid, include_events=True)
    assert view.started_by == "carol"
    (started,) = events_of(view, "instance_started")
    assert started.detail["started_by"] == "carol"
    (task,) = engine.list_tasks("dave", instance_id=iid)
    assert task.excluded == ("carol",)
    assert engine.list_tasks("carol") == []  # excluded: not hers to see
    with pytest.raises(PermissionDenied) as refused:
        engine.complete_task(task.task_id, "carol", (), {"ok": True})
    assert str(refused.value) == (
        f"'carol' may not act on human task {task.task_id!r}: excluded from it "
        "(four eyes: they started the instance)"
    )
    with pytest.raises(PermissionDenied, match="they started the instance"):
        engine.claim_task(task.task_id, "carol")
    engine.complete_task(task.task_id, "dave", (), {"ok": True})
    assert engine.describe(iid).context == {"decision": {"ok": True}}


def test_an_instance_no_person_started_excludes_no_starter(engine):
    flow = load_flow(FOUR_EYES)
    engine.register(flow)
    iid = engine.start("expense", {}).instance_id  # a schedule's fire starts them this way
    view = engine.describe(iid, include_events=True)
    assert view.started_by == ""
    assert "started_by" not in events_of(view, "instance_started")[0].detail
    (task,) = engine.list_tasks("carol", instance_id=iid)
    assert task.excluded == ()
    engine.complete_task(task.task_id, "carol", (), {"ok": True})
    assert engine.describe(iid).status is InstanceStatus.COMPLETED


def test_starter_and_last_actor_are_both_excluded_each_once(engine):
    flow = load_flow(
        TWO_STEPS.replace("name: four-eyes", "name: both").replace(
            "exclude: [last_actor]", "exclude: [starter, last_actor]"
        )
    )
    engine.register(flow)
    iid = engine.start("both", {}, started_by="erin").instance_id
    (check,) = engine.list_tasks("carol", instance_id=iid)
    assert check.excluded == ()  # the first step excludes nobody
    engine.complete_task(check.task_id, "carol", (), 1)
    (approve,) = engine.list_tasks("dave", instance_id=iid)
    assert approve.excluded == ("erin", "carol")
    with pytest.raises(PermissionDenied, match="they answered the instance's previous"):
        engine.complete_task(approve.task_id, "carol", (), 2)
    # The starter answering the first task is excluded once, as the starter.
    again = engine.start("both", {}, started_by="carol").instance_id
    (check,) = engine.list_tasks("carol", instance_id=again)
    engine.complete_task(check.task_id, "carol", (), 1)
    (approve,) = engine.list_tasks("dave", instance_id=again)
    assert approve.excluded == ("carol",)


def test_a_subflow_child_inherits_its_parents_starter(engine):
    engine.register(load_flow(FOUR_EYES))
    engine.register(load_flow("wiggle: 1\nname: claims\nsteps:\n  - subflow: expense\n"))
    iid = engine.start("claims", {}, started_by="dave").instance_id
    (child_id,) = engine.describe(iid).child_instance_ids
    assert engine.describe(child_id).started_by == "dave"
    (task,) = engine.list_tasks("carol", instance_id=child_id)
    assert task.excluded == ("dave",)
    with pytest.raises(PermissionDenied, match="they started the instance"):
        engine.complete_task(task.task_id, "dave", (), {})
    engine.complete_task(task.task_id, "carol", (), {"ok": True})
    assert engine.describe(iid).status is InstanceStatus.COMPLETED


def test_a_listing_shows_who_started_each_instance(engine):
    engine.register(load_flow(FOUR_EYES))
    engine.start("expense", {}, instance_id="by-carol", started_by="carol")
    engine.start("expense", {}, instance_id="by-nobody")
    listed = {v.instance_id: v.started_by for v in engine.list_instances(flow="expense")}
    assert listed == {"by-carol": "carol", "by-nobody": ""}
