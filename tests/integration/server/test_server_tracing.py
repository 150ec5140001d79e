"""The server's side of tracing (docs/observability.md), cheaply: what a start does with a bad
traceparent, the ids on the server's log lines, a collector that is away, the Python client's
current span, the receiver command; and, from an engine's committed events on a virtual clock
(both databases), the spans of the two layouts, of a subflow and of awaits.

The four-language trace test (tests/integration/fleet/test_traces.py) runs whole flows through
real workers; these check what it does not reach."""

from __future__ import annotations

import logging
import threading
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.waiting import wait_until
from wiggle._ports import free_port
from wiggle._proto.wiggle.v1 import wiggle_pb2 as pb
from wiggle._proto.wiggle.v1 import wiggle_pb2_grpc as pb_grpc
from wiggle.cli import main as wiggle_main
from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus, VirtualClock
from wiggle.server import EmbeddedStack, embedded_stack
from wiggle.tracecontext import instance_span_id, step_span_id, trace_id_for
from wiggle.tracing import Layout
from wiggle.tracing._sdk import Sdk
from wiggle.tracing._server import ServerTracing
from wiggle.tracing.receiver import Receiver, Span, render, serve

CALLER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
ONE = "wiggle: 1\nname: one\nsteps:\n  - task: a\n"
#: The shared server's flow for the report test, on a queue of its own (nothing else runs there).
REPORTED = "wiggle: 1\nname: reported\nsteps:\n  - task: a\n    queue: reported\n"


def _otel_env(mp: pytest.MonkeyPatch, endpoint: str) -> None:
    mp.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    mp.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
    mp.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")  # seconds: one try, then dropped


@pytest.fixture(scope="module")
def traced() -> Iterator[tuple[EmbeddedStack, Receiver]]:
    """A tracing server (SQLite) exporting to a receiver."""
    receiver = Receiver().start()
    try:
        with pytest.MonkeyPatch.context() as mp:
            _otel_env(mp, f"http://{receiver.address}")
            with embedded_stack(tracing=True) as st:
                mp.undo()
                st.client.deploy(ONE.encode())
                st.client.deploy(REPORTED.encode())
                yield st, receiver
    finally:
        receiver.stop()


def _start_span(receiver: Receiver, instance_id: str) -> Span:
    want = instance_span_id(instance_id)
    spans = receiver.wait_for(lambda got: any(s.span_id == want for s in got), 10)
    (span,) = [s for s in spans if s.span_id == want]
    return span


def test_a_malformed_or_oversized_traceparent_is_ignored_with_a_debug_line(traced, caplog):
    """The instance gets the trace derived from its id, its start span no parent; the debug
    line names what was ignored and carries the instance's ids."""
    st, receiver = traced
    caplog.set_level(logging.DEBUG, logger="wiggle.server")
    oversized = CALLER + "-" + "0" * 600  # a future version's shape, past 512 characters
    for bad in ("00-not-a-trace-01", oversized):
        iid = st.client.start("one", {}, traceparent=bad).instance_id
        derived = trace_id_for(iid)
        assert st.client.describe(iid).trace_id == derived
        span = _start_span(receiver, iid)
        assert (span.trace_id, span.parent_span_id) == (derived, ""), render([span])
        (line,) = [m for m in caplog.messages if "ignored a malformed" in m]
        assert line.endswith(f"trace_id={derived} span_id={instance_span_id(iid)}"), line
        caplog.clear()


def test_a_reports_log_line_carries_its_steps_ids(traced, caplog, monkeypatch):
    """A line the server logs while handling a report (here: an unexpected error) ends with
    the ids of the step attempt reported on, in the trace of the start's traceparent."""
    st, _ = traced
    iid = st.client.start("reported", {}, traceparent=CALLER).instance_id
    (task,) = st.engine.poll(["reported"], "w1", 1)
    assert task.instance_id == iid

    def broken(report: Any) -> Any:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(st.engine, "report", broken)
    with grpc.insecure_channel(st.address) as channel:
        stub = pb_grpc.WiggleStub(channel)
        with pytest.raises(grpc.RpcError) as refused:
            stub.CompleteTask(pb.CompleteTaskRequest(task_id=task.task_id, lease=task.lease))
    assert refused.value.code() is grpc.StatusCode.INTERNAL
    (line,) = [m for m in caplog.messages if "unexpected error" in m]
    span = step_span_id(iid, task.task_id, "a", 1, {})
    assert line.endswith(f"trace_id={CALLER.split('-')[1]} span_id={span}"), line
    monkeypatch.undo()
    st.engine.complete(task.task_id, task.lease, {})
    caplog.clear()
    logging.getLogger("wiggle.server").warning("outside any handler")
    assert "trace_id=" not in caplog.records[-1].getMessage()


