"""Storage: the schema version, definitions, idempotent starts, listing, execution modes."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select, update

from wiggle.compiler import load_flow
from wiggle.engine import SCHEMA_VERSION, Engine, IncompatibleSchema, InstanceStatus, StepFailure
from wiggle.engine.store import schema as schema
from wiggle.errors import InstanceExists, RepairRefused
from wiggle.graph import ExecutionMode
from wiggle.tracecontext import trace_id_for

LIN = load_flow("wiggle: 1\nname: lin\nsteps:\n  - task: a\n")
LIN2 = load_flow("wiggle: 1\nname: lin\nsteps:\n  - task: a\n  - task: b\n")
SYNC = load_flow("wiggle: 1\nname: fast\nexecution: LOCAL_SYNC\nsteps:\n  - task: a\n")


def test_schema_version_is_recorded_and_a_newer_database_refused(database_url):
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION
        e.register(LIN)
    finally:
        e.close()
    Engine(database_url).close()  # reopening a current database is fine and keeps the data
    e = Engine(database_url)
    try:
        assert e.get_definition("lin").version == LIN.version
        e.db.write(
            lambda c: c.execute(update(schema.schema_version).values(version=SCHEMA_VERSION + 1))
        )
    finally:
        e.close()
    with pytest.raises(IncompatibleSchema, match="newer"):
        Engine(database_url)


def test_register_is_idempotent_and_newest_wins(database_url):
    e = Engine(database_url)
    try:
        assert e.register(LIN) == (LIN.version, True)
        assert e.register(LIN) == (LIN.version, False)
        assert e.register(LIN2) == (LIN2.version, True)
        newest = e.get_definition("lin")
        assert newest.version == LIN2.version
        assert newest.canonical == LIN2.canonical
        assert newest.flow.version == LIN2.version
        assert newest.registered_at_ms > 0
        assert e.get_definition("lin", LIN.version).canonical == LIN.canonical
        assert e.start("lin", {}).version == LIN2.version
        assert e.start("lin", {}, version=LIN.version).version == LIN.version
    finally:
        e.close()


def test_a_registration_that_collides_on_its_number_is_not_reported_stored(
    postgres_database_url,
):
    """A definitions sequence behind its rows (rows copied in without it) made register()
    answer "already registered" for a version it had not stored."""
    from sqlalchemy.exc import IntegrityError

    e = Engine(postgres_database_url)
    try:
        e.register(LIN)
        e.db.write(
            lambda c: c.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('wiggle_definitions', 'seq'), 1, false)"
            )
        )
        with pytest.raises(IntegrityError):
            e.register(LIN2)
    finally:
        e.close()


def test_start_with_an_instance_id_is_idempotent(database_url):
    e = Engine(database_url)
    try:
        e.register(LIN)
        first = e.start("lin", {"a": 1}, instance_id="order-1")
        again = e.start("lin", {"a": 1}, instance_id="order-1")
        assert (first.instance_id, first.created) == ("order-1", True)
        assert (again.instance_id, again.created) == ("order-1", False)
        with pytest.raises(InstanceExists, match="started with another input"):
            e.start("lin", {"a": 2}, instance_id="order-1")
        assert e.describe("order-1").context == {"a": 1}
        assert len(e.poll(["default"], "w", 10)) == 1
    finally:
        e.close()


def test_list_instances_filters_and_pages(database_url):
    e = Engine(database_url)
    try:
        e.register(LIN)
        e.register(SYNC)
        ids = sorted(e.start("lin", {}).instance_id for _ in range(5))
        fast = e.start("fast", {}).instance_id
        e.cancel(ids[0])
        assert [v.instance_id for v in e.list_instances(flow="lin")] == ids
        assert [v.instance_id for v in e.list_instances(flow="lin", limit=2)] == ids[:2]
        assert [v.instance_id for v in e.list_instances(flow="lin", after=ids[1])] == ids[2:]
        cancelled = e.list_instances(status=InstanceStatus.CANCELLED)
        assert [v.instance_id for v in cancelled] == [ids[0]]
        assert [v.instance_id for v in e.list_instances(flow="fast")] == [fast]
    finally:
        e.close()


@pytest.mark.parametrize(
    "default,flow,expected",
    [
        (ExecutionMode.SERVER, LIN, ExecutionMode.SERVER),
        (ExecutionMode.LOCAL_ASYNC, LIN, ExecutionMode.LOCAL_ASYNC),
        (ExecutionMode.LOCAL_ASYNC, SYNC, ExecutionMode.LOCAL_SYNC),
        (ExecutionMode.DEFAULT, LIN, ExecutionMode.SERVER),
    ],
)
def test_execution_mode_is_resolved_and_stamped(database_url, default, flow, expected):
    e = Engine(database_url, default_mode=default)
    try:
        e.register(flow)
        r = e.start(flow.name, {})
        (task,) = e.poll(["default"], "w", 1)
        assert task.execution_mode is expected
        assert e.describe(r.instance_id).execution_mode is expected
    finally:
        e.close()


def test_an_in_memory_sqlite_database_works(tmp_path):
    e = Engine("sqlite://")
    try:
        e.register(LIN)
        r = e.start("lin", {"x": 1})
        (task,) = e.poll(["default"], "w", 1)
        e.complete(task.task_id, task.lease, {"x": 2})
        assert e.describe(r.instance_id).context == {"x": 2}
    finally:
        e.close()


def test_an_older_schema_is_upgraded_by_its_migrations(database_url, monkeypatch):
    e = Engine(database_url)
    e.db.write(lambda c: c.execute(update(schema.schema_version).values(version=SCHEMA_VERSION)))
    e.close()
    ran: list[int] = []
    monkeypatch.setattr(schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    monkeypatch.setitem(schema.MIGRATIONS, SCHEMA_VERSION, lambda conn: ran.append(1))
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert (got, ran) == (SCHEMA_VERSION + 1, [1])
    finally:
        e.close()
    Engine(database_url).close()  # already current: no migration runs again
    assert ran == [1]


def test_a_database_with_foreign_wiggle_tables_is_refused(database_url):
    e = Engine(database_url)
    e.db.write(lambda c: c.execute(schema.schema_version.delete()))
    e.db.write(lambda c: c.exec_driver_sql("DROP TABLE wiggle_schema_version"))
    e.close()
    with pytest.raises(IncompatibleSchema, match="no schema version"):
        Engine(database_url)


def test_notify_wakes_a_poller_in_another_engine(postgres_database_url):
    """PostgreSQL LISTEN/NOTIFY: another engine (another process, in production) wakes."""
    database_url = postgres_database_url
    import threading

    a = Engine(database_url, node_id="a")
    b = Engine(database_url, node_id="b")
    try:
        a.register(LIN)
        got: list[object] = []

        def long_poll() -> None:
            for _ in range(3):  # the first wait may return early (listener connecting)
                tasks = b.poll(["default"], "w", 1)
                if tasks:
                    got.extend(tasks)
                    return
                b.wait_for_tasks(["default"], 60.0)

        b.wait_for_tasks(["default"], 0.01)  # start b's listener
        t = threading.Thread(target=long_poll)
        t.start()
        a.start("lin", {})
        t.join(30)  # far below the 60 s the poller would sleep without a NOTIFY
        assert not t.is_alive() and len(got) == 1
    finally:
        a.close()
        b.close()


def test_racing_starts_of_one_instance_id_create_it_once(database_url):
    import threading

    e = Engine(database_url)
    try:
        e.register(LIN)
        results = []
        barrier = threading.Barrier(6)

        def go() -> None:
            barrier.wait()
            results.append(e.start("lin", {}, instance_id="same"))

        threads = [threading.Thread(target=go) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.created for r in results) == [False] * 5 + [True]
        assert len(e.poll(["default"], "w", 10)) == 1
    finally:
        e.close()


def test_an_unreachable_database_is_unavailable(tmp_path):
    from wiggle.errors import Unavailable

    with pytest.raises(Unavailable):
        Engine("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(Unavailable):
        Engine(f"sqlite:///{tmp_path}/missing-dir/x.db")


def test_a_schema_1_database_is_upgraded_keeping_its_instances(database_url):
    """Schema 1 had no token activity / report identity columns and no workers table."""
    e = Engine(database_url)
    try:
        e.register(LIN)
        started = e.start("lin", {"x": 1})

        def make_v1(conn):
            _make_v2(conn)
            conn.exec_driver_sql("DROP TABLE wiggle_workers")
            conn.exec_driver_sql("DROP INDEX ix_wiggle_instances_created")
            conn.exec_driver_sql("ALTER TABLE wiggle_instances DROP COLUMN input")
            for column in ("activity", "report_seq", "released_lease"):
                conn.exec_driver_sql(f"ALTER TABLE wiggle_tokens DROP COLUMN {column}")
            conn.execute(update(schema.schema_version).values(version=1))

        e.db.write(make_v1)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION
        (task,) = e.poll(["default"], "w", 1)  # the v1 token is claimable after the upgrade
        assert task.instance_id == started.instance_id
        e.complete(task.task_id, task.lease, {"x": 2})
        done = e.describe(started.instance_id)
        assert done.status is InstanceStatus.COMPLETED
        assert done.input is None  # started before schema 2: its input was not kept
        again = e.start("lin", {"x": 5})
        (task,) = e.poll(["default"], "w", 1)
        e.complete(task.task_id, task.lease, {"x": 6})
        assert e.describe(again.instance_id).input == {"x": 5}  # kept past the end
    finally:
        e.close()


REMINDED = """
wiggle: 1
name: reminded
steps:
  - human: approve
    title: Approve
    form: {}
    candidates: {people: [alice, bob]}
    remind: [1h]
    exclude: [starter]
