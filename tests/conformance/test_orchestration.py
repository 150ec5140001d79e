"""The orchestration judge on hand-made records: what it accepts and what it reports."""

from __future__ import annotations

from dataclasses import replace
from itertools import count
from typing import Any

import pytest

from wiggle.compiler import load_flow
from wiggle.conformance._orchestration import (
    RunContext,
    check_orchestration,
    logical_reports,
    render_reports,
)
from wiggle.conformance._recorder import Call, Delivery, StepSeen

FLOW = """
wiggle: 1
name: judged
steps:
  - {task: a}
  - {task: b, checkpoint: true}
  - {filter: p}
  - {task: c}
  - {task: d, queue: side}
"""
GRAPH = load_flow(FLOW.encode()).graph
_order = count()


def ctx(**kw: Any) -> RunContext:
    base: dict[str, Any] = {
        "graph_of": {GRAPH.version: GRAPH}.get,
        "batch_size": 5,
        "activities": {"a", "b", "p", "c", "d"},
    }
    return RunContext(**{**base, **kw})


def task(node: str, mode: str, lease: str = "L1") -> Delivery:
    return Delivery(
        task_id=f"t-{node}",
        lease=lease,
        instance_id="i",
        flow="judged",
        version=GRAPH.version,
        node_id=node,
        attempt=1,
        mode=mode,
        loop_counts=b"{}",
        via="poll",
        queues=("default", "other"),
        max_request_bytes=256 * 1024,
        max_payload_bytes=64 * 1024,
        timeout_ms=60_000,
        at=0.0,
    )


def step(node: str, value: Any = "ctx") -> StepSeen:
    if value is True or value is False:
        return StepSeen(node, "predicate", predicate=value)
    if value == "fail":
        return StepSeen(node, "failure")
    if value == "bool-context":
        return StepSeen(node, "context", context_bool=True, entry_bytes=8)
    return StepSeen(node, "context", context_bytes=10, entry_bytes=20)


#: A call's seq left to `judge`, which numbers it as a conforming worker would.
AUTO = -1


def advance(*steps: StepSeen, final: str | None = None, seq: int = AUTO, lease: str = "L1") -> Call:
    return Call(
        order=next(_order),
        at=1.0,
        rpc="AdvanceRun",
        task_id="t",
        lease=lease,
        seq=seq,
        steps=steps,
        final=final is not None,
        reason=final or "",
        keep_going=final is None,
        instance_status="RUNNING",
        request_bytes=100,
    )


def single(rpc: str, lease: str = "L1", seq: int = AUTO, code: str = "OK") -> Call:
    return Call(order=next(_order), at=1.0, rpc=rpc, task_id="t", lease=lease, seq=seq, code=code)


def numbered(calls: list[Call]) -> list[Call]:
    """Each AUTO seq replaced by one past the reports applied under its lease so far."""
    applied: dict[str, int] = {}
    out = []
    for c in calls:
        if c.seq == AUTO:
            c = replace(c, seq=applied.get(c.lease, 0) + 1)
        if c.code == "OK" and not c.injected:
            applied[c.lease] = max(applied.get(c.lease, 0), c.seq)
        out.append(c)
    return out


def judge(delivery: Delivery, *calls: Call, **kw: Any) -> list[str]:
    return check_orchestration([delivery], numbered(list(calls)), ctx(**kw))


def test_a_conforming_async_run_passes() -> None:
    calls = [
        advance(step("a"), step("b")),
        advance(step("p", True), step("c"), final="other_queue"),
    ]
    assert judge(task("a", "LOCAL_ASYNC"), *calls) == []


def test_a_conforming_sync_run_passes() -> None:
    calls = [
        advance(step("a")),
        advance(step("b")),
        advance(step("p", True)),
        advance(step("c"), final="other_queue"),
    ]
    assert judge(task("a", "LOCAL_SYNC"), *calls) == []


def test_a_local_task_reported_as_one_server_step_is_caught() -> None:
    [problem] = judge(task("a", "LOCAL_SYNC"), single("CompleteTask"))
    assert "did not chain" in problem


