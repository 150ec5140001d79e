"""Every vocabulary element end to end, on both databases and under all three modes."""

from __future__ import annotations

import pytest
from engine_testkit import MODES, events_of

from wiggle.engine import InstanceStatus, TokenState
from wiggle.errors import SignalNotAwaited

pytestmark = pytest.mark.parametrize("mode", MODES)


def test_linear_task_results_replace_the_context(make_driver, mode):
    d = make_driver({"a": lambda c: {"a": c["x"] + 1}, "b": lambda c: {**c, "b": True}}, mode=mode)
    d.deploy("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n")
    r = d.engine.start("lin", {"x": 1, "dropped": 1})
    view = d.run(r.instance_id)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context == {"a": 2, "b": True}
    assert view.execution_mode.value == "SERVER"
    assert d.ran == ["a", "b"]


def test_top_level_filter_completes_filtered(make_driver, mode):
    d = make_driver({"keep": lambda c: c["keep"], "after": lambda c: {**c, "after": 1}}, mode=mode)
    d.deploy("wiggle: 1\nname: f\nsteps:\n  - filter: keep\n  - task: after\n")
    yes = d.run(d.engine.start("f", {"keep": True}).instance_id)
    assert (yes.status, yes.reason, yes.context) == (
        InstanceStatus.COMPLETED,
        "",
        {"keep": True, "after": 1},
    )
    no = d.run(d.engine.start("f", {"keep": False}).instance_id)
    assert (no.status, no.reason, no.context) == (
        InstanceStatus.COMPLETED,
        "filtered",
        {"keep": False},
    )


CHOICE = """
wiggle: 1
name: choose
steps:
  - choice:
      - when: is_a
        steps: [{task: got_a}]
      - when: is_b
        steps: [{task: got_b}]
    otherwise:
      - task: got_other
  - task: tail
"""


def test_choice_takes_the_first_true_arm_or_otherwise(make_driver, mode):
    d = make_driver(
        {
            "is_a": lambda c: c["v"] == "a",
            "is_b": lambda c: c["v"] in ("a", "b"),
            "got_a": lambda c: {**c, "arm": "a"},
            "got_b": lambda c: {**c, "arm": "b"},
            "got_other": lambda c: {**c, "arm": "other"},
            "tail": lambda c: {**c, "tail": True},
        },
        mode=mode,
    )
    d.deploy(CHOICE)
    for v, arm in [("a", "a"), ("b", "b"), ("z", "other")]:
        view = d.run(d.engine.start("choose", {"v": v}).instance_id)
        assert view.context == {"v": v, "arm": arm, "tail": True}


def test_choice_without_otherwise_continues(make_driver, mode):
    d = make_driver({"p": lambda c: False, "x": lambda c: 1, "tail": lambda c: {"t": c}}, mode=mode)
    d.deploy(
        "wiggle: 1\nname: c2\nsteps:\n  - choice:\n      - when: p\n"
        "        steps: [{task: x}]\n  - task: tail\n"
    )
    view = d.run(d.engine.start("c2", {"in": 1}).instance_id)
    assert view.context == {"t": {"in": 1}}


PARALLEL = """
wiggle: 1
name: par
steps:
  - parallel:
      left:
        - task: mutate
      right:
        - filter: keep_right
        - task: mark
    combine: merge
"""


def test_parallel_branches_run_on_isolated_copies_and_combine(make_driver, mode):
    def mutate(c):
        c["mutated"] = True  # in place: must not leak into the other branch
        return c

    d = make_driver(
        {
            "mutate": mutate,
            "keep_right": lambda c: c["keep"],
            "mark": lambda c: {**c, "right": True},
            "merge": lambda i: {"at_fork": i["context"], "results": i["results"]},
        },
        mode=mode,
    )
    d.deploy(PARALLEL)
    view = d.run(d.engine.start("par", {"keep": True}).instance_id)
    assert view.context == {
        "at_fork": {"keep": True},
        "results": {
            "left": {"keep": True, "mutated": True},
            "right": {"keep": True, "right": True},
        },
    }
    filtered = d.run(d.engine.start("par", {"keep": False}).instance_id)
    assert filtered.status is InstanceStatus.COMPLETED
    assert filtered.context["results"] == {"left": {"keep": False, "mutated": True}}


