"""Many threads, two engines, one database: exactly-once dispatch and no lock errors."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter

from wiggle.compiler import load_flow
from wiggle.engine import Engine, InstanceStatus
from wiggle.errors import InstanceNotRunning, SignalNotAwaited

LINEAR = load_flow("wiggle: 1\nname: three\nsteps:\n  - task: a\n  - task: b\n  - task: c\n")
FANOUT = load_flow(
    "wiggle: 1\nname: fan\nsteps:\n  - for_each: /xs\n    steps: [{task: a}]\n"
    "    combine: merge\n  - task: c\n"
)


def test_two_engines_racing_claims_never_share_a_task(database_url):
    engines = [Engine(database_url, node_id=f"e{i}") for i in range(2)]
    try:
        engines[0].register(LINEAR)
        engines[1].register(FANOUT)
        ids = [engines[0].start("three", {"n": i}).instance_id for i in range(60)]
        ids += [engines[1].start("fan", {"xs": list(range(5))}).instance_id for _ in range(10)]
        held: dict[str, str] = {}  # task id -> worker currently holding its lease
        done: Counter[tuple[str, str]] = Counter()  # (task id, node) completed
        guard = threading.Lock()
        errors: list[str] = []
        stop = threading.Event()

        def worker(engine: Engine, name: str) -> None:
            while not stop.is_set():
                tasks = engine.poll(["default"], name, 8)
                for t in tasks:
                    with guard:
                        if t.task_id in held:
                            errors.append(f"{t.task_id} leased to {held[t.task_id]} and {name}")
                        held[t.task_id] = name
                for t in tasks:
                    with guard:
                        del held[t.task_id]
                        done[(t.task_id, t.node_id)] += 1
                    out = t.input["results"] if t.activity == "merge" else t.input
                    engine.complete(t.task_id, t.lease, out)
                if not tasks:
                    engine.wait_for_tasks(["default"], 0.05)

        threads = [
            threading.Thread(target=worker, args=(e, f"{e.node_id}-w{i}"))
            for e in engines
            for i in range(4)
        ]
        for t in threads:
            t.start()
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                running = engines[0].list_instances(status=InstanceStatus.RUNNING)
                if not running:
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert errors == []
        statuses = Counter(engines[0].describe(i).status for i in ids)
        assert statuses == {InstanceStatus.COMPLETED: 70}
        assert set(done.values()) == {1}
        assert len(done) == 60 * 3 + 10 * (1 + 5 + 1 + 1) - 10  # tokens are reused along a path
    finally:
        for e in engines:
            e.close()


def test_concurrent_writers_never_see_lock_errors(database_url):
    """Threads and two engines writing at once (SQLite: one file, WAL, BEGIN IMMEDIATE)."""
    engines = [Engine(database_url, node_id=f"e{i}") for i in range(2)]
    try:
        engines[0].register(LINEAR)
        failures: list[BaseException] = []

        def starter(engine: Engine, k: int) -> None:
            try:
                for i in range(15):
                    r = engine.start("three", {"k": k, "i": i})
                    # Refused (the flow awaits nothing) once it holds the instance lock, or
                    # finished by the others first.
                    with contextlib.suppress(InstanceNotRunning, SignalNotAwaited):
                        engine.signal(r.instance_id, "noise", i)
                    for t in engine.poll(["default"], f"w{k}", 4):
                        engine.heartbeat(t.task_id, t.lease)
                        engine.complete(t.task_id, t.lease, t.input)
                    engine.tick()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=starter, args=(engines[k % 2], k)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
        assert len(engines[1].list_instances(limit=1000)) == 120
    finally:
        for e in engines:
            e.close()
