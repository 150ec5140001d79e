"""Benchmark the engine in-process: a linear flow driven through poll/complete and advance_run.

    python scripts/bench_engine.py                  # SQLite and PostgreSQL (pgserver), all modes
    python scripts/bench_engine.py --database sqlite --modes SERVER
    python scripts/bench_engine.py --database postgresql://user@host/db --instances 500

Prints, per database and mode, the steps committed per second and the database commits per step
(every transaction the engine commits, polls included). Not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import event, make_url

from wiggle._postgres import create_database, drop_database
from wiggle._postgres import postgres_server as shared_postgres_server
from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus, StepOutcome, TaskActivation
from wiggle.graph import ExecutionMode


def linear_flow(steps: int) -> str:
    body = "".join(f"  - task: inc\n    id: s{i:02d}\n" for i in range(steps))
    return f"wiggle: 1\nname: bench-linear\nsteps:\n{body}"


@contextmanager
def postgres_server(url: str | None) -> Iterator[str]:
    """`url`, or a throwaway pgserver (fsync on, as shipped) for the duration."""
    if url is not None:
        yield url
        return
    with shared_postgres_server() as base:
        yield base


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh database on the server of `server_url`, dropped afterwards."""
    url = create_database(server_url, prefix="wiggle_bench")
    try:
        yield url
    finally:
        drop_database(url)


def postgres_settings(server_url: str) -> str:
    admin = make_url(server_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as c:
        got = [(k, c.execute(f"SHOW {k}").fetchone()) for k in ("fsync", "synchronous_commit")]
    return ", ".join(f"{k}={row[0] if row else '?'}" for k, row in got)


class Runner:
    def __init__(self, engine: Engine, mode: ExecutionMode, graph: Any) -> None:
        self.engine = engine
        self.mode = mode
        self.graph = graph
        self.steps = 0
        self.lock = threading.Lock()

    def work(self, stop: threading.Event, name: str) -> None:
        while not stop.is_set():
            tasks = self.engine.poll(["default"], name, 16)
            if not tasks:
                self.engine.wait_for_tasks(["default"], 0.05)
                continue
            for task in tasks:
                n = self.run(task)
                with self.lock:
                    self.steps += n

    def run(self, task: TaskActivation) -> int:
        if self.mode is ExecutionMode.SERVER:
            self.engine.complete(task.task_id, task.lease, task.input + 1)
            return 1
        node, ctx, buf, done = task.node_id, task.input, [], 0
        while True:
            ctx += 1
            buf.append(StepOutcome(node, context=ctx))
            nxt = self.graph.nodes[node].next
            last = self.graph.nodes[nxt].kind != "task"
            if self.mode is ExecutionMode.LOCAL_SYNC or last:
                res = self.engine.advance_run(task.task_id, task.lease, buf, final=last)
                done += len(buf)
                buf = []
                if last or not res.keep_going:
                    return done
            node = nxt


def bench(
    url: str, label: str, mode: ExecutionMode, instances: int, threads: int, steps: int
) -> None:
    engine = Engine(url, default_mode=mode)
    commits = [0]
    event.listen(engine.sa_engine, "commit", lambda _conn: commits.__setitem__(0, commits[0] + 1))
    flow = load_flow(linear_flow(steps))
    engine.register(flow)
    ids = [engine.start("bench-linear", 0).instance_id for _ in range(instances)]
    runner = Runner(engine, mode, flow.graph)
    stop = threading.Event()
    base = commits[0]
    t0 = time.perf_counter()
    workers = [threading.Thread(target=runner.work, args=(stop, f"w{i}")) for i in range(threads)]
    for w in workers:
        w.start()
    while runner.steps < instances * steps:
        time.sleep(0.01)
    elapsed = time.perf_counter() - t0
    stop.set()
    for w in workers:
        w.join()
    used = commits[0] - base
    sample = engine.describe(ids[-1])
    assert sample.status is InstanceStatus.COMPLETED and sample.context == steps, sample
    engine.close()
    total = instances * steps
    print(
        f"{label:10s} {mode.value:11s} {total:6d} steps in {elapsed:6.2f}s  "
        f"{total / elapsed:8.0f} steps/s  {used / total:5.2f} commits/step"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--database", action="append", help="sqlite | postgres | a database URL")
    ap.add_argument("--modes", default="SERVER,LOCAL_SYNC,LOCAL_ASYNC")
    ap.add_argument("--instances", type=int, default=200)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    modes = [ExecutionMode(m.strip()) for m in args.modes.split(",")]
    shape = (args.instances, args.threads, args.steps)
    print(f"{args.steps}-step linear flow, {args.instances} instances, {args.threads} threads")
    for db in args.database or ["sqlite", "postgres"]:
        if db == "sqlite":
            for mode in modes:
                with tempfile.TemporaryDirectory() as d:
                    bench(f"sqlite:///{d}/bench.db", "sqlite", mode, *shape)
            continue
        with postgres_server(None if db == "postgres" else db) as server_url:
            print(f"postgres: {postgres_settings(server_url)}")
            for mode in modes:
                with postgres_database(server_url) as url:
                    bench(url, "postgres", mode, *shape)


if __name__ == "__main__":
    main()
