#!/usr/bin/env python3
"""Peers-harness slot runner: Wiggle embedded (wiggle.embedded.Engine) on the seed workload.

The system under test is one process: the node over the database at --url, a worker of
--inflight slots running the benchmark's step (`bench_step` of `wiggle.bench._handlers`: its
input with n + 1), and --inflight driver threads, each starting an instance (`Engine.start`,
its first task handed straight to the worker) and waiting for its result (`Engine.wait`, the
node's WaitInstance called in process) before starting the next. No socket, no other process.
The flow is Wiggle's own benchmark flow (`wiggle.bench._throughput.flow_source`): --steps
tasks, `execution: --mode`. Input {"n": 0}, expected {"n": steps}.

Run by the slots beside it (bench/peers/slots/wiggle-embedded-*), through the harness:

    PEERS_SLOTS_DIR=bench/peers/slots PEERS_PIP_EXTRA="-e $PWD" bash ../shared/peers/run_all.sh

It needs the harness's `pg.py` (PEERS_DIR, which run_all.sh exports) and Wiggle importable (the
harness venv with Wiggle installed, or WIGGLE_PYTHON). client CPU is this one process's, all of
it (node, worker and drivers). Every instance is verified from Wiggle's tables; the one JSON
line is the harness's runner contract.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.environ.get("PEERS_DIR") or os.path.dirname(os.path.abspath(__file__)))
import pg  # (the harness's counters and output line: after PEERS_DIR is on the path)


def _drive(engine: Any, flow: str, count: int, inflight: int) -> tuple[list[Any], list[float]]:
    """`count` instances, `inflight` at a time: (status, context) of each, and each latency."""
    results: list[Any] = []
    latencies: list[float] = []
    lock = threading.Lock()
    left = [count]

    def loop() -> None:
        while True:
            with lock:
                if left[0] == 0:
                    return
                left[0] -= 1
            began = time.perf_counter()
            started = engine.start(flow, {"n": 0})
            view = engine.wait(started.instance_id, timeout=120)
            took = time.perf_counter() - began
            with lock:
                results.append((str(view.status), view.context))
                latencies.append(took)

    threads = [threading.Thread(target=loop) for _ in range(min(inflight, count))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, latencies


def _verify(url: str, total: int, steps: int) -> dict[str, Any]:
    """From Wiggle's tables: every instance COMPLETED with {"n": steps} and `steps` completed
    steps, one per step node."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        completed = conn.execute(
            "SELECT count(*) FROM wiggle_instances WHERE status = 'COMPLETED' "
            "AND context::jsonb = %s::jsonb",
            (json.dumps({"n": steps}),),
        ).fetchone()[0]
        whole = conn.execute(
            "SELECT count(*) FROM (SELECT i.id FROM wiggle_instances i JOIN wiggle_events e "
            "ON e.instance_id = i.id AND e.kind = 'step_completed' GROUP BY i.id "
            "HAVING count(*) = %s AND count(DISTINCT e.node_id) = %s) t",
            (steps, steps),
        ).fetchone()[0]
        instances = conn.execute("SELECT count(*) FROM wiggle_instances").fetchone()[0]
    return {
        "db_instances": instances,
        "db_result_ok": completed,
        "db_instances_with_all_steps": whole,
        "db_ok": instances == total == completed == whole,
    }


def main() -> int:
    parser = pg.bench_args(__doc__.splitlines()[0])
    parser.add_argument("--mode", default="SERVER", choices=("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"))
    args: argparse.Namespace = parser.parse_args()
    import wiggle
    from wiggle.bench._throughput import flow_source
    from wiggle.embedded import Engine
    from wiggle.worker import load_handlers

    window = pg.Window(args.url)
    with Engine(
        args.url,
        activities=load_handlers("wiggle.bench._handlers"),
        concurrency=max(16, args.inflight),
    ) as engine:
        flow = engine.deploy(flow_source(args.mode, args.steps).encode()).name
        warm, _ = _drive(engine, flow, args.warmup, args.inflight)
        window.begin()
        results, latencies = _drive(engine, flow, args.instances, args.inflight)
        window.done()
    counters = window.end()
    expect = {"n": args.steps}
    in_process = len(results) == args.instances and all(
        s == "COMPLETED" and c == expect for s, c in warm + results
    )
    db = _verify(args.url, args.warmup + args.instances, args.steps)
    config = f"mode={args.mode} embedded worker={max(16, args.inflight)} slots"
    pg.emit(
        "wiggle-embedded",
        wiggle.__version__,
        config,
        args,
        counters,
        latencies,
        verified=in_process and db["db_ok"],
        mode=args.mode,
        **db,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
