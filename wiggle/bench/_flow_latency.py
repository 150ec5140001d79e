"""One flow's result as fast as its commits allow: start to result with one instance in flight.

The workload of the peers harness at `PEERS_INFLIGHT=1`: a linear flow of `--steps` tasks (the
throughput benchmark's flow, each step `input + 1`), one `wiggle server` and, as the harness's
slot runs them, `--workers` (4) `wiggle worker` processes of `--concurrency` (16) slots over one
database, and this process starting an instance and waiting for its result
through WaitInstance (`Client.wait`), one at a time. Every result is checked (`n` equals the
number of steps). Figures per mode: p50 and p99 in ms, and p50 per step; and what an instance
costs, counted over the measured instances: the server's RPCs by method and its transactions
(from its metrics endpoint), PostgreSQL's commits, and the CPU time of each process per step
(server, worker, this client, and every PostgreSQL process) — counts that hold from run to run
where times do not.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from wiggle._postgres import create_database, drop_database, postgres_server
from wiggle.bench._counters import cpu_seconds, pg_counters, server_counts
from wiggle.bench._processes import free_port, running, wait_serving
from wiggle.bench._throughput import MODES, flow_source
from wiggle.client import Client

__all__ = ["measure_flows"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class _Stack:
    """What one measurement runs on: the client, the processes, the database and its metrics.
    Embedded (`server` and `worker` empty): node, worker and client are this process, and
    `start` hands the first task to its worker (wiggle.embedded.Engine.start)."""

    client: Client
    server: list[subprocess.Popen[bytes]]
    worker: list[subprocess.Popen[bytes]]
    metrics_port: int
    url: str
    postgres: bool
    start: Callable[[str, Any], Any] | None = None

    def reading(self) -> dict[str, float]:
        """Every counter at this moment: RPCs (in process: calls) and transactions (server
        metrics), CPU seconds per process, and on PostgreSQL its commits and CPU."""
        got: dict[str, float] = dict(server_counts(self.metrics_port))
        if self.start is not None:
            got["cpu embedded"] = time.process_time()
        else:
            got["cpu server"] = cpu_seconds(self.server)
            got["cpu worker"] = cpu_seconds(self.worker)
            got["cpu client"] = time.process_time()
        if self.postgres:
            pg = pg_counters(self.url)
            got["commits"] = pg.commits
            if pg.cpu_s is not None:
                got["cpu postgres"] = pg.cpu_s
        return got


def _settled(stack: _Stack, within_s: float = 2.0) -> dict[str, float]:
    """A reading taken once the server has answered its last calls. The server counts a call
    when it answers it, and the commit of an instance's last report wakes the client's
    WaitInstance before that report's own call is answered: a reading taken at once can miss
    it (seen on a loaded machine). Read until two readings 50 ms apart count the same calls
    (long polls aside: an idle worker's poll may end at any moment)."""
    deadline = time.monotonic() + within_s
    last = stack.reading()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = stack.reading()
        if _calls(now) == _calls(last):
            return now
        last = now
    return last


def _calls(reading: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in reading.items() if k.startswith("rpc ") and k != "rpc PollTasks"}


def _one_mode(stack: _Stack, mode: str, steps: int, count: int, warmup: int) -> dict[str, Any]:
    client = stack.client
    flow = client.deploy(flow_source(mode, steps).encode()).name
    latencies: list[float] = []
    before: dict[str, float] = {}
    for i in range(warmup + count):
        if i == warmup:
            before = _settled(stack)  # the warm-up's last report answered and counted
        begun = time.perf_counter()
        started = (stack.start or client.start)(flow, {"n": 0})
        view = client.wait(started.instance_id, timeout=60)
        took = (time.perf_counter() - begun) * 1000
        if view.status != "COMPLETED" or view.context != {"n": steps}:
            raise RuntimeError(
                f"{mode}: instance {view.instance_id} ended {view.status} {view.context}"
            )
        if i >= warmup:
            latencies.append(took)
    after = _settled(stack)
    spent = {k: after[k] - before.get(k, 0.0) for k in after}
    p50 = statistics.median(latencies)
    return {
        "mode": mode,
        "steps": steps,
        "instances": count,
        "p50_ms": round(p50, 2),
        "p99_ms": round(_pct(latencies, 0.99), 2),
        "per_step_ms": round(p50 / steps, 3),
        "per_instance": {
            k: round(v / count, 2) for k, v in sorted(spent.items()) if not k.startswith("cpu")
        },
        "cpu_ms_per_step": {
            k.removeprefix("cpu "): round(v * 1000 / (count * steps), 3)
            for k, v in sorted(spent.items())
            if k.startswith("cpu")
        },
    }


def _combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One mode's rounds as one row: the median p50 and p99 (times move between runs on a
    shared machine), the counts and CPU averaged (they hold), and every round's own figures."""
    first = runs[0]
    p50 = statistics.median(r["p50_ms"] for r in runs)

    def mean_of(key: str) -> dict[str, float]:
        # A counter first used in a later round is missing from the earlier ones: 0 there.
        keys = runs[-1][key]
        return {k: round(statistics.mean(r[key].get(k, 0.0) for r in runs), 3) for k in keys}

    return {
        **first,
        "p50_ms": round(p50, 2),
        "p99_ms": round(statistics.median(r["p99_ms"] for r in runs), 2),
        "per_step_ms": round(p50 / first["steps"], 3),
        "per_instance": mean_of("per_instance"),
        "cpu_ms_per_step": mean_of("cpu_ms_per_step"),
        "rounds": [{"p50_ms": r["p50_ms"], "p99_ms": r["p99_ms"]} for r in runs],
    }