def test_after_unimplemented_server_steps_are_fine() -> None:
    assert judge(task("a", "LOCAL_SYNC"), single("CompleteTask"), fallback=True) == []


def test_sync_batches_of_several_steps_are_caught() -> None:
    calls = [
        advance(step("a"), step("b")),
        advance(step("p", True), step("c"), final="other_queue"),
    ]
    problems = judge(task("a", "LOCAL_SYNC"), *calls)
    assert any("LOCAL_SYNC sent 2 steps" in p for p in problems)


def test_an_ignored_checkpoint_is_caught() -> None:
    calls = [advance(step("a"), step("b"), step("p", True), step("c"), final="other_queue")]
    [problem] = judge(task("a", "LOCAL_ASYNC"), *calls)
    assert "checkpoint b was not flushed" in problem


def test_a_flush_without_a_reason_is_caught() -> None:
    calls = [
        advance(step("a")),
        advance(step("b")),
        advance(step("p", True), step("c"), final="other_queue"),
    ]
    [problem] = judge(task("a", "LOCAL_ASYNC"), *calls)
    assert "flushed after a (1 steps)" in problem


def test_a_batch_over_the_batch_size_is_caught() -> None:
    calls = [
        advance(step("a"), step("b")),
        advance(step("p", True), step("c"), final="other_queue"),
    ]
    problems = judge(task("a", "LOCAL_ASYNC"), *calls, batch_size=1)
    assert any("the batch size is 1" in p for p in problems)


def test_a_predicate_sent_as_a_context_is_caught() -> None:
    calls = [
        advance(step("a"), step("b")),
        advance(step("p", "bool-context"), step("c"), final="other_queue"),
    ]
    [problem] = judge(task("a", "LOCAL_ASYNC"), *calls)
    assert "predicate p: its boolean was sent as a context" in problem


def test_a_wrong_handback_reason_is_caught() -> None:
    calls = [advance(step("a"), step("b")), advance(step("p", True), step("c"), final="end")]
    [problem] = judge(task("a", "LOCAL_ASYNC"), *calls)
    assert "reason 'end'; expected 'other_queue'" in problem


def test_handing_back_where_the_run_could_go_on_is_caught() -> None:
    [problem] = judge(task("a", "LOCAL_SYNC"), advance(step("a"), final="end"))
    assert "could go on to b" in problem


@pytest.mark.parametrize(
    ("reason", "allowed"),
    [("shutdown", {"terminated": True}), ("lease_budget", {"heartbeats_refused": True})],
)
def test_runtime_reasons_need_their_cause(reason: str, allowed: dict[str, Any]) -> None:
    d = task("a", "LOCAL_SYNC")
    assert judge(d, advance(step("a"), final=reason))
    assert judge(d, advance(step("a"), final=reason), **allowed) == []


def _beat(at: float) -> Call:
    return Call(order=next(_order), at=at, rpc="Heartbeat", task_id="t", lease="L1", seq=0)


def test_lease_budget_after_steady_heartbeats_is_caught() -> None:
    """Heartbeats every third of a 60 s lease, the last 5 s before the hand-back: the worker had
    most of its lease left."""
    d = task("a", "LOCAL_SYNC")
    beats = [_beat(t) for t in (20.0, 40.0, 60.0)]
    [problem] = judge(d, *beats, replace(advance(step("a"), final="lease_budget"), at=65.0))
    assert "heartbeats kept the lease" in problem


def test_lease_budget_is_plausible_after_a_long_gap_in_the_heartbeats() -> None:
    """The worker was held up for 40 s of a 60 s lease: its next heartbeat renewed the lease just
    before the hand-back, whose decision may have come before that renewal's answer did."""
    d = task("a", "LOCAL_SYNC")
    beats = [_beat(t) for t in (20.0, 60.0)]
    assert judge(d, *beats, replace(advance(step("a"), final="lease_budget"), at=60.2)) == []
    # Or with no heartbeat for half a lease before the hand-back.
    assert judge(d, _beat(20.0), replace(advance(step("a"), final="lease_budget"), at=51.0)) == []


