"""How long planning a migration takes as the number of live instances grows.

N instances of a flow wait at an `await` (started directly on the engine: no worker needed), a
second version adds a step after it, and `plan_migration` (what `wiggle migrate plan` runs on the
server) is timed over all of them. Every planned instance is checked to migrate to the right
node. Figures: seconds per plan and instances planned per second, best of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import time

from wiggle._postgres import create_database, drop_database, postgres_server
from wiggle.compiler import load_flow
from wiggle.engine import Engine

__all__ = ["run"]

V1 = (
    "wiggle: 1\nname: bench-plan\nsteps:\n  - task: prepare\n  - await: go\n"
    "    timeout: 30d\n  - task: book\n"
)
V2 = V1.replace("  - task: book\n", "  - task: check\n  - task: book\n")


def _fill(engine: Engine, count: int) -> None:
    """`count` instances parked at the await: started, their first step completed."""
    for at in range(0, count, 200):
        for i in range(at, min(at + 200, count)):
            engine.start("bench-plan", {"i": i})
        for task in engine.poll(["default"], "bench-filler", 200):
            engine.complete(task.task_id, task.lease, task.input)


def run(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        if args.database == "postgres":
            base = stack.enter_context(postgres_server())
            url = create_database(base, prefix="wiggle_bench")
            stack.callback(drop_database, url)
        else:
            url = f"sqlite:///{stack.enter_context(tempfile.TemporaryDirectory())}/plan.db"
        engine = Engine(url)
        stack.callback(engine.close)
        engine.register(load_flow(V1))
        began = time.perf_counter()
        _fill(engine, args.instances)
        filled = time.perf_counter() - began
        v2 = load_flow(V2)
        engine.register(v2)
        times = []
        for _ in range(args.rounds):
            began = time.perf_counter()
            plan = engine.plan_migration("bench-plan", v2.version)
            times.append(time.perf_counter() - began)
            entries = plan["instances"]
            wrong = [
                e["instance_id"]
                for e in entries
                if e["outcome"] != "migrate" or [m["to"] for m in e["moves"]] != ["go"]
            ]
            if len(entries) != args.instances or wrong:
                print(f"plan is wrong: {len(entries)} entries, {len(wrong)} not to `go`")
                return 1
        best = min(times)
        size = len(str(plan)) / 1e6
        print(
            f"migration plan, {args.instances} live instances at an await, {args.database} "
            f"(filled in {filled:.1f} s)"
        )
        print(
            f"plan: best {best:.2f} s of {args.rounds} ({args.instances / best:,.0f} instances/s), "
            f"worst {max(times):.2f} s; plan document {size:.1f} MB"
        )
    return 0
