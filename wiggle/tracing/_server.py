"""The server's spans, made from the events each committed transaction wrote.

Every span is in the instance tree's trace and, but for a root instance's start span (under
the caller's span when the start carried a traceparent), a child of its instance span:

- `start FLOW`: the instance span itself, at the start (layout `linked`); a subflow child's
  also links to its parent's instance span. Layout `continuous`: emitted when the instance
  ends, from its start to its end;
- `timer NODE` (a sleep or a retry's back-off), from when it was set to when it fired;
- `await NODE`, until its signal arrived or its deadline passed;
- `handback REASON` where a local run handed back; `subflow NODE` where a child started;
  `lease expired NODE`; `end STATUS` when the instance ended.

Spans are made only from what a transaction committed, so a rolled-back one leaves none. A wait
starts where the transaction that parked the token committed it (a trace note, `wait_began`,
that history does not keep); one that began on another server (or before a restart) is a
point at its end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import orjson
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from wiggle.tracecontext import TraceContext, derive, instance_span_id, parse_traceparent
from wiggle.tracing._env import Layout
from wiggle.tracing._sdk import Sdk, remote_context

__all__ = ["ServerTracing"]

_log = logging.getLogger("wiggle.tracing")
_ENDS = {"instance_completed": "COMPLETED", "instance_failed": "FAILED"}
_ENDS["instance_cancelled"] = "CANCELLED"
#: Waits remembered at most (instance, node) pairs; past it the oldest half is forgotten.
_REMEMBERED = 100_000


def _ns(ms: int) -> int:
    return int(ms) * 1_000_000


class ServerTracing:
    """`events` is an engine trace observer (Database.trace_observers)."""

    def __init__(self, sdk: Sdk, layout: Layout = Layout.LINKED) -> None:
        self.sdk = sdk
        self.layout = layout
        self._lock = threading.Lock()
        self._since: dict[tuple[str, str], int] = {}  # (instance, node) -> when its wait began
        self._started: dict[str, int] = {}  # instance -> its start (layout continuous)

    # -- the trace of an event --------------------------------------------------------------

    @staticmethod
    def _trace(ev: dict[str, Any]) -> TraceContext:
        return derive(ev.get("root_id") or ev["instance_id"], ev.get("traceparent", ""))

    def _parent(self, ev: dict[str, Any]) -> Any:
        t = self._trace(ev)
        own = TraceContext(t.trace_id, instance_span_id(ev["instance_id"]), t.flags)
        return remote_context(own, ev.get("tracestate", ""))

    def _attrs(self, ev: dict[str, Any], **more: Any) -> dict[str, Any]:
        attrs = {
            "wiggle.instance.id": ev["instance_id"],
            "wiggle.flow.name": ev.get("flow", ""),
            "wiggle.flow.version": ev.get("version", ""),
        }
        if ev.get("node_id"):
            attrs["wiggle.node.id"] = ev["node_id"]
        attrs.update({k: v for k, v in more.items() if v is not None})
        return attrs

    def _span(
        self,
        name: str,
        ev: dict[str, Any],
        *,
        start_ms: int | None = None,
        error: str = "",
        attrs: dict[str, Any] | None = None,
    ) -> None:
        span = self.sdk.start(
            name,
            span_id=_random(),
            parent=self._parent(ev),
            attributes=self._attrs(ev, **(attrs or {})),
            start_ns=_ns(ev["at_ms"] if start_ms is None else min(start_ms, ev["at_ms"])),
        )
        if error:
            span.set_status(Status(StatusCode.ERROR, error[:1000]))
        span.end(end_time=_ns(ev["at_ms"]))

    # -- the observer ----------------------------------------------------------------------

    def events(self, events: Sequence[dict[str, Any]]) -> None:
        for ev in events:
            try:
                self._event(ev)
            except Exception:  # tracing must never break the commit path it observes
                _log.debug("no span for event %s", ev.get("kind"), exc_info=True)

    def _event(self, ev: dict[str, Any]) -> None:
        kind = ev["kind"]
        key = (ev["instance_id"], ev.get("node_id", ""))
        detail = orjson.loads(ev["detail"]) if ev.get("detail") else {}
        if kind == "instance_started":
            self._start(ev, detail)
        elif kind in ("wait_began", "timer_set", "step_retried"):
            self._remember(key, ev["at_ms"])
        elif kind == "timer_fired":
            since = self._forget(key)
            timer = detail.get("timer", "")
            if timer == "await_timeout":
                self._span(
                    f"await {key[1]}",
                    ev,
                    start_ms=since,
                    attrs={"wiggle.await.outcome": "deadline"},
                )
            else:
                self._span(
                    f"timer {key[1]}", ev, start_ms=since, attrs={"wiggle.timer.kind": timer}
                )
        elif kind == "signal_consumed":
            self._span(
                f"await {key[1]}",
                ev,
                start_ms=self._forget(key),
                attrs={
                    "wiggle.await.outcome": "signal",
                    "wiggle.signal.name": detail.get("signal"),
                },
            )
        elif kind == "handed_back":
            reason = detail.get("reason", "")
            if reason == "await":
                self._remember(key, ev["at_ms"])
            self._span(f"handback {reason}", ev, attrs={"wiggle.handback.reason": reason})
        elif kind == "child_started":
            child = detail.get("child_instance_id", "")
            self._span(f"subflow {key[1]}", ev, attrs={"wiggle.child.instance_id": child})
        elif kind == "lease_expired":
            self._span(f"lease expired {key[1]}", ev, error="lease expired")
        elif kind in _ENDS:
            self._end(ev, _ENDS[kind], detail.get("reason", ""))

    def _remember(self, key: tuple[str, str], at_ms: int) -> None:
        with self._lock:
            if len(self._since) >= _REMEMBERED:
                for old in list(self._since)[: _REMEMBERED // 2]:
                    del self._since[old]
            self._since[key] = at_ms

    def _forget(self, key: tuple[str, str]) -> int | None:
        with self._lock:
            return self._since.pop(key, None)

    def _start(self, ev: dict[str, Any], detail: dict[str, Any]) -> None:
        if self.layout is Layout.CONTINUOUS:
            with self._lock:
                if len(self._started) >= _REMEMBERED:
                    self._started.clear()
                self._started[ev["instance_id"]] = ev["at_ms"]
            return
        self._instance_span(ev, ev["at_ms"], "")

    def _instance_span(self, ev: dict[str, Any], start_ms: int, status: str) -> None:
        t = self._trace(ev)
        iid = ev["instance_id"]
        parent_id = ev.get("parent_instance_id", "")
        links = []
        parent: Any = None
        if parent_id:  # a subflow child: under its parent's instance span, and linked to it
            parent = remote_context(
                TraceContext(t.trace_id, instance_span_id(parent_id), t.flags),
                ev.get("tracestate", ""),
            )
            links.append(parent)
        else:
            given = parse_traceparent(ev.get("traceparent", ""))
            if given is not None:  # the caller's span
                parent = remote_context(given, ev.get("tracestate", ""))
        span = self.sdk.start(
            f"start {ev.get('flow', '')}" if not status else f"instance {ev.get('flow', '')}",
            span_id=instance_span_id(iid),
            trace_id=t.trace_id,
            parent=parent,
            attributes=self._attrs(
                ev,
                **{
                    "wiggle.execution.mode": ev.get("mode"),
                    "wiggle.parent.instance_id": parent_id or None,
                    "wiggle.instance.status": status or None,
                },
            ),
            links=links,
            start_ns=_ns(start_ms),
            kind=trace.SpanKind.SERVER,
        )
        if status == "FAILED":
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=_ns(ev["at_ms"]))

    def _end(self, ev: dict[str, Any], status: str, reason: str) -> None:
        with self._lock:
            started = self._started.pop(ev["instance_id"], None)
        if self.layout is Layout.CONTINUOUS:
            self._instance_span(ev, ev["at_ms"] if started is None else started, status)
        self._span(
            f"end {status}",
            ev,
            error=reason if status == "FAILED" else "",
            attrs={"wiggle.instance.status": status, "wiggle.instance.reason": reason or None},
        )


def _random() -> str:
    import secrets

    return secrets.token_hex(8)
