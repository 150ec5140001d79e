"""The distributed database profile (engine/store/profile.py) on PostgreSQL: what it creates,
what it never asks of the database, how another server's tasks reach a parked poller, and what
happens to a start, a claim, a report and a signal whose COMMIT fails or whose connection drops
around it (the commit injector of tests/faults/injector.py, scripted commit by commit)."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import event, inspect, text

from tests.faults.injector import Injector
from tests.waiting import wait_until
from wiggle._postgres import create_database, drop_database, libpq_url
from wiggle.compiler import load_flow
from wiggle.engine import Engine, IncompatibleSchema, InstanceStatus, Report, ReportKind
from wiggle.engine.store.keyed import SEQ_SCALE
from wiggle.errors import InvalidRequest

FLOW = load_flow(
    """
wiggle: 1
name: keyed
steps:
  - task: a
  - parallel:
      left: [{task: b}]
      right: [{task: c}]
    combine: merge
  - sleep: 10ms
  - await: go
    timeout: 1m
  - task: d
"""
)
LINE = load_flow("wiggle: 1\nname: line\nsteps:\n  - task: a\n  - task: b\n")


@pytest.fixture
def distributed(postgres_database_url: str) -> Iterator[Engine]:
    engine = Engine(postgres_database_url, database_profile="distributed", leader_ttl_s=5.0)
    try:
        yield engine
    finally:
        engine.close()


def _sql(engine: Engine, statement: str) -> list[Any]:
    return list(engine.db.read(lambda c: c.execute(text(statement)).all()))


def _complete_all(engine: Engine, worker: str = "w") -> int:
    """Poll and complete every READY task once (a merge gets its branches' results)."""
    done = 0
    for task in engine.poll(["default"], worker, 16):
        result = task.input if task.activity != "merge" else {"merged": True}
        engine.complete(task.task_id, task.lease, result, seq=1)
        done += 1
    return done


def test_a_database_keeps_the_profile_it_was_created_under(postgres_url: str, tmp_path):
    made_distributed = create_database(postgres_url, prefix="wiggle_t")
    made_default = create_database(postgres_url, prefix="wiggle_t")
    try:
        Engine(made_distributed, database_profile="distributed").close()
        Engine(made_distributed, database_profile="distributed").close()  # and opens again
        with pytest.raises(IncompatibleSchema, match="--database-profile distributed"):
            Engine(made_distributed)
        Engine(made_default).close()
        with pytest.raises(IncompatibleSchema, match="created without the distributed"):
            Engine(made_default, database_profile="distributed")
    finally:
        drop_database(made_distributed)
        drop_database(made_default)
    with pytest.raises(InvalidRequest, match="not SQLite"):
        Engine(f"sqlite:///{tmp_path / 'w.db'}", database_profile="distributed")


def test_events_and_signals_are_keyed_by_instance_not_numbered_by_a_sequence(distributed):
    def keys(conn: Any) -> dict[str, list[str]]:
        found = inspect(conn)
        return {
            t: found.get_pk_constraint(t)["constrained_columns"]
            for t in ("wiggle_events", "wiggle_signals")
        }

    assert distributed.db.read(keys) == {
        "wiggle_events": ["instance_id", "seq"],
        "wiggle_signals": ["instance_id", "seq"],
    }
    sequences = _sql(distributed, "SELECT sequencename FROM pg_sequences")
    assert not [s for (s,) in sequences if "events" in s or "signals" in s], sequences


def test_an_instance_keeps_its_order_when_another_node_clock_ran_ahead(distributed):
    distributed.register(LINE)
    instance = distributed.start("line", {}).instance_id
    now_ms = distributed.describe(instance, include_events=True).events[-1].at_ms
    ahead = (now_ms + 3_600_000) * SEQ_SCALE  # a node an hour ahead wrote this one
    distributed.db.write(
        lambda c: c.execute(
            text(
                "INSERT INTO wiggle_events (instance_id, seq, at_ms, kind, node_id, attempt, "
                "detail) VALUES (:i, :s, :at, 'note', '', 0, '{}')"
            ),
            {"i": instance, "s": ahead, "at": now_ms},
        )
    )
    while _complete_all(distributed):
        pass
    view = distributed.describe(instance, include_events=True)
    assert view.status is InstanceStatus.COMPLETED
    kinds = [e.kind for e in view.events]
    assert kinds.index("note") < kinds.index("step_started")  # later writes sort after it
    seqs = [e.seq for e in view.events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert all(s < 2**53 for s in seqs)  # exact in JavaScript


_MODIFIES = re.compile(r"\b(INSERT INTO|UPDATE|DELETE FROM)\s+(\w+)", re.IGNORECASE)


def _audit(statements: list[str]) -> list[str]:
    """What in `statements` the profile must never ask of a distributed engine."""
    problems = []
    for sql in statements:
        if re.search(r"\bLISTEN\b|\bNOTIFY\b|pg_notify|pg_advisory", sql, re.IGNORECASE):
            problems.append(f"LISTEN/NOTIFY or an advisory lock: {sql[:120]}")
        if "json_to_recordset" in sql:  # CockroachDB has none
            problems.append(f"json_to_recordset: {sql[:120]}")
        modified: dict[str, list[str]] = {}
        for verb, table in _MODIFIES.findall(sql):
            modified.setdefault(table.lower(), []).append(verb.upper())
        for table, verbs in modified.items():
            if len(verbs) > 1 and (set(verbs) != {"INSERT INTO"} or "ON CONFLICT" in sql):
                problems.append(f"{table} modified {len(verbs)} times in: {sql[:200]}")
        if re.search(r"INSERT INTO wiggle_(events|signals)\b", sql) and not re.search(
            r"INSERT INTO wiggle_(events|signals)\s*\([^)]*\bseq\b", sql
        ):
            problems.append(f"an event or signal without its key: {sql[:160]}")
    return problems


def test_the_profile_asks_nothing_a_distributed_engine_lacks(
    postgres_database_url: str,
):
    statements: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    engine = Engine(postgres_database_url, database_profile="distributed", leader_ttl_s=5.0)
    try:
        event.listen(engine.db.sa, "before_cursor_execute", seen)
        engine.register(FLOW)
        instance = engine.start("keyed", {"n": 1}).instance_id
        engine.signal(instance, "go", {"ok": True})  # buffered: the await comes later
        for _ in range(50):
            engine.tick()
            _complete_all(engine)
            if engine.describe(instance).status is not InstanceStatus.RUNNING:
                break
            engine.wait_for_timers(0.05)
        assert engine.describe(instance).status is InstanceStatus.COMPLETED
        engine.prune(0)
    finally:
        engine.close()
    assert len(statements) > 20
    assert _audit(statements) == []


def test_a_task_another_server_made_ready_wakes_a_parked_poller(postgres_database_url: str):
    a = Engine(postgres_database_url, database_profile="distributed")
    b = Engine(postgres_database_url, database_profile="distributed")
    try:
        a.register(LINE)
        woken = threading.Event()

        def park() -> None:
            assert b.poll(["default"], "w", 1) == []
            b.wait_for_tasks(["default"], 120.0)
            woken.set()

        threading.Thread(target=park, daemon=True).start()
        wait_until(b.waiters.parked_queues, 30, "the poller parked")
        a.start("line", {})  # a's commit wakes only a's own pollers: no NOTIFY
        assert woken.wait(60.0), "the parked poller was not woken by the other server's task"
        assert [t.node_id for t in b.poll(["default"], "w", 1)] == ["a"]
        listening = _sql(b, "SELECT count(*) FROM pg_stat_activity WHERE query ILIKE 'LISTEN%'")
        assert listening == [(0,)]
    finally:
        a.close()
        b.close()


@pytest.fixture
def scripted(distributed: Engine) -> Injector:
    injector = Injector(0.0, 0.0)
    injector.install(distributed.db.sa)
    return injector


def _one_row(engine: Engine, sql: str, **params: Any) -> Any:
    return engine.db.read(lambda c: c.execute(text(sql), params).one())


@pytest.mark.parametrize("fate", ["serialization", "drop_after", "drop_before"])
def test_a_start_whose_commit_fails_or_is_lost_starts_one_instance(distributed, scripted, fate):
    distributed.register(LINE)
    scripted.script(fate)
    started = distributed.start("line", {"k": 1})
    assert scripted.counts[fate] == 1
    (count,) = _one_row(distributed, "SELECT count(*) FROM wiggle_instances")
    assert count == 1
    assert distributed.describe(started.instance_id).status is InstanceStatus.RUNNING


@pytest.mark.parametrize("fate", ["serialization", "drop_after", "drop_before"])
def test_a_claim_whose_commit_fails_or_is_lost_hands_its_task_out_once(distributed, scripted, fate):
    distributed.register(LINE)
    instance = distributed.start("line", {}).instance_id
    scripted.script(fate)
    tasks = distributed.poll(["default"], "w", 4)
    assert [t.node_id for t in tasks] == ["a"]
    assert distributed.poll(["default"], "w", 4) == []  # nothing leased and lost on the way
    started = [
        e
        for e in distributed.describe(instance, include_events=True).events
        if e.kind == "step_started"
    ]
    assert len(started) == 1
    distributed.complete(tasks[0].task_id, tasks[0].lease, {}, seq=1)  # the lease handed out
    assert [t.node_id for t in distributed.poll(["default"], "w", 4)] == ["b"]


@pytest.mark.parametrize("fate", ["serialization", "drop_after", "drop_before"])
def test_a_report_whose_commit_fails_or_is_lost_is_applied_once(distributed, scripted, fate):
    distributed.register(LINE)
    instance = distributed.start("line", {}).instance_id
    (task,) = distributed.poll(["default"], "w", 1)
    scripted.script(fate)
    answer = distributed.report(
        Report(ReportKind.COMPLETE, task.task_id, task.lease, 1, result={"a": 1})
    )
    assert answer.instance_status is InstanceStatus.RUNNING
    view = distributed.describe(instance, include_events=True)
    assert [e.node_id for e in view.events if e.kind == "step_completed"] == ["a"]
    (b,) = distributed.poll(["default"], "w", 1)
    assert b.node_id == "b" and b.input == {"a": 1}
    counted = {"serialization": "serialization", "drop_after": "ambiguous_rerun"}
    if fate in counted:
        assert distributed.db.retries[counted[fate]] >= 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("fate", ["drop_after", "drop_before"])
def test_a_signal_whose_connection_drops_is_delivered_once(distributed, scripted, fate):
    flow = load_flow("wiggle: 1\nname: wait\nsteps:\n  - await: go\n    timeout: 1m\n")
    distributed.register(flow)
    instance = distributed.start("wait", {}).instance_id
    scripted.script(fate)
    assert distributed.signal(instance, "go", {"x": 1}) is True
    outcome = "ambiguous_committed" if fate == "drop_after" else "ambiguous_rolled_back"
    assert distributed.db.retries[outcome] == 1  # type: ignore[attr-defined]
    (signals,) = _one_row(distributed, "SELECT count(*) FROM wiggle_signals")
    assert signals == 1
    view = distributed.describe(instance, include_events=True)
    assert view.status is InstanceStatus.COMPLETED
    assert [e.kind for e in view.events].count("signal_consumed") == 1


def test_outcome_markers_are_swept_once_old(distributed, scripted):
    distributed.register(LINE)
    distributed.start("line", {})
    (markers,) = _one_row(distributed, "SELECT count(*) FROM wiggle_commits")
    assert markers >= 1  # the start proved nothing, but wrote its marker
    url = libpq_url(distributed.db.url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE wiggle_commits SET at_ms = at_ms - 3600000")
    distributed.db.sweep()
    (left,) = _one_row(distributed, "SELECT count(*) FROM wiggle_commits")
    assert left == 0


def test_a_deployment_moves_to_a_database_under_the_profile(postgres_url: str):
    """docs/scaling.md, "Moving a deployment": the rows of a default database, copied table by
    table (as `pg_dump --data-only` would) into one created under the profile, run on there: the
    moved instances finish, and their events keep their order after the ones written there."""
    old_url = create_database(postgres_url, prefix="wiggle_t")
    new_url = create_database(postgres_url, prefix="wiggle_t")
    try:
        old = Engine(old_url)
        try:
            old.register(LINE)
            moved = [old.start("line", {"i": i}).instance_id for i in range(3)]
            _complete_all(old)  # every instance one step in, at b
        finally:
            old.close()
        Engine(new_url, database_profile="distributed").close()  # the profile's tables
        with psycopg.connect(libpq_url(old_url)) as src, psycopg.connect(libpq_url(new_url)) as dst:
            for table in _MOVED:
                columns = [
                    r[0]
                    for r in src.execute(
                        "SELECT column_name FROM information_schema.columns "
                        "WHERE table_name = %s ORDER BY ordinal_position",
                        (table,),
                    )
                ]
                names = ", ".join(columns)
                dst.execute(f"DELETE FROM {table}")
                with (
                    src.cursor().copy(f"COPY {table} ({names}) TO STDOUT") as out,
                    dst.cursor().copy(f"COPY {table} ({names}) FROM STDIN") as into,
                ):
                    for block in out:
                        into.write(block)
            # pg_dump --data-only carries the sequence's value too: definitions are numbered.
            dst.execute(
                "SELECT setval(pg_get_serial_sequence('wiggle_definitions', 'seq'), "
                "(SELECT max(seq) FROM wiggle_definitions))"
            )
        new = Engine(new_url, database_profile="distributed")
        try:
            # A definition registered after the move gets a number of its own.
            assert new.register(FLOW) == (FLOW.version, True)
            while _complete_all(new):
                pass
            for instance in moved:
                view = new.describe(instance, include_events=True)
                assert view.status is InstanceStatus.COMPLETED
                seqs = [e.seq for e in view.events]
                assert seqs == sorted(seqs)
                kinds = [e.kind for e in view.events]
                assert kinds[0] == "instance_started" and kinds[-1] == "instance_completed"
        finally:
            new.close()
    finally:
        drop_database(old_url)
        drop_database(new_url)


#: What a move copies: every table but the schema version and the outcome markers (the new
#: database has its own), the leader row included (it lapses).
_MOVED = (
    "wiggle_definitions",
    "wiggle_instances",
    "wiggle_tokens",
    "wiggle_events",
    "wiggle_signals",
    "wiggle_workers",
    "wiggle_step_inputs",
    "wiggle_search",
    "wiggle_batches",
    "wiggle_batch_items",
    "wiggle_leader",
)
