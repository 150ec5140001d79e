"""The tables, the recorded schema version and the migrations between versions.

Every row the engine keeps lives in one of the tables below. The schema carries a version in
`wiggle_schema_version`; `ensure_schema` creates it on an empty database, upgrades an older one
with the explicit steps in `MIGRATIONS`, and refuses a newer one. Nothing here ever drops data.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    inspect,
    select,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from wiggle.errors import WiggleError

__all__ = [
    "ENDED_ROOTS",
    "HALTED_FAILED",
    "HALTED_FINAL",
    "LEASED_TOKENS",
    "READY_TOKENS",
    "REMINDED_TASKS",
    "SCHEMA_VERSION",
    "TIMED_TOKENS",
    "IncompatibleSchema",
    "batch_items",
    "batches",
    "definitions",
    "ensure_schema",
    "events",
    "human_task_actions",
    "human_tasks",
    "instances",
    "leader",
    "metadata",
    "schedule_fires",
    "schedules",
    "schema_version",
    "search_values",
    "seed_schema",
    "signals",
    "step_inputs",
    "tokens",
    "workers",
]

#: `halted` of the token whose step failure ended its instance: `retry` runs that step again.
HALTED_FAILED = "FAILED"
#: `halted` of a token whose failure a retry could not mend (a loop over its limit).
HALTED_FINAL = "FINAL"

#: The schema version this code writes. Bump it and add a MIGRATIONS entry for every change.
SCHEMA_VERSION = 10

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL wants a BIGINT identity.
_SeqType = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

schema_version = Table(
    "wiggle_schema_version",
    metadata,
    Column("version", Integer, primary_key=True),
    Column("upgraded_at_ms", BigInteger, nullable=False),
)

definitions = Table(
    "wiggle_definitions",
    metadata,
    Column("seq", _SeqType, primary_key=True, autoincrement=True),
    Column("version", String(80), nullable=False, unique=True),
    Column("name", String(200), nullable=False),
    Column("canonical", LargeBinary, nullable=False),
    Column("registered_at_ms", BigInteger, nullable=False),
    Index("ix_wiggle_definitions_name", "name", "seq"),
)


def _where(condition: str) -> dict[str, Any]:
    """A partial index's condition, for both databases."""
    return {"sqlite_where": text(condition), "postgresql_where": text(condition)}


# Finished top-level instances: what retention removes (engine/ops/prune.py), by when they ended.
_ENDED = "parent_instance_id IS NULL AND status IN ('COMPLETED', 'FAILED', 'CANCELLED')"
ENDED_ROOTS = text(_ENDED)

instances = Table(
    "wiggle_instances",
    metadata,
    Column("id", String(64), primary_key=True),
    # Every transition locks the root instance's row: a subflow tree is serialised as one unit,
    # so a child finishing can resume its parent without a lock-order deadlock.
    Column("root_id", String(64), nullable=False),
    Column("flow", String(200), nullable=False),
    Column("version", String(80), nullable=False),
    Column("status", String(16), nullable=False),
    Column("context", Text, nullable=False),  # JSON: the input, then the final context
    Column("reason", Text, nullable=False, default=""),
    Column("mode", String(16), nullable=False),
    Column("parent_instance_id", String(64)),
    Column("parent_token_id", String(64)),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    # Since schema 2: the start input, kept after `context` became the final context (null for
    # instances started before schema 2).
    Column("input", Text),
    # Since schema 8: who started it (the calling credential's name; a subflow child its
    # parent's), for a human step's `exclude: [starter]`. Null: no person (a schedule's fire,
    # a server without credentials, an instance started before schema 8).
    Column("started_by", String(200)),
    # Since schema 9: the W3C trace context its start carried (docs/observability.md), kept as
    # a normalised traceparent (version 00) and a checked tracestate; a subflow child copies its
    # parent's. Null: none (the trace is then derived from the root instance id).
    Column("traceparent", String(64)),
    Column("tracestate", String(512)),
    # Listing is newest first (created_at_ms, id), optionally by flow or by status.
    Index("ix_wiggle_instances_created", "created_at_ms", "id"),
    Index("ix_wiggle_instances_flow", "flow", "created_at_ms", "id"),
    Index("ix_wiggle_instances_status", "status", "created_at_ms", "id"),
    Index("ix_wiggle_instances_parent", "parent_instance_id"),
    # Since schema 4. Pruning a day of history reads that day's entries only, however long the
    # history: an instance enters it once, when it ends.
    Index("ix_wiggle_instances_ended", "updated_at_ms", "id", **_where(_ENDED)),
)