"""


def _make_v9(conn):
    """Turn a current database back into schema 9: the inputs each node received last are rows
    of wiggle_step_inputs (one per instance and node), not on the events."""
    e = schema.events
    rows = conn.execute(
        select(e.c.instance_id, e.c.at_ms, e.c.entered)
        .where(e.c.entered.is_not(None))
        .order_by(e.c.seq)
    ).all()
    kept: dict[tuple[str, str], dict] = {}
    for row in rows:
        for node, item in json.loads(row.entered)["nodes"].items():
            kept[(row.instance_id, node)] = {
                "instance_id": row.instance_id,
                "node_id": node,
                "context": json.dumps(item["context"]),
                "input": json.dumps(item["input"]) if "input" in item else None,
                "loop_counts": json.dumps(item["loop_counts"]),
                "at_ms": row.at_ms,
            }
    if kept:
        conn.execute(schema.step_inputs.insert(), list(kept.values()))
    conn.exec_driver_sql("ALTER TABLE wiggle_events DROP COLUMN entered")
    conn.execute(update(schema.schema_version).values(version=9))


def test_a_schema_9_database_is_upgraded_to_10_and_resets_to_nodes_passed_before(database_url):
    """Schema 10 keeps each node's input on the events. What an instance recorded before (rows
    of wiggle_step_inputs) still answers a reset, and what it records after supersedes it."""
    e = Engine(database_url)
    try:
        e.register(LIN2)
        started = e.start("lin", {"x": 1})
        (task,) = e.poll(["default"], "w", 1)
        e.complete(task.task_id, task.lease, {"y": 2})
        e.db.write(_make_v9)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION == 10
        iid = started.instance_id
        before = e.describe(iid, include_events=True).step_inputs
        assert before["a"]["context"] == {"x": 1}
        assert before["b"]["context"] == {"y": 2}  # a's result is b's context
        (task,) = e.poll(["default"], "w", 1)
        e.complete(task.task_id, task.lease, {"z": 3})
        assert e.describe(iid).status is InstanceStatus.COMPLETED
        e.reset(iid, "b")  # from the row schema 9 wrote
        (task,) = e.poll(["default"], "w", 1)
        assert (task.node_id, task.input) == ("b", {"y": 2})
        e.complete(task.task_id, task.lease, {"z": 4})
        e.reset(iid, "a")
        (task,) = e.poll(["default"], "w", 1)
        assert (task.node_id, task.input) == ("a", {"x": 1})
        e.complete(task.task_id, task.lease, {"y": 5})
        after = e.describe(iid, include_events=True).step_inputs
        assert after["b"]["context"] == {"y": 5}
        assert after["b"]["at_ms"] >= after["a"]["at_ms"] >= before["b"]["at_ms"]
    finally:
        e.close()


def _make_v8(conn):
    """Turn a current database back into schema 8 (no trace context)."""
    _make_v9(conn)
    for column in ("traceparent", "tracestate"):
        conn.exec_driver_sql(f"ALTER TABLE wiggle_instances DROP COLUMN {column}")
    conn.execute(update(schema.schema_version).values(version=8))


def test_a_schema_8_database_is_upgraded_to_9_and_its_instances_get_a_trace(database_url):
    """Schema 9 keeps a start's trace context. An instance started before has none: its trace
    is derived from its id; one started after keeps the traceparent it was given, and its
    tasks carry it when asked."""
    flow = load_flow(REMINDED)
    e = Engine(database_url)
    try:
        e.register(flow)
        kept = e.start("reminded", {})
        e.db.write(_make_v8)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION
        assert e.describe(kept.instance_id).trace_id == trace_id_for(kept.instance_id)
        parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        fresh = e.start("reminded", {}, traceparent=parent, tracestate="k=v")
        assert e.describe(fresh.instance_id).trace_id == "0af7651916cd43dd8448eb211c80319c"
        (listed,) = [
            i for i in e.list_instances(flow="reminded") if i.instance_id == fresh.instance_id
        ]
        assert listed.trace_id == "0af7651916cd43dd8448eb211c80319c"
    finally:
        e.close()


def _make_v7(conn):
    """Turn a current database back into schema 7 (no starter, no reminders)."""
    _make_v8(conn)
    conn.exec_driver_sql("DROP INDEX ix_wiggle_human_tasks_remind")
    for column in ("reminded_count", "last_reminded_at_ms", "next_remind_at_ms"):
        conn.exec_driver_sql(f"ALTER TABLE wiggle_human_tasks DROP COLUMN {column}")
    conn.exec_driver_sql("ALTER TABLE wiggle_instances DROP COLUMN started_by")
    conn.execute(update(schema.schema_version).values(version=7))


def test_a_schema_7_database_is_upgraded_to_8_and_its_tasks_and_instances_carry_on(
    database_url,
):
    """Schema 8 records an instance's starter and a task's reminders. A task written before
    has no reminders scheduled and excludes nobody as the starter (none was recorded); both
    work for what starts after the upgrade."""
    flow = load_flow(REMINDED)
    e = Engine(database_url)
    try:
        e.register(flow)
        kept = e.start("reminded", {})
        e.db.write(_make_v7)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION
        assert e.describe(kept.instance_id).started_by == ""
        (old,) = e.list_tasks("alice", instance_id=kept.instance_id)
        assert (old.excluded, old.reminded_count, old.next_remind_at_ms) == ((), 0, None)
        fresh = e.start("reminded", {}, started_by="alice")
        assert e.describe(fresh.instance_id).started_by == "alice"
        (new,) = e.list_tasks("bob", instance_id=fresh.instance_id)
        assert new.excluded == ("alice",)
        assert new.next_remind_at_ms == new.created_at_ms + 3_600_000
        e.complete_task(old.task_id, "alice", (), {})  # the task from before still answers
        assert e.describe(kept.instance_id).status is InstanceStatus.COMPLETED
        index = e.db.read(lambda c: _index_sql(c, "ix_wiggle_human_tasks_remind"))
        assert "next_remind_at_ms IS NOT NULL" in index.replace("(", "").replace(")", "")
    finally:
        e.close()


def _make_v6(conn):
    """Turn a current database back into schema 6 (no human tasks)."""
    _make_v7(conn)
    for table in ("wiggle_human_task_actions", "wiggle_human_tasks"):
        conn.exec_driver_sql(f"DROP TABLE {table}")
    conn.execute(update(schema.schema_version).values(version=6))


def test_a_schema_6_database_is_upgraded_to_7_and_keeps_human_tasks(database_url):
    """Schema 7 adds the human tasks and their actions; what the database held stays."""
    e = Engine(database_url)
    try:
        e.register(LIN)
        kept = e.start("lin", {"x": 1})
        e.db.write(_make_v6)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        assert e.describe(kept.instance_id).input == {"x": 1}
        assert e.list_tasks("alice", admin=True) == []
    finally:
        e.close()


def _make_v5(conn):
    """Turn a current database back into schema 5 (no schedules)."""
    _make_v6(conn)
    for table in ("wiggle_schedule_fires", "wiggle_schedules"):
        conn.exec_driver_sql(f"DROP TABLE {table}")
    conn.execute(update(schema.schema_version).values(version=5))


def test_a_schema_5_database_is_upgraded_to_6_and_takes_schedules(database_url):
    """Schema 6 adds the schedules and their fires; what the database held stays."""
    from wiggle.schedules import load_schedule

    e = Engine(database_url)
    try:
        e.register(LIN)
        kept = e.start("lin", {"x": 1})
        e.db.write(_make_v5)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        assert e.describe(kept.instance_id).input == {"x": 1}
        e.apply_schedule(load_schedule("schedule: s\nflow: lin\ncron: '0 * * * *'\n"))
        assert [v.name for v in e.list_schedules()] == ["s"]
    finally:
        e.close()


def _make_v4(conn):
    """Turn a current database back into schema 4 (search value indexes not partial)."""
    _make_v5(conn)
    for name, column in (("text", "text_value"), ("num", "num_value")):
        conn.exec_driver_sql(f"DROP INDEX ix_wiggle_search_{name}")
        conn.exec_driver_sql(
            f"CREATE INDEX ix_wiggle_search_{name} ON wiggle_search (name, {column})"
        )
    conn.execute(update(schema.schema_version).values(version=4))


def _index_sql(conn, name: str) -> str:
    if conn.dialect.name == "sqlite":
        query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?"
    else:
        query = "SELECT indexdef FROM pg_indexes WHERE indexname = %s"
    return str(conn.exec_driver_sql(query, (name,)).scalar_one())


def _make_v3(conn):
    """Turn a current database back into schema 3 (no index of ended instances)."""
    _make_v4(conn)
    conn.exec_driver_sql("DROP INDEX ix_wiggle_instances_ended")
    conn.execute(update(schema.schema_version).values(version=3))


def _make_v2(conn):
    """Turn a current database back into schema 2 (no repair or search tables)."""
    _make_v3(conn)
    for table in ("wiggle_step_inputs", "wiggle_search", "wiggle_batches", "wiggle_batch_items"):
        conn.exec_driver_sql(f"DROP TABLE {table}")
    conn.exec_driver_sql("ALTER TABLE wiggle_tokens DROP COLUMN halted")
    conn.execute(update(schema.schema_version).values(version=2))


def test_a_schema_2_database_is_upgraded_to_3_and_its_failures_can_be_retried(database_url):
    """Schema 3 adds the halted state of tokens, step inputs, search values and bulk actions.
    An instance that failed before the upgrade has no halted token: retry says so."""
    e = Engine(database_url)
    try:
        e.register(LIN)
        running = e.start("lin", {"x": 1})
        failed = e.start("lin", {"x": 2})
        for task in e.poll(["default"], "w", 2):
            if task.instance_id == failed.instance_id:
                e.fail(task.task_id, task.lease, StepFailure("boom", non_retryable=True))
        e.db.write(_make_v2)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        got = e.db.read(lambda c: c.execute(select(schema.schema_version.c.version)).scalar_one())
        assert got == SCHEMA_VERSION
        assert e.describe(running.instance_id).status is InstanceStatus.RUNNING
        with pytest.raises(RepairRefused, match="before this server could record"):
            e.retry(failed.instance_id)
    finally:
        e.close()


def test_a_schema_3_database_is_upgraded_to_4_and_prunes_by_end_time(database_url):
    """Schema 4 adds the index of finished top-level instances by end time, which pruning
    reads; instances that ended before the upgrade are in it."""
    e = Engine(database_url)
    try:
        e.register(LIN)
        done = e.start("lin", {"x": 1})
        running = e.start("lin", {"x": 2})
        (task,) = [t for t in e.poll(["default"], "w", 2) if t.instance_id == done.instance_id]
        e.complete(task.task_id, task.lease, {"x": 3})
        e.db.write(_make_v3)
    finally:
        e.close()
    e = Engine(database_url)
    try:
        indexes = e.db.read(lambda c: sa_inspect(c).get_indexes("wiggle_instances"))
        assert "ix_wiggle_instances_ended" in {ix["name"] for ix in indexes}
        assert e.prune(0).instances == 1
        assert e.describe(running.instance_id).status is InstanceStatus.RUNNING
    finally:
        e.close()


SEARCHED = load_flow(
    "wiggle: 1\nname: keyed\nsearch: {order: /order, total: {pointer: /total, type: number}}\n"
    "steps:\n  - task: a\n"
)


def test_a_schema_4_database_is_upgraded_to_5_and_still_finds_by_search_values(database_url):
    """Schema 5 makes the search value indexes partial (each holds the rows with its value);
    values written before the upgrade are found through them."""
    from wiggle.engine import InstanceFilter
    from wiggle.filters import parse_filter

    e = Engine(database_url)
    try:
        e.register(SEARCHED)
        e.start("keyed", {"order": "A-1", "total": 10}, instance_id="k1")
        e.start("keyed", {"order": "A-2", "total": 20}, instance_id="k2")
        e.db.write(_make_v4)
        assert "WHERE" not in _index_sql_of(e, "ix_wiggle_search_num").upper()
    finally:
        e.close()
    e = Engine(database_url)
    try:
        for name, column in (("text", "text_value"), ("num", "num_value")):
            assert f"{column} IS NOT NULL" in _index_sql_of(e, f"ix_wiggle_search_{name}")

        def found(*where: str) -> list[str]:
            page = e.find_instances(InstanceFilter(where=parse_filter(where)), limit=10)
            return sorted(v.instance_id for v in page.instances)

        assert found("order=A-2") == ["k2"]
        assert found("total>15") == ["k2"]
        assert found("total<=20") == ["k1", "k2"]
    finally:
        e.close()


def _index_sql_of(engine: Engine, name: str) -> str:
    return engine.db.read(lambda c: _index_sql(c, name))


def test_a_database_url_with_an_invalid_host_name_is_a_clear_error():
    """`--database postgresql://...` (a placeholder copied from the docs) raised UnicodeError
    from the driver's name lookup, a traceback in every command that opens the database."""
    from wiggle.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="host name is not valid"):
        Engine("postgresql://...")