def test_the_python_client_continues_the_current_span(traced):
    """With OpenTelemetry loaded and a span current, a start without a traceparent continues
    that span's trace: the instance's start span is its child."""
    st, receiver = traced
    tracer = TracerProvider().get_tracer("caller")
    with tracer.start_as_current_span("place order") as caller:
        ctx = caller.get_span_context()
        iid = st.client.start("one", {}).instance_id
        assert trace.get_current_span() is caller
    trace_id = f"{ctx.trace_id:032x}"
    assert st.client.describe(iid).trace_id == trace_id
    span = _start_span(receiver, iid)
    assert (span.trace_id, span.parent_span_id) == (trace_id, f"{ctx.span_id:016x}")
    # An explicit "" is no traceparent at all, span or none.
    with tracer.start_as_current_span("elsewhere"):
        alone = st.client.start("one", {}, traceparent="").instance_id
    assert st.client.describe(alone).trace_id == trace_id_for(alone)


def _free_port() -> int:
    return free_port()


def _dropped(st: EmbeddedStack) -> float:
    url = f"http://127.0.0.1:{st.server.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith("wiggle_trace_spans_dropped_total ")]
    return float(line.split()[1])


def test_an_unreachable_collector_fails_no_step_and_its_spans_are_counted(monkeypatch):
    """Nothing listens where the spans go: the steps complete as ever, and the spans the
    exporter could not deliver are counted in wiggle_trace_spans_dropped_total."""
    _otel_env(monkeypatch, f"http://127.0.0.1:{_free_port()}")
    with embedded_stack(tracing=True, metrics_address="127.0.0.1:0") as st:
        st.client.deploy(ONE.encode())
        started = [st.client.start("one", {}).instance_id for _ in range(3)]
        for _ in started:
            (task,) = st.engine.poll(["default"], "w1", 1)
            assert st.engine.complete(task.task_id, task.lease, {}) is InstanceStatus.COMPLETED
        assert all(st.client.describe(i).status == "COMPLETED" for i in started)
        # 3 starts and 3 ends at least, dropped by the batch processor's thread
        wait_until(lambda: _dropped(st) >= 6, 10, "the dropped spans to be counted")


# -- the spans of an engine's committed events (ServerTracing), on a virtual clock -------------


class Spans:
    """An engine whose committed events become spans, kept in memory."""

    def __init__(self, database_url: str, layout: Layout) -> None:
        self.clock = VirtualClock()
        self.engine = Engine(database_url, clock=self.clock)
        self.exporter = InMemorySpanExporter()
        self.sdk = Sdk("server", exporter=self.exporter)
        self.tracing = ServerTracing(self.sdk, layout)
        self.engine.db.trace_observers.append(self.tracing.events)

    def run_tasks(self) -> int:
        done = 0
        for task in self.engine.poll(["default"], "w1", 10):
            self.engine.complete(task.task_id, task.lease, {})
            done += 1
        return done

    def spans(self, instance_id: str) -> dict[str, ReadableSpan]:
        """The instance's spans by name (each name once)."""
        self.sdk.processor.force_flush()
        mine = [
            s
            for s in self.exporter.get_finished_spans()
            if (s.attributes or {}).get("wiggle.instance.id") == instance_id
        ]
        by_name = {s.name: s for s in mine}
        assert len(by_name) == len(mine), [s.name for s in mine]
        return by_name

    def close(self) -> None:
        self.sdk.shutdown()
        self.engine.close()


@pytest.fixture
def spans(database_url: str) -> Iterator[Any]:
    made: list[Spans] = []

    def make(layout: Layout = Layout.LINKED) -> Spans:
        made.append(Spans(database_url, layout))
        return made[-1]

    yield make
    for s in made:
        s.close()


def _hex(span: ReadableSpan) -> tuple[str, str, str]:
    """(trace id, span id, parent span id) in hex."""
    ctx = span.get_span_context()
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else ""
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", parent


def _links(span: ReadableSpan) -> list[str]:
    return [f"{link.context.span_id:016x}" for link in span.links]