FOREACH = """
wiggle: 1
name: each
steps:
  - for_each: /items
    steps:
      - filter: not_skip
      - task: double
    combine: collect
"""


def _each_handlers():
    return {
        "not_skip": lambda x: x != 3,
        "double": lambda x: x * 2,
        "collect": lambda i: {"results": i["results"], "n": len(i["context"]["items"])},
    }


def test_for_each_over_a_list_keeps_order_and_leaves_filtered_out(make_driver, mode):
    d = make_driver(_each_handlers(), mode=mode)
    d.deploy(FOREACH)
    view = d.run(d.engine.start("each", {"items": [1, 2, 3, 4]}).instance_id)
    assert view.context == {"results": [2, 4, 8], "n": 4}


def test_for_each_over_an_object_keeps_keys(make_driver, mode):
    d = make_driver(_each_handlers(), mode=mode)
    d.deploy(FOREACH)
    view = d.run(d.engine.start("each", {"items": {"a": 1, "b": 3, "c": 5}}).instance_id)
    assert view.context == {"results": {"a": 2, "c": 10}, "n": 3}


def test_for_each_over_an_empty_collection_goes_straight_to_combine(make_driver, mode):
    d = make_driver(_each_handlers(), mode=mode)
    d.deploy(FOREACH)
    assert d.run(d.engine.start("each", {"items": []}).instance_id).context == {
        "results": [],
        "n": 0,
    }
    assert d.run(d.engine.start("each", {"items": {}}).instance_id).context == {
        "results": {},
        "n": 0,
    }
    assert "double" not in d.ran


