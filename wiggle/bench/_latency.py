"""Start-to-first-step latency, with and without eager dispatch (docs/worker-protocol.md).

A one-step flow; a worker in this process; each start is timed from the StartInstance call to the
moment the handler begins. Without eager dispatch the task reaches the worker through its long
poll; with it, the task comes back in the start response and runs on a slot reserved beforehand.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import threading
import time
from typing import Any

from wiggle._postgres import create_database, drop_database, postgres_server
from wiggle.bench._processes import free_port, running, wait_serving
from wiggle.client import Client
from wiggle.worker import Registry, Worker, step

__all__ = ["run"]

FLOW = b"wiggle: 1\nname: bench-first-step\nexecution: SERVER\nsteps:\n  - task: first\n"


def _measure(
    client: Client, worker: Worker, seen: dict[str, float], starts: int, eager: bool
) -> list[float]:
    latencies = []
    for i in range(starts):
        begun = time.perf_counter()
        started = client.start("bench-first-step", {"i": i}, worker=worker if eager else None)
        deadline = begun + 30
        while started.instance_id not in seen:
            if time.perf_counter() > deadline:
                raise TimeoutError("the first step never ran")
            time.sleep(0.0002)
        latencies.append((seen[started.instance_id] - begun) * 1000)
    return latencies


def _summary(label: str, values: list[float]) -> str:
    values = sorted(values)
    p90 = values[int(0.9 * (len(values) - 1))]
    return f"{label:<14} median {statistics.median(values):7.2f} ms   p90 {p90:7.2f} ms"


def run(args: argparse.Namespace) -> int:
    if args.steps:
        from wiggle.bench._flow_latency import measure_flows

        return measure_flows(args)
    seen: dict[str, float] = {}
    lock = threading.Lock()
    registry = Registry()

    @registry.activity("first")
    def first(ctx: Any) -> Any:
        with lock:
            seen[step().instance_id] = time.perf_counter()
        return ctx

    with contextlib.ExitStack() as stack:
        if args.database == "postgres":
            base = stack.enter_context(postgres_server())
            url = create_database(base, prefix="wiggle_bench")
            stack.callback(drop_database, url)
        else:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/latency.db"
        port = free_port()
        address = f"127.0.0.1:{port}"
        stack.enter_context(
            running([["server", "--database", url, "--address", address, "--log-level", "warning"]])
        )
        wait_serving(address)
        client = stack.enter_context(Client(address))
        client.deploy(FLOW)
        worker = Worker(address, registry=registry, concurrency=4)
        worker.start()
        stack.callback(worker.stop)
        time.sleep(1.0)
        _measure(client, worker, seen, 5, eager=False)  # warm both paths up
        _measure(client, worker, seen, 5, eager=True)
        print(f"start-to-first-step latency, {args.starts} starts each, {args.database}")
        print(_summary("long poll", _measure(client, worker, seen, args.starts, eager=False)))
        print(_summary("eager", _measure(client, worker, seen, args.starts, eager=True)))
    return 0
