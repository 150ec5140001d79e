"""Bulk actions: a durable batch over what a filter matched, each instance's action once."""

from __future__ import annotations

import threading

import pytest
from engine_testkit import Fail, drain_batch, events_of

from wiggle.engine import Engine, InstanceStatus
from wiggle.errors import BatchNotFound, InvalidRequest

FLOW = """
wiggle: 1
name: bulky
steps:
  - task: work
  - await: go
  - task: last
"""


def _fleet(make_driver, broken: list[bool]):
    def work(ctx):
        if broken[0] and ctx.get("n", 0) % 2 == 0:
            raise Fail("dependency down", non_retryable=True)
        return ctx

    d = make_driver({"work": work, "last": lambda c: {**c, "last": True}})
    d.deploy(FLOW)
    return d


def test_bulk_retry_by_filter_previews_then_retries_each_failed_instance_once(make_driver):
    broken = [True]
    d = _fleet(make_driver, broken)
    e = d.engine
    ids = [e.start("bulky", {"n": n}).instance_id for n in range(10)]
    for _ in range(20):
        d.step()
    failed = {i for i in ids if e.describe(i).status is InstanceStatus.FAILED}
    assert len(failed) == 5
    preview = e.preview_bulk(["flow=bulky", "status=FAILED"])
    assert preview.matched == 5 and preview.by_status["FAILED"] == 5
    assert set(preview.first_ids) == failed
    broken[0] = False
    batch = e.start_bulk(
        "retry", ["flow=bulky", "status=FAILED"], requested_by="ops", rate_per_s=1000
    )
    assert (batch.action, batch.matched, batch.pending, batch.state) == ("retry", 5, 5, "RUNNING")
    done = drain_batch(e, batch.batch_id)
    assert (done.state, done.done, done.skipped, done.failed) == ("DONE", 5, 0, 0)
    for iid in failed:
        view = e.describe(iid, include_events=True)
        assert view.status is InstanceStatus.RUNNING
        (retried,) = events_of(view, "instance_retried")
        assert retried.detail["by"].startswith(f"batch {batch.batch_id[:12]} (ops)")


def test_bulk_signal_and_cancel_skip_what_no_longer_applies(make_driver):
    d = _fleet(make_driver, [False])
    e = d.engine
    ids = [e.start("bulky", {"n": n}).instance_id for n in range(6)]
    for _ in range(10):
        d.step()
    e.cancel(ids[0])
    batch = e.start_bulk(
        "signal", ["flow=bulky"], params={"name": "go", "payload": {"ok": 1}}, rate_per_s=1000
    )
    view = drain_batch(e, batch.batch_id)
    assert (view.done, view.skipped) == (5, 1)
    (skipped,) = view.items
    assert skipped.instance_id == ids[0] and "CANCELLED" in skipped.message
    for _ in range(10):
        d.step()
    assert all(e.describe(i).status is InstanceStatus.COMPLETED for i in ids[1:])
    cancel = e.start_bulk("cancel", ["flow=bulky"], params={"reason": "cleanup"}, rate_per_s=1000)
    view = drain_batch(e, cancel.batch_id)
    assert (view.done, view.skipped) == (0, 6)  # finished or already cancelled


def test_a_bulk_action_that_matches_nothing_or_is_malformed_is_refused(make_driver):
    d = _fleet(make_driver, [False])
    e = d.engine
    with pytest.raises(InvalidRequest, match="matches no instance"):
        e.start_bulk("retry", ["flow=bulky"])
    e.start("bulky", {})
    with pytest.raises(InvalidRequest, match="needs a filter"):
        e.start_bulk("cancel", [])
    with pytest.raises(InvalidRequest, match="unknown bulk action 'explode'"):
        e.start_bulk("explode", ["flow=bulky"])
    with pytest.raises(InvalidRequest, match="needs the node to reset to"):
        e.start_bulk("reset", ["flow=bulky"])
    with pytest.raises(InvalidRequest, match="not a built-in field"):
        e.start_bulk("cancel", ["colour=red"])
    with pytest.raises(BatchNotFound):
        e.get_batch("nope")
    assert e.list_batches() == []


PARALLEL = """
wiggle: 1
name: branches
steps:
  - task: work
  - parallel:
      left:
        - task: inner
      right:
        - task: other
    combine: merge
  - task: last
"""

