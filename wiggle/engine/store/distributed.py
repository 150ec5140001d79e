"""The distributed profile's database layer (engine/store/profile.py): no LISTEN/NOTIFY, no advisory
lock, whole transactions retried, and a COMMIT that a dropped connection left in doubt proved
before anything is answered.

Retries. A serialisation failure (40001), a deadlock (40P01) or two transactions of one instance
picking the same event key (engine/store/keyed.py) roll the whole transaction back, and the base
class's loop runs it again from the start with backoff. A transition re-reads everything it
decides on in each run and writes each token through the fence it read, so a retried report is
applied at most once: if its first run committed after all (below), the second finds the report's
sequence number on the token and answers it as a resent report.

Ambiguous commits. When the connection drops after COMMIT was sent, the transaction may or may
not have committed. One that is safe to run twice (`write(idempotent=True)`: a report whose
sequence numbers the token records, a heartbeat, a timer or lease expiry fenced on what it saw)
simply runs again. Every other write transaction inserts an outcome marker, a random id in
`wiggle_commits`, just before its COMMIT. After the drop the engine inserts the same id in a new
transaction, as a probe: that insert waits for the first transaction if it is still committing,
then either conflicts with its marker (it committed: its result, computed before the COMMIT, is
the answer, and its wake-ups are delivered) or takes the id (it did not commit, and now never
can: the transaction runs again). A transaction that wrote nothing (`wrote_nothing`: a claim that
found no task) needs no marker. The leader sweeps markers older than `MARKER_TTL_S`.

Wake-ups. Nothing is NOTIFYed and nothing LISTENs: this process's pollers are woken by its own
commits as before, and while any of them is parked one thread checks every `POLL_S` seconds which
of their queues hold READY tasks and wakes those pollers. A task another server made READY is
seen within `POLL_S`; a parked poller that cannot take the READY task it is woken for (another
worker's activity) polls once per `POLL_S` while the task waits.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from wiggle.errors import InvalidRequest, Unavailable

from ..model.clock import Clock
from .db import _AFTER_COMMIT, _EVENTS, Database
from .keyed import KEYED_CONSTRAINTS, keyed_write
from .rows import new_id
from .schema import COMMITS
from .transition import Rows
from .wakeups import Waiters, Wakeups

__all__ = ["MARKER_TTL_S", "POLL_S", "DistributedDatabase"]

T = TypeVar("T")

#: How often a process checks for READY tasks while it has parked pollers: the bound on how
#: late a poller learns of a task another server made READY.
POLL_S = 0.1
#: Outcome markers older than this are swept (a probe comes within seconds of its drop).
MARKER_TTL_S = 600.0
_SWEEP_EVERY_S = 60.0
_SWEEP_BATCH = 5000
#: Dropped COMMITs in a row after which a write gives up with Unavailable.
_DROPS_IN_A_ROW = 10
_NOTHING = "wiggle_wrote_nothing"

_READY_ON = (
    "SELECT q FROM unnest(%(qs)s::text[]) AS q WHERE EXISTS "
    "(SELECT 1 FROM wiggle_tokens AS t WHERE t.state = 'READY' AND t.queue = q)"
)


class _Unit(Generic[T]):
    """A write transaction's function, and whether it may simply run twice."""

    __slots__ = ("fn", "idempotent")

    def __init__(self, fn: Callable[[Connection], T], idempotent: bool) -> None:
        self.fn = fn
        self.idempotent = idempotent

    def __call__(self, conn: Connection) -> T:
        return self.fn(conn)


class _Ambiguous(Exception):
    """The connection dropped during COMMIT: what the transaction would have answered."""

    def __init__(
        self, marker: str | None, result: Any, done: Wakeups | None, logged: list[Any] | None
    ) -> None:
        super().__init__(marker)
        self.marker = marker
        self.result = result
        self.done = done
        self.logged = logged


