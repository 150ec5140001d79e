"""Commits that do not come back: a PostgreSQL primary without the synchronous standby it waits for.

Under synchronous replication a COMMIT returns once a standby holds the transaction. When none
does (Patroni's `synchronous_mode_strict` with every replica down, a primary cut off from its
replicas until it demotes itself), every COMMIT waits, without an error, for as long as that
lasts, and every transaction that needs a row one of them holds waits behind it. A server would
hold each call until the caller's deadline ran out, and a connection and a thread with it.

`StallGuard` tells that apart from one slow transaction, and answers for it:

- A write transaction still running after `STALL_S` makes the guard try a commit of its own: a
  transaction that writes one logical message to the WAL and nothing else, on a connection of
  its own (the probe).
  If the probe commits within `PROBE_S`, commits work and the slow transaction is left alone.
- If it does not, commits are stalled. One WARNING line says so, with what the database says
  (how many sessions wait for a synchronous standby, and the standby it names). Every write
  transaction in flight is cut (its socket shut: its caller gets UNAVAILABLE now, a fate
  unknown as after any connection lost at COMMIT, which a worker's resend or a client's retry
  settles), and every write transaction begun while the stall lasts is refused with UNAVAILABLE
  at once, without a connection.
- The probe keeps waiting. When its COMMIT comes back (a standby acknowledged it), or its
  connection fails (the node was demoted or died, and failing over is the ordinary path), one
  line says which and writes go through again.

A cut transaction's backend goes on waiting: its work stays invisible, its locks held, until a
standby acknowledges it, and only then is it committed. Cancelling the wait instead would make
PostgreSQL commit it locally without any standby (it says so with a WARNING, and the COMMIT
succeeds), which is what synchronous replication is there to prevent.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection

from wiggle.errors import Unavailable

__all__ = ["PROBE_S", "STALL_S", "StallGuard"]

_log = logging.getLogger("wiggle.engine")

#: A write transaction running this long makes the guard probe.
STALL_S = 2.0
#: A probe's COMMIT not back after this long: commits are stalled.
PROBE_S = 1.5
#: How often the guard looks at the transactions in flight.
LOOK_S = 0.25
#: What a refusal and a cut transaction say.
_STALLED = "the database does not finish commits ({why}); retry later"


class StallGuard:
    """Watches one Database's write transactions (see the module docstring)."""

    def __init__(self, libpq_url: Callable[[], str]) -> None:
        self._url = libpq_url
        self._lock = threading.Lock()
        self._keys = itertools.count()
        self._inflight: dict[int, tuple[float, Connection]] = {}
        self._cut: dict[int, str] = {}
        self._probed_up_to = -1  # transactions begun before a probe that committed
        self._why: str | None = None  # while stalled: what refusals say
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # -- what each write transaction does ---------------------------------------------------------

    def check(self) -> None:
        """Refuse a write transaction while commits are stalled (before it takes a connection)."""
        why = self._why
        if why is not None:
            raise Unavailable(_STALLED.format(why=why))

    def begin(self, conn: Connection) -> int:
        """A write transaction begins on `conn`; refused while commits are stalled."""
        self.check()
        key = next(self._keys)
        with self._lock:
            self._inflight[key] = (time.monotonic(), conn)
            if self._watcher is None and not self._stop.is_set():
                self._watcher = threading.Thread(
                    target=self._watch, name="wiggle-stall", daemon=True
                )
                self._watcher.start()
        return key

    def end(self, key: int) -> str | None:
        """The transaction is over: what it was told if it was cut (else None). Called while
        the transaction still holds its connection, so a cut never reaches another one."""
        with self._lock:
            self._inflight.pop(key, None)
            return self._cut.pop(key, None)

    # -- the watcher ------------------------------------------------------------------------------

    def _watch(self) -> None:
        while not self._stop.wait(LOOK_S):
            with self._lock:
                now = time.monotonic()
                slow = [k for k, (t, _) in self._inflight.items() if now - t >= STALL_S]
            if any(k > self._probed_up_to for k in slow):
                self._check()

    def _check(self) -> None:
        """Probe; when the probe's commit does not come back in time, stand for the stall
        until it does."""
        first_after = next(self._keys)  # transactions from here on began after the probe did
        done = threading.Event()
        failed: list[BaseException] = []
        probe = threading.Thread(
            target=self._probe, args=(done, failed), name="wiggle-stall-probe", daemon=True
        )
        probe.start()
        if done.wait(PROBE_S):
            self._probed_up_to = first_after
            return
        began = time.monotonic()
        why = self._why = self._ask()
        _log.warning("commits are not coming back (%s); answering UNAVAILABLE until one does", why)
        self._cut_all(_STALLED.format(why=why))
        while not done.wait(LOOK_S):
            if self._stop.is_set():
                return
        self._probed_up_to = next(self._keys)
        self._why = None
        took = time.monotonic() - began
        if failed:  # demoted or gone: where writes go now is the URL's (or the proxy's) to find
            _log.warning(
                "the node that held the commits went away after %.1f s (%s); writes go on",
                took,
                " ".join(str(failed[0]).split())[:300],
            )
        else:
            _log.warning("commits come back again after %.1f s", took)

    @property
    def stalled(self) -> bool:
        """Commits are stalled now: writes are refused (the line saying so was logged)."""
        return self._why is not None

    def _probe(self, done: threading.Event, failed: list[BaseException]) -> None:
        """A commit of our own, on a connection of our own. It must write WAL to wait for a
        synchronous standby (a transaction that only took an id commits without waiting):
        a transactional logical message, which any role may write and nothing stores."""
        try:
            import psycopg  # (PostgreSQL only: an SQLite engine never loads it)

            with psycopg.connect(self._url(), connect_timeout=10) as conn:
                conn.execute("SELECT pg_logical_emit_message(true, 'wiggle', 'probe')")
                conn.commit()
        except Exception as exc:  # a node gone (failing over), or not PostgreSQL's function
            failed.append(exc)
        finally:
            done.set()

    def _ask(self) -> str:
        """What the database says about waiting commits, on another connection of its own."""
        try:
            import psycopg

            with psycopg.connect(self._url(), connect_timeout=5, autocommit=True) as conn:
                row = conn.execute(
                    "SELECT count(*) FILTER (WHERE wait_event = 'SyncRep'), "
                    "current_setting('synchronous_standby_names') FROM pg_stat_activity"
                ).fetchone()
        except Exception as exc:
            return f"a test commit waited {PROBE_S:.1f} s; asking why failed: {exc}"
        waiting, names = row if row else (0, "")
        return (
            f"a test commit waited {PROBE_S:.1f} s; {waiting} sessions wait for a "
            f"synchronous standby, synchronous_standby_names is {names!r}"
        )

    def _cut_all(self, why: str) -> None:
        """Shut the socket of every write transaction in flight: each caller is told now."""
        with self._lock:
            for key, (_, conn) in self._inflight.items():
                self._cut[key] = why
                _shut(conn)

    def stop(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)


def _shut(conn: Connection) -> None:
    """Shut `conn`'s socket under the thread blocked on it, which then sees the connection
    dropped. The backend is not told: a COMMIT it waits on stays waiting (module docstring)."""
    with contextlib.suppress(Exception):
        raw: Any = conn.connection.driver_connection
        fd = os.dup(raw.pgconn.socket)
        with socket.socket(fileno=fd) as sock:
            sock.shutdown(socket.SHUT_RDWR)
