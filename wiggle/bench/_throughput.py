"""Throughput of the whole stack: a linear flow over real gRPC and PostgreSQL.

A linear flow of `steps` tasks; `instances` instances started in a burst; `workers` worker
processes of `concurrency` slots each (4 x 16 = 64 in flight); one server process (or more, over
one PostgreSQL). Per mode it prints instances/s, steps/s and, on PostgreSQL, transactions
committed and WAL flushes per instance, read from the server's own statistics views.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import sqlalchemy as sa

from wiggle._postgres import create_database, drop_database, postgres_server
from wiggle.bench._processes import free_port, running, wait_serving
from wiggle.client import Client

__all__ = ["run"]

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")


def flow_source(mode: str, steps: int) -> str:
    lines = [f"wiggle: 1\nname: bench-linear-{mode.lower().replace('_', '-')}\nexecution: {mode}"]
    lines.append("steps:")
    lines += [f"  - {{task: bench_step, id: s{i}}}" for i in range(1, steps + 1)]
    return "\n".join(lines) + "\n"


@dataclass
class Result:
    mode: str
    instances: int
    steps: int
    seconds: float
    commits: int | None
    wal_syncs: int | None

    def line(self) -> str:
        per = (
            f"{self.commits / self.instances:7.1f} commits/inst  "
            f"{self.wal_syncs / self.instances:6.1f} WAL flushes/inst"
            if self.commits is not None and self.wal_syncs is not None
            else "commits n/a (SQLite)"
        )
        rate = self.instances / self.seconds
        return (
            f"{self.mode:<12} {rate:8.1f} inst/s  {rate * self.steps:8.0f} steps/s  "
            f"{self.seconds:7.2f} s  {per}"
        )


def _pg_counters(url: str) -> tuple[int, int]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            commits = conn.execute(
                sa.text(
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                )
            ).scalar_one()
            wal_syncs = conn.execute(sa.text("SELECT wal_sync FROM pg_stat_wal")).scalar_one()
            return int(commits), int(wal_syncs)
    finally:
        engine.dispose()


def _pg_settings(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            fsync = conn.execute(sa.text("SHOW fsync")).scalar_one()
            sync = conn.execute(sa.text("SHOW synchronous_commit")).scalar_one()
            return f"fsync={fsync} synchronous_commit={sync}"
    finally:
        engine.dispose()


@contextlib.contextmanager
def _database(kind: str, base: str | None, tmpdir: str, mode: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{tmpdir}/bench-{mode}.db"
        return
    assert base is not None
    url = create_database(base, prefix="wiggle_bench")
    try:
        yield url
    finally:
        drop_database(url)


def _count_finished(engine: sa.Engine) -> int:
    # Read-only: each check ends in a rollback, so it adds nothing to the commit count.
    with engine.connect() as conn:
        query = sa.text("SELECT count(*) FROM wiggle_instances WHERE status <> 'RUNNING'")
        return int(conn.execute(query).scalar_one())


def run_mode(args: argparse.Namespace, url: str, mode: str) -> Result:
    ports = [free_port() for _ in range(args.servers)]
    servers = [
        ["server", "--database", url, "--address", f"127.0.0.1:{p}", "--log-level", "warning"]
        for p in ports
    ]
    with running(servers):
        for port in ports:
            wait_serving(f"127.0.0.1:{port}")
        address = f"127.0.0.1:{ports[0]}"
        with Client(address) as client:
            flow = client.deploy(flow_source(mode, args.steps).encode())
        workers = [
            [
                "worker",
                "--handlers",
                "wiggle.bench._handlers",
                "--address",
                f"127.0.0.1:{ports[i % len(ports)]}",
                "--concurrency",
                str(args.concurrency),
                "--log-level",
                "warning",
            ]
            for i in range(args.workers)
        ]
        with running(workers):
            time.sleep(args.warmup)  # let every worker connect and park its first long poll
            before = _pg_counters(url) if url.startswith("postgresql") else None
            started = time.perf_counter()
            with Client(address) as client, ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda i: client.start(flow.name, {"i": i}), range(args.instances)))
            watcher = sa.create_engine(url)
            try:
                while _count_finished(watcher) < args.instances:
                    if time.perf_counter() - started > args.timeout:
                        raise TimeoutError(f"{mode}: unfinished after {args.timeout}s")
                    time.sleep(0.05)
                seconds = time.perf_counter() - started
            finally:
                watcher.dispose()
    # The server and workers are gone: every backend has flushed its statistics.
    after = _pg_counters(url) if before is not None else None
    commits = after[0] - before[0] if after and before else None
    wal = after[1] - before[1] if after and before else None
    return Result(mode, args.instances, args.steps, seconds, commits, wal)


def run(args: argparse.Namespace) -> int:
    import tempfile

    modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    print(
        f"linear {args.steps}-step flow, {args.instances} instances, {args.workers} workers x "
        f"{args.concurrency}, {args.servers} server(s), {args.database}"
    )
    with contextlib.ExitStack() as stack:
        tmpdir = stack.enter_context(tempfile.TemporaryDirectory())
        base = stack.enter_context(postgres_server()) if args.database == "postgres" else None
        if base is not None:
            print(_pg_settings(base))
        for mode in modes:
            with _database(args.database, base, tmpdir, mode) as url:
                print(run_mode(args, url, mode).line(), flush=True)
    return 0
