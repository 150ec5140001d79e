"""When the machine, not the worker, spoiled a run: judged from hand-made records, no clock."""

from __future__ import annotations

from dataclasses import replace

from wiggle.compiler import load_flow
from wiggle.conformance._cases import Moment
from wiggle.conformance._recorder import Call, Delivery, StepSeen
from wiggle.conformance._spoiled import Landed, late_landings, spoiled, unexplained_lapses
from wiggle.conformance._trace import TraceLine

FLOW = """
wiggle: 1
name: spoiled
steps:
  - {task: append, id: a}
  - {task: hold, id: c}
  - {task: append, id: d}
"""
GRAPH = load_flow(FLOW.encode()).graph
ROOT = "i"


def delivered(node: str, lease: str, at: float, instance: str = ROOT) -> Delivery:
    return Delivery(
        task_id=f"t-{lease}",
        lease=lease,
        instance_id=instance,
        flow="spoiled",
        version=GRAPH.version,
        node_id=node,
        attempt=1,
        mode="SERVER",
        loop_counts=b"{}",
        via="poll",
        queues=("default", "other"),
        max_request_bytes=256 * 1024,
        max_payload_bytes=64 * 1024,
        timeout_ms=1000,
        at=at,
    )


def complete(lease: str, at: float, code: str = "OK") -> Call:
    return Call(order=0, at=at, rpc="CompleteTask", task_id=f"t-{lease}", lease=lease, code=code)


def advance(lease: str, at: float, *nodes: str, final: bool = False) -> Call:
    steps = tuple(StepSeen(n, "context") for n in nodes)
    return Call(
        order=0, at=at, rpc="AdvanceRun", task_id=f"t-{lease}", lease=lease, steps=steps,
        final=final,
    )  # fmt: skip


def line(seq: int, node: str) -> TraceLine:
    return TraceLine(seq, ROOT, "spoiled", node, node, 1)


def kill_at_c(at: float, lines: int, action: str = "kill") -> Landed:
    return Landed(action, Moment.parse("started:c"), at, lines)


def test_a_kill_while_the_hold_runs_is_on_time():
    # SERVER: a reported, c leased and traced, killed before its report.
    deliveries = [delivered("a", "L1", 1.0), delivered("c", "L2", 2.0)]
    calls = [complete("L1", 1.5)]
    lines = [line(0, "a"), line(1, "c")]
    assert late_landings([kill_at_c(3.0, 2)], GRAPH, ROOT, lines, deliveries, calls) == []


def test_a_kill_after_the_hold_was_reported_landed_late():
    deliveries = [delivered("a", "L1", 1.0), delivered("c", "L2", 2.0)]
    calls = [complete("L1", 1.5), complete("L2", 2.9)]
    lines = [line(0, "a"), line(1, "c")]
    assert late_landings([kill_at_c(3.0, 2)], GRAPH, ROOT, lines, deliveries, calls) == [
        "the kill at started:c landed after c ended (c had been reported)"
    ]
    # The redelivered c, leased after the kill, reports c too: that is no sign of lateness.
    redelivered = [*deliveries[:1], delivered("c", "L2", 2.0), delivered("c", "L3", 4.0)]
    calls = [complete("L1", 1.5), complete("L3", 4.5)]
    assert late_landings([kill_at_c(3.0, 2)], GRAPH, ROOT, lines, redelivered, calls) == []


def test_a_local_run_that_moved_past_the_hold_before_the_pause_landed_late():
    # LOCAL_ASYNC: nothing reported, but d had started by the time the worker froze.
    deliveries = [delivered("a", "L1", 1.0)]
    lines = [line(0, "a"), line(1, "c"), line(2, "d")]
    late = late_landings([kill_at_c(3.0, 3, "pause")], GRAPH, ROOT, lines, deliveries, [])
    assert late == ["the pause at started:c landed after c ended (d had started)"]
    # d traced after the pause (seq 2 >= 2 lines at the time) is what came next, not lateness.
    assert late_landings([kill_at_c(3.0, 2, "pause")], GRAPH, ROOT, lines, deliveries, []) == []
    # An AdvanceRun carrying c before the pause: late as well.
    calls = [advance("L1", 2.5, "a", "c")]
    assert late_landings([kill_at_c(3.0, 2, "pause")], GRAPH, ROOT, lines, deliveries, calls)


