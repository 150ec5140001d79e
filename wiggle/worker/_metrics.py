"""The worker's Prometheus metrics (docs/operations.md lists them).

Read off the worker's one I/O seam: every report passes through `Rpc.call`, so the steps it
carries, the local run it ends and the reason it hands back are counted there, without hooks in
the run loop. Poll round trips are timed by the poller.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

__all__ = ["WorkerMetrics"]

_RUN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
_POLL_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_REPORTS = frozenset({"CompleteTask", "FailTask", "AdvanceRun", "ReleaseTask"})


class WorkerMetrics:
    """One worker's metrics, in a registry of their own."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.steps = Counter(
            "wiggle_worker_steps", "Steps reported, by outcome", ["outcome"], registry=r
        )
        self.local_runs = Histogram(
            "wiggle_worker_local_run_steps",
            "Steps per task, from its lease to its handback (a SERVER task is one)",
            buckets=_RUN_BUCKETS,
            registry=r,
        )
        self.handbacks = Counter(
            "wiggle_worker_handbacks", "Local runs ended, by reason", ["reason"], registry=r
        )
        self.refused = Counter(
            "wiggle_worker_reports_refused",
            "Reports the server refused (a lost lease, a finished instance, ...)",
            ["method"],
            registry=r,
        )
        self.polls = Histogram(
            "wiggle_worker_poll_seconds",
            "PollTasks round trips, by whether they brought tasks",
            ["outcome"],
            buckets=_POLL_BUCKETS,
            registry=r,
        )
        self.spans_dropped = Counter(
            "wiggle_trace_spans_dropped",
            "Spans the OTLP exporter could not deliver (tracing on; docs/observability.md)",
            registry=r,
        )
        self._lock = threading.Lock()
        self._run_steps: dict[str, int] = {}  # task id -> steps reported so far under its lease

    def call(self, method: str, request: Any, ok: bool) -> None:
        """Rpc.call's observer: one finished call (`ok`: answered without an error)."""
        if method not in _REPORTS:
            return
        if not ok:
            self.refused.labels(method).inc()
            return
        if method == "ReleaseTask":
            self._end(request.task_id, 0, str(request.reason or "released"))
            return
        if method == "CompleteTask":
            self.steps.labels("completed").inc()
            self._end(request.task_id, 1, "")
            return
        if method == "FailTask":
            self.steps.labels("failed").inc()
            self._end(request.task_id, 1, "")
            return
        failed = sum(1 for s in request.steps if s.WhichOneof("outcome") == "failure")
        done = len(request.steps) - failed
        if done:
            self.steps.labels("completed").inc(done)
        if failed:
            self.steps.labels("failed").inc(failed)
        if request.final or failed:
            self._end(request.task_id, len(request.steps), request.handback_reason or "failed")
        else:
            with self._lock:
                self._run_steps[request.task_id] = self._run_steps.get(request.task_id, 0) + len(
                    request.steps
                )

    def _end(self, task_id: str, steps: int, reason: str) -> None:
        with self._lock:
            steps += self._run_steps.pop(task_id, 0)
        self.local_runs.observe(steps)
        if reason:
            self.handbacks.labels(reason).inc()

    def poll(self, seconds: float, got: int) -> None:
        self.polls.labels("tasks" if got else "empty").observe(seconds)
