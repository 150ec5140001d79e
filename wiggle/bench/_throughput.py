"""Throughput of the whole stack: a linear flow, real server and worker processes, a closed loop.

Per mode: `servers` `wiggle server` processes over one database and `workers` `wiggle worker`
processes of `concurrency` slots; a linear flow of `steps` tasks (`bench_step`, n + 1 each); a
warm-up of `warmup` instances, then `instances` measured ones, `inflight` at a time, each result
seen through WaitInstance. The measured window opens after a settle pause (PostgreSQL publishes
its statistics late, see _counters) and closes at the last result; commits and WAL syncs are read
once every process has disconnected. Then the run is verified from the engine's tables (_verify):
a run that fails verification, or loses an instance, gets no figure and a non-zero exit.

With `--worker-command CMD` the workers are another program: CMD runs through /bin/sh once per
worker process (_processes.running_shell), with WIGGLE_ADDRESS (its server), WIGGLE_BENCH_QUEUE
(the flow's queue), WIGGLE_BENCH_CONCURRENCY (its slots) and WIGGLE_BENCH_WORKER (0, 1, ...) in
its environment; it must register `bench_step` as _handlers does (sdk/java/bench/BenchWorker.java
is the Java one). Their CPU is that of each shell with all its descendants. With `--rpcs` each
server serves its metrics and the run counts their RPCs and transactions over the window.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa

from wiggle._postgres import create_database, drop_database, postgres_server, sqlalchemy_url
from wiggle.bench._counters import (
    PgCounters,
    cpu_seconds,
    pg_counters,
    pg_settings,
    settled_server_counts,
    wait_disconnected,
)
from wiggle.bench._loop import Outcome, drive
from wiggle.bench._processes import (
    free_port,
    running,
    running_shell,
    tree_cpu_seconds,
    wait_serving,
)
from wiggle.bench._report import HEADER, Figures, counts, percentile, row
from wiggle.bench._tracing import exporting, overhead, runs_of
from wiggle.bench._verify import verify
from wiggle.client import Client
from wiggle.engine.ops.prune import write_history
from wiggle.engine.store.db import Database

__all__ = ["MODES", "flow_source", "run"]

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")

#: The queue of the flow's tasks (flow_source names none): what a --worker-command must serve.
QUEUE = "default"


def flow_source(mode: str, steps: int) -> str:
    """The benchmark's flow: `steps` tasks in a row. WIGGLE_BENCH_SEARCH=NAME:POINTER:TYPE,...
    declares search attributes too (their cost is measured that way, docs/performance.md)."""
    lines = [f"wiggle: 1\nname: bench-linear-{mode.lower().replace('_', '-')}\nexecution: {mode}"]
    search = [s.split(":") for s in os.environ.get("WIGGLE_BENCH_SEARCH", "").split(",") if s]
    if search:
        lines.append("search:")
        lines += [f"  {n}: {{pointer: {p}, type: {t}}}" for n, p, t in search]
    lines.append("steps:")
    lines += [f"  - {{task: bench_step, id: s{i}}}" for i in range(1, steps + 1)]
    return "\n".join(lines) + "\n"


def step_nodes(steps: int) -> list[str]:
    return [f"s{i}" for i in range(1, steps + 1)]


@dataclass
class ModeRun:
    """One mode's outcome: figures when it verified, else the problems found (never both)."""

    mode: str
    figures: Figures | None = None
    problems: list[str] = field(default_factory=list)


def _fill_history(url: str, version: str, steps: int, count: int) -> None:
    """`count` finished instances of the flow (engine: write_history), before the run."""
    db = Database(url)
    try:
        write_history(db, version, count, input={"n": 0}, context={"n": steps})
    finally:
        db.dispose()


@contextlib.contextmanager
def _databases(kind: str) -> Iterator[Any]:
    """A factory of one database per mode: fresh and dropped afterwards for "postgres" and
    "sqlite", the given URL itself (kept) otherwise."""
    with contextlib.ExitStack() as stack:
        if kind == "sqlite":
            tmpdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="wiggle-bench-"))

            @contextlib.contextmanager
            def sqlite_db(mode: str) -> Iterator[str]:
                yield f"sqlite:///{tmpdir}/bench-{mode.lower()}.db"

            yield sqlite_db
        elif kind == "postgres":
            base = stack.enter_context(postgres_server())

            @contextlib.contextmanager
            def postgres_db(mode: str) -> Iterator[str]:
                url = create_database(base, prefix="wiggle_bench")
                try:
                    yield url
                finally:
                    drop_database(url)

            yield postgres_db
        else:
            url = sqlalchemy_url(kind)

            @contextlib.contextmanager
            def given(mode: str) -> Iterator[str]:
                yield url

            yield given


