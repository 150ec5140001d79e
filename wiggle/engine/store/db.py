"""The database seam: connections, transactions, the database clock and wake-ups.

Dialect differences stay here. SQLite: WAL, a busy timeout, `BEGIN IMMEDIATE` for every write
transaction, one in-process write lock (so threads queue in Python instead of spinning on
SQLITE_BUSY) and a retry when another process holds the lock, so "database is locked" never
reaches a caller. PostgreSQL: READ COMMITTED, row locks, a retry on deadlock or serialisation
failure, and LISTEN/NOTIFY to wake pollers in other processes. Every PostgreSQL session is
opened with `idle_in_transaction_session_timeout`: a process frozen inside a transaction (SIGSTOP,
a paused VM, a long GC pause) loses that session, and with it the row locks it held, instead of
stalling every other server that needs them (the leader row, an instance). When it resumes, a
transaction whose next statement or COMMIT is told so (SQLSTATE 25P03, `_session_ended`) runs
again on a new connection; one whose COMMIT travelled with its last statement (psycopg's pipeline)
sees only a dropped connection, and its caller gets Unavailable, as in a failover.

The distributed database profile (`_distributed.DistributedDatabase`) overrides the seams marked
"profile seam" below: how one transaction runs and commits, how a transition's rows are written
and which event and signal rows carry their key, what is transient, what a commit wakes, how
other processes' tasks are noticed, how schema creation is serialised.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    URL,
    ColumnElement,
    Connection,
    create_engine,
    event,
    literal_column,
    make_url,
)
from sqlalchemy.engine import Engine as SAEngine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.pool import StaticPool

from wiggle._postgres import libpq_url
from wiggle.errors import InvalidRequest, Unavailable

from ..model.clock import Clock
from .queries import FENCE_LOST_MARK, pg_write
from .stall import StallGuard
from .transition import FenceLost, Rows, write_sqlite
from .wakeups import Waiters, Wakeups

if TYPE_CHECKING:
    # Imported where PostgreSQL is used: an SQLite engine (`wiggle run`, tests) need not load
    # psycopg, a tenth of a server's start.
    import psycopg

__all__ = ["NOTIFY_CHANNEL", "Database"]

T = TypeVar("T")

NOTIFY_CHANNEL = "wiggle_ready"

# Milliseconds since the Unix epoch from the database's own clock. PostgreSQL's
# clock_timestamp() moves within a transaction (now() does not), which is what a lease needs.
_PG_NOW = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
_SQLITE_NOW = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)"
# A clock the engine is given (see wiggle.engine.model.clock): a function on SQLite, a session
# setting on PostgreSQL that every transaction sets first.
_SQLITE_GIVEN_NOW = "wiggle_now()"
_PG_GIVEN_NOW = "CAST(current_setting('wiggle.now') AS BIGINT)"

_AFTER_COMMIT = "wiggle_after_commit"
_EVENTS = "wiggle_events"
_TRACED = "wiggle_traced"

_PG_RETRY_CODES = {"40001", "40P01"}  # serialization_failure, deadlock_detected
#: idle_in_transaction_session_timeout: PostgreSQL ended the session of a transaction that sat
#: idle too long, and rolled it back (it never commits: the COMMIT had not been read).
_PG_SESSION_ENDED = "25P03"
_IDLE_SETTING = "idle_in_transaction_session_timeout"


class _PipelineEndNotSaidTwice(logging.Filter):
    """psycopg logs a WARNING when a pipeline fails to end while the error that broke it is
    being raised: the same lost connection said a second time, once per transaction in flight
    when a primary dies. The error itself reaches the caller (Unavailable) and, once, the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("error ignored terminating")


logging.getLogger("psycopg").addFilter(_PipelineEndNotSaidTwice())


def _idle() -> Any:
    """psycopg's IDLE transaction status (psycopg is loaded once PostgreSQL is in use)."""
    import psycopg

    return psycopg.pq.TransactionStatus.IDLE


