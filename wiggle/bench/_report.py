"""The figures of one verified run, and how they are printed: a table for people, JSON for tools.

Every per-step figure divides by the measured steps (measured instances x steps per instance);
the warm-up instances are outside the window. A figure the run could not measure (commits and
WAL syncs on SQLite, PostgreSQL's CPU when it runs elsewhere) is None: "n/a" in the table, null
in JSON.

With `--rpcs` a run also counts the servers' RPCs by method and their transactions by kind
(from their metrics endpoints): `rpcs_per_step` and `transactions_per_step` in JSON, one line
under the mode's row in the table (`counts`). Without it they are None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["HEADER", "Figures", "counts", "percentile", "row"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by the nearest-rank method: a value that was measured."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(frozen=True)
class Figures:
    mode: str
    instances: int  # measured
    steps: int  # per instance
    seconds: float
    p50_ms: float
    p99_ms: float
    commits: int | None
    wal_syncs: int | None
    pg_cpu_s: float | None
    server_cpu_s: float
    worker_cpu_s: float
    driver_cpu_s: float
    tracing: bool = False  # --tracing: the servers and workers exported spans
    # --rpcs: the servers' calls by method and transactions by kind over the window
    rpcs: dict[str, float] | None = field(default=None)
    transactions: dict[str, float] | None = field(default=None)

    @property
    def total_steps(self) -> int:
        return self.instances * self.steps

    def per_step(self, value: float | None, scale: float = 1.0) -> float | None:
        return None if value is None else value * scale / self.total_steps

    def as_json(self) -> dict[str, Any]:
        per = self.per_step
        return {
            **asdict(self),
            "inst_per_s": self.instances / self.seconds,
            "steps_per_s": self.total_steps / self.seconds,
            "commits_per_step": per(self.commits),
            "wal_syncs_per_step": per(self.wal_syncs),
            "pg_cpu_ms_per_step": per(self.pg_cpu_s, 1000),
            "server_cpu_ms_per_step": per(self.server_cpu_s, 1000),
            "worker_cpu_ms_per_step": per(self.worker_cpu_s, 1000),
            "driver_cpu_ms_per_step": per(self.driver_cpu_s, 1000),
            "rpcs_per_step": self._per_step_each(self.rpcs),
            "transactions_per_step": self._per_step_each(self.transactions),
        }

    def _per_step_each(self, counts: dict[str, float] | None) -> dict[str, float] | None:
        if counts is None:
            return None
        return {k: v / self.total_steps for k, v in sorted(counts.items()) if v}


_COLUMNS = (
    ("mode", 18, "mode"),
    ("inst/s", 8, "inst_per_s"),
    ("steps/s", 9, "steps_per_s"),
    ("p50 ms", 8, "p50_ms"),
    ("p99 ms", 8, "p99_ms"),
    ("commits/step", 14, "commits_per_step"),
    ("WAL syncs/step", 16, "wal_syncs_per_step"),
    ("PG CPU", 9, "pg_cpu_ms_per_step"),
    ("server CPU", 12, "server_cpu_ms_per_step"),
    ("worker CPU", 12, "worker_cpu_ms_per_step"),
    ("driver CPU", 12, "driver_cpu_ms_per_step"),
)

HEADER = "".join(
    f"{title:<{width}}" if key == "mode" else f"{title:>{width}}" for title, width, key in _COLUMNS
)


def _cell(value: Any, width: int, key: str) -> str:
    if key == "mode":
        return f"{value:<{width}}"
    if value is None:
        return f"{'n/a':>{width}}"
    digits = 1 if key in ("inst_per_s", "steps_per_s", "p50_ms", "p99_ms") else 2
    if key == "steps_per_s":
        digits = 0
    return f"{value:>{width}.{digits}f}"


def row(figures: Figures) -> str:
    """One table line under HEADER (every CPU column in milliseconds per step); a run that
    traced is `MODE +otel`."""
    data = figures.as_json()
    if figures.tracing:
        data["mode"] += " +otel"
    return "".join(_cell(data[key], width, key) for _title, width, key in _COLUMNS)


def counts(figures: Figures) -> str | None:
    """The line under a row of a run with --rpcs: RPCs per step by method, transactions per
    step by kind. None without them."""
    data = figures.as_json()
    if data["rpcs_per_step"] is None:
        return None
    rpcs = data["rpcs_per_step"]
    line = f"{'':<18}RPCs/step: {sum(rpcs.values()):.3f}"
    if rpcs:
        line += " (" + ", ".join(f"{k} {v:.3f}" for k, v in rpcs.items()) + ")"
    transactions = data["transactions_per_step"] or {}
    if transactions:
        line += "; server transactions/step: " + ", ".join(
            f"{k} {v:.3f}" for k, v in transactions.items()
        )
    return line