def _input_for(args: argparse.Namespace, warmup: bool) -> Any:
    def make(i: int) -> Any:
        if args.inject_failure and not warmup and i == 0:
            return {"n": 0, "fail_at": args.steps // 2}  # bench_step fails it for good
        return {"n": 0}

    return make


def _workers(
    args: argparse.Namespace, ports: list[int], env: dict[str, str]
) -> tuple[
    contextlib.AbstractContextManager[list[subprocess.Popen[bytes]]],
    Callable[[Sequence[subprocess.Popen[bytes]]], float],
]:
    """The worker processes to start (`wiggle worker`, or --worker-command through the shell),
    and the function that reads their CPU seconds."""
    if args.worker_command:
        envs = [
            {
                "WIGGLE_ADDRESS": f"127.0.0.1:{ports[i % len(ports)]}",
                "WIGGLE_BENCH_QUEUE": QUEUE,
                "WIGGLE_BENCH_CONCURRENCY": str(args.concurrency),
                "WIGGLE_BENCH_WORKER": str(i),
                **env,
            }
            for i in range(args.workers)
        ]
        return running_shell(args.worker_command, envs), tree_cpu_seconds
    commands = [
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
    return running(commands, env), cpu_seconds


def _alive(procs: Sequence[subprocess.Popen[bytes]]) -> Callable[[], None]:
    """A check for the closed loop: every worker process is still running (one that exited
    would leave its share of the instances waiting until --timeout)."""

    def check() -> None:
        for i, proc in enumerate(procs):
            code = proc.poll()
            if code is not None:
                raise RuntimeError(f"worker process {i} exited with code {code} during the run")

    return check


def _split(spent: dict[str, float], prefix: str) -> dict[str, float]:
    return {k.removeprefix(prefix): v for k, v in spent.items() if k.startswith(prefix)}


def run_mode(
    args: argparse.Namespace, url: str, mode: str, env: dict[str, str] | None = None
) -> ModeRun:
    """One mode's run; `env` goes to every server and worker process (--tracing)."""
    env = env or {}
    is_pg = url.startswith("postgresql")
    ports = [free_port() for _ in range(args.servers)]
    metrics_ports = [free_port() for _ in ports] if args.rpcs else []
    servers = [
        ["server", "--database", url, "--address", f"127.0.0.1:{p}", "--log-level", "warning"]
        + (["--metrics-address", f"127.0.0.1:{metrics_ports[i]}"] if args.rpcs else [])
        for i, p in enumerate(ports)
    ]
    workers, worker_cpu = _workers(args, ports, env)
    address = f"127.0.0.1:{ports[0]}"
    warm: list[Outcome] = []
    measured: list[Outcome] = []
    failure: str | None = None
    spent: dict[str, float] | None = None
    with running(servers, env) as server_procs:
        for port in ports:
            wait_serving(f"127.0.0.1:{port}")
        with Client(address) as client:
            flow = client.deploy(flow_source(mode, args.steps).encode())
            if args.history:
                _fill_history(url, flow.version, args.steps, args.history)
            with workers as worker_procs:
                try:
                    warm = drive(
                        client, flow.name, args.warmup, args.inflight,
                        _input_for(args, warmup=True), args.timeout, _alive(worker_procs),
                    )  # fmt: skip
                    if is_pg:
                        time.sleep(args.settle)  # the warm-up's backends publish their counters
                    calls0 = settled_server_counts(metrics_ports) if args.rpcs else {}
                    before = pg_counters(url) if is_pg else None
                    cpu0 = cpu_seconds(server_procs), worker_cpu(worker_procs)
                    driver0 = time.process_time()
                    started = time.perf_counter()
                    measured = drive(
                        client, flow.name, args.instances, args.inflight,
                        _input_for(args, warmup=False), args.timeout, _alive(worker_procs),
                    )  # fmt: skip
                    seconds = time.perf_counter() - started
                    driver_cpu = time.process_time() - driver0
                    cpu1 = cpu_seconds(server_procs), worker_cpu(worker_procs)
                    if args.rpcs:
                        calls1 = settled_server_counts(metrics_ports)
                        spent = {k: v - calls0.get(k, 0.0) for k, v in calls1.items()}
                except Exception as exc:  # a lost instance, a refused start: no figure
                    failure = f"the closed loop stopped: {type(exc).__name__}: {exc}"
    # Every server and worker has exited: their backends have published their counters.
    after: PgCounters | None = None
    if is_pg and failure is None:
        wait_disconnected(url)
        after = pg_counters(url)
    ids = [o.instance_id for o in warm + measured]
    found = verify(url, ids, {"n": args.steps}, step_nodes(args.steps)) if ids else []
    if failure is not None:
        found.insert(0, failure)
    if found:
        return ModeRun(mode, problems=found)
    latencies = [o.latency_s * 1000 for o in measured]
    figures = Figures(
        mode=mode,
        instances=len(measured),
        steps=args.steps,
        seconds=seconds,
        p50_ms=percentile(latencies, 50),
        p99_ms=percentile(latencies, 99),
        commits=after.commits - before.commits if after and before else None,
        wal_syncs=after.wal_syncs - before.wal_syncs if after and before else None,
        pg_cpu_s=(
            after.cpu_s - before.cpu_s
            if after and before and after.cpu_s is not None and before.cpu_s is not None
            else None
        ),
        server_cpu_s=cpu1[0] - cpu0[0],
        worker_cpu_s=cpu1[1] - cpu0[1],
        driver_cpu_s=driver_cpu,
        tracing=bool(env),
        rpcs=_split(spent, "rpc ") if spent is not None else None,
        transactions=_split(spent, "transactions ") if spent is not None else None,
    )
    return ModeRun(mode, figures=figures)


def _modes(text: str) -> list[str]:
    modes = [m.strip().upper() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise SystemExit(
            f"wiggle bench: --modes takes a comma-separated list of {', '.join(MODES)}"
            + (f" (not {', '.join(unknown)})" if unknown else "")
        )
    return modes


def _check(args: argparse.Namespace) -> None:
    for name in ("instances", "steps", "workers", "concurrency", "servers", "inflight"):
        if getattr(args, name) < 1:
            raise SystemExit(f"wiggle bench: --{name} must be at least 1")
    for name in ("warmup", "history"):
        if getattr(args, name) < 0:
            raise SystemExit(f"wiggle bench: --{name} must not be negative")
    if args.settle < 0 or args.timeout <= 0:
        raise SystemExit("wiggle bench: --settle must not be negative, --timeout must be positive")


def _config(args: argparse.Namespace, modes: list[str]) -> dict[str, Any]:
    return {
        "modes": modes,
        "steps": args.steps,
        "instances": args.instances,
        "warmup": args.warmup,
        "inflight": args.inflight,
        "servers": args.servers,
        "workers": args.workers,
        "concurrency": args.concurrency,
        "history": args.history,
        "settle_s": args.settle,
        "database": args.database if args.database in ("postgres", "sqlite") else "url",
        "worker_command": args.worker_command or None,
        "rpcs": args.rpcs,
        "tracing": args.tracing,
    }


def run(args: argparse.Namespace) -> int:
    modes = _modes(args.modes)
    _check(args)
    try:
        return _run(args, modes)
    except ModuleNotFoundError as exc:
        if exc.name != "pgserver":
            raise
        print(
            "wiggle bench: --database postgres needs the pgserver package (pip install "
            "pgserver), or WIGGLE_TEST_POSTGRES_URL naming a server to create databases on",
            file=sys.stderr,
        )
    except (sa.exc.SQLAlchemyError, TimeoutError) as exc:
        # A database that cannot be reached, a server that never answered: no figure, no
        # traceback.
        detail = getattr(exc, "orig", None) or exc
        print(f"wiggle bench: {type(exc).__name__}: {detail}", file=sys.stderr)
    return 2


def _run(args: argparse.Namespace, modes: list[str]) -> int:
    config = _config(args, modes)
    runs: list[ModeRun] = []
    with _databases(args.database) as database_for:
        for mode, traced in [(m, t) for m in modes for t in runs_of(args.tracing)]:
            with database_for(mode) as url, exporting(traced) as (env, received):
                if not runs:
                    settings = pg_settings(url) if url.startswith("postgresql") else None
                    config["postgres_settings"] = settings
                    if not args.json:
                        _introduce(args, url, settings)
                result = run_mode(args, url, mode, env)
                spans = received()  # every process has exited: its last batch is in
            runs.append(result)
            if result.figures is not None and not args.json:
                print(row(result.figures), flush=True)
                line = counts(result.figures)
                if line is not None:
                    print(line, flush=True)
                before = runs[-2].figures if len(runs) > 1 else None
                if traced and args.tracing == "both" and before is not None:
                    instances = args.warmup + args.instances
                    print(overhead(before, result.figures, spans, instances), flush=True)
            if result.problems:
                _refuse(result)
                break
    if not args.json and runs and not any(r.problems for r in runs):
        print(
            f"verified from the database: in every mode, all {args.warmup + args.instances} "
            f'instances COMPLETED with {{"n": {args.steps}}} and one step_completed event per '
            "step node"
        )
    if args.json:
        document = {
            "config": config,
            "runs": [r.figures.as_json() for r in runs if r.figures is not None],
            "failed": [{"mode": r.mode, "problems": r.problems} for r in runs if r.problems],
        }
        sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode() + "\n")
    return 1 if any(r.problems for r in runs) else 0


def _introduce(args: argparse.Namespace, url: str, settings: str | None) -> None:
    """The run's shape (and PostgreSQL's durability settings), before the table's header."""
    where = args.database if args.database in ("postgres", "sqlite") else url.split("://")[0]
    if settings:
        where += " " + settings
    history = f", {args.history} finished instances of history" if args.history else ""
    command = f" ({args.worker_command})" if args.worker_command else ""
    print(
        f"linear {args.steps}-step flow, {args.instances} instances (+{args.warmup} warm-up), "
        f"{args.inflight} in flight, {args.servers} server(s), {args.workers} workers x "
        f"{args.concurrency}{command}, {where}{history}; CPU in ms per step"
    )
    print(HEADER, flush=True)


def _refuse(result: ModeRun) -> None:
    print(
        f"wiggle bench: {result.mode} failed verification; no figures for it:",
        file=sys.stderr,
    )
    for problem in result.problems:
        print(f"  {problem}", file=sys.stderr)