# The conditions of the partial token indexes. A query uses such an index only when its own
# WHERE says the same with literal values (a bound parameter proves nothing to the planner, and
# PostgreSQL's generic plans for prepared statements see only parameters): the queries take
# these conditions from here (`READY_TOKENS` ...), never as parameters.
_READY = "state = 'READY'"
_TIMED = "state IN ('WAITING', 'AWAITING')"
_LEASED = "state = 'LEASED'"
READY_TOKENS = text(_READY)
TIMED_TOKENS = text(_TIMED)
LEASED_TOKENS = text(_LEASED)

tokens = Table(
    "wiggle_tokens",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("instance_id", String(64), nullable=False),
    Column("version", String(80), nullable=False),  # denormalised: a claim needs no join
    Column("node_id", String(200), nullable=False),
    Column("state", String(16), nullable=False),
    Column("context", Text, nullable=False),  # JSON
    Column("input", Text),  # JSON for a combine / apply step; null: the input is the context
    Column("attempt", Integer, nullable=False),
    Column("queue", String(200)),
    Column("timeout_ms", BigInteger, nullable=False),
    Column("ready_at_ms", BigInteger),
    Column("lease", String(64)),
    Column("lease_owner", String(200)),
    Column("lease_expires_at_ms", BigInteger),
    Column("wake_at_ms", BigInteger),
    # Why a WAITING token waits: sleep | retry | child | held (a for_each element over the
    # max_concurrency limit, released when a sibling finishes).
    Column("wait_kind", String(16)),
    Column("parent_token_id", String(64)),  # the fork / foreach token this branch belongs to
    Column("branch", Text),  # branch name, list index or object key
    Column("seq", Integer, nullable=False),  # the branch's position (results keep this order)
    Column("pending", Integer, nullable=False),  # a fork parent: branches not yet finished
    Column("loop_counts", Text, nullable=False),  # JSON object
    Column("child_instance_id", String(64)),
    Column("aux", Text),  # JSON: a foreach parent's collection shape
    # Since schema 2. READY / LEASED: the step's activity (claims lease only tasks whose activity
    # the polling worker has).
    Column("activity", String(200)),
    # Since schema 2. Report identity (docs/worker-protocol.md): the last report seq applied
    # under the current lease, and the lease that the last final report ended, so that a report
    # resent after a lost response is answered again instead of applied twice.
    Column("report_seq", Integer, nullable=False, server_default="0"),
    Column("released_lease", String(64)),
    # Since schema 3. When its instance ended, a token that was still live kept the state it
    # was in here (and the token whose failure ended it, HALTED_FAILED): `retry` brings exactly
    # those tokens back (engine/ops/repair.py). Null for tokens that finished on their own.
    Column("halted", String(16)),
    Index("ix_wiggle_tokens_instance", "instance_id", "state"),
    # Partial indexes (schema 2): each holds only the tokens its query looks for, so a claim, a
    # timer scan or a lease scan never walks finished tokens however long the history, and a
    # token's update adds entries only to the indexes whose condition it meets.
    Index(
        "ix_wiggle_tokens_parent",
        "parent_token_id",
        "state",
        "seq",
        **_where("parent_token_id IS NOT NULL"),
    ),
    Index("ix_wiggle_tokens_ready", "queue", "ready_at_ms", **_where(_READY)),
    Index("ix_wiggle_tokens_wake", "wake_at_ms", **_where(_TIMED)),
    Index("ix_wiggle_tokens_lease", "lease_expires_at_ms", **_where(_LEASED)),
)

signals = Table(
    "wiggle_signals",
    metadata,
    Column("seq", _SeqType, primary_key=True, autoincrement=True),
    Column("instance_id", String(64), nullable=False),
    Column("name", String(200), nullable=False),
    Column("payload", Text, nullable=False),
    Column("received_at_ms", BigInteger, nullable=False),
    Column("consumed_at_ms", BigInteger),
    Column("token_id", String(64)),
    Index("ix_wiggle_signals_inbox", "instance_id", "name", "consumed_at_ms", "seq"),
)