@pytest.mark.parametrize("items", [{"items": 5}, {"items": "abc"}, {"other": []}])
def test_for_each_over_a_non_collection_fails_clearly(make_driver, mode, items):
    d = make_driver(_each_handlers(), mode=mode)
    d.deploy(FOREACH)
    view = d.run(d.engine.start("each", items).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert "for_each" in view.reason and "/items" in view.reason
    assert "not a list or an object" in view.reason


def test_for_each_max_concurrency_limits_live_elements(make_driver, engine, mode):
    live_seen: list[int] = []
    holder: dict[str, str] = {}

    def work(x):
        view = engine.describe(holder["id"])
        live = [
            t
            for t in view.tokens
            if t.node_id == "work" and t.state in (TokenState.READY, TokenState.LEASED)
        ]
        live_seen.append(len(live))
        return x + 100

    d = make_driver({"work": work, "collect": lambda i: i["results"]}, mode=mode)
    d.deploy(
        "wiggle: 1\nname: mc\nsteps:\n  - for_each: /xs\n    max_concurrency: 2\n"
        "    steps: [{task: work}]\n    combine: collect\n"
    )
    r = d.engine.start("mc", {"xs": list(range(7))})
    holder["id"] = r.instance_id
    view = d.run(r.instance_id)
    assert view.context == [100 + i for i in range(7)]
    assert max(live_seen) <= 2
    assert len(live_seen) == 7


LOOP = """
wiggle: 1
name: loop
steps:
  - loop:
      steps:
        - task: inc
      while: below
      max_iterations: 5
  - task: done
"""


def test_loop_repeats_while_true_and_fails_past_max_iterations(make_driver, mode):
    d = make_driver(
        {
            "inc": lambda c: {**c, "n": c["n"] + 1},
            "below": lambda c: c["n"] < c["limit"],
            "done": lambda c: {**c, "done": True},
        },
        mode=mode,
    )
    d.deploy(LOOP)
    ok = d.run(d.engine.start("loop", {"n": 0, "limit": 5}).instance_id)
    assert ok.status is InstanceStatus.COMPLETED
    assert ok.context == {"n": 5, "limit": 5, "done": True}
    over = d.run(d.engine.start("loop", {"n": 0, "limit": 50}).instance_id)
    assert over.status is InstanceStatus.FAILED
    assert over.reason == "loop 'below' exceeded max_iterations 5"


def test_loop_counts_reset_when_the_loop_exits(make_driver, mode):
    # The same loop entered twice (inside an outer loop) starts counting afresh.
    d = make_driver(
        {
            "inc": lambda c: {**c, "n": c["n"] + 1},
            "inner": lambda c: c["n"] % 4 != 0,
            "outer": lambda c: c["n"] < 12,
        },
        mode=mode,
    )
    d.deploy(
        "wiggle: 1\nname: nested-loop\nsteps:\n  - loop:\n      steps:\n        - loop:\n"
        "            steps: [{task: inc}]\n            while: inner\n"
        "            max_iterations: 4\n"
        "      while: outer\n      max_iterations: 10\n"
    )
    view = d.run(d.engine.start("nested-loop", {"n": 0}).instance_id)
    assert view.status is InstanceStatus.COMPLETED, view.reason
    assert view.context == {"n": 12}


def test_sleep_by_duration_parks_on_a_timer(make_driver, mode, clock):
    d = make_driver({"a": lambda c: c, "b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy("wiggle: 1\nname: nap\nsteps:\n  - task: a\n  - sleep: 150ms\n  - task: b\n")
    r = d.engine.start("nap", {})
    parked = d.run(
        r.instance_id,
        until=lambda v: any(
            t.state is TokenState.WAITING and t.node_id == "sleep-1" for t in v.tokens
        ),
    )
    assert parked.status is InstanceStatus.RUNNING
    view = d.run(r.instance_id)
    assert view.context == {"b": 1}
    assert len(events_of(view, "timer_fired")) == 1


UNTIL = "wiggle: 1\nname: until\nsteps:\n  - sleep: {until: /at}\n  - task: b\n"


def test_sleep_until_an_instant(make_driver, engine, mode, clock):
    d = make_driver({"b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy(UNTIL)
    past = d.run(d.engine.start("until", {"at": "2001-01-01T00:00:00Z"}).instance_id)
    assert past.status is InstanceStatus.COMPLETED
    assert events_of(past, "timer_fired") == []
    import datetime as dt

    soon_ms = clock.now_ms() + 1500
    soon = dt.datetime.fromtimestamp(soon_ms / 1000, dt.UTC).isoformat()
    view = d.run(d.engine.start("until", {"at": soon}).instance_id)
    assert view.status is InstanceStatus.COMPLETED
    (fired,) = events_of(view, "timer_fired")
    assert fired.at_ms >= soon_ms


@pytest.mark.parametrize("ctx", [{"at": "tomorrow"}, {"at": 12}, {}, {"at": "2030-01-01T00:00:00"}])
def test_sleep_until_a_bad_instant_fails_clearly(make_driver, mode, ctx):
    d = make_driver({"b": lambda c: c}, mode=mode)
    d.deploy(UNTIL)
    view = d.run(d.engine.start("until", ctx).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason.startswith("sleep 'sleep-1': /at ")


UNTIL_EXPR = (
    "wiggle: 1\nname: until-expr\nsteps:\n"
    '  - sleep: {until: "timestamp(ctx.at) + duration(ctx.wait)"}\n  - task: b\n'
)


def test_sleep_until_an_expression_waits_for_the_instant_it_computes(make_driver, mode, clock):
    import datetime as dt

    d = make_driver({"b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy(UNTIL_EXPR)
    now = dt.datetime.fromtimestamp(clock.now_ms() / 1000, dt.UTC)
    at = now.isoformat().replace("+00:00", "Z")
    view = d.run(d.engine.start("until-expr", {"at": at, "wait": "90s"}).instance_id)
    assert view.status is InstanceStatus.COMPLETED
    (fired,) = events_of(view, "timer_fired")
    assert fired.at_ms >= int(now.timestamp() * 1000) + 90_000
    past = d.run(
        d.engine.start("until-expr", {"at": "2001-01-01T00:00:00Z", "wait": "1s"}).instance_id
    )
    assert past.status is InstanceStatus.COMPLETED and events_of(past, "timer_fired") == []


def test_sleep_until_an_expression_records_the_instant_it_computed(make_driver, mode):
    d = make_driver({"b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy(UNTIL_EXPR)
    past = d.run(
        d.engine.start("until-expr", {"at": "2001-01-01T00:00:00Z", "wait": "1.25s"}).instance_id
    )
    assert past.status is InstanceStatus.COMPLETED
    (armed,) = events_of(past, "timer_set")
    assert armed.node_id == "sleep-1"
    assert armed.detail["until"] == "2001-01-01T00:00:01.250Z"


@pytest.mark.parametrize(
    ("ctx", "says"),
    [
        ({"at": "tomorrow", "wait": "1s"}, "invalid_argument"),
        ({"wait": "1s"}, "no_such_key"),
        ({"at": [1], "wait": "1s"}, "type_mismatch"),
    ],
)
def test_sleep_until_a_failing_expression_fails_clearly(make_driver, mode, ctx, says):
    d = make_driver({"b": lambda c: c}, mode=mode)
    d.deploy(UNTIL_EXPR)
    view = d.run(d.engine.start("until-expr", ctx).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason.startswith(f"sleep 'sleep-1': {says}"), view.reason


AWAIT = """
wiggle: 1
name: wait
steps:
  - task: a
  - await: approve
  - task: b
"""


def test_signal_before_the_await_is_buffered(make_driver, mode):
    d = make_driver({"a": lambda c: c, "b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy(AWAIT)
    r = d.engine.start("wait", {"x": 1})
    assert d.engine.signal(r.instance_id, "approve", {"ok": True}) is False
    view = d.run(r.instance_id)
    assert view.context == {"x": 1, "b": 1}  # without apply the context is unchanged
    assert [e.kind for e in view.events if e.kind.startswith("signal")] == [
        "signal_received",
        "signal_consumed",
    ]


def test_signal_after_the_await_is_reached_is_delivered(make_driver, mode):
    d = make_driver({"a": lambda c: c, "b": lambda c: {**c, "b": 1}}, mode=mode)
    d.deploy(AWAIT)
    r = d.engine.start("wait", {"x": 1})
    d.run(r.instance_id, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    # A name no await of the flow takes is refused (buffered, it could never land).
    with pytest.raises(SignalNotAwaited, match="it awaits 'approve'"):
        d.engine.signal(r.instance_id, "other", 1)
    assert d.engine.signal(r.instance_id, "approve", None) is True
    assert d.run(r.instance_id).context == {"x": 1, "b": 1}


def test_await_apply_gets_context_and_signal_fifo_per_name(make_driver, mode):
    d = make_driver(
        {"merge": lambda i: {"seen": [*i["context"].get("seen", []), i["signal"]]}},
        mode=mode,
    )
    d.deploy(
        "wiggle: 1\nname: fifo\nsteps:\n  - await: s\n    apply: merge\n"
        "  - await: s\n    id: second\n    apply: merge\n"
    )
    r = d.engine.start("fifo", {})
    d.engine.signal(r.instance_id, "s", "first")
    d.engine.signal(r.instance_id, "s", "second")
    assert d.run(r.instance_id).context == {"seen": ["first", "second"]}


def test_await_timeout_runs_on_timeout_steps_then_continues(make_driver, mode, clock):
    d = make_driver(
        {"escalate": lambda c: {**c, "escalated": True}, "b": lambda c: {**c, "b": 1}}, mode=mode
    )
    d.deploy(
        "wiggle: 1\nname: to\nsteps:\n  - await: s\n    timeout: 200ms\n"
        "    on_timeout:\n      - task: escalate\n  - task: b\n"
    )
    late = d.run(d.engine.start("to", {}).instance_id)
    assert late.context == {"escalated": True, "b": 1}
    r = d.engine.start("to", {})
    d.engine.signal(r.instance_id, "s", 1)
    assert d.run(r.instance_id).context == {"b": 1}


CHILD = "wiggle: 1\nname: child\nsteps:\n  - task: c1\n"
PARENT = "wiggle: 1\nname: parent\nsteps:\n  - task: p1\n  - subflow: child\n  - task: p2\n"


def test_subflow_result_replaces_the_parent_context(make_driver, mode):
    d = make_driver(
        {
            "p1": lambda c: {**c, "p1": 1},
            "c1": lambda c: {"child_saw": c},
            "p2": lambda c: {**c, "p2": 1},
        },
        mode=mode,
    )
    d.deploy(CHILD)
    d.deploy(PARENT)
    view = d.run(d.engine.start("parent", {"x": 1}).instance_id)
    assert view.status is InstanceStatus.COMPLETED
    assert view.context == {"child_saw": {"x": 1, "p1": 1}, "p2": 1}
    (started,) = events_of(view, "child_started")
    child = d.engine.describe(started.detail["child_instance_id"])
    assert child.parent_instance_id == view.instance_id
    assert child.status is InstanceStatus.COMPLETED


def test_unpinned_subflow_resolves_the_newest_version_at_child_start(make_driver, mode):
    d = make_driver(
        {"p1": lambda c: c, "c1": lambda c: "v1", "c2": lambda c: "v2", "p2": lambda c: c},
        mode=mode,
    )
    d.deploy(CHILD)
    d.deploy(PARENT)
    d.deploy("wiggle: 1\nname: child\nsteps:\n  - task: c2\n")
    assert d.run(d.engine.start("parent", {}).instance_id).context == "v2"


def test_a_failed_child_fails_the_parent_naming_it(make_driver, mode):
    from engine_testkit import Fail

    def boom(c):
        raise Fail("child broke", non_retryable=True)

    d = make_driver({"p1": lambda c: c, "c1": boom, "p2": lambda c: c}, mode=mode)
    d.deploy(CHILD)
    d.deploy(PARENT)
    view = d.run(d.engine.start("parent", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert "subflow 'child'" in view.reason and "child broke" in view.reason


def test_a_missing_subflow_fails_the_parent_clearly(make_driver, mode):
    d = make_driver({"p1": lambda c: c}, mode=mode)
    d.deploy(PARENT)
    view = d.run(d.engine.start("parent", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert view.reason == "subflow 'child': flow 'child' is not registered"


NESTED = """
wiggle: 1
name: nested
steps:
  - choice:
      - when: fan
        steps:
          - for_each: /groups
            steps:
              - parallel:
                  up:
                    - task: upper
                  len:
                    - loop:
                        steps: [{task: count}]
                        while: more
                        max_iterations: 10
                    - subflow: child
                combine: pair
            combine: gather
  - task: tail
"""


def test_blocks_nest_and_compose(make_driver, mode):
    d = make_driver(
        {
            "fan": lambda c: True,
            "upper": lambda s: s.upper(),
            "count": lambda s: s if isinstance(s, dict) else {"s": s, "n": 1},
            "more": lambda c: False,
            "c1": lambda c: len(c["s"]),
            "pair": lambda i: [i["results"]["up"], i["results"]["len"]],
            "gather": lambda i: i["results"],
            "tail": lambda c: {"out": c},
        },
        mode=mode,
    )
    d.deploy(CHILD)
    d.deploy(NESTED)
    view = d.run(d.engine.start("nested", {"groups": ["ab", "xyz"]}).instance_id)
    assert view.status is InstanceStatus.COMPLETED, view.reason
    assert view.context == {"out": [["AB", 2], ["XYZ", 3]]}


def test_a_loop_around_an_await_consumes_one_signal_per_iteration(make_driver, mode):
    d = make_driver(
        {
            "add": lambda i: {"items": [*i["context"]["items"], i["signal"]]},
            "more": lambda c: c["items"][-1] != "stop",
        },
        mode=mode,
    )
    d.deploy(
        "wiggle: 1\nname: inbox\nsteps:\n  - loop:\n      steps:\n        - await: item\n"
        "          apply: add\n      while: more\n      max_iterations: 10\n"
    )
    r = d.engine.start("inbox", {"items": []})
    d.engine.signal(r.instance_id, "item", 1)
    d.run(r.instance_id, until=lambda v: any(t.state is TokenState.AWAITING for t in v.tokens))
    d.engine.signal(r.instance_id, "item", 2)
    d.engine.signal(r.instance_id, "item", "stop")
    view = d.run(r.instance_id)
    assert view.context == {"items": [1, 2, "stop"]}


def test_a_retry_inside_a_branch_and_a_failed_child_in_another(make_driver, mode, clock):
    from engine_testkit import Fail

    def flaky(c, task):
        if task.attempt == 1:
            raise Fail("transient")
        return "ok"

    def broken(c):
        raise Fail("child is broken", non_retryable=True)

    d = make_driver({"flaky": flaky, "c1": broken, "merge": lambda i: i["results"]}, mode=mode)
    d.deploy(CHILD)
    d.deploy(
        "wiggle: 1\nname: mixed\nsteps:\n  - parallel:\n      a:\n        - task: flaky\n"
        "          retry: {initial: 10ms}\n      b:\n        - subflow: child\n"
        "    combine: merge\n"
    )
    view = d.run(d.engine.start("mixed", {}).instance_id)
    assert view.status is InstanceStatus.FAILED
    assert "child is broken" in view.reason
    assert {t.state for t in view.tokens} == {TokenState.DONE}
