"""History for the benchmark: finished instances written straight into the engine's tables.

What a finished run of the benchmark's linear flow leaves behind, made by the database itself
(INSERT ... SELECT over a generated series, a few thousand instances per transaction) instead of
through the engine: per instance its COMPLETED row, its one DONE token at `end`, and its events
(instance_started, step_started and step_completed per step, instance_completed). Every one
ended two days before the fill, so `wiggle prune --finished-before 1d` removes exactly them.
"""

from __future__ import annotations

import time
import uuid

import orjson
import sqlalchemy as sa

__all__ = ["fill_history"]

#: Instances per transaction: each brings 2 + 2 x steps event rows.
BATCH = 5000
_DAY_MS = 86_400_000


def _series(is_pg: bool) -> str:
    """A CTE `g(i)` of the integers :lo..:hi, as each database makes it fastest."""
    if is_pg:
        return "WITH g(i) AS (SELECT generate_series(CAST(:lo AS BIGINT), CAST(:hi AS BIGINT)))"
    return "WITH RECURSIVE g(i) AS (SELECT :lo UNION ALL SELECT i + 1 FROM g WHERE i < :hi)"


def _statements(is_pg: bool, tag: str) -> list[str]:
    g = _series(is_pg)
    iid = f"'{tag}-' || CAST(i AS TEXT)"
    steps = (
        "s(k) AS (SELECT generate_series(1, CAST(:steps AS INTEGER)))"
        if is_pg
        else "s(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM s WHERE k < :steps)"
    )
    g_and_s = f"{g}, {steps}"
    event = "INSERT INTO wiggle_events (instance_id, at_ms, kind, node_id, attempt, detail) "
    return [
        f"{g} INSERT INTO wiggle_instances (id, root_id, flow, version, status, context, reason, "
        "mode, parent_instance_id, parent_token_id, created_at_ms, updated_at_ms) "
        f"SELECT {iid}, {iid}, :flow, :version, 'COMPLETED', :context, '', :mode, NULL, NULL, "
        ":t0 + i, :t0 + i + 1000 FROM g",
        f"{g} INSERT INTO wiggle_tokens (id, instance_id, version, node_id, state, context, "
        "attempt, queue, timeout_ms, ready_at_ms, seq, pending, loop_counts, activity, "
        "report_seq) "
        f"SELECT {iid} || '-t', {iid}, :version, 'end', 'DONE', :context, 1, 'default', 60000, "
        ":t0 + i + 1000, 0, 0, '{}', 'bench_step', 0 FROM g",
        f"{g} {event}SELECT {iid}, :t0 + i, 'instance_started', '', 0, :started FROM g",
        f"{g_and_s} {event}SELECT {iid}, :t0 + i + k, 'step_started', 's' || CAST(k AS TEXT), 1, "
        "'{}' FROM g CROSS JOIN s",
        f"{g_and_s} {event}SELECT {iid}, :t0 + i + k, 'step_completed', "
        "'s' || CAST(k AS TEXT), 1, '{}' FROM g CROSS JOIN s",
        f"{g} {event}SELECT {iid}, :t0 + i + 1000, 'instance_completed', '', 0, "
        '\'{"reason":""}\' FROM g',
    ]


def fill_history(url: str, flow: str, version: str, mode: str, steps: int, count: int) -> None:
    """Write `count` finished instances of the registered `flow` `version` into `url`."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    is_pg = engine.dialect.name == "postgresql"
    tag = f"history-{uuid.uuid4().hex[:8]}"
    statements = [sa.text(sql) for sql in _statements(is_pg, tag)]
    try:
        with engine.connect() as conn:
            now = int(time.time() * 1000)
            params = {
                "flow": flow,
                "version": version,
                "mode": mode,
                "steps": steps,
                "context": orjson.dumps({"n": steps}).decode(),
                "started": orjson.dumps({"version": version, "mode": mode}).decode(),
                "t0": now - 2 * _DAY_MS - count - 1000,
            }
            for lo in range(1, count + 1, BATCH):
                hi = min(count, lo + BATCH - 1)
                for statement in statements:
                    conn.execute(statement, {**params, "lo": lo, "hi": hi})
                conn.commit()
            if is_pg:  # what autovacuum would do by itself after a while
                for table in ("wiggle_instances", "wiggle_tokens", "wiggle_events"):
                    conn.execute(sa.text(f"ANALYZE {table}"))
                conn.commit()
    finally:
        engine.dispose()