@contextlib.contextmanager
def _driver_errors(sql: str, params: Any) -> Iterator[None]:
    """psycopg's errors as SQLAlchemy's, as if the statement had gone through SQLAlchemy: the
    retry of transient failures (Database._retrying) and the callers see one kind of error."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise DBAPIError.instance(sql, params, exc, psycopg.Error) from exc


def _normalise(url: str) -> str:
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def _session_options(url: URL, idle_in_transaction_timeout_s: float) -> str | None:
    """libpq's `options` for every PostgreSQL session: the URL's own, plus
    `-c idle_in_transaction_session_timeout=N` (milliseconds) unless the timeout is 0 or the URL
    sets it already. None: nothing to add to what the URL says."""
    if idle_in_transaction_timeout_s <= 0:
        return None
    given = url.query.get("options")
    theirs = " ".join(given) if isinstance(given, tuple) else (given or "")
    if _IDLE_SETTING in theirs:
        return None  # the URL's own choice stands
    ms = max(1, round(idle_in_transaction_timeout_s * 1000))
    return f"{theirs} -c {_IDLE_SETTING}={ms}".strip()


def _session_ended(exc: DBAPIError) -> bool:
    """PostgreSQL ended this connection's session for sitting idle in its transaction (this
    process was frozen or starved mid-transaction): the transaction rolled back, so running it
    again on another connection is safe, as after a deadlock."""
    return getattr(exc.orig, "sqlstate", None) == _PG_SESSION_ENDED


class Database:
    """One SQLAlchemy engine plus the dialect-specific pieces the engine needs."""

    #: Under the distributed profile: events and signals keyed by the engine (store/keyed.py).
    distributed = False

    def __init__(
        self, url: str, *, clock: Clock | None = None, idle_in_transaction_timeout_s: float = 0.0
    ) -> None:
        """`idle_in_transaction_timeout_s` (PostgreSQL; 0: the server's own setting, off by
        default): how long a session may sit inside a transaction without sending a statement
        before PostgreSQL ends it, rolling back and freeing its locks (module docstring)."""
        self.url = _normalise(url)
        u = make_url(self.url)
        self.is_sqlite = u.get_backend_name() == "sqlite"
        self.is_postgres = u.get_backend_name() == "postgresql"
        if not (self.is_sqlite or self.is_postgres):
            raise ValueError(
                f"unsupported database {u.get_backend_name()!r}: use sqlite or postgresql"
            )
        self._write_lock = threading.RLock()
        self._statements: dict[str, Any] = {}
        # After a commit: this process's waiters are told what the transaction did
        # (`on_commit`), and on PostgreSQL the other processes' pollers through a NOTIFY whose
        # payload starts with this origin, so our own listener can ignore it.
        self.on_commit: Callable[[Wakeups], None] | None = None
        self._origin = uuid.uuid4().hex + ":"
        # Metrics: each committed transaction's events as (kind, flow, mode, detail JSON), and
        # each transaction's latency (seconds, read?). Empty lists cost nothing.
        self.event_observers: list[Callable[[list[tuple[str, str, str, str]]], None]] = []
        # Tracing (wiggle.tracing): each committed transaction's events as dicts with their
        # instance, node, attempt, time and the instance tree's trace context. Nothing is
        # collected while the list is empty.
        self.trace_observers: list[Callable[[list[dict[str, Any]]], None]] = []
        self.transaction_observers: list[Callable[[float, bool], None]] = []
        self._notify_cond = threading.Condition()
        self._notify_pending: set[str] = set()
        self._notify_stop = False
        self._notifier: threading.Thread | None = None
        self._memory = self.is_sqlite and u.database in (None, "", ":memory:")
        self.sa: SAEngine
        if self.is_sqlite:
            kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
            if self._memory:
                kwargs["poolclass"] = StaticPool
            self.sa = create_engine(self.url, **kwargs)
            event.listen(self.sa, "connect", self._sqlite_connect)
            event.listen(self.sa, "begin", self._sqlite_begin)
            self.now_sql = _SQLITE_NOW
        else:
            options = _session_options(u, idle_in_transaction_timeout_s)
            self.sa = create_engine(
                self.url,
                pool_size=64,
                max_overflow=64,
                pool_pre_ping=False,
                # Every pooled connection, at no round trip: libpq sends them at connect.
                connect_args={"options": options} if options else {},
            )
            self.now_sql = _PG_NOW
        self.idle_in_transaction_timeout_s = (
            idle_in_transaction_timeout_s if self.is_postgres else 0.0
        )
        # PostgreSQL: commits a synchronous standby never acknowledges answered UNAVAILABLE
        # within seconds instead of holding their callers (store/stall.py).
        self._stall = StallGuard(self.libpq_url) if self.is_postgres else None
        self.clock = clock
        if clock is not None:
            self._use_clock(clock)
        self.now: ColumnElement[int] = literal_column(self.now_sql).label("now_ms")
        self.lease_id_sql = (
            "lower(hex(randomblob(16)))"
            if self.is_sqlite
            else "replace(gen_random_uuid()::text, '-', '')"
        )

    def cached(self, key: str, build: Callable[[], T]) -> T:
        """A statement built once per database: SQLAlchemy memoises the cache key of a
        statement object, so reusing the object skips that work on every execution."""
        got = self._statements.get(key)
        if got is None:
            got = self._statements[key] = build()
        return got

    def _use_clock(self, clock: Clock) -> None:
        """Read `clock` wherever the statements read the time (the clock seam, see
        wiggle.engine.model.clock)."""
        if self.is_sqlite:

            def register(dbapi_conn: Any, _record: Any) -> None:
                dbapi_conn.create_function("wiggle_now", 0, clock.now_ms)

            event.listen(self.sa, "connect", register)
            self.now_sql = _SQLITE_GIVEN_NOW
            return

        def set_now(conn: Connection) -> None:
            conn.exec_driver_sql(
                "SELECT set_config('wiggle.now', %(now)s, false)", {"now": str(clock.now_ms())}
            )

        event.listen(self.sa, "begin", set_now)
        self.now_sql = _PG_GIVEN_NOW

    # -- SQLite plumbing ------------------------------------------------------------------------

    @staticmethod
    def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control away from pysqlite: we issue BEGIN ourselves.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    @staticmethod
    def _sqlite_begin(conn: Connection) -> None:
        # A write transaction takes the database lock up front: a deferred one that upgrades
        # later can fail with SQLITE_BUSY without waiting on the busy timeout.
        if conn.get_execution_options().get("wiggle_read"):
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    # -- transactions ---------------------------------------------------------------------------

    def write(self, fn: Callable[[Connection], T], *, idempotent: bool = False) -> T:
        """Run `fn` in one write transaction, retrying transient lock conflicts.

        `idempotent`: running `fn` a second time after it committed changes nothing and gives
        an equivalent answer (the distributed profile then runs it again when a dropped
        connection hides whether its COMMIT took effect, instead of proving the outcome)."""
        return self._run(fn, read=False)

    def wrote_nothing(self, conn: Connection) -> None:
        """This transaction changed nothing (a claim that found no task): nothing to prove
        about its COMMIT (profile seam)."""

    def read(self, fn: Callable[[Connection], T]) -> T:
        return self._run(fn, read=True)

    def _run(self, fn: Callable[[Connection], T], *, read: bool) -> T:
        if self.transaction_observers:
            began = time.perf_counter()
            try:
                return self._retrying(fn, read=read)
            finally:
                for observe in self.transaction_observers:
                    observe(time.perf_counter() - began, read)
        return self._retrying(fn, read=read)

    def _retrying(self, fn: Callable[[Connection], T], *, read: bool) -> T:
        deadline = time.monotonic() + 120.0
        delay = 0.005
        while True:
            try:
                return self._once(fn, read=read)
            except OperationalError as exc:
                if not self._transient(exc) or time.monotonic() > deadline:
                    raise Unavailable(f"the database is unavailable: {exc.orig}") from exc
            except UnicodeError as exc:
                # The driver resolving a host name no resolver accepts ("postgresql://..."):
                # a bad URL, not an outage.
                raise InvalidRequest(
                    f"cannot connect to the database: its host name is not valid ({exc})"
                ) from None
            except DBAPIError as exc:
                if _session_ended(exc) and time.monotonic() <= deadline:
                    pass  # rolled back by the server: again, on a new connection
                elif exc.connection_invalidated:
                    raise Unavailable(f"the database connection was lost: {exc.orig}") from exc
                elif not self._transient(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def _once(self, fn: Callable[[Connection], T], *, read: bool) -> T:
        lock = self._write_lock if (self.is_sqlite and (not read or self._memory)) else None
        guard = lock if lock is not None else contextlib.nullcontext()
        if not read and self._stall is not None:
            self._stall.check()
        with guard, self.sa.connect() as conn:
            if read:
                conn = conn.execution_options(wiggle_read=True)
            watched = None if read or self._stall is None else self._stall.begin(conn)
            try:
                result = self._transaction(conn, fn)
            except Exception as exc:
                cut = self._stall_end(watched)
                if cut is not None:
                    raise Unavailable(cut) from exc  # its COMMIT may yet come: fate unknown
                raise
            else:
                self._stall_end(watched)
            finally:
                # Wake-ups a transaction queued count only if it committed: on an error this
                # is dropped, and the code below is not reached.
                done: Wakeups | None = conn.info.pop(_AFTER_COMMIT, None)
                logged = conn.info.pop(_EVENTS, None)
                traced = conn.info.pop(_TRACED, None)
        self._deliver(done, logged, traced)
        return result

    @property
    def commits_stalled(self) -> bool:
        """Commits do not come back now, and writes are refused (store/stall.py), which the
        engine has logged: a loop that fails for it need not say so again."""
        return self._stall is not None and self._stall.stalled

    def _stall_end(self, watched: int | None) -> str | None:
        """End the stall guard's watch of a write transaction: what it was told if it was cut."""
        if watched is None or self._stall is None:
            return None
        return self._stall.end(watched)

    def _transaction(self, conn: Connection, fn: Callable[[Connection], T]) -> T:
        """`fn` in one transaction, committed (profile seam)."""
        with conn.begin():
            return fn(conn)

    def _deliver(
        self, done: Wakeups | None, logged: list[Any] | None, traced: list[Any] | None = None
    ) -> None:
        """What a committed transaction did, to this process's waiters and observers."""
        if done:
            self._committed(done)
        if logged:
            for observe in self.event_observers:
                observe(logged)
        if traced:
            for trace in self.trace_observers:
                trace(traced)

    # -- one round trip fewer at each end of a transaction (PostgreSQL) -------------------------

    def first_rows(self, conn: Connection, sql: str, params: Any) -> list[tuple[Any, ...]]:
        """The rows of `sql`, the first statement of `conn`'s transaction. On PostgreSQL the
        transaction's BEGIN travels with it (psycopg's pipeline mode): one round trip, not two.
        """
        raw = self._driver(conn)
        if raw is None or raw.info.transaction_status != _idle():
            return [tuple(row) for row in conn.exec_driver_sql(sql, params)]
        cur = raw.cursor()
        try:
            with _driver_errors(sql, params), raw.pipeline():
                cur.execute(sql, params)
            rows: list[tuple[Any, ...]] = cur.fetchall()
            return rows
        finally:
            cur.close()

    def write_rows(self, conn: Connection, rows: Rows, *, commit: bool = False) -> None:
        """A transition's rows (store/transition.py), whatever the dialect: on SQLite a few
        statements, on PostgreSQL one (with the COMMIT when `commit`). FenceLost when a fenced
        token update matched no row."""
        if not self.is_postgres:
            write_sqlite(conn, rows)
            return
        try:
            self._write_postgres(conn, rows, commit=commit)
        except DBAPIError as exc:
            if FENCE_LOST_MARK not in str(exc.orig):
                raise
            updates = rows.token_updates
            raise FenceLost(updates[0]["id"] if len(updates) == 1 else "one of several") from None

    def _write_postgres(self, conn: Connection, rows: Rows, *, commit: bool) -> None:
        """PostgreSQL: `queries.pg_write`'s one statement (profile seam)."""
        statement = pg_write(*rows.as_args())
        if statement is None:
            return
        sql, params = statement
        if commit:
            self.write_and_commit(conn, sql, params)
        else:
            conn.exec_driver_sql(sql, params)

    def keyed(self, seq: Any) -> dict[str, Any]:
        """The key columns of a new event or signal row besides its instance: none here (the
        database numbers them); `seq`, the SQL that orders them, under the distributed
        profile (profile seam)."""
        return {}

    def write_and_commit(self, conn: Connection, sql: str, params: Any) -> None:
        """Run `sql`, the last statement of `conn`'s transaction, and commit. On PostgreSQL the
        COMMIT travels with it: one round trip, not two. Nothing may run on `conn` afterwards
        (it would begin another transaction); the transaction's own commit is then a no-op."""
        raw = self._driver(conn)
        if raw is None:
            conn.exec_driver_sql(sql, params)
            return
        cur = raw.cursor()
        try:
            with _driver_errors(sql, params), raw.pipeline():
                cur.execute(sql, params)
                cur.execute("COMMIT")
        finally:
            cur.close()

    def _driver(self, conn: Connection) -> psycopg.Connection[Any] | None:
        """psycopg's own connection under `conn` (PostgreSQL), else None."""
        if not self.is_postgres:
            return None
        import psycopg

        raw = conn.connection.driver_connection
        assert isinstance(raw, psycopg.Connection)
        return raw

    # -- wake-ups -------------------------------------------------------------------------------

    def after_commit(self, conn: Connection, done: Wakeups) -> None:
        """What this transaction did, for whoever waits for it, once it has committed."""
        pending: Wakeups | None = conn.info.get(_AFTER_COMMIT)
        if pending is None:
            conn.info[_AFTER_COMMIT] = pending = Wakeups()
        pending.merge(done)

    def logged(self, conn: Connection, events: list[tuple[str, str, str, str]]) -> None:
        """Events this transaction wrote, for `event_observers` once it has committed."""
        conn.info.setdefault(_EVENTS, []).extend(events)

    def traced(self, conn: Connection, events: list[dict[str, Any]]) -> None:
        """Events this transaction wrote, for `trace_observers` once it has committed."""
        conn.info.setdefault(_TRACED, []).extend(events)

    def _committed(self, done: Wakeups) -> None:
        """Wake this process's waiters, and NOTIFY other processes' pollers (profile seam)."""
        if self.on_commit is not None:
            self.on_commit(done)  # this process's waiters, at once
        if not (self.is_postgres and done.queues):
            return
        with self._notify_cond:  # the other processes' pollers, through the notifier thread
            self._notify_pending |= done.queues
            if self._notifier is None:
                self._notifier = threading.Thread(
                    target=self._notify_loop, name="wiggle-notify", daemon=True
                )
                self._notifier.start()
            self._notify_cond.notify()

    def _notify_loop(self) -> None:
        """NOTIFY other processes outside every write transaction, from a pooled connection.
        Queues made READY while one NOTIFY is in flight share the next one."""
        sql = f"SELECT pg_notify('{NOTIFY_CHANNEL}', %(o)s || q) FROM unnest(%(qs)s::text[]) q"
        while True:
            with self._notify_cond:
                while not self._notify_pending and not self._notify_stop:
                    self._notify_cond.wait()
                if self._notify_stop:
                    return
                queues = sorted(self._notify_pending)
                self._notify_pending = set()
            try:
                with self.sa.connect() as conn:
                    conn.exec_driver_sql(sql, {"o": self._origin, "qs": queues})
                    conn.commit()
            except Exception:
                # Lost: other processes' pollers see these tasks at their next poll slice.
                with self._notify_cond:
                    self._notify_cond.wait(0.2)

    def _transient(self, exc: DBAPIError) -> bool:
        if self.is_sqlite:
            msg = str(exc.orig).lower()
            return "database is locked" in msg or "database table is locked" in msg or "busy" in msg
        code = getattr(exc.orig, "sqlstate", None)
        return code in _PG_RETRY_CODES

    def libpq_url(self) -> str:
        return libpq_url(self.url)

    def listen(self, waiters: Waiters, stop: threading.Event) -> threading.Thread:
        """Start a daemon thread that tells `waiters` of every NOTIFY on our channel: tasks
        other processes made READY (profile seam)."""
        import psycopg

        on_notify = waiters.notified

        def run() -> None:
            while not stop.is_set():
                try:
                    with psycopg.connect(self.libpq_url(), autocommit=True) as pc:
                        pc.execute(f"LISTEN {NOTIFY_CHANNEL}")
                        on_notify()  # we may have missed some while (re)connecting
                        while not stop.is_set():
                            for n in pc.notifies(timeout=0.5, stop_after=1):
                                # Our own NOTIFYs: this process's pollers were woken already.
                                if not n.payload.startswith(self._origin):
                                    on_notify()
                except psycopg.Error:
                    stop.wait(0.5)

        t = threading.Thread(target=run, name="wiggle-listen", daemon=True)
        t.start()
        return t

    def lock_schema(self, conn: Connection) -> None:
        """Serialise schema creation across processes: an advisory lock on PostgreSQL, released
        at commit (SQLite's BEGIN IMMEDIATE already does) (profile seam)."""
        if self.is_postgres:
            conn.exec_driver_sql("SELECT pg_advisory_xact_lock(8245001)")

    def sweep(self) -> None:
        """The leader's housekeeping of the database layer, once per tick (profile seam)."""

    def dispose(self) -> None:
        if self._stall is not None:
            self._stall.stop()
        with self._notify_cond:
            self._notify_stop = True
            self._notify_cond.notify()
        if self._notifier is not None:
            self._notifier.join(timeout=5.0)
        self.sa.dispose()
