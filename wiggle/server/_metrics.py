"""The server's Prometheus metrics (see docs/operations.md for the list).

Step outcomes, handbacks and lease expiries are counted from the events a transaction logged,
after it committed (so a rolled-back transaction counts nothing); READY tokens per queue are
read from the database when the endpoint is scraped.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import orjson
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from wiggle.engine import Engine

__all__ = ["ServerMetrics"]

_WAIT_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_TX_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class _ReadyTokens:
    """wiggle_ready_tokens{queue}: read at scrape time (one grouped count)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "wiggle_ready_tokens", "Tokens READY for a worker, per queue", labels=["queue"]
        )

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        for queue, count in sorted(self._engine.ready_by_queue().items()):
            family.add_metric([queue], count)
        yield family


class _BulkPending:
    """wiggle_bulk_pending{action}: instances bulk actions still have to reach (at scrape)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "wiggle_bulk_pending",
            "Instances that running or paused bulk actions have not reached yet",
            labels=["action"],
        )

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield self._family()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = self._family()
        pending: dict[str, int] = {}
        for batch in self._engine.list_batches(limit=500):
            if batch.state in ("RUNNING", "PAUSED"):
                pending[batch.action] = pending.get(batch.action, 0) + batch.pending
        for action, count in sorted(pending.items()):
            family.add_metric([action], count)
        yield family


#: The events that say an instance was repaired, and the action each stands for.
_REPAIRS = {"instance_retried": "retry", "instance_reset": "reset", "instance_migrated": "migrate"}


class ServerMetrics:
    """One server process's metrics, in a registry of their own."""

    def __init__(self, engine: Engine) -> None:
        r = self.registry = CollectorRegistry()
        self.spans_dropped = Counter(
            "wiggle_trace_spans_dropped",
            "Spans the OTLP exporter could not deliver (tracing on; docs/observability.md)",
            registry=r,
        )
        self.steps_completed = Counter(
            "wiggle_steps_completed", "Steps completed", ["flow", "mode"], registry=r
        )
        self.steps_failed = Counter(
            "wiggle_steps_failed", "Failed step attempts", ["flow", "mode"], registry=r
        )
        self.handbacks = Counter(
            "wiggle_handbacks", "Local runs handed back, by reason", ["reason"], registry=r
        )
        self.lease_expiries = Counter(
            "wiggle_lease_expiries", "Leases that expired and were reclaimed", registry=r
        )
        self.stale_reports = Counter(
            "wiggle_stale_reports_refused",
            "Reports refused because their lease was no longer current",
            registry=r,
        )
        self.poll_wait = Histogram(
            "wiggle_poll_wait_seconds",
            "How long PollTasks waited before answering",
            ["outcome"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.eager = Counter(
            "wiggle_eager_dispatch",
            "Eager dispatch asked for (a start's first task, CompleteTask's next): hit or miss",
            ["kind", "result"],
            registry=r,
        )
        self.run_batch = Histogram(
            "wiggle_advance_run_steps",
            "Steps per AdvanceRun batch (local runs)",
            ["final"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
            registry=r,
        )
        self.transactions = Histogram(
            "wiggle_transaction_seconds",
            "Database transaction latency, retries included",
            ["kind"],
            buckets=_TX_BUCKETS,
            registry=r,
        )
        self.repairs = Counter(
            "wiggle_instances_repaired",
            "Instances retried, reset or migrated (one per instance, bulk actions included)",
            ["action", "flow"],
            registry=r,
        )
        self.cancels = Counter(
            "wiggle_instances_cancelled", "Instances cancelled", ["flow"], registry=r
        )
        self.rpcs = Counter(
            "wiggle_rpcs",
            "gRPC calls answered, by method and status code",
            ["method", "code"],
            registry=r,
        )
        self.schedule_fires = Counter(
            "wiggle_schedule_fires",
            "Instances schedules started (triggers and buffered fires included)",
            ["schedule"],
            registry=r,
        )
        self.schedule_skips = Counter(
            "wiggle_schedule_skips",
            "Nominal times schedules skipped, by reason: overlap, missed, window, paused, "
            "input, not_started",
            ["schedule", "reason"],
            registry=r,
        )
        self.schedule_lateness = Histogram(
            "wiggle_schedule_lateness_seconds",
            "How long after its due time a schedule's fire started its instance",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 600.0, 3600.0),
            registry=r,
        )
        r.register(_ReadyTokens(engine))
        r.register(_BulkPending(engine))

    def events(self, rows: Sequence[tuple[str, str, str, str]]) -> None:
        """Count a committed transaction's events: (kind, flow, mode, detail JSON)."""
        for kind, flow, mode, detail in rows:
            if kind == "step_completed":
                self.steps_completed.labels(flow, mode).inc()
            elif kind == "step_failed":
                self.steps_failed.labels(flow, mode).inc()
            elif kind == "handed_back":
                reason: Any = orjson.loads(detail).get("reason") if detail else ""
                self.handbacks.labels(str(reason or "unspecified")).inc()
            elif kind == "lease_expired":
                self.lease_expiries.inc()
            elif kind in _REPAIRS:
                self.repairs.labels(_REPAIRS[kind], flow).inc()
            elif kind == "instance_cancelled":
                self.cancels.labels(flow).inc()
            elif kind == "schedule_fired":
                fired: Any = orjson.loads(detail)
                self.schedule_fires.labels(fired["schedule"]).inc()
                if not fired["triggered"]:
                    self.schedule_lateness.observe(fired["lateness_ms"] / 1000)
            elif kind == "schedule_skipped":
                skipped: Any = orjson.loads(detail)
                self.schedule_skips.labels(skipped["schedule"], skipped["reason"]).inc(
                    skipped["count"]
                )

    def transaction(self, seconds: float, read: bool) -> None:
        self.transactions.labels("read" if read else "write").observe(seconds)