def test_a_cancel_counts_only_reports_answered_before_it():
    deliveries = [delivered("c", "L2", 2.0)]
    cancel = kill_at_c(3.0, 1, "cancel")
    # Answered after the cancel went out: the server may have taken it before or after the
    # cancel, and a report it took after would be refused; not evidence of lateness.
    after = [complete("L2", 3.5)]
    assert late_landings([cancel], GRAPH, ROOT, [line(0, "c")], deliveries, after) == []
    before = [complete("L2", 2.5)]
    assert late_landings([cancel], GRAPH, ROOT, [line(0, "c")], deliveries, before) == [
        "the cancel at started:c landed after c ended (c had been reported)"
    ]


def test_a_cancel_is_judged_by_when_it_reached_the_server():
    deliveries = [delivered("c", "L2", 2.0)]
    calls = [complete("L2", 3.5)]
    sent = kill_at_c(3.0, 1, "cancel")
    # Sent while c held, but served only after c's report was answered: late.
    arrived = replace(sent, arrived=4.0)
    assert late_landings([arrived], GRAPH, ROOT, [line(0, "c")], deliveries, calls) == [
        "the cancel at started:c landed after c ended (c had been reported)"
    ]
    # Served before the report: in time, whatever the engine did with it.
    in_time = replace(sent, arrived=3.2)
    assert late_landings([in_time], GRAPH, ROOT, [line(0, "c")], deliveries, calls) == []


def test_only_faults_aimed_at_a_hold_can_land_late():
    deliveries = [delivered("a", "L1", 1.0)]
    calls = [complete("L1", 1.5)]
    at_a = Landed("kill", Moment.parse("started:a"), 3.0, 1)
    term = kill_at_c(3.0, 2, "term")
    lines = [line(0, "a"), line(1, "c"), line(2, "d")]
    assert late_landings([at_a, term], GRAPH, ROOT, lines, deliveries, calls) == []


def test_lapses_are_explained_by_the_leases_a_kill_took_down():
    deliveries = [delivered("a", "L1", 1.0), delivered("c", "L2", 2.0), delivered("c", "L3", 4.0)]
    calls = [complete("L1", 1.5)]  # L2 was live when the worker died
    kill = kill_at_c(3.0, 2)
    assert unexplained_lapses([kill], [4.0], deliveries, calls) is None
    assert unexplained_lapses([kill], [4.0, 4.5], deliveries, calls) == (
        "1 lease(s) expired that no fault explains"
    )
    assert unexplained_lapses([], [4.0], deliveries, calls) == (
        "1 lease(s) expired that no fault explains"
    )
    assert unexplained_lapses([], [], deliveries, calls) is None
    # A pause may cost more leases than the frozen worker held: not judged.
    pause = kill_at_c(3.0, 2, "pause")
    assert unexplained_lapses([pause], [4.0, 4.1, 4.2], deliveries, calls) is None
    # A heartbeat does not end a lease; a final AdvanceRun does.
    beat = Call(order=0, at=2.5, rpc="Heartbeat", task_id="t-L2", lease="L2")
    assert unexplained_lapses([kill], [4.0], deliveries, [*calls, beat]) is None
    ended = advance("L2", 2.5, "c", final=True)
    assert unexplained_lapses([kill], [4.0], deliveries, [*calls, ended]) is not None