def test_the_continuous_layout_is_one_span_from_the_start_to_the_end(spans):
    """WIGGLE_TRACE_LAYOUT=continuous: no short start span; the instance span, emitted at the
    end, lasts from the start to the end and the end hangs under it (linked: a start span that
    ends at once)."""
    for layout in Layout:
        s = spans(layout)
        s.engine.register(load_flow(ONE))
        iid = s.engine.start("one", {}, traceparent=CALLER).instance_id
        began = s.clock.now_ms()
        s.clock.advance(5_000)
        assert s.run_tasks() == 1
        got = s.spans(iid)
        root = instance_span_id(iid)
        name = "instance one" if layout is Layout.CONTINUOUS else "start one"
        assert set(got) == {name, "end COMPLETED"}
        instance = got[name]
        assert _hex(instance) == (CALLER.split("-")[1], root, CALLER.split("-")[2])
        ended = began + 5_000 if layout is Layout.CONTINUOUS else began
        assert (instance.start_time, instance.end_time) == (began * 10**6, ended * 10**6)
        if layout is Layout.CONTINUOUS:
            assert instance.attributes["wiggle.instance.status"] == "COMPLETED"
        assert _hex(got["end COMPLETED"])[2] == root


SUB_PARENT = "wiggle: 1\nname: parent\nsteps:\n  - subflow: kid\n    id: call_kid\n"
SUB_CHILD = "wiggle: 1\nname: kid\nsteps:\n  - task: a\n"


def test_a_subflows_child_is_in_its_parents_trace_under_and_linked_to_its_instance_span(spans):
    s = spans()
    s.engine.register(load_flow(SUB_CHILD))
    s.engine.register(load_flow(SUB_PARENT))
    parent = s.engine.start("parent", {}).instance_id
    (kid,) = s.engine.describe(parent).child_instance_ids
    assert s.run_tasks() == 1
    assert s.engine.describe(parent).status is InstanceStatus.COMPLETED
    trace_id, parent_span = trace_id_for(parent), instance_span_id(parent)
    mine, theirs = s.spans(parent), s.spans(kid)
    call = mine["subflow call_kid"]
    assert _hex(call)[0::2] == (trace_id, parent_span)
    assert call.attributes["wiggle.child.instance_id"] == kid
    start = theirs["start kid"]
    assert _hex(start) == (trace_id, instance_span_id(kid), parent_span)
    assert _links(start) == [parent_span]
    assert start.attributes["wiggle.parent.instance_id"] == parent
    assert _hex(theirs["end COMPLETED"])[0::2] == (trace_id, instance_span_id(kid))
    assert _hex(mine["end COMPLETED"])[0::2] == (trace_id, parent_span)


AWAITS = """
wiggle: 1
name: waits
steps:
  - await: go
    id: wait_go
  - await: never
    id: wait_never
    timeout: 1m
"""


def test_an_await_is_a_span_until_its_signal_or_its_deadline(spans):
    s = spans()
    s.engine.register(load_flow(AWAITS))
    iid = s.engine.start("waits", {}).instance_id
    t0 = s.clock.now_ms()
    s.clock.advance(2_000)
    assert s.engine.signal(iid, "go", {"ok": True})
    t1 = s.clock.now_ms()
    s.clock.advance(60_000)
    assert s.engine.tick() == 1
    assert s.engine.describe(iid).status is InstanceStatus.COMPLETED
    got = s.spans(iid)
    go, never = got["await wait_go"], got["await wait_never"]
    assert (go.start_time, go.end_time) == (t0 * 10**6, t1 * 10**6)
    assert go.attributes["wiggle.await.outcome"] == "signal"
    assert go.attributes["wiggle.signal.name"] == "go"
    assert (never.start_time, never.end_time) == (t1 * 10**6, (t1 + 60_000) * 10**6)
    assert never.attributes["wiggle.await.outcome"] == "deadline"
    for span in (go, never):
        assert _hex(span)[0::2] == (trace_id_for(iid), instance_span_id(iid))


# -- wiggle trace-receiver ---------------------------------------------------------------------


def test_the_trace_receiver_command_prints_each_trace_it_is_sent(capsys):
    with pytest.raises(SystemExit) as helped:
        wiggle_main(["trace-receiver", "--help"])
    assert helped.value.code == 0
    assert "WIGGLE_TRACE_RECEIVER_ADDRESS" in capsys.readouterr().out
    port, said, stop = _free_port(), [], threading.Event()
    listening = threading.Thread(target=serve, args=(f"127.0.0.1:{port}", said.append, stop))
    listening.start()
    try:
        wait_until(lambda: said, 10, "the receiver to listen")
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}", insecure=True)
        sdk = Sdk("demo", exporter=exporter)
        span = sdk.start("step charge", span_id="00f067aa0ba902b7", parent=None, trace_id="ab" * 16)
        span.end()
        sdk.shutdown()
        wait_until(lambda: len(said) > 1, 10, "the trace to be printed")
    finally:
        stop.set()
        listening.join(10)
    assert said[0] == f"OTLP/gRPC receiver on 127.0.0.1:{port}"
    assert said[1].splitlines()[0] == f"trace {'ab' * 16}"
    assert "step charge  [wiggle-demo] 00f067aa0ba902b7" in said[1]
