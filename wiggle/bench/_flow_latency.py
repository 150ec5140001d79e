"""One flow's result as fast as its commits allow: start to result with one instance in flight.

The workload of the peers harness at `PEERS_INFLIGHT=1`: a linear flow of `--steps` tasks (the
throughput benchmark's flow, each step `input + 1`), one `wiggle server` and one `wiggle worker`
process over one database, and this process starting an instance and waiting for its result
through WaitInstance (`Client.wait`), one at a time. Every result is checked (`n` equals the
number of steps). Figures per mode: p50 and p99 in ms, and p50 per step.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from typing import Any

import orjson

from wiggle._postgres import create_database, drop_database, postgres_server
from wiggle.bench._processes import free_port, running, wait_serving
from wiggle.bench._throughput import MODES, flow_source
from wiggle.client import Client

__all__ = ["measure_flows"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _one_mode(client: Client, mode: str, steps: int, count: int, warmup: int) -> dict[str, Any]:
    flow = client.deploy(flow_source(mode, steps).encode()).name
    latencies: list[float] = []
    for i in range(warmup + count):
        begun = time.perf_counter()
        started = client.start(flow, {"n": 0})
        view = client.wait(started.instance_id, timeout=60)
        took = (time.perf_counter() - begun) * 1000
        if view.status != "COMPLETED" or view.context != {"n": steps}:
            raise RuntimeError(
                f"{mode}: instance {view.instance_id} ended {view.status} {view.context}"
            )
        if i >= warmup:
            latencies.append(took)
    p50 = statistics.median(latencies)
    return {
        "mode": mode,
        "steps": steps,
        "instances": count,
        "p50_ms": round(p50, 2),
        "p99_ms": round(_pct(latencies, 0.99), 2),
        "per_step_ms": round(p50 / steps, 3),
    }


def measure_flows(args: argparse.Namespace) -> int:
    modes = [m.upper() for m in (args.modes or MODES)]
    with contextlib.ExitStack() as stack:
        if args.database == "postgres":
            base = stack.enter_context(postgres_server())
            url = create_database(base, prefix="wiggle_bench")
            stack.callback(drop_database, url)
        else:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/latency.db"
        address = f"127.0.0.1:{free_port()}"
        stack.enter_context(
            running([["server", "--database", url, "--address", address, "--log-level", "warning"]])
        )
        wait_serving(address)
        worker = [
            "worker",
            "--handlers",
            "wiggle.bench._handlers",
            "--address",
            address,
            "--concurrency",
            "16",
            "--log-level",
            "warning",
        ]
        stack.enter_context(running([worker]))
        client = stack.enter_context(Client(address))
        time.sleep(1.0)  # the worker's first poll
        rows = [_one_mode(client, m, args.steps, args.instances, args.warmup) for m in modes]
    if args.json:
        print(orjson.dumps({"database": args.database, "rows": rows}).decode())
        return 0
    print(
        f"one instance in flight, {args.steps} steps, {args.instances} instances per mode "
        f"(+{args.warmup} warm-up), {args.database}, start to result through WaitInstance"
    )
    print(f"{'mode':<12} {'p50 ms':>8} {'p99 ms':>8} {'per step':>9}")
    for r in rows:
        print(f"{r['mode']:<12} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['per_step_ms']:>8.3f}")
    return 0
