"""The pure pieces of tracing: the derived ids against the shared vectors, traceparent and
tracestate checks, the switch, the attributes."""

from __future__ import annotations

import json
from pathlib import Path

from wiggle.tracecontext import (
    derive,
    instance_span_id,
    loops_key,
    parse_traceparent,
    parse_tracestate,
    step_span_id,
    trace_id_for,
)
from wiggle.tracing import Layout, enabled, layout, step_attributes
from wiggle.tracing._attributes import outcome_attributes

ROOT = Path(__file__).resolve().parents[3]
VECTORS = json.loads((ROOT / "spec/tracing/ids.json").read_text())


def test_the_shared_vectors() -> None:
    for c in VECTORS["trace_ids"]:
        assert trace_id_for(c["root_instance_id"]) == c["trace_id"]
    for c in VECTORS["instance_span_ids"]:
        assert instance_span_id(c["instance_id"]) == c["span_id"]
    for c in VECTORS["step_span_ids"]:
        assert loops_key(c["loop_counts"]) == c["loops"]
        got = step_span_id(
            c["instance_id"], c["task_id"], c["node_id"], c["attempt"], c["loop_counts"]
        )
        assert got == c["span_id"], c
    for c in VECTORS["traceparents"]:
        parsed = parse_traceparent(c["traceparent"])
        assert (parsed is not None) == c["valid"], c
        if parsed is not None:
            assert (parsed.trace_id, parsed.span_id, parsed.flags) == (
                c["trace_id"],
                c["span_id"],
                c["flags"],
            )


def test_ids_tell_apart_attempts_tokens_and_loop_iterations() -> None:
    base = step_span_id("i", "t", "n", 1, {})
    assert len({base, step_span_id("i", "t", "n", 2, {}), step_span_id("i", "u", "n", 1, {})}) == 3
    assert step_span_id("i", "t", "n", 1, {"w": 1}) != step_span_id("i", "t", "n", 1, {"w": 2})


def test_derive_keeps_a_given_trace_and_its_flags_else_derives() -> None:
    given = derive("root", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
    assert (given.trace_id, given.span_id, given.flags) == (
        "4bf92f3577b34da6a3ce929d0e0e4736",
        instance_span_id("root"),
        0,
    )
    fresh = derive("root", "garbage")
    assert (fresh.trace_id, fresh.flags) == (trace_id_for("root"), 1)


def test_tracestate_is_kept_when_well_formed_and_short() -> None:
    assert parse_tracestate("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7") == (
        "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    )
    assert parse_tracestate("not a member") == ""
    assert parse_tracestate("k=" + "v" * 600) == ""


def test_the_switch_is_the_standard_variables() -> None:
    assert not enabled({})
    assert enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"})
    assert enabled({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"})
    assert not enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"})
    assert not enabled({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"})
    assert layout({}) is Layout.LINKED
    assert layout({"WIGGLE_TRACE_LAYOUT": "continuous"}) is Layout.CONTINUOUS


def test_attributes() -> None:
    attrs = step_attributes(
        instance_id="i",
        flow="f",
        version="sha256:x",
        node_id="n",
        activity="a",
        attempt=2,
        mode="LOCAL_SYNC",
        queue="q",
        task_id="t",
        position=3,
    )
    assert attrs["wiggle.step.attempt"] == 2 and attrs["wiggle.run.position"] == 3
    assert all(k.startswith("wiggle.") for k in attrs)
    failed = outcome_attributes(failed=True, predicate=None, error_type="ValueError")
    assert failed == {
        "wiggle.step.outcome": "failed",
        "error.type": "ValueError",
        "wiggle.step.non_retryable": False,
    }
    assert outcome_attributes(failed=False, predicate=False) == {"wiggle.step.outcome": "false"}
