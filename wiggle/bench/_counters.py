"""What a run costs: PostgreSQL's commit and WAL counters (and its durability settings, which
the figures depend on), and CPU time per process group.

PostgreSQL's figures come from its statistics views: `pg_stat_database.xact_commit` of the run's
database (every committed transaction, read-only ones included) and `pg_stat_wal.wal_sync` (WAL
fsyncs, cluster-wide). A backend publishes its counters at most once a second while busy, only
after about ten seconds once idle, and at once when it exits. So a window opens after a settle
pause (the warm-up's backends have flushed) and closes after every server and worker process has
gone (their backends have exited).

CPU is user + system time read with psutil: of the postmaster with its reaped and live children
(every backend, whatever user the server runs as; only when the server runs on this machine), of
each server and worker subprocess, and of this process (the driver threads).

A server's RPCs by method and its transactions by kind come from its metrics endpoint (a server
started with --metrics-address): `server_counts`, and `settled_server_counts` for a reading
taken once the server has answered its last calls.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

import psutil
import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "PgCounters",
    "cpu_seconds",
    "pg_counters",
    "pg_settings",
    "server_counts",
    "settled_server_counts",
    "wait_disconnected",
]


@dataclass(frozen=True)
class PgCounters:
    commits: int
    wal_syncs: int
    cpu_s: float | None  # None: the server is not a local process psutil can read


def cpu_seconds(procs: Sequence[subprocess.Popen[bytes]]) -> float:
    """User + system CPU seconds of `procs` so far (a process that has exited counts 0)."""
    total = 0.0
    for proc in procs:
        try:
            times = psutil.Process(proc.pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _postgres_cpu(backend_pid: int) -> float | None:
    """CPU seconds of every process of the PostgreSQL server that runs `backend_pid`."""
    try:
        backend = psutil.Process(backend_pid)
        master = backend.parent()
        if master is None or "postgres" not in backend.name() + master.name():
            return None  # the pid is some other local process: the server is elsewhere
        times = master.cpu_times()
        total = float(times.user + times.system + times.children_user + times.children_system)
        for child in master.children():
            try:
                ct = child.cpu_times()
            except psutil.Error:
                continue  # exited meanwhile: counted in the postmaster's children_* next time
            total += ct.user + ct.system
        return total
    except psutil.Error:
        return None


def _wal_syncs(conn: sa.Connection) -> int:
    # PostgreSQL 18 moved the WAL's write and sync counts from pg_stat_wal to pg_stat_io.
    in_wal_view = conn.execute(
        sa.text(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pg_stat_wal'::regclass "
            "AND attname = 'wal_sync'"
        )
    ).scalar_one()
    if in_wal_view:
        return int(conn.execute(sa.text("SELECT wal_sync FROM pg_stat_wal")).scalar_one())
    return int(
        conn.execute(
            sa.text("SELECT coalesce(sum(fsyncs), 0) FROM pg_stat_io WHERE object = 'wal'")
        ).scalar_one()
    )


def pg_counters(url: str) -> PgCounters:
    """One reading, on a connection of its own (nothing cached between readings)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            commits = conn.execute(
                sa.text(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                )
            ).scalar_one()
            wal_syncs = _wal_syncs(conn)
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            # While the connection is open: its backend is the way to the postmaster.
            cpu = _postgres_cpu(int(pid))
            conn.rollback()  # a rolled-back read adds nothing to xact_commit
        return PgCounters(int(commits), int(wal_syncs), cpu)
    finally:
        engine.dispose()


def pg_settings(url: str) -> str:
    """The server's durability settings, as `fsync=on synchronous_commit=on`."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            got = [
                f"{name}={conn.execute(sa.text(f'SHOW {name}')).scalar_one()}"
                for name in ("fsync", "synchronous_commit")
            ]
            conn.rollback()
            return " ".join(got)
    finally:
        engine.dispose()


def wait_disconnected(url: str, timeout_s: float = 15.0) -> bool:
    """Wait until no other session uses the URL's database: their statistics are then flushed.
    False when some session stayed past `timeout_s`."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                others = conn.execute(query).scalar_one()
                conn.rollback()
            if others == 0:
                return True
            time.sleep(0.2)
        return False
    finally:
        engine.dispose()


def server_counts(port: int) -> dict[str, float]:
    """The server's RPCs by method (`rpc M`) and transactions by kind (`transactions K`)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "wiggle_rpcs_total":
                key = f"rpc {sample.labels['method']}"
            elif sample.name == "wiggle_transaction_seconds_count":
                key = f"transactions {sample.labels['kind']}"
            else:
                continue
            out[key] = out.get(key, 0.0) + sample.value
    return out


def settled_server_counts(ports: Sequence[int], within_s: float = 2.0) -> dict[str, float]:
    """The servers' counts summed, read once they have answered their last calls: a server
    counts a call when it answers it, and the commit of an instance's last report wakes the
    client's WaitInstance before that report's own call is answered. Read until two readings
    50 ms apart count the same calls (PollTasks aside: an idle worker's poll may end at any
    moment), or `within_s` has passed."""

    def reading() -> dict[str, float]:
        total: dict[str, float] = {}
        for port in ports:
            for key, value in server_counts(port).items():
                total[key] = total.get(key, 0.0) + value
        return total

    def calls(got: dict[str, float]) -> dict[str, float]:
        return {k: v for k, v in got.items() if k.startswith("rpc ") and k != "rpc PollTasks"}

    deadline = time.monotonic() + within_s
    last = reading()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = reading()
        if calls(now) == calls(last):
            return now
        last = now
    return last