def _embedded(stack: contextlib.ExitStack, url: str, args: argparse.Namespace) -> _Stack:
    """The node, a worker of `--concurrency` slots and the client, all in this process."""
    from wiggle.embedded import Engine
    from wiggle.worker import load_handlers

    metrics_port = free_port()
    node = stack.enter_context(
        Engine(
            url,
            activities=load_handlers("wiggle.bench._handlers"),
            concurrency=args.concurrency,
            metrics_address=f"127.0.0.1:{metrics_port}",
        )
    )
    return _Stack(
        node.client, [], [], metrics_port, url, args.database == "postgres", start=node.start
    )


def measure_flows(args: argparse.Namespace) -> int:
    modes = [m.upper() for m in (args.modes or MODES)]
    with contextlib.ExitStack() as stack:
        if args.database == "postgres":
            base = stack.enter_context(postgres_server())
            url = create_database(base, prefix="wiggle_bench")
            stack.callback(drop_database, url)
        else:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/latency.db"
        if args.embedded:
            return _report(args, modes, _embedded(stack, url, args))
        address = f"127.0.0.1:{free_port()}"
        metrics_port = free_port()
        server = [
            "server",
            "--database",
            url,
            "--address",
            address,
            "--metrics-address",
            f"127.0.0.1:{metrics_port}",
            "--log-level",
            "warning",
        ]
        server_procs = stack.enter_context(running([server]))
        wait_serving(address)
        worker = [
            "worker",
            "--handlers",
            "wiggle.bench._handlers",
            "--address",
            address,
            "--concurrency",
            str(args.concurrency),
            "--log-level",
            "warning",
        ]
        worker_procs = stack.enter_context(running([worker] * max(1, args.workers)))
        client = stack.enter_context(Client(address))
        time.sleep(1.0)  # the worker's first poll
        on = _Stack(
            client,
            server_procs,
            worker_procs,
            metrics_port,
            url,
            postgres=args.database == "postgres",
        )
        return _report(args, modes, on)


def _report(args: argparse.Namespace, modes: list[str], on: _Stack) -> int:
    """Measure each mode on `on` over the rounds, then print (or --json) the figures."""
    rounds = max(1, args.rounds)
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    for n in range(rounds):
        # Each round starts with another mode, so no mode always runs first or last.
        for m in modes[n % len(modes) :] + modes[: n % len(modes)]:
            runs[m].append(_one_mode(on, m, args.steps, args.instances, args.warmup))
    rows = [_combined(runs[m]) for m in modes]
    if args.json:
        shape = {
            "layout": "embedded" if args.embedded else "remote",
            "workers": 0 if args.embedded else args.workers,
            "concurrency": args.concurrency,
            "rounds": rounds,
        }
        print(orjson.dumps({"database": args.database, **shape, "rows": rows}).decode())
        return 0
    layout = (
        f"embedded (node, a worker of {args.concurrency} slots and the client in one process, "
        "no socket)"
        if args.embedded
        else f"{args.workers} worker(s) of {args.concurrency} slots"
    )
    print(
        f"one instance in flight, {args.steps} steps, {args.instances} instances per mode "
        f"(+{args.warmup} warm-up), {args.database}, {layout}, start to result through "
        "WaitInstance"
    )
    if rounds > 1:
        print(f"medians of {rounds} rounds (each mode's rounds interleaved with the others')")
    print(f"{'mode':<12} {'p50 ms':>8} {'p99 ms':>8} {'per step':>9}  p50 of each round")
    for r in rows:
        each = ", ".join(f"{x['p50_ms']:.1f}" for x in r["rounds"])
        print(
            f"{r['mode']:<12} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['per_step_ms']:>8.3f}"
            f"  {each}"
        )
    print("\nper instance (measured instances only), and CPU ms per step by process:")
    for r in rows:
        counts = ", ".join(f"{k} {v:g}" for k, v in r["per_instance"].items())
        cpu = ", ".join(f"{k} {v:.3f}" for k, v in r["cpu_ms_per_step"].items())
        print(f"{r['mode']:<12} {counts}\n{'':<12} cpu: {cpu}")
    return 0