def _shape(url: str) -> dict[str, object]:
    """Every table's columns (name, type, nullability, default), key and indexes."""
    from sqlalchemy import create_engine

    from wiggle._postgres import sqlalchemy_url

    sa = create_engine(sqlalchemy_url(url))
    try:
        with sa.connect() as conn:
            found = sa_inspect(conn)
            return {
                table: (
                    [
                        (c["name"], str(c["type"]), c["nullable"], c.get("default"))
                        for c in found.get_columns(table)
                    ],
                    found.get_pk_constraint(table)["constrained_columns"],
                    sorted(
                        (i["name"], tuple(i["column_names"]), bool(i["unique"]))
                        for i in found.get_indexes(table)
                    ),
                )
                for table in sorted(found.get_table_names())
            }
    finally:
        sa.dispose()


def _created_as_create_all_would(url: str, reference: str, profile: str) -> None:
    """The engine runs DDL compiled once per dialect, not create_all on every start: what it
    makes on `url` must be exactly what create_all makes from the same tables on `reference`."""
    from sqlalchemy import create_engine

    from wiggle._postgres import sqlalchemy_url

    Engine(url, database_profile=profile).close()
    sa = create_engine(sqlalchemy_url(reference))
    shape = schema.distributed_metadata() if profile == "distributed" else schema.metadata
    with sa.begin() as conn:
        shape.create_all(conn)
    sa.dispose()
    ours, theirs = _shape(url), _shape(reference)
    assert sorted(ours) == sorted(theirs)
    for table in ours:
        assert ours[table] == theirs[table], table


def test_an_engine_creates_the_schema_create_all_would(database_url, tmp_path):
    from wiggle._postgres import create_database, drop_database

    if database_url.startswith("sqlite"):
        _created_as_create_all_would(database_url, f"sqlite:///{tmp_path / 'ref.db'}", "default")
        return
    reference = create_database(database_url, prefix="wiggle_ref")
    try:
        _created_as_create_all_would(database_url, reference, "default")
    finally:
        drop_database(reference)


def test_the_distributed_profile_creates_the_schema_create_all_would(postgres_database_url):
    from wiggle._postgres import create_database, drop_database

    reference = create_database(postgres_database_url, prefix="wiggle_ref")
    try:
        _created_as_create_all_would(postgres_database_url, reference, "distributed")
    finally:
        drop_database(reference)