def test_unknown_activity_needs_a_missing_activity() -> None:
    d = task("a", "LOCAL_SYNC")
    assert judge(d, advance(step("a"), final="unknown_activity"))
    assert judge(d, advance(step("a"), final="unknown_activity"), activities={"a"}) == []


def test_no_activity_is_missing_in_front_of_a_set_node() -> None:
    # A set node runs no handler: a worker handing back there for want of one does not know it.
    graph = load_flow(b"wiggle: 1\nname: judged-set\nsteps: [{task: a}, {set: {x: '1'}}]").graph
    d = replace(task("a", "LOCAL_SYNC"), flow="judged-set", version=graph.version)
    problems = judge(
        d, advance(step("a"), final="unknown_activity"), graph_of={graph.version: graph}.get
    )
    assert any("but set-1 needs no activity" in p for p in problems), problems


def test_chaining_past_a_queue_the_worker_does_not_serve_is_caught() -> None:
    calls = [advance(step("p", True), step("c"), step("d"), final="end")]
    problems = judge(task("p", "LOCAL_ASYNC"), *calls)
    assert any("chained past c, where the run hands back (other_queue)" in p for p in problems)


def test_a_failure_must_end_the_run_as_step_failed() -> None:
    assert judge(task("a", "LOCAL_SYNC"), advance(step("a", "fail"), final="step_failed")) == []
    [problem] = judge(task("a", "LOCAL_SYNC"), advance(step("a", "fail"), final="end"))
    assert "expected 'step_failed'" in problem


def test_stopping_after_keep_going_is_caught_unless_disturbed() -> None:
    d = task("a", "LOCAL_SYNC")
    [problem] = judge(d, advance(step("a")))
    assert "without handing back" in problem
    assert judge(d, advance(step("a")), disturbed=True) == []


def test_a_task_never_reported_is_caught() -> None:
    [problem] = judge(task("a", "SERVER"))
    assert "never reported" in problem


def test_a_server_task_with_advance_run_is_caught() -> None:
    [problem] = judge(task("a", "SERVER"), advance(step("a"), final="end"))
    assert "SERVER tasks are one step" in problem


def test_resends_count_once_and_render_in_the_vectors_notation() -> None:
    d = task("a", "LOCAL_ASYNC")
    first = advance(step("a"), step("b"), seq=1)
    lost = Call(**{**first.__dict__, "order": next(_order), "code": "UNAVAILABLE"})
    second = advance(step("p", False), final="filtered", seq=2)
    calls = [first, lost, second]
    assert [c.order for c in logical_reports(calls)] == [first.order, second.order]
    assert render_reports([d], calls) == ["advance a b", "advance p=false / filtered"]
    assert judge(d, *calls) == []


def test_a_resend_with_other_content_is_caught() -> None:
    first = advance(step("a"), seq=1)
    lost = Call(**{**first.__dict__, "order": next(_order), "code": "UNAVAILABLE"})
    changed = Call(**{**first.__dict__, "order": next(_order), "steps": (step("a"), step("b"))})
    problems = judge(task("a", "LOCAL_ASYNC"), lost, changed, disturbed=True)
    assert problems == ["task at a (LOCAL_ASYNC): AdvanceRun seq 1 was resent with other content"]


def lost(call: Call) -> Call:
    """`call` as the recorder writes down a report it applied and whose answer it then lost."""
    return replace(call, code="OK", injected="lost")


def test_a_lost_answer_resent_with_its_seq_passes() -> None:
    d = task("a", "SERVER")
    assert judge(d, lost(single("CompleteTask", seq=1)), single("CompleteTask", seq=1)) == []


def test_a_report_without_seq_is_caught_once_per_lease() -> None:
    calls = [advance(step("a"), seq=0), advance(step("b"), seq=0)]
    calls.append(advance(step("p", True), step("c"), final="other_queue", seq=0))
    [problem] = judge(task("a", "LOCAL_SYNC"), *calls, batch_size=1)[:1]
    assert "reports without seq (AdvanceRun seq 0)" in problem
    assert sum("without seq" in p for p in judge(task("a", "LOCAL_SYNC"), *calls)) == 1


