"""Migrations: plan from the diff, apply as a durable batch (a canary first), roll back."""

from __future__ import annotations

import copy

import pytest
from engine_testkit import MODES, drain_batch, events_of

from wiggle.engine import InstanceStatus, TokenState
from wiggle.errors import DefinitionNotFound, InvalidRequest, RepairRefused

V1 = """
wiggle: 1
name: approval
steps:
  - task: prepare
  - await: approved
    timeout: 30d
  - task: book
"""
V2 = """
wiggle: 1
name: approval
steps:
  - task: prepare
  - await: approved
    timeout: 30d
  - task: check
  - task: book
"""


def _handlers():
    return {
        "prepare": lambda c: {**c, "prepared": True},
        "check": lambda c: {**c, "checked": True},
        "book": lambda c: {**c, "booked": True},
    }


def _waiting(d, n: int, version: str | None = None) -> list[str]:
    ids = [d.engine.start("approval", {"n": i}, version=version).instance_id for i in range(n)]
    for iid in ids:
        d.run(iid, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    return ids


@pytest.mark.parametrize("mode", MODES)
def test_plan_apply_a_canary_then_the_rest_and_finish_on_the_new_version(make_driver, mode):
    d = make_driver(_handlers(), mode=mode)
    v1 = d.deploy(V1)
    ids = _waiting(d, 5)
    v2 = d.deploy(V2)
    plan = d.engine.plan_migration("approval", v2.version[7:19])
    assert plan["to"] == v2.version and plan["from"] == [v1.version]
    assert plan["summary"]["migrate"] == 5 and plan["summary"]["blocked"] == 0
    assert {e["instance_id"] for e in plan["instances"]} == set(ids)
    (move,) = plan["instances"][0]["moves"]
    assert (move["node"], move["to"], move["timer"]) == ("approved", "approved", "keep")
    canary = d.engine.apply_migration(plan, limit=2, rate_per_s=1000, requested_by="ops")
    assert (canary.action, canary.matched) == ("migrate", 2)
    assert drain_batch(d.engine, canary.batch_id).done == 2
    rest = d.engine.apply_migration(plan, rate_per_s=1000)
    assert rest.matched == 3  # the canary's two are on the new version already
    assert drain_batch(d.engine, rest.batch_id).done == 3
    for iid in ids:
        view = d.engine.describe(iid, include_events=True)
        assert view.version == v2.version
        (ev,) = events_of(view, "instance_migrated")
        assert ev.detail["from"] == v1.version and ev.detail["plan"] == plan["hash"]
        d.engine.signal(iid, "approved", {"ok": True})
    for iid in ids:
        done = d.run(iid)
        assert done.status is InstanceStatus.COMPLETED
        assert done.context["checked"] is True and done.context["booked"] is True


def test_the_deadline_of_a_migrated_await_keeps_its_time(make_driver):
    d = make_driver(_handlers())
    d.deploy(V1)
    (iid,) = _waiting(d, 1)
    before = next(t.wake_at_ms for t in d.engine.describe(iid).tokens if t.node_id == "approved")
    v2 = d.deploy(V2.replace("timeout: 30d", "timeout: 60d"))
    keep = d.engine.plan_migration("approval", v2.version)
    drain_batch(d.engine, d.engine.apply_migration(keep, rate_per_s=1000).batch_id)
    after = next(t.wake_at_ms for t in d.engine.describe(iid).tokens if t.node_id == "approved")
    assert after == before


def test_a_plan_refuses_what_it_cannot_do(make_driver):
    d = make_driver(_handlers())
    v1 = d.deploy(V1)
    v2 = d.deploy(V2)
    with pytest.raises(InvalidRequest, match="has no live instance to move"):
        d.engine.plan_migration("approval", v2.version)
    (iid,) = _waiting(d, 1, version=v1.version)
    with pytest.raises(InvalidRequest, match="matches no version of 'approval'"):
        d.engine.plan_migration("approval", "abcdef")
    with pytest.raises(DefinitionNotFound):
        d.engine.plan_migration("nope", v2.version)
    with pytest.raises(InvalidRequest, match="has no node 'nowhere'"):
        d.engine.plan_migration("approval", v2.version, mapping={"approved": "nowhere"})
    with pytest.raises(InvalidRequest, match="a token can only move to a node of the same kind"):
        d.engine.plan_migration("approval", v2.version, mapping={"approved": "check"})
    plan = d.engine.plan_migration("approval", v2.version)
    edited = copy.deepcopy(plan)
    edited["instances"][0]["moves"][0]["to"] = "book"
    with pytest.raises(InvalidRequest, match="does not match its hash"):
        d.engine.apply_migration(edited)
    with pytest.raises(InvalidRequest, match="not a Wiggle migration plan"):
        d.engine.apply_migration({"hello": 1})
    assert d.engine.describe(iid).version != v2.version  # nothing changed


def test_a_plan_whose_instances_moved_is_refused_unless_told_to_skip_them(make_driver):
    d = make_driver(_handlers())
    d.deploy(V1)
    ids = _waiting(d, 3)
    v2 = d.deploy(V2)
    plan = d.engine.plan_migration("approval", v2.version)
    d.engine.signal(ids[0], "approved", {})  # it moves on: its plan entry is stale
    with pytest.raises(RepairRefused, match=r"1 instance.* moved or ended since it was made"):
        d.engine.apply_migration(plan)
    batch = d.engine.apply_migration(plan, skip_changed=True, rate_per_s=1000)
    assert batch.matched == 2
    assert drain_batch(d.engine, batch.batch_id).done == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_step_running_on_a_worker_delays_its_instance_until_it_reports(make_driver, mode):
    """Never a report applied to a node the new version lacks: the instance waits for the
    running step's report, then moves from where that report left it."""
    d = make_driver(_handlers(), mode=mode)
    d.deploy(V1)
    iid = d.engine.start("approval", {"n": 1}).instance_id
    (task,) = d.engine.poll(["default"], "slow-worker", 1)
    assert task.node_id == "prepare"
    v2 = d.deploy(V2)
    plan = d.engine.plan_migration("approval", v2.version)
    batch = d.engine.apply_migration(plan, rate_per_s=1000)
    for _ in range(5):
        d.engine.tick()
    item = d.engine.get_batch(batch.batch_id)
    assert (item.state, item.done) == ("RUNNING", 0)  # waiting for the step's report
    d.run_task(task)  # the worker reports (on the version it started on)
    view = drain_batch(d.engine, batch.batch_id)
    assert view.done == 1
    migrated = d.engine.describe(iid, include_events=True)
    assert migrated.version == v2.version
    (ev,) = events_of(migrated, "instance_migrated")
    assert ev.detail["replanned"] is True
    d.engine.signal(iid, "approved", {})
    assert d.run(iid).context == {"n": 1, "prepared": True, "checked": True, "booked": True}


def test_rollback_restores_what_has_not_moved_since_and_lists_the_rest(make_driver):
    d = make_driver(_handlers())
    v1 = d.deploy(V1)
    ids = _waiting(d, 3)
    v2 = d.deploy(V2)
    plan = d.engine.plan_migration("approval", v2.version)
    applied = drain_batch(d.engine, d.engine.apply_migration(plan, rate_per_s=1000).batch_id)
    d.engine.signal(ids[0], "approved", {})  # advanced since the migration
    d.run(ids[0])
    back = drain_batch(
        d.engine, d.engine.rollback_migration(applied.batch_id, rate_per_s=1000).batch_id
    )
    assert (back.action, back.done, back.skipped) == ("rollback", 2, 1)
    (listed,) = back.items
    assert listed.instance_id == ids[0] and "ended since the migration" in listed.message
    for iid in ids[1:]:
        view = d.engine.describe(iid, include_events=True)
        assert view.version == v1.version
        assert events_of(view, "instance_migration_rolled_back")
        d.engine.signal(iid, "approved", {})
        assert "checked" not in d.run(iid).context  # back on v1: no check step


def test_blocked_instances_are_listed_with_their_reason(make_driver):
    d = make_driver(_handlers())
    d.deploy(V1)
    (iid,) = _waiting(d, 1)
    v3 = d.deploy(
        "wiggle: 1\nname: approval\nsteps:\n  - task: prepare\n  - await: approved_v3\n"
        "  - task: book\n"
    )
    plan = d.engine.plan_migration("approval", v3.version)
    (entry,) = plan["instances"]
    assert entry["outcome"] == "blocked"
    assert [b["rule"] for b in entry["blockers"]] == ["removed-node"]
    with pytest.raises(InvalidRequest, match="nothing left to apply"):
        d.engine.apply_migration(plan)
    mapped = d.engine.plan_migration("approval", v3.version, mapping={"approved": "approved_v3"})
    assert mapped["summary"]["migrate"] == 1
    drain_batch(d.engine, d.engine.apply_migration(mapped, rate_per_s=1000).batch_id)
    d.engine.signal(iid, "approved_v3", {})
    assert d.run(iid).status is InstanceStatus.COMPLETED


PARENT_V1 = """
wiggle: 1
name: parent
steps:
  - subflow: kid
  - task: book
"""
KID_V1 = """
wiggle: 1
name: kid
steps:
  - await: go
  - task: prepare
"""
KID_V2 = """
wiggle: 1
name: kid
steps:
  - await: go
  - task: check
  - task: prepare
"""


def test_children_are_planned_with_children_or_left_alone(make_driver):
    d = make_driver(_handlers())
    d.deploy(KID_V1)
    d.deploy(PARENT_V1)
    iid = d.engine.start("parent", {}).instance_id
    view = d.run(iid, until=lambda v: bool(v.child_instance_ids))
    (kid,) = view.child_instance_ids
    d.run(kid, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    d.deploy(KID_V2)
    parent_v2 = d.deploy(PARENT_V1 + "  - task: check\n")
    alone = d.engine.plan_migration("parent", parent_v2.version)
    (entry,) = alone["instances"]
    assert [c["instance_id"] for c in entry["children_left"]] == [kid]
    planned = d.engine.plan_migration("parent", parent_v2.version, children=True)
    (entry,) = planned["instances"]
    assert [c["instance_id"] for c in entry["children"]] == [kid]
    assert planned["summary"]["children_planned"] == 1
    drain_batch(d.engine, d.engine.apply_migration(planned, rate_per_s=1000).batch_id)
    assert d.engine.describe(kid).version != d.engine.describe(iid).version  # its own flow
    d.engine.signal(kid, "go", {})
    done = d.run(iid)
    assert done.status is InstanceStatus.COMPLETED
    assert done.context.get("checked") is True


def test_rollback_after_a_partial_apply_restores_the_canary_only(make_driver):
    d = make_driver(_handlers())
    v1 = d.deploy(V1)
    ids = _waiting(d, 4)
    v2 = d.deploy(V2)
    plan = d.engine.plan_migration("approval", v2.version)
    canary = drain_batch(
        d.engine, d.engine.apply_migration(plan, limit=2, rate_per_s=1000).batch_id
    )
    assert canary.done == 2
    back = drain_batch(d.engine, d.engine.rollback_migration(plan_hash=plan["hash"]).batch_id)
    assert (back.done, back.skipped) == (2, 0)
    assert {d.engine.describe(i).version for i in ids} == {v1.version}
    with pytest.raises(InvalidRequest, match="no migration batch applied plan"):
        d.engine.rollback_migration(plan_hash="sha256:" + "0" * 64)
    # The plan still applies: every instance is where it was planned.
    again = drain_batch(d.engine, d.engine.apply_migration(plan, rate_per_s=1000).batch_id)
    assert again.done == 4


def test_a_node_renamed_by_a_migration_keeps_its_input_for_a_reset(make_driver):
    d = make_driver(_handlers())
    d.deploy(V1)
    (iid,) = _waiting(d, 1)
    received = d.engine.describe(iid, include_events=True).step_inputs["approved"]["context"]
    v3 = d.deploy(
        "wiggle: 1\nname: approval\nsteps:\n  - task: prepare\n  - await: approved_v3\n"
        "  - task: book\n"
    )
    mapped = d.engine.plan_migration("approval", v3.version, mapping={"approved": "approved_v3"})
    drain_batch(d.engine, d.engine.apply_migration(mapped, rate_per_s=1000).batch_id)
    kept = d.engine.describe(iid, include_events=True).step_inputs
    assert "approved" not in kept and kept["approved_v3"]["context"] == received
    d.engine.signal(iid, "approved_v3", {"ok": 1})
    assert d.run(iid).status is InstanceStatus.COMPLETED
    d.engine.reset(iid, "approved_v3")
    view = d.run(iid, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    (waiting,) = [t for t in view.tokens if t.state is TokenState.AWAITING]
    assert (waiting.node_id, waiting.context) == ("approved_v3", received)