def test_a_lease_that_expired_before_the_kill_began_is_not_the_kills():
    # A starved worker let L1 (a) lapse at 2.0, its report of it refused, then ran c under L2
    # and was killed at 3.0: two expiries, and two leases not ended by a final report, but only
    # L2's expiry is the kill's doing (crash/kill-in-branch, TypeScript worker, loaded machine).
    deliveries = [delivered("a", "L1", 1.0), delivered("c", "L2", 2.5)]
    refused = complete("L1", 2.2, code="FAILED_PRECONDITION")
    kill = replace(kill_at_c(3.1, 2), began=3.0)
    assert unexplained_lapses([kill], [2.0, 4.0], deliveries, [refused]) == (
        "1 lease(s) expired that no fault explains"
    )
    # Logged by the server after the kill began, an expiry counts as the kill's.
    assert unexplained_lapses([kill], [3.05, 4.0], deliveries, [refused]) is None


def test_spoiled_joins_every_reason():
    deliveries = [delivered("c", "L2", 2.0)]
    calls = [complete("L2", 2.5)]
    why = spoiled([kill_at_c(3.0, 1)], GRAPH, ROOT, [line(0, "c")], deliveries, calls, [4.0])
    assert why == (
        "the kill at started:c landed after c ended (c had been reported); "
        "1 lease(s) expired that no fault explains"
    )
    assert spoiled([], GRAPH, ROOT, [], deliveries, calls, []) is None


def test_a_term_is_late_when_the_next_step_had_started():
    deliveries = [delivered("a", "L1", 1.0)]
    calls = [complete("L1", 1.5)]
    lines = [line(0, "a"), line(1, "c"), line(2, "d")]
    # Sent while c held (two lines written): a worker that then ran d failed to drain.
    assert late_landings([kill_at_c(3.0, 2, "term")], GRAPH, ROOT, lines, deliveries, calls) == []
    # Sent once d had started (three lines written): the machine was late, not the worker.
    assert late_landings([kill_at_c(3.0, 3, "term")], GRAPH, ROOT, lines, deliveries, calls) == [
        "the term at started:c landed after c ended (d had started)"
    ]


def test_a_term_sent_after_the_hold_was_reported_is_late():
    # SERVER: c reported at 2.5; the worker's next poll was open and brought d, which the drain
    # handed back. The term was sent at 2.6, so it aimed at a step no longer in flight.
    deliveries = [delivered("a", "L1", 1.0), delivered("c", "L2", 2.0), delivered("d", "L3", 2.7)]
    calls = [complete("L1", 1.5), complete("L2", 2.5)]
    lines = [line(0, "a"), line(1, "c")]
    late = replace(kill_at_c(3.0, 2, "term"), began=2.6)
    assert late_landings([late], GRAPH, ROOT, lines, deliveries, calls) == [
        "the term at started:c was sent after c ended (c had been reported)"
    ]
    # Sent while c held, reported during the drain: on time (taking d would be the worker's
    # failure to drain).
    in_time = replace(kill_at_c(3.0, 2, "term"), began=2.2)
    assert late_landings([in_time], GRAPH, ROOT, lines, deliveries, calls) == []
    # LOCAL_ASYNC: the buffered results of a and c go in the drain's final report.
    buffered = [delivered("a", "L1", 1.0)]
    drained = [advance("L1", 2.5, "a", "c", final=True)]
    assert late_landings([in_time], GRAPH, ROOT, lines, buffered, drained) == []


def test_a_pause_explains_the_lapses_of_leases_handed_out_before_the_thaw_only():
    # L1 held when frozen, L2 handed to the frozen worker's open poll, L3 after the thaw.
    deliveries = [delivered("c", "L1", 1.0), delivered("c", "L2", 3.5), delivered("c", "L3", 5.0)]
    pause = Landed("pause", Moment.parse("started:c"), 2.0, 2, thawed=4.0)
    assert unexplained_lapses([pause], [4.5, 4.6], deliveries, []) is None
    # The lease handed out after the thaw lapsed too: the machine starved the worker.
    assert unexplained_lapses([pause], [4.5, 4.6, 6.0], deliveries, []) == (
        "1 lease(s) expired that no fault explains"
    )
