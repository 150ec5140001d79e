"""`Engine`: the durable state machine's public face (docs/internals.md).

Every method is one short transaction (retried on transient lock conflicts) and thread-safe.
Transitions of one instance are serialised by a row lock on its root instance; claims and
heartbeats touch only token rows and never wait on that lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError, ProgrammingError

from wiggle._group import GroupCommit
from wiggle.errors import (
    StaleLease,
    Unavailable,
    WiggleError,
)
from wiggle.graph import Await, ExecutionMode, Graph, Join, Predicate, Task

from ._engine_definitions import Definitions
from ._engine_repairs import Repairs
from ._engine_schedules import Schedules
from ._engine_tasks import Tasks
from ._engine_views import Views
from .machine.claims import claim, heartbeat_stmt, task_trace, with_trace
from .machine.reports import apply_reports
from .machine.starts import StartRequest, apply_starts
from .machine.tx import FenceLost, new_id
from .model.clock import Clock
from .model.types import (
    AdvanceResult,
    EagerRequest,
    HeartbeatResult,
    InstanceStatus,
    Json,
    QueueGrant,
    Report,
    ReportKind,
    StartResult,
    StepFailure,
    StepOutcome,
    TaskActivation,
)
from .ops import instances as _instances
from .ops import prune as _prune
from .ops import ticker as _ticker
from .ops.bulk_runner import BulkRunner
from .ops.context import OpsContext
from .reads.workers import WorkerBook
from .store import schema as s
from .store.db import Database
from .store.profile import DatabaseProfile, open_database
from .store.wakeups import Waiters

__all__ = ["Engine"]

#: While a bulk action has items left, the leader's ticker comes back this often.
BULK_TICK_S = 0.02
#: The floor of the default idle-in-transaction timeout (the leader lease, see Engine): no
#: engine transaction sits idle this long, however short a lease a test picks.
MIN_IDLE_IN_TRANSACTION_TIMEOUT_S = 1.0

_d = s.definitions
_t = s.tokens


class Engine(Definitions, Views, Repairs, Schedules, Tasks):
    """Runs compiled flows durably over one SQLite or PostgreSQL database."""

    def __init__(
        self,
        database_url: str,
        *,
        default_mode: ExecutionMode = ExecutionMode.SERVER,
        node_id: str | None = None,
        leader_ttl_s: float = 10.0,
        database_profile: DatabaseProfile | str = DatabaseProfile.DEFAULT,
        clock: Clock | None = None,
        idle_in_transaction_timeout_s: float | None = None,
    ) -> None:
        """`idle_in_transaction_timeout_s` (PostgreSQL): PostgreSQL ends a session of this
        engine that sits inside a transaction without sending a statement this long, rolling it
        back and freeing its row locks, so a frozen process (SIGSTOP, a paused VM) cannot stall
        the others: a frozen leader mid-renewal holds the leader row, and a standby takes over
        after about max(lease, this) plus a tick. None: the leader lease, at least
        MIN_IDLE_IN_TRANSACTION_TIMEOUT_S (engine transactions never sit idle for seconds);
        0: off (the database's own setting). SQLite has no such sessions: ignored."""
        if idle_in_transaction_timeout_s is None:
            idle_in_transaction_timeout_s = max(leader_ttl_s, MIN_IDLE_IN_TRANSACTION_TIMEOUT_S)
        if idle_in_transaction_timeout_s < 0:
            raise ValueError("idle_in_transaction_timeout_s must be 0 (off) or positive")
        # `clock`: None reads the database's clock (production); tests give a VirtualClock.
        self.db: Database = open_database(
            database_url,
            database_profile,
            clock=clock,
            idle_in_transaction_timeout_s=idle_in_transaction_timeout_s,
        )
        # What the operations below the facade may use of the engine (see ops/context.py); the
        # engine's own settings are read from it too, so they are held once.
        self.ops = OpsContext(
            self.db,
            self.graph_of,
            default_mode,
            node_id or f"engine-{new_id()[:12]}",
            leader_ttl_s,
            self._check_input,
        )
        self._graphs: dict[str, Graph] = {}
        self._validators: dict[str, Any] = {}
        self._stop = threading.Event()
        self._recheck_lock = threading.Lock()
        self._rechecked_at = 0.0  # monotonic time of the last shared re-read (wait_finished)
        # Who in this process waits for tasks, timers and instance ends (see
        # wiggle.engine.store.wakeups); the database tells it what each committed transaction did.
        self.waiters = Waiters()
        self.db.on_commit = self.waiters.committed
        self._listener: threading.Thread | None = None
        self._listener_lock = threading.Lock()
        self.is_leader = False  # as of the last tick()
        self._workers = WorkerBook()
        # True: a polled task carries its instance tree's trace context (one more statement per
        # claim). A server that traces sets it (docs/observability.md); eager tasks always do.
        self.trace_context = False
        # Reports arriving together share a transaction (two batches in flight on PostgreSQL:
        # one commits while the next is applied; SQLite serialises writes anyway).
        self._reports: GroupCommit[Report, AdvanceResult] = GroupCommit(
            self._run_reports, max_batch=64, max_active=2 if self.db.is_postgres else 1
        )
        self._bulk = BulkRunner(self.ops)
        self._starts: GroupCommit[StartRequest, StartResult] = GroupCommit(
            self._run_starts, max_batch=64, max_active=2 if self.db.is_postgres else 1
        )
        try:
            self._create_schema()
        except BaseException:
            self.db.dispose()
            raise
        if clock is not None:
            # Time moved: what fell due is fired by the ticker now, not at its next wake-up.
            clock.watch(self.waiters.ticker_needed)

    def _create_schema(self) -> None:
        """Create, upgrade or check the schema. Under the distributed profile, which takes no
        advisory lock, an engine that lost a race to create it tries again and finds it."""
        for attempt in range(3):
            try:
                self.db.write(self._ensure_schema)
                return
            except (IntegrityError, ProgrammingError):
                if not self.db.distributed or attempt == 2:
                    raise

    def _ensure_schema(self, conn: Connection) -> None:
        self.db.lock_schema(conn)
        now = int(conn.execute(select(self.db.now)).scalar_one())
        s.ensure_schema(conn, now, distributed=self.db.distributed)

    @property
    def default_mode(self) -> ExecutionMode:
        """The mode of a flow that names none."""
        return self.ops.default_mode

    @property
    def node_id(self) -> str:
        """This engine's name in the leader election."""
        return self.ops.node_id

    @property
    def leader_ttl_s(self) -> float:
        return self.ops.leader_ttl_s

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

    # -- instances ------------------------------------------------------------------------------

    def start(
        self,
        flow: str,
        input: Json,
        *,
        version: str | None = None,
        instance_id: str | None = None,
        eager: EagerRequest | None = None,
        started_by: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> StartResult:
        """Start an instance (idempotent on `instance_id`); optionally claim its first task.
        `started_by`: the person starting it (on a server, the calling credential's name), whom
        a human step's `exclude: [starter]` excludes. Starts arriving together share one
        transaction. `traceparent`, `tracestate`: the W3C trace context it continues, checked by
        the caller (wiggle.tracecontext); its subflow children share it."""
        return self._starts.submit(
            StartRequest(
                flow, input, version, instance_id, eager, started_by, traceparent, tracestate
            )
        )

    def _run_starts(self, requests: Sequence[StartRequest]) -> list[StartResult | BaseException]:
        """Group commit's batch of starts; on a failure of the whole batch (another process
        started one of the caller-chosen ids meanwhile, a bug) each is started alone."""

        def fn(conn: Connection) -> list[StartResult | WiggleError]:
            tx = self.ops.tx(conn)
            results = apply_starts(tx, requests, self._check_input, self.default_mode)
            tx.finish(commit=True)  # the last statement: on PostgreSQL the COMMIT goes with it
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
        return self.db.write(lambda c: _instances.signal(self.ops, c, instance_id, name, payload))

    def cancel(self, instance_id: str, reason: str = "") -> InstanceStatus:
        """Cancel an instance with its tokens, timers and children. Cancelling an already
        cancelled instance answers CANCELLED again; a completed or failed one is refused."""
        return self.db.write(lambda c: _instances.cancel(self.ops, c, instance_id, reason))

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

        def fn(c: Connection) -> list[TaskActivation]:
            tasks = claim(
                c,
                self.db,
                queues,
                worker_id,
                max_tasks,
                self.graph_of,
                self.default_mode,
                activities,
            )
            return with_trace(c, tasks) if self.trace_context else tasks

        return self.db.write(fn)

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
            tx = self.ops.tx(conn)
            answers = apply_reports(tx, reports)
            tx.finish(commit=True)  # the last statement: on PostgreSQL the COMMIT goes with it
            return answers

        try:
            # Reports numbered under their lease are answered again, never applied twice, so a
            # batch whose COMMIT was lost in a dropped connection may simply run again.
            answers = self.db.write(fn, idempotent=all(r.seq > 0 for r in reports))
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

    def task_trace(self, task_id: str) -> tuple[str, str] | None:
        """(trace id, span id) of the step attempt task `task_id` is at (one read), for a log
        line that names it; None when the task is gone (docs/observability.md)."""
        return self.db.read(lambda c: task_trace(c, task_id))

    def heartbeat(
        self, task_id: str, lease: str, *, node_id: str = "", grant: QueueGrant | None = None
    ) -> HeartbeatResult:
        """Renew a lease by the task's timeout, or by the timeout of `node_id` when the worker
        says it is running that step of a local run (docs/worker-protocol.md, "Leases"); says
        so when the instance is no longer RUNNING. `grant`: PermissionDenied (nothing renewed)
        unless it covers the task's queue."""

        def fn(conn: Connection) -> HeartbeatResult:
            length = self._step_timeout(conn, task_id, node_id) if node_id else None
            row = conn.execute(
                heartbeat_stmt(self.db), {"tid": task_id, "b_lease": lease, "length": length}
            ).first()
            if row is not None:
                if grant is not None:  # a refusal rolls the renewal back
                    grant.check(row[2] or "", "report on a task of")
                return HeartbeatResult(int(row[0]), InstanceStatus.RUNNING, int(row[1]))
            i = s.instances
            seen = conn.execute(
                select(_t.c.lease, _t.c.queue, i.c.status)
                .select_from(_t.join(i, i.c.id == _t.c.instance_id))
                .where(_t.c.id == task_id)
            ).first()
            if seen is not None and grant is not None:
                grant.check(seen.queue or "", "report on a task of")
            if seen is None or seen.lease != lease or seen.status == InstanceStatus.RUNNING.value:
                raise StaleLease(task_id)
            return HeartbeatResult(0, InstanceStatus(seen.status))

        return self.db.write(fn, idempotent=True)

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
                    self._listener = self.db.listen(self.waiters, self._stop)
        self.waiters.wait_for_tasks(queues, timeout_s, waiter)

    def wake(self) -> None:
        """Wake every waiter now: pollers in wait_for_tasks, instance waiters and the ticker
        (used at shutdown)."""
        self.waiters.wake_all()

    @property
    def commits_stalled(self) -> bool:
        """The database does not finish commits now (a primary waiting for a synchronous
        standby it does not have): writes answer Unavailable at once, and the engine has said
        so in one line (engine/store/stall.py)."""
        return self.db.commits_stalled

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
        with their tokens, events and signals, `batch` trees per transaction (see
        wiggle.engine.ops.prune)."""
        return _prune.prune(self.db, older_than_ms, batch=batch, dry_run=dry_run, between=between)

    # -- leader duties --------------------------------------------------------------------------

    def tick(self) -> int:
        """Leader election, then due timers, expired leases, reminders of human tasks, schedules
        and bulk work; returns how many were handled."""
        done = _ticker.tick(self.ops, self._bulk, self._check_input)
        self.is_leader = done.leader
        return done.handled

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
        """The earliest armed timer, lease expiry, schedule fire or reminder of an open human
        task, on the engine's clock; None when nothing is armed. A driver of a virtual clock
        moves it there next."""
        return self.db.read(lambda c: _ticker.next_due(c, self.db))