events = Table(
    "wiggle_events",
    metadata,
    Column("seq", _SeqType, primary_key=True, autoincrement=True),
    Column("instance_id", String(64), nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("kind", String(40), nullable=False),
    Column("node_id", String(200), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("detail", Text, nullable=False),
    # Since schema 10. JSON: the input of each top-level node the event's transition entered,
    # for `reset` (store/inputs.py); null on most events.
    Column("entered", Text),
    Index("ix_wiggle_events_instance", "instance_id", "seq"),
)

# Since schema 2. Workers seen polling: written at most every few seconds per worker and server
# process (never once per poll), read by `wiggle workers` and by `wiggle status` explanations.
workers = Table(
    "wiggle_workers",
    metadata,
    Column("worker_id", String(200), primary_key=True),
    Column("queues", Text, nullable=False),  # JSON list
    Column("activities", Text, nullable=False),  # JSON list; empty: the worker did not say
    Column("slots", Integer, nullable=False),
    Column("sdk", String(100), nullable=False),
    Column("first_seen_ms", BigInteger, nullable=False),
    Column("last_poll_ms", BigInteger, nullable=False),
    Index("ix_wiggle_workers_last_poll", "last_poll_ms"),
)

# Schema 3 to 9. The context each node received the last time a top-level token entered it, so
# that `reset` can rewind an instance to a node it passed (engine/ops/repair.py). One row per
# (instance, node), overwritten on each visit; nodes inside a parallel branch or a for_each body
# are not kept (a reset to them is refused, naming the enclosing block). Pruned with the instance.
# Since schema 10 no longer written (the events' `entered` carries the inputs, store/inputs.py),
# only read, for what an instance recorded before the upgrade.
step_inputs = Table(
    "wiggle_step_inputs",
    metadata,
    Column("instance_id", String(64), primary_key=True),
    Column("node_id", String(200), primary_key=True),
    Column("context", Text, nullable=False),  # JSON
    Column("input", Text),  # JSON: a combine or apply step's input; null: the context
    Column("loop_counts", Text, nullable=False),  # JSON object
    Column("at_ms", BigInteger, nullable=False),
)

# Since schema 3. The values of a flow's search attributes (docs/flow-format.md, `search`), one
# row per instance and attribute that has a value: text for `string` and `bool`, a number for
# `number` and `time` (milliseconds since the epoch). Written when a transition changes them.
search_values = Table(
    "wiggle_search",
    metadata,
    Column("instance_id", String(64), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("text_value", String(256)),
    Column("num_value", Float(precision=53)),
    # Partial since schema 5: a row has one of the two values, so each index holds only the
    # rows it can find, and a row's update writes one value index entry, not two.
    Index("ix_wiggle_search_text", "name", "text_value", **_where("text_value IS NOT NULL")),
    Index("ix_wiggle_search_num", "name", "num_value", **_where("num_value IS NOT NULL")),
)

# Since schema 3. Bulk actions (and migrations): what was asked, by whom, and how far it got.
# The instances an action touches are fixed when it is created (`batch_items`); the leading
# server works through them in small transactions, each instance's action and its item's new
# state in the same transaction, so a crash repeats nothing and loses nothing (engine/ops/bulk.py).
batches = Table(
    "wiggle_batches",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("action", String(16), nullable=False),  # cancel | retry | reset | signal | migrate
    Column("params", Text, nullable=False),  # JSON: the action's arguments
    Column("filter", Text, nullable=False),  # JSON: the filter as given, for the record
    Column("requested_by", String(200), nullable=False),
    Column("state", String(16), nullable=False),  # RUNNING | PAUSED | DONE | CANCELLED
    Column("rate_per_s", Float(precision=53), nullable=False),
    Column("matched", Integer, nullable=False),
    Column("done", Integer, nullable=False),
    Column("skipped", Integer, nullable=False),
    Column("failed", Integer, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Column("finished_at_ms", BigInteger),
    Index("ix_wiggle_batches_state", "state", "created_at_ms"),
)

batch_items = Table(
    "wiggle_batch_items",
    metadata,
    Column("batch_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),  # the order items are worked in
    Column("instance_id", String(64), nullable=False),
    Column("state", String(16), nullable=False),  # PENDING | DONE | SKIPPED | FAILED
    Column("message", Text, nullable=False),
    Column("detail", Text),  # JSON: the item's own arguments (a migration's plan entry)
    Column("undo", Text),  # JSON: what applying it replaced (a migration's pre-image)
    Column("at_ms", BigInteger),
    Index("ix_wiggle_batch_items_state", "batch_id", "state", "seq"),
    Index("ix_wiggle_batch_items_instance", "instance_id"),
)

# Since schema 6. Schedules (docs/schedules.md): each one's document as applied and how far it
# has fired. Every nominal time up to `cursor_ms` is decided, each in the transaction that
# records its fire and starts its instance (engine/ops/firing.py); the leader finds the due
# ones through the partial index on `next_due_ms`, so schedules that are not due cost nothing.
schedules = Table(
    "wiggle_schedules",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("flow", String(200), nullable=False),
    Column("document", Text, nullable=False),  # JSON: the schedule as applied
    Column("digest", String(80), nullable=False),  # sha256: of the canonical document
    Column("paused", Boolean, nullable=False),
    Column("note", Text, nullable=False),  # why it was paused
    Column("cursor_ms", BigInteger, nullable=False),
    Column("next_due_ms", BigInteger),  # the next fire's due time; NULL: paused or none left
    Column("running_id", String(64)),  # the instance of its last start
    Column("buffered", Integer, nullable=False),  # fires waiting for that instance to end
    Column("fired", BigInteger, nullable=False),
    Column("skipped", BigInteger, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
    Index("ix_wiggle_schedules_due", "next_due_ms", **_where("next_due_ms IS NOT NULL")),
    Index("ix_wiggle_schedules_buffered", "name", **_where("buffered > 0")),
)

# One row per decided nominal time: started, buffered or skipped (a run of nominal times
# skipped for one reason is one row, `count` of them up to `until_ms`).
schedule_fires = Table(
    "wiggle_schedule_fires",
    metadata,
    Column("schedule", String(64), primary_key=True),
    Column("nominal_ms", BigInteger, primary_key=True),
    Column("until_ms", BigInteger, nullable=False),
    Column("count", Integer, nullable=False),
    Column("due_ms", BigInteger, nullable=False),
    Column("outcome", String(16), nullable=False),  # STARTED | BUFFERED | SKIPPED
    Column("reason", Text, nullable=False),
    Column("instance_id", String(64)),
    Column("triggered", Boolean, nullable=False),  # by `trigger` or a backfill
    Column("decided_at_ms", BigInteger, nullable=False),
    Column("started_at_ms", BigInteger),
    Index("ix_wiggle_schedule_fires_recent", "schedule", "decided_at_ms"),
    Index("ix_wiggle_schedule_fires_instance", "instance_id"),
)

# The partial reminder index's condition (literal in the queries that use it, see READY_TOKENS).
_REMINDED = "next_remind_at_ms IS NOT NULL"
REMINDED_TASKS = text(_REMINDED)

# Since schema 7. Human tasks (docs/human-tasks.md): one row each time a token parks at a human
# step's await, written in that transition, with the values computed then (title, people) and
# what the person is asked. Whether a task can still be answered is read from its token at the
# time (AWAITING at the task's node, and this the token's newest task), so a deadline, a cancel,
# a reset or a migration that moves the token on closes the task without touching this row.
human_tasks = Table(
    "wiggle_human_tasks",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("instance_id", String(64), nullable=False),
    Column("token_id", String(64), nullable=False),
    Column("token_seq", Integer, nullable=False),  # 1, 2, ...: the token's tasks in order
    Column("node_id", String(200), nullable=False),
    Column("flow", String(200), nullable=False),
    Column("version", String(80), nullable=False),
    Column("title", Text, nullable=False),
    Column("instructions", Text),
    Column("form", Text, nullable=False),  # JSON Schema
    Column("assignee", String(200)),
    Column("candidate_people", Text, nullable=False),  # JSON list of strings
    Column("candidate_groups", Text, nullable=False),  # JSON list of strings
    Column("excluded", Text, nullable=False),  # JSON list of strings: who may not answer
    Column("approvals", Integer, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("due_at_ms", BigInteger),
    Column("deadline_at_ms", BigInteger),
    Column("state", String(16), nullable=False),  # OPEN | CLAIMED | COMPLETED (as written)
    Column("claimed_by", String(200)),
    Column("completed_by", String(200)),
    Column("completed_at_ms", BigInteger),
    Column("answer", Text),  # JSON: the answer (approvals > 1: the list of answers)
    # Since schema 8. Reminders (the step's `remind`): how many were recorded, when the last
    # one was, and when the next one falls due (null: none left). The leader finds the due
    # ones through the partial index (engine/ops/tasks.py `remind`).
    Column("reminded_count", Integer, nullable=False, server_default="0"),
    Column("last_reminded_at_ms", BigInteger),
    Column("next_remind_at_ms", BigInteger),
    Index("ix_wiggle_human_tasks_instance", "instance_id", "created_at_ms"),
    Index("ix_wiggle_human_tasks_token", "token_id", "token_seq", unique=True),
    Index(
        "ix_wiggle_human_tasks_open", "state", "due_at_ms", **_where("state IN ('OPEN', 'CLAIMED')")
    ),
    Index("ix_wiggle_human_tasks_remind", "next_remind_at_ms", **_where(_REMINDED)),
)

# Since schema 7. What was done to each human task, by whom: the audit trail, and what makes a
# completion idempotent (a request id is used once per task).
human_task_actions = Table(
    "wiggle_human_task_actions",
    metadata,
    Column("task_id", String(64), primary_key=True),
    Column("seq", Integer, primary_key=True),  # 1, 2, ... per task
    Column("instance_id", String(64), nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("actor", String(200), nullable=False),
    Column("action", String(16), nullable=False),  # claim | unclaim | approve | complete | reassign
    Column("detail", Text, nullable=False),  # JSON
    Column("request_id", String(200)),
    Index("ix_wiggle_human_task_actions_request", "task_id", "request_id", unique=True),
    Index("ix_wiggle_human_task_actions_instance", "instance_id"),
)

leader = Table(
    "wiggle_leader",
    metadata,
    Column("name", String(32), primary_key=True),
    Column("holder", String(200), nullable=False),
    Column("term", BigInteger, nullable=False),  # strictly increasing with every new holder
    Column("expires_at_ms", BigInteger, nullable=False),
)


class IncompatibleSchema(WiggleError):
    """The database was written by a newer Wiggle (or is not a Wiggle database)."""


def _v1_to_v2(conn: Connection) -> None:
    """Schema 2: tokens learn their activity and report identity; instances keep their input;
    the workers table; partial token indexes and newest-first instance indexes."""
    for ddl in (
        "ALTER TABLE wiggle_tokens ADD COLUMN activity VARCHAR(200)",
        "ALTER TABLE wiggle_tokens ADD COLUMN report_seq INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE wiggle_tokens ADD COLUMN released_lease VARCHAR(64)",
        "ALTER TABLE wiggle_instances ADD COLUMN input TEXT",
        "DROP INDEX ix_wiggle_instances_flow",
        "DROP INDEX ix_wiggle_instances_status",
    ):
        conn.exec_driver_sql(ddl)
    for index in instances.indexes:
        if index.name in {
            "ix_wiggle_instances_created",
            "ix_wiggle_instances_flow",
            "ix_wiggle_instances_status",
        }:
            index.create(conn)
    workers.create(conn)
    # The token indexes become partial (see `tokens`).
    names = ("parent", "ready", "wake", "lease")
    for name in names:
        conn.exec_driver_sql(f"DROP INDEX ix_wiggle_tokens_{name}")
    for index in tokens.indexes:
        if index.name in {f"ix_wiggle_tokens_{n}" for n in names}:
            index.create(conn)


def _v2_to_v3(conn: Connection) -> None:
    """Schema 3: repair and search. Tokens remember the state they halted in; step inputs,
    search attribute values and bulk actions get their tables."""
    conn.exec_driver_sql("ALTER TABLE wiggle_tokens ADD COLUMN halted VARCHAR(16)")
    for table in (step_inputs, search_values, batches, batch_items):
        table.create(conn)


def _v3_to_v4(conn: Connection) -> None:
    """Schema 4: the index of finished top-level instances by end time, for pruning."""
    for index in instances.indexes:
        if index.name == "ix_wiggle_instances_ended":
            index.create(conn)


def _v4_to_v5(conn: Connection) -> None:
    """Schema 5: the search value indexes become partial (each holds the rows with its value)."""
    for index in search_values.indexes:
        conn.exec_driver_sql(f"DROP INDEX {index.name}")
        index.create(conn)


def _v5_to_v6(conn: Connection) -> None:
    """Schema 6: schedules and their fires."""
    for table in (schedules, schedule_fires):
        table.create(conn)


def _v6_to_v7(conn: Connection) -> None:
    """Schema 7: human tasks and their actions."""
    for table in (human_tasks, human_task_actions):
        table.create(conn)


def _v7_to_v8(conn: Connection) -> None:
    """Schema 8: instances record who started them; human tasks their reminders. (A database
    upgraded from before 7 in the same run made its human task tables in this shape already.)"""
    found = inspect(conn)
    task_columns = {c["name"] for c in found.get_columns(human_tasks.name)}
    for table, column, ddl in (
        (instances.name, "started_by", "VARCHAR(200)"),
        (human_tasks.name, "reminded_count", "INTEGER NOT NULL DEFAULT 0"),
        (human_tasks.name, "last_reminded_at_ms", "BIGINT"),
        (human_tasks.name, "next_remind_at_ms", "BIGINT"),
    ):
        if table == instances.name or column not in task_columns:
            conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
    indexes = {ix["name"] for ix in found.get_indexes(human_tasks.name)}
    for index in human_tasks.indexes:
        if index.name == "ix_wiggle_human_tasks_remind" and index.name not in indexes:
            index.create(conn)


def _v8_to_v9(conn: Connection) -> None:
    """Schema 9: instances keep the trace context their start carried."""
    for column, ddl in (("traceparent", "VARCHAR(64)"), ("tracestate", "VARCHAR(512)")):
        conn.exec_driver_sql(f"ALTER TABLE {instances.name} ADD COLUMN {column} {ddl}")


def _v9_to_v10(conn: Connection) -> None:
    """Schema 10: an event carries the inputs of the nodes its transition entered (a nullable
    column: PostgreSQL and SQLite add it without rewriting the table)."""
    conn.exec_driver_sql(f"ALTER TABLE {events.name} ADD COLUMN entered TEXT")


#: MIGRATIONS[v] upgrades a database at version v to v + 1, inside the creation transaction.
MIGRATIONS: dict[int, Callable[[Connection], None]] = {
    1: _v1_to_v2,
    2: _v2_to_v3,
    3: _v3_to_v4,
    4: _v4_to_v5,
    5: _v5_to_v6,
    6: _v6_to_v7,
    7: _v7_to_v8,
    8: _v8_to_v9,
    9: _v9_to_v10,
}


# -- the distributed profile's shapes (its SQL: store/keyed.py) -----------------------------

#: The outcome markers' table (one row per write transaction whose COMMIT may have to be proved
#: after the connection dropped under it, see wiggle.engine.store.distributed); only a database
#: created under the distributed profile has it.
COMMITS = "wiggle_commits"

_REKEYED = ("wiggle_events", "wiggle_signals")


def _rekeyed(table: Table, metadata: MetaData) -> Table:
    """`table` keyed by (instance_id, seq), seq given by the engine; an index that the new key
    covers is dropped."""
    key = ("instance_id", "seq")
    first = [table.c[name] for name in key]
    columns = [
        Column(c.name, c.type, nullable=c.nullable, primary_key=c.name in key, autoincrement=False)
        for c in (*first, *(c for c in table.c if c.name not in key))
    ]
    indexes = [
        Index(ix.name, *[c.name for c in ix.columns])
        for ix in table.indexes
        if tuple(c.name for c in ix.columns) != key
    ]
    return Table(table.name, metadata, *columns, *indexes)


@functools.cache
def distributed_metadata() -> MetaData:
    """The tables of a database created under the profile: the default ones, events and
    signals keyed by (instance_id, seq), and the outcome markers."""
    md = MetaData()
    for table in metadata.sorted_tables:
        if table.name in _REKEYED:
            _rekeyed(table, md)
        else:
            table.to_metadata(md)
    Table(
        COMMITS,
        md,
        Column("id", String(32), primary_key=True),
        Column("at_ms", BigInteger, nullable=False),
        # True: written by the engine proving that the transaction of this id never committed.
        Column("probe", Boolean, nullable=False),
    )
    return md


#: (dialect name, server version, distributed) -> the statements that create the schema.
_CREATION_DDL: dict[tuple[str, Any, bool], tuple[str, ...]] = {}


def _creation_ddl(dialect: Dialect, distributed: bool) -> tuple[str, ...]:
    """The statements that create the schema on an empty database: what `create_all` runs
    (each table, then its indexes, tables in dependency order), compiled once per dialect and
    server version rather than on every engine's start (the suite starts a few thousand engines
    on new databases, and compiling their 45 statements was half of each start's CPU)."""
    key = (dialect.name, dialect.server_version_info, distributed)
    statements = _CREATION_DDL.get(key)
    if statements is None:
        shape = distributed_metadata() if distributed else metadata
        compiled: list[str] = []
        for table in shape.sorted_tables:
            compiled.append(str(CreateTable(table).compile(dialect=dialect)).strip())
            compiled += [
                str(CreateIndex(index).compile(dialect=dialect)).strip()
                for index in sorted(table.indexes, key=lambda i: i.name or "")
            ]
        statements = _CREATION_DDL[key] = tuple(compiled)
    return statements


def seed_schema(conn: Connection, now_ms: int) -> None:
    """The rows a newly created schema holds: its version, and the leader's row that every
    election updates (never inserts)."""
    conn.execute(schema_version.insert().values(version=SCHEMA_VERSION, upgraded_at_ms=now_ms))
    conn.execute(leader.insert().values(name="main", holder="", term=0, expires_at_ms=0))


def ensure_schema(conn: Connection, now_ms: int, *, distributed: bool = False) -> int:
    """Create, upgrade or check the schema; returns the version found before (0: empty).

    The caller runs this inside one write transaction that it serialises across processes
    (BEGIN IMMEDIATE on SQLite, an advisory lock on PostgreSQL; under the distributed profile,
    which takes no advisory lock, a second engine's creation fails and is tried again), so two
    engines starting on one empty database do not both create it.

    `distributed`: the tables of the distributed profile (engine/store/keyed.py), created that way
    and required. A database keeps the shape it was created with; every migration applies to
    both shapes.
    """
    existing = set(inspect(conn).get_table_names())
    if schema_version.name not in existing:
        shape = metadata
        if distributed:
            shape = distributed_metadata()
        ours = {t.name for t in shape.sorted_tables} & existing
        if ours:
            raise IncompatibleSchema(
                f"the database has Wiggle tables ({', '.join(sorted(ours))}) but no schema "
                "version; refusing to touch it"
            )
        for statement in _creation_ddl(conn.dialect, distributed):
            conn.exec_driver_sql(statement)
        seed_schema(conn, now_ms)
        return 0
    if (COMMITS in existing) != distributed:
        raise IncompatibleSchema(
            "the database was created under the distributed database profile: start Wiggle "
            "with --database-profile distributed"
            if distributed is False
            else "the database was created without the distributed database profile (its "
            "events and signals are numbered by sequences): create a new database under the "
            'profile and move the rows into it (docs/scaling.md, "Moving a deployment")'
        )
    found = conn.execute(select(schema_version.c.version)).scalar_one()
    if found > SCHEMA_VERSION:
        raise IncompatibleSchema(
            f"the database has schema version {found}, newer than this Wiggle understands "
            f"({SCHEMA_VERSION}); upgrade Wiggle"
        )
    for version in range(found, SCHEMA_VERSION):
        MIGRATIONS[version](conn)
        conn.execute(schema_version.update().values(version=version + 1, upgraded_at_ms=now_ms))
    return int(found)