def test_a_lost_answer_never_resent_is_caught_unless_the_worker_was_stopped() -> None:
    d = task("a", "LOCAL_SYNC")
    calls = [lost(advance(step("a"), seq=1))]
    [problem] = judge(d, *calls, disturbed=True)
    assert "the answer to AdvanceRun seq 1 was lost and it was never resent" in problem
    assert judge(d, *calls, disturbed=True, resends_due=False) == []


def test_a_lost_answer_need_not_be_resent_once_a_heartbeat_said_the_lease_is_over() -> None:
    """A lost report that ended the instance; a heartbeat in the resend's back-off then
    told the worker so, and a worker that knows its lease is gone stops resending. A heartbeat
    that found the instance still running, or one of another lease, excuses nothing."""
    d = task("a", "LOCAL_SYNC")
    report = lost(advance(step("a"), seq=1))
    for ended in (
        replace(single("Heartbeat"), instance_status="COMPLETED"),
        single("Heartbeat", code="NOT_FOUND"),
    ):
        assert judge(d, report, ended, disturbed=True) == [], ended
    for excuses_nothing in (
        replace(single("Heartbeat"), instance_status="RUNNING"),
        replace(single("Heartbeat", lease="L2"), instance_status="COMPLETED"),
    ):
        [problem] = judge(d, report, excuses_nothing, disturbed=True)
        assert "was lost and it was never resent" in problem
    before = replace(single("Heartbeat"), instance_status="COMPLETED")
    [problem] = judge(d, before, lost(advance(step("a"), seq=1)), disturbed=True)
    assert "was lost and it was never resent" in problem


def test_a_lost_answer_resent_with_a_new_seq_is_caught() -> None:
    d = task("a", "SERVER")
    problems = judge(d, lost(single("CompleteTask", seq=1)), single("CompleteTask", seq=2))
    assert any("was lost; the worker then sent CompleteTask seq 2" in p for p in problems)
    assert any("sent with seq 2; the server had acknowledged 0" in p for p in problems)


def test_a_lost_answer_followed_by_another_report_is_caught() -> None:
    d = task("a", "SERVER")
    problems = judge(d, lost(single("CompleteTask", seq=1)), single("ReleaseTask", seq=1))
    assert any("instead of resending it unchanged" in p for p in problems)


def test_a_refused_report_is_followed_by_one_with_the_same_seq() -> None:
    d = task("a", "SERVER")
    refused = single("CompleteTask", seq=1, code="INTERNAL")
    assert judge(d, refused, single("ReleaseTask", seq=1)) == []
    [problem] = judge(d, refused, single("ReleaseTask", seq=2))
    assert "ReleaseTask sent with seq 2; the server had acknowledged 0 report(s)" in problem


def test_a_seq_reused_after_it_was_applied_is_caught() -> None:
    d = task("a", "LOCAL_SYNC")
    calls = [advance(step("a"), seq=1), single("ReleaseTask", seq=1)]
    problems = judge(d, *calls, disturbed=True)
    assert any("ReleaseTask sent with seq 1; the server had acknowledged 1" in p for p in problems)
    # The same RPC with the same seq is a resend: it must repeat the report unchanged.
    calls = [advance(step("a"), seq=1), advance(step("b"), seq=1, final="end")]
    problems = judge(d, *calls)
    assert any("AdvanceRun seq 1 was resent with other content" in p for p in problems)


def test_results_over_the_limits_are_caught() -> None:
    big = StepSeen("a", "context", context_bytes=64 * 1024 + 1, entry_bytes=20)
    deep = StepSeen("a", "context", context_bytes=600, entry_bytes=20, too_deep=True)
    for seen, phrase in [(big, "65537-byte result, over max_payload_bytes (65536)"),
                         (deep, "nested deeper than 128 levels")]:  # fmt: skip
        problems = judge(task("a", "LOCAL_SYNC"), advance(seen, final="end"))
        assert any(phrase in p for p in problems), problems
