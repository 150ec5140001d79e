"""A worker process for the crash and drain tests: `python crash_worker.py ADDRESS LOG [SLOW_S]`.

Every activity appends `<instance> <node> <attempt> <pid>` to LOG before it works, so the test
can count executions per step across processes. Steps named `slow*` sleep SLOW_S seconds (the
window in which the test kills or stops the process). SIGTERM drains (Worker.run).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable

from wiggle.worker import Registry, Worker, step


def main() -> None:
    address, log_path = sys.argv[1], sys.argv[2]
    slow_s = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    logging.basicConfig(level=logging.WARNING, format="crash_worker %(levelname)s: %(message)s")
    registry = Registry()

    def record() -> None:
        info = step()
        line = f"{info.instance_id} {info.node_id} {info.attempt} {os.getpid()}\n"
        # One write on an O_APPEND descriptor: lines from two processes never interleave.
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def make(name: str) -> Callable[[dict[str, int]], dict[str, int]]:
        def fn(ctx: dict[str, int]) -> dict[str, int]:
            record()
            if name.startswith("slow"):
                time.sleep(slow_s)
            return {**ctx, name: ctx.get(name, 0) + 1}

        return fn

    for name in ("s0", "s1", "s2", "s3", "slow4", "s5"):
        registry.register(make(name), name)
    worker = Worker(address, registry=registry, concurrency=8, poll_wait_ms=1000)
    print("ready", flush=True)
    worker.run()
    print("drained", flush=True)


if __name__ == "__main__":
    main()