class DistributedDatabase(Database):
    """`Database` under the distributed profile (module docstring)."""

    distributed = True

    def __init__(
        self, url: str, *, clock: Clock | None = None, idle_in_transaction_timeout_s: float = 0.0
    ) -> None:
        super().__init__(
            url, clock=clock, idle_in_transaction_timeout_s=idle_in_transaction_timeout_s
        )
        if not self.is_postgres:
            self.dispose()
            raise InvalidRequest(
                "the distributed database profile needs a database that speaks PostgreSQL's "
                "protocol (postgresql://...), not SQLite"
            )
        #: Why transactions ran again: serialization (40001), deadlock (40P01), key (two
        #: transactions picked one event key), and for dropped COMMITs ambiguous_rerun (an
        #: idempotent one), ambiguous_committed (proved committed), ambiguous_rolled_back.
        self.retries: Counter[str] = Counter()
        self._retries_lock = threading.Lock()
        self._marker_sql = (
            f"INSERT INTO {COMMITS} (id, at_ms, probe) VALUES (%(m)s, {self.now_sql}, false)"
        )
        self._swept_at = 0.0

    def _count(self, reason: str) -> None:
        with self._retries_lock:
            self.retries[reason] += 1

    # -- transactions ---------------------------------------------------------------------------

    def write(self, fn: Callable[[Connection], T], *, idempotent: bool = False) -> T:
        return self._run(_Unit(fn, idempotent), read=False)

    def _write_postgres(self, conn: Connection, rows: Rows, *, commit: bool) -> None:
        # Keyed events, each table modified once per statement; no COMMIT sent with the
        # write: the transaction writes its outcome marker last (see _transaction).
        keyed_write(conn, *rows.as_args())

    def keyed(self, seq: Any) -> dict[str, Any]:
        return {"seq": seq}

    def wrote_nothing(self, conn: Connection) -> None:
        conn.info[_NOTHING] = True

    def _transaction(self, conn: Connection, fn: Callable[[Connection], T]) -> T:
        marker: str | None = None
        committing = False
        try:
            with conn.begin():
                result = fn(conn)
                nothing = conn.info.pop(_NOTHING, False)
                if isinstance(fn, _Unit) and not fn.idempotent and not nothing:
                    marker = new_id()
                    conn.exec_driver_sql(self._marker_sql, {"m": marker})
                committing = True
        except DBAPIError as exc:
            if not (committing and exc.connection_invalidated):
                raise
            if not isinstance(fn, _Unit):
                return result  # a read: what it read stands
            done = conn.info.get(_AFTER_COMMIT)
            raise _Ambiguous(marker, result, done, conn.info.get(_EVENTS)) from exc
        return result

    def _once(self, fn: Callable[[Connection], T], *, read: bool) -> T:
        for _ in range(_DROPS_IN_A_ROW):
            try:
                result: T = super()._once(fn, read=read)
                return result
            except _Ambiguous as drop:
                if drop.marker is None:
                    self._count("ambiguous_rerun")
                    continue
                if self._committed_before(drop.marker):
                    self._count("ambiguous_committed")
                    self._deliver(drop.done, drop.logged)
                    committed: T = drop.result
                    return committed
                self._count("ambiguous_rolled_back")
        raise Unavailable(
            f"the database connection dropped during COMMIT {_DROPS_IN_A_ROW} times in a row"
        )

    def _committed_before(self, marker: str) -> bool:
        """Whether the transaction that wrote `marker` committed (module docstring). The probe
        is itself safe to run twice: a second run finds its own row, marked as a probe."""
        sql = (
            f"INSERT INTO {COMMITS} (id, at_ms, probe) VALUES (%(m)s, {self.now_sql}, true) "
            f"ON CONFLICT (id) DO NOTHING"
        )

        def probe(conn: Connection) -> bool:
            conn.exec_driver_sql(sql, {"m": marker})
            found = conn.exec_driver_sql(
                f"SELECT probe FROM {COMMITS} WHERE id = %(m)s", {"m": marker}
            ).scalar_one()
            return not found

        return self.write(probe, idempotent=True)

    def _transient(self, exc: DBAPIError) -> bool:
        code = getattr(exc.orig, "sqlstate", None)
        if super()._transient(exc):
            self._count("deadlock" if code == "40P01" else "serialization")
            return True
        diag = getattr(exc.orig, "diag", None)
        if code == "23505" and getattr(diag, "constraint_name", None) in KEYED_CONSTRAINTS:
            self._count("key")
            return True
        return False

    # -- what the default profile does with LISTEN/NOTIFY and advisory locks --------------------

    def _committed(self, done: Wakeups) -> None:
        if self.on_commit is not None:
            self.on_commit(done)  # this process's waiters; other processes poll

    def listen(self, waiters: Waiters, stop: threading.Event) -> threading.Thread:
        """Start the thread that wakes this process's parked pollers for READY tasks on their
        queues, every POLL_S seconds while any is parked."""

        def ready_on(queues: list[str]) -> list[str]:
            return list(
                self.read(lambda c: c.exec_driver_sql(_READY_ON, {"qs": queues}).scalars().all())
            )

        def run() -> None:
            while not stop.wait(POLL_S):
                queues = waiters.parked_queues()
                if not queues:
                    continue
                try:
                    ready = ready_on(sorted(queues))
                except Exception:
                    continue  # the database is away: pollers see their tasks when it is back
                if ready:
                    waiters.tasks_ready(ready, None)

        t = threading.Thread(target=run, name="wiggle-ready-poll", daemon=True)
        t.start()
        return t

    def lock_schema(self, conn: Connection) -> None:
        """No advisory lock: two engines creating the schema at once collide on a catalog
        entry, and the engine's start tries again (Engine._ensure_schema)."""

    def sweep(self) -> None:
        """Remove outcome markers older than MARKER_TTL_S, at most once per _SWEEP_EVERY_S."""
        now = time.monotonic()
        if now - self._swept_at < _SWEEP_EVERY_S:
            return
        self._swept_at = now
        cutoff = int(MARKER_TTL_S * 1000)
        sql = (
            f"DELETE FROM {COMMITS} WHERE id IN (SELECT id FROM {COMMITS} "
            f"WHERE at_ms < {self.now_sql} - {cutoff} LIMIT {_SWEEP_BATCH})"
        )
        while self.write(lambda c: c.exec_driver_sql(sql).rowcount, idempotent=True) >= (
            _SWEEP_BATCH
        ):
            pass