PARALLEL_V2 = PARALLEL.replace("  - task: last\n", "  - task: last\n  - task: audit\n")


def test_a_bulk_reset_no_matched_instance_could_take_is_refused_before_the_batch(make_driver):
    """A bulk reset to a node the flow lacks (or one inside a block, or the end) was recorded
    as a batch whose every item then failed; it is refused at once, saying why, and nothing is
    recorded. A node that some matched versions have is accepted."""
    d = make_driver({})
    d.deploy(PARALLEL)
    e = d.engine
    e.start("branches", {})
    for node, why in (
        ("nope", "flow 'branches' .* has no node 'nope'; its nodes: .*work"),
        ("inner", "inside parallel block 'parallel-1'.*reset to 'parallel-1' instead"),
        ("end", "the end of the flow"),
    ):
        with pytest.raises(InvalidRequest, match=f"no instance the filter matches .*{why}"):
            e.start_bulk("reset", ["flow=branches"], params={"node": node})
        # The preview of that run refuses it the same way (it said "matches 1" before).
        with pytest.raises(InvalidRequest, match=f"no instance the filter matches .*{why}"):
            e.preview_bulk(["flow=branches"], "reset", {"node": node})
    with pytest.raises(InvalidRequest, match="needs the node"):
        e.preview_bulk(["flow=branches"], "reset", {})
    with pytest.raises(InvalidRequest, match="unknown bulk action 'rewind'"):
        e.preview_bulk(["flow=branches"], "rewind", {})
    assert e.preview_bulk(["flow=branches"], "reset", {"node": "work"}).matched == 1
    assert e.list_batches() == []
    d.deploy(PARALLEL_V2)
    e.start("branches", {})  # the new version has `audit`, the first does not
    batch = e.start_bulk("reset", ["flow=branches"], params={"node": "audit"})
    assert batch.matched == 2


def test_pause_resume_and_cancel_a_batch(make_driver):
    d = _fleet(make_driver, [False])
    e = d.engine
    for n in range(4):
        e.start("bulky", {"n": n})
    batch = e.start_bulk("cancel", ["flow=bulky"], rate_per_s=1000)
    paused = e.set_batch_state(batch.batch_id, "PAUSED")
    assert paused.state == "PAUSED"
    e.tick()
    assert e.get_batch(batch.batch_id).done == 0  # a paused batch does nothing
    e.set_batch_state(batch.batch_id, "RUNNING")
    assert drain_batch(e, batch.batch_id).done == 4
    second = e.start_bulk("reset", ["flow=bulky"], params={"node": "work"}, rate_per_s=1000)
    stopped = e.set_batch_state(second.batch_id, "CANCELLED")
    assert stopped.state == "CANCELLED" and stopped.finished_at_ms > 0
    e.tick()
    assert e.get_batch(second.batch_id).done == 0
    listed = e.list_batches()
    assert [b.batch_id for b in listed] == [second.batch_id, batch.batch_id]


def test_two_leaders_racing_apply_each_item_once(database_url, make_driver):
    """A deposed leader still mid-tick and the new one: the item's PENDING guard, taken in the
    action's own transaction, lets exactly one of them apply it."""
    broken = [True]
    d = _fleet(make_driver, broken)
    e = d.engine
    ids = [e.start("bulky", {"n": 2 * n}).instance_id for n in range(30)]
    for _ in range(40):
        d.step()
    assert all(e.describe(i).status is InstanceStatus.FAILED for i in ids)
    broken[0] = False
    batch = e.start_bulk("retry", ["status=FAILED"], rate_per_s=100_000)
    other = Engine(database_url)
    try:
        # Both run the bulk runner at once, as two leaders would during a hand-over, until
        # nothing is left: every item is fought over.
        def leader(eng: Engine) -> None:
            while eng.get_batch(batch.batch_id).state == "RUNNING":
                eng._bulk.tick()

        threads = [threading.Thread(target=leader, args=(eng,)) for eng in (e, other, e, other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        view = e.get_batch(batch.batch_id)
    finally:
        other.close()
    assert (view.done, view.skipped, view.failed) == (30, 0, 0)
    for iid in ids:
        assert len(events_of(e.describe(iid, include_events=True), "instance_retried")) == 1
