"""`wiggle bench throughput --tracing`: the servers and workers with OpenTelemetry on.

On, every server and worker process gets OTEL_EXPORTER_OTLP_ENDPOINT naming an OTLP/gRPC
receiver in the driver process (wiggle.tracing.receiver), and so exports its spans as it would
in production: the batch processor on a thread of its own, the standard OTEL_* settings (the
batch's 5 s delay by default). The receiver's work is the driver's CPU, never the server's or
the workers'. Off, the processes get nothing: the environment as it is, as before this option.
`both` runs each mode off and then on, on a fresh database each, and `overhead` says what
tracing cost per step.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from wiggle.bench._report import Figures

__all__ = ["CHOICES", "exporting", "overhead", "runs_of"]

CHOICES = ("off", "on", "both")


def runs_of(choice: str) -> tuple[bool, ...]:
    """Whether each run of a mode traces, in order."""
    return {"off": (False,), "on": (True,), "both": (False, True)}[choice]


@contextlib.contextmanager
def exporting(on: bool) -> Iterator[tuple[dict[str, str], Callable[[], int]]]:
    """The environment that turns tracing on in the processes (empty when off) and a count of
    the spans received so far (0 when off)."""
    if not on:
        yield {}, lambda: 0
        return
    from wiggle.tracing.receiver import Receiver

    receiver = Receiver("127.0.0.1:0").start()
    try:
        yield (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{receiver.address}"},
            lambda: len(receiver.spans),
        )
    finally:
        receiver.stop()


def overhead(off: Figures, on: Figures, spans: int, instances: int) -> str:
    """The line under a mode's two rows: CPU per step with tracing on minus off; `spans`
    received from the run's `instances` (warm-up included)."""
    per = 1000 / on.total_steps
    server = on.server_cpu_s * per - off.server_cpu_s * 1000 / off.total_steps
    workers = on.worker_cpu_s * per - off.worker_cpu_s * 1000 / off.total_steps
    return (
        f"{'':<18}tracing: {server + workers:+.3f} ms CPU per step (server {server:+.3f}, "
        f"workers {workers:+.3f}); {spans} spans received, "
        f"{spans / max(instances, 1):.1f} per instance"
    )
