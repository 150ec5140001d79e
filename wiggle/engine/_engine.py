"""`Engine`: the durable state machine's public face (docs/internals.md).

Every method is one short transaction (retried on transient lock conflicts) and thread-safe.
Transitions of one instance are serialised by a row lock on its root instance; claims and
heartbeats touch only token rows and never wait on that lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError

from wiggle._group import GroupCommit
from wiggle.errors import (
    DefinitionNotFound,
    InputRejected,
    InstanceNotFound,
    InvalidRequest,
    StaleLease,
    Unavailable,
    WiggleError,
)
from wiggle.filters import parse_filter
from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task

from . import (
    _bulk,
    _describe,
    _instances,
    _listing,
    _migrate,
    _overview,
    _prune,
    _repair,
    _ticker,
    _workers,
)
from . import _schema as s
from ._batch import apply_reports
from ._claims import claim, heartbeat_stmt
from ._clock import Clock
from ._db import Database
from ._overview import IncidentPage, NodeCount, QueueStats
from ._repair import RepairResult
from ._starts import StartRequest, apply_starts
from ._tx import FenceLost, Tx, dumps, new_id
from ._types import (
    AdvanceResult,
    DefinitionSummary,
    EagerRequest,
    HeartbeatResult,
    InstanceFilter,
    InstancePage,
    InstanceStatus,
    InstanceView,
    Json,
    Report,
    ReportKind,
    StartResult,
    StepFailure,
    StepOutcome,
    StoredDefinition,
    TaskActivation,
    WorkerSeen,
)
from ._wakeups import Waiters
from ._workers import POLLING_WINDOW_MS, WorkerBook, WorkerNote

__all__ = ["Engine"]

#: How often a process re-reads the instances its WaitInstance calls wait for: an instance
#: finished by another server process wakes no waiter here. One query covers every waiter.
FINISH_RECHECK_S = 0.25
#: While a bulk action has items left, the leader's ticker comes back this often.
BULK_TICK_S = 0.02

_d = s.definitions
_t = s.tokens


class Engine:
    """Runs compiled flows durably over one SQLite or PostgreSQL database."""

    def __init__(
        self,
        database_url: str,
        *,
        default_mode: ExecutionMode = ExecutionMode.SERVER,
        node_id: str | None = None,
        leader_ttl_s: float = 10.0,
        clock: Clock | None = None,
    ) -> None:
        # `clock`: None reads the database's clock (production); tests give a VirtualClock.
        self.db = Database(database_url, clock=clock)
        self.default_mode = default_mode
        self.node_id = node_id or f"engine-{new_id()[:12]}"
        self.leader_ttl_s = leader_ttl_s
        self._graphs: dict[str, Graph] = {}
        self._validators: dict[str, Any] = {}
        self._stop = threading.Event()
        self._recheck_lock = threading.Lock()
        self._rechecked_at = 0.0  # monotonic time of the last shared re-read (wait_finished)
        # Who in this process waits for tasks, timers and instance ends (see _wakeups); the
        # database tells it what each committed transaction did.
        self.waiters = Waiters()
        self.db.on_commit = self.waiters.committed
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self.is_leader = False  # as of the last tick()
        self._workers = WorkerBook()
        # Reports arriving together share a transaction (two batches in flight on PostgreSQL:
        # one commits while the next is applied; SQLite serialises writes anyway).
        self._reports: GroupCommit[Report, AdvanceResult] = GroupCommit(
            self._run_reports, max_batch=64, max_active=2 if self.db.is_postgres else 1
        )
        self._bulk = _bulk.BulkRunner(self)
        self._starts: GroupCommit[StartRequest, StartResult] = GroupCommit(
            self._run_starts, max_batch=64, max_active=2 if self.db.is_postgres else 1
        )
        try:
            self.db.write(self._ensure_schema)
        except BaseException:
            self.db.dispose()
            raise
        if clock is not None:
            # Time moved: what fell due is fired by the ticker now, not at its next wake-up.
            clock.watch(self.waiters.ticker_needed)

    def _ensure_schema(self, conn: Connection) -> None:
        if self.db.is_postgres:
            conn.exec_driver_sql(s.advisory_lock_sql())
        now = int(conn.execute(select(self.db.now)).scalar_one())
        s.ensure_schema(conn, now)

    @property
    def sa_engine(self) -> Any:
        """The SQLAlchemy engine (benchmarks count its commits)."""
        return self.db.sa

    def close(self) -> None:
        """Give up leadership (so another engine takes over at once) and close connections."""
        self._stop.set()
        if self.db.clock is not None:
            self.db.clock.unwatch(self.waiters.ticker_needed)
        try:
            self.db.write(lambda c: c.execute(_ticker.release_stmt(), {"me": self.node_id}))
        finally:
            # The listener closes its own connection within one notifies() slice of the stop.
            if self._listener is not None:
                self._listener.join(timeout=5.0)
            self.db.dispose()

    # -- definitions ----------------------------------------------------------------------------

    def graph_of(self, conn: Connection, version: str) -> Graph:
        """The parsed graph of a version, cached: versions are immutable."""
        graph = self._graphs.get(version)
        if graph is None:
            canonical = conn.execute(select(_d.c.canonical).where(_d.c.version == version)).scalar()
            if canonical is None:
                raise DefinitionNotFound("?", version)
            graph = Graph.from_json(orjson.loads(canonical), version)
            self._graphs[version] = graph
        return graph

    def register(self, flow: Any) -> tuple[str, bool]:
        """Store a CompiledFlow; registering a known version is a no-op (created False)."""

        def fn(conn: Connection) -> bool:
            if conn.execute(select(_d.c.seq).where(_d.c.version == flow.version)).first():
                return False
            now = int(conn.execute(select(self.db.now)).scalar_one())
            conn.execute(
                _d.insert().values(
                    version=flow.version,
                    name=flow.name,
                    canonical=bytes(flow.canonical),
                    registered_at_ms=now,
                )
            )
            return True

        try:
            created = self.db.write(fn)
        except IntegrityError:  # another engine registered the same version just now
            created = False
        self._graphs.setdefault(flow.version, flow.graph)
        return flow.version, created

    def get_definition(self, name: str, version: str | None = None) -> StoredDefinition:
        def fn(conn: Connection) -> Any:
            q = select(_d.c.name, _d.c.version, _d.c.canonical, _d.c.registered_at_ms)
            if version:
                q = q.where(_d.c.version == version, _d.c.name == name)
            else:
                q = q.where(_d.c.name == name).order_by(_d.c.seq.desc()).limit(1)
            return conn.execute(q).first()

        row = self.db.read(fn)
        if row is None:
            raise DefinitionNotFound(name, version)
        from wiggle.compiler import graph_from_canonical  # the compiler is optional at import

        canonical = bytes(row.canonical)
        return StoredDefinition(
            row.name,
            row.version,
            canonical,
            int(row.registered_at_ms),
            graph_from_canonical(canonical),
        )

    def _check_input(self, graph: Graph, value: Json) -> None:
        if graph.input_schema is None:
            return
        validator = self._validators.get(graph.version)
        if validator is None:
            cls = jsonschema.validators.validator_for(graph.input_schema)
            validator = cls(graph.input_schema)
            self._validators[graph.version] = validator
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = (
                "/" + "/".join(str(p) for p in error.absolute_path) if error.absolute_path else ""
            )
            raise InputRejected(
                f"input rejected by flow {graph.name!r}{' at ' + where if where else ''}: "
                f"{error.message}"
            )

    # -- instances ------------------------------------------------------------------------------

    def start(
        self,
        flow: str,
        input: Json,
        *,
        version: str | None = None,
        instance_id: str | None = None,
        eager: EagerRequest | None = None,
    ) -> StartResult:
        """Start an instance (idempotent on `instance_id`); optionally claim its first task.
        Starts arriving together share one transaction."""
        return self._starts.submit(StartRequest(flow, input, version, instance_id, eager))

    def _run_starts(self, requests: Sequence[StartRequest]) -> list[StartResult | BaseException]:
        """Group commit's batch of starts; on a failure of the whole batch (another process
        started one of the caller-chosen ids meanwhile, a bug) each is started alone."""

        def fn(conn: Connection) -> list[StartResult | WiggleError]:
            tx = Tx(conn, self.db, 0, self.graph_of, self.default_mode)
            results = apply_starts(tx, requests, self._check_input, self.default_mode)
            tx.finish()
            return results

        try:
            results = self.db.write(fn)
        except Unavailable as exc:
            return [exc] * len(requests)
        except IntegrityError as exc:
            if len(requests) > 1:
                return [self._run_starts([r])[0] for r in requests]
            request = requests[0]
            if request.instance_id is None:
                return [exc]
            # Another caller started the same instance id between our check and our insert:
            # now it is known, and the same start again answers (or refuses) as it should.
            return [self._run_starts([request])[0]]
        except Exception as exc:
            if len(requests) > 1:
                return [self._run_starts([r])[0] for r in requests]
            return [exc]
        return list(results)

    def signal(self, instance_id: str, name: str, payload: Json) -> bool:
        """Deliver a signal now (True) or buffer it for a later await (False)."""
        return self.db.write(lambda c: _instances.signal(self, c, instance_id, name, payload))

    def cancel(self, instance_id: str, reason: str = "") -> InstanceStatus:
        """Cancel an instance with its tokens, timers and children. Cancelling an already
        cancelled instance answers CANCELLED again; a completed or failed one is refused."""
        return self.db.write(lambda c: _instances.cancel(self, c, instance_id, reason))

    def retry(self, instance_id: str, *, by: str = "") -> RepairResult:
        """Resume a FAILED instance where it failed: the tokens live when it failed are live
        again, the failed step READY with a fresh attempt count (a failed subflow child and
        its waiting parent come back together). RepairRefused in any other state."""
        return self.db.write(lambda c: _repair.retry(self, c, instance_id, by=by))

    def reset(self, instance_id: str, node_id: str, *, by: str = "") -> RepairResult:
        """Rewind a RUNNING, FAILED or COMPLETED instance to `node_id`, a top-level node it
        passed, with the input that node received the last time it ran. Live tokens end and
        their leases are fenced."""
        return self.db.write(lambda c: _repair.reset(self, c, instance_id, node_id, by=by))

    # -- bulk actions -------------------------------------------------------------------------

    def preview_bulk(self, where: Sequence[str]) -> _bulk.BulkPreview:
        """How many instances a filter matches now, per status, and the first ids."""
        conditions = parse_filter(where)
        return self.db.read(lambda c: _bulk.preview(c, conditions, self.graph_of, self.db.now_sql))

    def start_bulk(
        self,
        action: str,
        where: Sequence[str],
        *,
        params: dict[str, Json] | None = None,
        requested_by: str = "",
        rate_per_s: float = _bulk.DEFAULT_RATE,
    ) -> _bulk.BatchView:
        """Record a bulk action over the instances `where` matches now; the leading server
        applies it (see _bulk). InvalidRequest when the filter matches nothing."""
        args = dict(params or {})
        batch_id = self.db.write(
            lambda c: _bulk.create_batch(
                self, c, action, args, list(where), requested_by or "anonymous", rate_per_s
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(batch_id)

    def get_batch(self, batch_id: str, *, items: int = 100) -> _bulk.BatchView:
        return self.db.read(lambda c: _bulk.get_batch(c, batch_id, items=items))

    def list_batches(self, *, limit: int = 50, action: str = "") -> list[_bulk.BatchView]:
        return self.db.read(lambda c: _bulk.list_batches(c, limit, action))

    def set_batch_state(self, batch_id: str, state: str) -> _bulk.BatchView:
        """PAUSED, RUNNING (resume) or CANCELLED."""
        if state not in (_bulk.PAUSED, _bulk.RUNNING, _bulk.CANCELLED):
            raise InvalidRequest(f"a batch can be paused, resumed or cancelled, not {state!r}")
        view = self.db.write(lambda c: _bulk.set_state(c, self.db.now_sql, batch_id, state))
        self.waiters.ticker_needed()
        return view

    # -- migrations ---------------------------------------------------------------------------

    def plan_migration(
        self,
        flow: str,
        to: str,
        *,
        from_versions: Sequence[str] = (),
        where: Sequence[str] = (),
        mapping: dict[str, str] | None = None,
        timers: str = "keep",
        children: bool = False,
    ) -> dict[str, Json]:
        """The plan (a content-hashed JSON document, docs/migration.md) that moves the live
        instances of `flow` to version `to` (full, or the start of its digest)."""
        return self.db.read(
            lambda c: _migrate.plan_migration(
                self,
                c,
                flow,
                to,
                from_versions=from_versions,
                where=where,
                mapping=mapping,
                timers=timers,
                children=children,
            )
        )

    def apply_migration(
        self,
        plan: Json,
        *,
        limit: int = 0,
        rate_per_s: float = _bulk.DEFAULT_RATE,
        requested_by: str = "",
        skip_changed: bool = False,
    ) -> _bulk.BatchView:
        """Check a plan and start the durable batch that applies it (the first `limit`
        instances only, for a canary). RepairRefused when instances moved since it was made."""
        batch_id = self.db.write(
            lambda c: _migrate.apply_migration(
                self,
                c,
                plan,
                limit=limit,
                rate_per_s=rate_per_s,
                requested_by=requested_by or "anonymous",
                skip_changed=skip_changed,
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(batch_id)

    def rollback_migration(
        self,
        batch_id: str = "",
        *,
        plan_hash: str = "",
        rate_per_s: float = _bulk.DEFAULT_RATE,
        requested_by: str = "",
    ) -> _bulk.BatchView:
        """Start the batch that restores every instance migration `batch_id` (or every batch
        that applied the plan `plan_hash`) moved and that has not advanced since; the others
        are listed as skipped."""
        if not batch_id and not plan_hash:
            raise InvalidRequest("a rollback needs a migration batch id or a plan's hash")
        new_id = self.db.write(
            lambda c: _migrate.rollback_migration(
                self,
                c,
                batch_id,
                rate_per_s=rate_per_s,
                requested_by=requested_by or "anonymous",
                plan_hash=plan_hash,
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(new_id)

    def describe(self, instance_id: str, *, include_events: bool = False) -> InstanceView:
        """The instance with its current context and every token's context and explanation."""
        return self.db.read(
            lambda c: _describe.describe(c, instance_id, include_events, self.graph_of, self.db.now)
        )

    def find_instances(
        self,
        where: InstanceFilter | None = None,
        *,
        limit: int = 100,
        page_token: str = "",
        counts: bool = False,
    ) -> InstancePage:
        """Instances matching `where`, newest first; `page_token` continues a previous page.
        With `counts`, how many match per status (the filter without its status)."""
        f = where or InstanceFilter()
        return self.db.read(
            lambda c: _listing.find_instances(
                c, f, limit, page_token, counts, self.graph_of, self.db.now_sql
            )
        )

    def list_definitions(
        self, name: str | None = None, *, include_counts: bool = False
    ) -> list[DefinitionSummary]:
        """Registered versions, by name, the newest version of each name first."""
        return self.db.read(
            lambda c: _listing.list_definitions(c, name, include_counts, self.graph_of)
        )

    # -- read-only aggregates for operators (engine/_overview.py) ------------------------------

    def queue_stats(self) -> list[QueueStats]:
        """Every queue holding READY or leased tasks: how many, and since when the oldest
        READY one waits."""
        return self.db.read(_overview.queue_stats)

    def node_counts(self, version: str) -> list[NodeCount]:
        """Where the instances of `version` stand: RUNNING ones per node and live token state,
        FAILED ones at the node they failed at."""
        return self.db.read(lambda c: _overview.node_counts(c, version))

    def incidents(
        self, *, flow: str = "", version: str = "", failed_after_ms: int = 0, limit: int = 100
    ) -> IncidentPage:
        """FAILED instances grouped by flow, node and reason, the largest group first."""
        return self.db.read(lambda c: _overview.incidents(c, flow, version, failed_after_ms, limit))

    def ready_by_queue(self) -> dict[str, int]:
        """Tokens READY for a worker now, per queue (metrics)."""
        return self.db.read(_listing.ready_by_queue)

    def wait_finished(self, instance_id: str, timeout_s: float) -> InstanceStatus:
        """The instance's status once it is no longer RUNNING, or as it is after `timeout_s`.

        Woken at once when this process commits its end; an end committed by another process
        is seen at the next re-read (every FINISH_RECHECK_S). Reads only, never a write.
        """
        deadline = time.monotonic() + timeout_s
        event = self.waiters.watch(instance_id)  # before the first read: no end slips between
        try:
            while True:
                status = self.db.read(lambda c: _instances.status_of(c, instance_id))
                if status is None:
                    raise InstanceNotFound(instance_id)
                left = deadline - time.monotonic()
                if status is not InstanceStatus.RUNNING or left <= 0 or self._stop.is_set():
                    return status
                # Woken by this process's commit of the end, or by the shared re-read seeing
                # it ended elsewhere; each waiter does not read on its own while it waits.
                while not event.wait(min(left, FINISH_RECHECK_S)):
                    left = deadline - time.monotonic()
                    if left <= 0 or self._stop.is_set():
                        break
                    self._recheck_waited_instances()
                event.clear()
        finally:
            self.waiters.unwatch(instance_id, event)

    def _recheck_waited_instances(self) -> None:
        """One read for every instance this process's waiters wait for, at most once per
        FINISH_RECHECK_S whoever asks: those another process ended wake their waiters."""
        with self._recheck_lock:
            now = time.monotonic()
            if now - self._rechecked_at < FINISH_RECHECK_S:
                return  # another waiter has just read for everyone
            self._rechecked_at = now
        watched = self.waiters.watched()
        if watched:
            self.waiters.instances_ended(self.db.read(lambda c: _instances.ended_among(c, watched)))

    def list_instances(
        self,
        *,
        flow: str | None = None,
        status: InstanceStatus | None = None,
        limit: int = 100,
        after: str | None = None,
    ) -> list[InstanceView]:
        """Instances ordered by id; `after` is the last id of the previous page."""
        return self.db.read(lambda c: _instances.list_instances(c, flow, status, limit, after))

    # -- workers --------------------------------------------------------------------------------

    def note_worker(self, note: WorkerNote) -> None:
        """A worker polled: record it, at most every few seconds per worker (see _workers)."""
        if not self._workers.due(note):
            return
        try:
            self.db.write(lambda c: _workers.upsert(c, self.db, note))
        except Exception:
            self._workers.forget(note.worker_id)
            raise

    def list_workers(self, within_ms: int = POLLING_WINDOW_MS) -> tuple[list[WorkerSeen], int]:
        """Workers whose last poll is at most `within_ms` old, and the database's clock."""
        return self.db.read(lambda c: _workers.list_workers(c, self.db, within_ms))

    def poll(
        self,
        queues: Sequence[str],
        worker_id: str,
        max_tasks: int,
        *,
        activities: Sequence[str] = (),
    ) -> list[TaskActivation]:
        """Claim up to `max_tasks` READY tasks on `queues` (never blocks; see wait_for_tasks).
        `activities`: only tasks of these activities (empty: any)."""
        self.waiters.polled()
        if not queues or max_tasks <= 0:
            return []
        if self.db.is_sqlite and not self.db.read(lambda c: self._any_ready(c, queues)):
            return []  # do not take SQLite's write lock just to find nothing
        return self.db.write(
            lambda c: claim(
                c,
                self.db,
                queues,
                worker_id,
                max_tasks,
                self.graph_of,
                self.default_mode,
                activities,
            )
        )

    @staticmethod
    def _any_ready(conn: Connection, queues: Sequence[str]) -> bool:
        q = select(_t.c.id).where(s.READY_TOKENS, _t.c.queue.in_(list(queues)))
        return conn.execute(q.limit(1)).first() is not None

    def complete(self, task_id: str, lease: str, result: Json, *, seq: int = 0) -> InstanceStatus:
        report = Report(ReportKind.COMPLETE, task_id, lease, seq, result=result)
        return self.report(report).instance_status

    def complete_and_next(
        self, task_id: str, lease: str, result: Json, next: EagerRequest, *, seq: int = 0
    ) -> tuple[InstanceStatus, TaskActivation | None]:
        """`complete`, then lease the instance's next READY task on `next.queues` to
        `next.worker_id` in the same transaction (None when there is none). A resent report
        (same `seq`) gets the same next task again while its lease is still unused."""
        answer = self.report(
            Report(ReportKind.COMPLETE, task_id, lease, seq, result=result, next=next)
        )
        return answer.instance_status, answer.next_task

    def fail(
        self, task_id: str, lease: str, failure: StepFailure, *, seq: int = 0
    ) -> InstanceStatus:
        return self.report(
            Report(ReportKind.FAIL, task_id, lease, seq, failure=failure)
        ).instance_status

    def release(
        self, task_id: str, lease: str, *, seq: int = 0, reason: str = ""
    ) -> InstanceStatus:
        """Give a leased task back unrun: READY again at its node with the same attempt."""
        report = Report(ReportKind.RELEASE, task_id, lease, seq, reason=reason or "released")
        return self.report(report).instance_status

    def advance_run(
        self,
        task_id: str,
        lease: str,
        steps: Sequence[StepOutcome],
        *,
        final: bool,
        handback_reason: str = "",
        seq: int = 0,
    ) -> AdvanceResult:
        """Apply a batch of locally run steps atomically (docs/worker-protocol.md, "Local
        runs"); a resent batch (same `seq`) is answered again, not applied twice."""
        return self.report(
            Report(
                ReportKind.ADVANCE,
                task_id,
                lease,
                seq,
                steps=tuple(steps),
                final=final,
                reason=handback_reason,
            )
        )

    def report(self, report: Report) -> AdvanceResult:
        """Apply one report (sharing a transaction with reports arriving meanwhile)."""
        return self._reports.submit(report)

    def report_many(self, reports: Sequence[Report]) -> list[AdvanceResult | WiggleError]:
        """Apply several reports; each gets its answer or the error that refused it."""
        out = self._reports.submit_many(reports)
        for got in out:
            if isinstance(got, BaseException) and not isinstance(got, WiggleError):
                raise got
        return out  # type: ignore[return-value]

    def _run_reports(self, reports: Sequence[Report]) -> list[AdvanceResult | BaseException]:
        """Group commit's batch: one transaction for all of `reports`. If the batch as a whole
        fails (a fence lost to a race, a bug), each report is applied alone, so that one bad
        report answers for itself only."""

        def fn(conn: Connection) -> list[AdvanceResult | WiggleError]:
            tx = Tx(conn, self.db, 0, self.graph_of, self.default_mode)
            answers = apply_reports(tx, reports)
            tx.finish()
            return answers

        try:
            answers = self.db.write(fn)
        except Unavailable as exc:
            return [exc] * len(reports)
        except FenceLost as exc:
            if len(reports) > 1:
                return [self._run_reports([r])[0] for r in reports]
            lost = StaleLease(reports[0].task_id, "the task moved on while this report was applied")
            lost.__cause__ = exc
            return [lost]
        except Exception as exc:
            if len(reports) > 1:
                return [self._run_reports([r])[0] for r in reports]
            return [exc]
        return list(answers)

    def heartbeat(self, task_id: str, lease: str, *, node_id: str = "") -> HeartbeatResult:
        """Renew a lease by the task's timeout, or by the timeout of `node_id` when the worker
        says it is running that step of a local run (docs/worker-protocol.md, "Leases"); says
        so when the instance is no longer RUNNING."""

        def fn(conn: Connection) -> HeartbeatResult:
            length = self._step_timeout(conn, task_id, node_id) if node_id else None
            row = conn.execute(
                heartbeat_stmt(self.db), {"tid": task_id, "b_lease": lease, "length": length}
            ).first()
            if row is not None:
                return HeartbeatResult(int(row[0]), InstanceStatus.RUNNING, int(row[1]))
            i = s.instances
            seen = conn.execute(
                select(_t.c.lease, i.c.status)
                .select_from(_t.join(i, i.c.id == _t.c.instance_id))
                .where(_t.c.id == task_id)
            ).first()
            if seen is None or seen.lease != lease or seen.status == InstanceStatus.RUNNING.value:
                raise StaleLease(task_id)
            return HeartbeatResult(0, InstanceStatus(seen.status))

        return self.db.write(fn)

    def _step_timeout(self, conn: Connection, task_id: str, node_id: str) -> int | None:
        """The timeout of `node_id` if it is a step a worker runs in the task's graph."""
        version = conn.execute(select(_t.c.version).where(_t.c.id == task_id)).scalar()
        if version is None:
            return None
        node = self.graph_of(conn, version).nodes.get(node_id)
        if isinstance(node, Task | Predicate | Join):
            return node.timeout_ms
        if isinstance(node, Await) and node.apply is not None:
            return node.apply.timeout_ms
        return None

    def task_route(self, task_id: str) -> tuple[str, Graph] | None:
        """Where a task is now: its queue and its instance's graph; None for no such task.

        The server authorizes a report by it (a worker credential reports only on its queues).
        """

        def fn(conn: Connection) -> tuple[str, Graph] | None:
            row = conn.execute(select(_t.c.queue, _t.c.version).where(_t.c.id == task_id)).first()
            if row is None:
                return None
            return row.queue or "", self.graph_of(conn, row.version)

        return self.db.read(fn)

    # -- wake-ups -------------------------------------------------------------------------------

    def wait_for_tasks(
        self, queues: Sequence[str], timeout_s: float, *, waiter: threading.Event | None = None
    ) -> None:
        """Return when a task may have become READY since this thread's last poll, or after
        `timeout_s`. Other processes' tasks wake us through LISTEN/NOTIFY on PostgreSQL.
        `waiter`: the event to park on, so the caller can end the wait itself by setting it."""
        if self.db.is_postgres and self._listener is None:
            with self._listener_lock:
                if self._listener is None:
                    self._listener = self.db.listen(self.waiters.notified, self._stop)
        self.waiters.wait_for_tasks(queues, timeout_s, waiter)

    def wake(self) -> None:
        """Wake every waiter now: pollers in wait_for_tasks, instance waiters and the ticker
        (used at shutdown)."""
        self.waiters.wake_all()

    def wait_for_timers(self, timeout_s: float) -> None:
        """Sleep until `timeout_s` passes or this process arms a timer (or wake() is called).

        The ticker sleeps here between ticks, so a sleep, retry backoff or await deadline armed
        in this process is fired on time instead of at the ticker's next routine wake-up.
        Timers armed by other server processes are seen within the ticker's bounded sleep.
        """
        self.waiters.wait_for_timers(timeout_s)

    # -- history --------------------------------------------------------------------------------

    def prune(
        self,
        older_than_ms: int,
        *,
        batch: int = _prune.BATCH,
        dry_run: bool = False,
        between: Callable[[], bool] | None = None,
    ) -> _prune.PruneResult:
        """Remove the finished instance trees whose root ended more than `older_than_ms` ago,
        with their tokens, events and signals, `batch` trees per transaction (see _prune)."""
        return _prune.prune(self.db, older_than_ms, batch=batch, dry_run=dry_run, between=between)

    # -- leader duties --------------------------------------------------------------------------

    def tick(self) -> int:
        """Leader election, then due timers and expired leases; returns how many were handled."""
        return _ticker.tick(self)

    def next_wakeup_s(self) -> float:
        """Seconds until the earliest timer or lease expiry (capped by the leader renewal).

        A follower only needs to try the election again: it answers the renewal cadence, so a
        ticker does not spin on timers that only the leader may fire."""
        cap = self.leader_ttl_s / 3
        if not self.is_leader:
            return cap
        if self._bulk.busy:
            cap = min(cap, BULK_TICK_S)
        return self.db.read(lambda c: _ticker.next_wakeup(c, self.db, cap))

    def next_due_ms(self) -> int | None:
        """The earliest armed timer or lease expiry of any instance, on the engine's clock;
        None when nothing is armed. A driver of a virtual clock moves it there next."""
        return self.db.read(lambda c: _ticker.next_due(c, self.db))


_ = (text, dumps, TaskActivation)


def _has_activity(worker: EagerRequest, activity: str | None) -> bool:
    """Whether the worker can run a task of `activity` (it said nothing, or it listed it)."""
    return not worker.activities or activity is None or activity in worker.activities
