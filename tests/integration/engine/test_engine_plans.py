"""The hot queries use the partial token indexes, so a long history of finished tokens is never
scanned: a claim reads only READY tokens, the leader's scans only timed or leased ones."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.dialects import postgresql

from wiggle.engine import Engine
from wiggle.engine.machine.claims import claim_rows
from wiggle.engine.ops import firing
from wiggle.engine.ops import prune as _prune
from wiggle.engine.ops.leader import due_leases_stmt, due_timers_stmt

FINISHED = 20_000


def _fill(engine: Engine) -> None:
    """Many finished tokens and a few live ones of every kind, then fresh statistics."""

    def fill(conn):
        for n in range(0, FINISHED, 5_000):
            conn.execute(
                text(
                    "INSERT INTO wiggle_tokens (id, instance_id, version, node_id, state, context,"
                    " attempt, queue, timeout_ms, seq, pending, loop_counts, report_seq) VALUES "
                    + ", ".join(
                        f"('d{i}', 'i{i // 3}', 'v', 'n', 'DONE', '{{}}', 1, 'default', 1000, 0, 0,"
                        " '{}', 0)"
                        for i in range(n, n + 5_000)
                    )
                )
            )
        for i, (state, extra) in enumerate(
            [("READY", "ready_at_ms"), ("LEASED", "lease_expires_at_ms"), ("WAITING", "wake_at_ms")]
            * 10
        ):
            conn.execute(
                text(
                    "INSERT INTO wiggle_tokens (id, instance_id, version, node_id, state, context,"
                    f" attempt, queue, timeout_ms, seq, pending, loop_counts, report_seq, {extra})"
                    f" VALUES ('l{i}', 'l{i}', 'v', 'n', '{state}', '{{}}', 1, 'default', 1000, 0,"
                    f" 0, '{{}}', 0, {i})"
                )
            )
        conn.exec_driver_sql("ANALYZE")

    engine.db.write(fill)


def _explain(engine: Engine, run) -> str:
    """The plan of the statement `run(conn)` executes, exactly as the engine would send it
    (a cursor hook prefixes it with EXPLAIN)."""
    prefix = "EXPLAIN " if engine.db.is_postgres else "EXPLAIN QUERY PLAN "

    def explain(conn, cursor, statement, parameters, context, executemany):
        return prefix + statement, parameters

    event.listen(engine.db.sa, "before_cursor_execute", explain, retval=True)
    try:
        rows = engine.db.read(lambda c: run(c).all())
    finally:
        event.remove(engine.db.sa, "before_cursor_execute", explain)
    return "\n".join(str(r[0] if engine.db.is_postgres else r[-1]) for r in rows)


@pytest.mark.parametrize("by_activity", [False, True])
def test_the_claim_reads_only_ready_tokens(database_url, by_activity):
    engine = Engine(database_url)
    try:
        _fill(engine)
        params = {"queues": ["default"], "lim": 16, "worker": "w", "acts": ["a"]}
        if engine.db.is_postgres:
            params["detail"] = "{}"
        plan = _explain(engine, lambda c: claim_rows(c, engine.db, params, by_activity))
        assert "ix_wiggle_tokens_ready" in plan, plan
    finally:
        engine.close()


def test_the_leaders_scans_read_only_timed_and_leased_tokens(database_url):
    engine = Engine(database_url)
    try:
        _fill(engine)
        params = {"me": "x", "term": 1, "limit": 10}
        for stmt, index in (
            (due_timers_stmt(engine.db), "ix_wiggle_tokens_wake"),
            (due_leases_stmt(engine.db), "ix_wiggle_tokens_lease"),
        ):
            plan = _explain(engine, lambda c, stmt=stmt: c.execute(stmt, params))
            assert index in plan, plan
    finally:
        engine.close()


def test_pruning_reads_only_instances_that_ended_before_the_cutoff(database_url):
    """The prune's candidates come from the index of finished top-level instances by end time:
    what a day of pruning reads does not grow with the days kept."""
    engine = Engine(database_url)
    try:

        def fill(conn):
            for n in range(0, FINISHED, 5_000):
                conn.execute(
                    text(
                        "INSERT INTO wiggle_instances (id, root_id, flow, version, status, "
                        "context, reason, mode, created_at_ms, updated_at_ms) VALUES "
                        + ", ".join(
                            f"('i{i}', 'i{i}', 'f', 'v', '{('COMPLETED', 'RUNNING')[i % 2]}',"
                            f" '{{}}', '', 'SERVER', {i}, {i})"
                            for i in range(n, n + 5_000)
                        )
                    )
                )
            conn.exec_driver_sql("ANALYZE")

        engine.db.write(fill)
        plan = _explain(engine, lambda c: c.execute(_prune.candidates_stmt(100, (-1, ""), 500)))
        assert "ix_wiggle_instances_ended" in plan, plan
    finally:
        engine.close()


def test_the_leaders_schedule_scans_read_only_due_and_buffered_schedules(database_url):
    """With many schedules applied, none due and none buffered, the leader's two scans of them
    at every tick go through their partial indexes: what a tick costs does not grow with the
    schedules that are not due. On PostgreSQL the plan is the generic one a prepared statement
    gets after its first executions, which sees no parameter's value."""
    engine = Engine(database_url)
    try:

        def fill(conn):
            conn.execute(
                text(
                    "INSERT INTO wiggle_schedules (name, flow, document, digest, paused, note,"
                    " cursor_ms, next_due_ms, running_id, buffered, fired, skipped,"
                    " created_at_ms, updated_at_ms) VALUES "
                    + ", ".join(
                        f"('s{i}', 'f', '{{}}', 'd', false, '', 0, {10**12 + i}, NULL, 0, 0, 0,"
                        " 0, 0)"
                        for i in range(FINISHED // 2)
                    )
                )
            )
            conn.exec_driver_sql("ANALYZE")

        engine.db.write(fill)
        for stmt, index in (
            (firing.buffered_ready_stmt(10), "ix_wiggle_schedules_buffered"),
            (firing.due_schedules_stmt(engine.db, 10), "ix_wiggle_schedules_due"),
        ):
            if engine.db.is_postgres:
                plan = _generic_plan(engine, stmt)
            else:
                plan = _explain(engine, lambda c, stmt=stmt: c.execute(stmt))
            assert index in plan, plan
    finally:
        engine.close()


def _generic_plan(engine: Engine, stmt: Any) -> str:
    """PostgreSQL's generic plan of `stmt`: the one a prepared statement is given once its
    first executions are done, made without the parameters' values (a one-shot EXPLAIN is
    planned with them, and would hide a bound value where an index's predicate needs a
    constant)."""
    compiled = stmt.compile(dialect=postgresql.dialect(paramstyle="numeric_dollar"))
    values = [compiled.params[name] for name in compiled.positiontup or ()]

    def explain(conn):
        conn.exec_driver_sql("SET LOCAL plan_cache_mode = force_generic_plan")
        conn.exec_driver_sql(f"PREPARE wiggle_plan AS {compiled}")
        try:
            args = ", ".join(_sql_literal(v) for v in values)
            return [
                r[0]
                for r in conn.exec_driver_sql(
                    f"EXPLAIN EXECUTE wiggle_plan{f'({args})' if args else ''}"
                )
            ]
        finally:
            conn.exec_driver_sql("DEALLOCATE wiggle_plan")

    return "\n".join(engine.db.write(explain))


def _sql_literal(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"no literal for {value!r}")
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"
