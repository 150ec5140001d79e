"""The fault injector of the distributed simulation: commits that fail as a distributed SQL
engine's would.

Installed on an engine's SQLAlchemy pool (`Injector.install`), every connection it opens is a
psycopg connection whose `commit()` first draws a fate:

- `serialization` (probability `serialization`): the server raises a real serialisation failure
  (SQLSTATE 40001, from a `RAISE` inside the transaction) and the transaction is rolled back, as
  CockroachDB or YugabyteDB abort a transaction that lost a conflict at COMMIT;
- `drop_after` / `drop_before` (probability `drop`, half each): the connection breaks around the
  COMMIT, with the client none the wiser: after COMMIT was sent (the server commits it and then
  finds its client gone) or before (the server rolls the transaction back). Both end in the same
  error ("server closed the connection unexpectedly"), as a network partition or a gateway node
  dying at that moment would.

The counts (per fate, and every commit drawn) are what a scenario proves its faults fired by.
`serializable(url)` makes SERIALIZABLE the database's default isolation, as on CockroachDB.
"""

from __future__ import annotations

import random
import socket
import threading
from collections import Counter, deque
from typing import Any

import psycopg
from sqlalchemy import event, make_url

_ABORT = (
    "DO $$BEGIN RAISE EXCEPTION 'wiggle fault: injected serialization failure' "
    "USING ERRCODE = '40001'; END$$"
)
_DROPPED = "server closed the connection unexpectedly (wiggle fault: dropped {when} COMMIT)"


class Injector:
    def __init__(self, serialization: float, drop: float, seed: int = 1) -> None:
        self.serialization = serialization
        self.drop = drop
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self._script: deque[str] = deque()
        self.connection_class = self._connection_class()

    def script(self, *fates: str) -> None:
        """The fates of the next commits, in order, before the random draws resume."""
        with self._lock:
            self._script.extend(fates)

    def fate(self) -> str:
        with self._lock:
            self.counts["commits"] += 1
            if self._script:
                fate = self._script.popleft()
                self.counts[fate] += 1
                return fate
            draw = self._random.random()
            if draw < self.serialization:
                fate = "serialization"
            elif draw < self.serialization + self.drop:
                fate = "drop_after" if self._random.random() < 0.5 else "drop_before"
            else:
                return "commit"
            self.counts[fate] += 1
            return fate

    def install(self, sa_engine: Any) -> None:
        """Every connection `sa_engine` opens from now on injects (the pool is emptied)."""
        cls = self.connection_class

        def connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
            return cls.connect(*cargs, **cparams)

        event.listen(sa_engine, "do_connect", connect)
        sa_engine.dispose()

    def _connection_class(self) -> type[psycopg.Connection[Any]]:
        injector = self

        class InjectingConnection(psycopg.Connection[Any]):
            def commit(self) -> None:
                fate = injector.fate()
                if fate == "serialization":
                    self.execute(_ABORT)  # raises SerializationFailure; the server aborted
                elif fate in ("drop_after", "drop_before"):
                    if fate == "drop_after":
                        self.pgconn.send_query(b"COMMIT")
                        self.pgconn.flush()
                    _break(self)
                    when = fate.removeprefix("drop_")
                    raise psycopg.OperationalError(_DROPPED.format(when=when))
                super().commit()

        return InjectingConnection

    def line(self) -> str:
        c = self.counts
        return (
            f"{c['commits']} commits: {c['serialization']} serialization failures, "
            f"{c['drop_after']} dropped after COMMIT, {c['drop_before']} before"
        )


def _break(conn: psycopg.Connection[Any]) -> None:
    """Cut the connection's socket under libpq (no Terminate message), then let libpq give the
    connection up: the server sees its client vanish; psycopg reports the connection closed."""
    sock = socket.socket(fileno=_dup(conn.pgconn.socket))
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()
    conn.pgconn.finish()


def _dup(fd: int) -> int:
    import os

    return os.dup(fd)


def serializable(url: str) -> None:
    """Make SERIALIZABLE the default isolation of `url`'s database (new sessions)."""
    from wiggle._postgres import libpq_url

    name = make_url(url).database
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_isolation = serializable')
