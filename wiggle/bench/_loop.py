"""The closed loop: N instances in flight, a new one started as soon as one ends.

Each driver thread starts an instance, waits for its end through `Client.wait` (one
WaitInstance long poll, answered when the instance stops RUNNING), records the start-to-end
latency and starts the next, until the run's count is used up. The loop never judges an outcome:
it hands every instance id, status and latency to the caller, which verifies them from the
database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wiggle.client import Client

__all__ = ["Outcome", "drive"]


@dataclass(frozen=True)
class Outcome:
    """One instance of the loop: its id, how it ended as the client saw it, and its latency."""

    instance_id: str
    status: str
    latency_s: float


def drive(
    client: Client,
    flow: str,
    count: int,
    inflight: int,
    input_for: Callable[[int], Any],
    timeout_s: float,
    check: Callable[[], None] | None = None,
) -> list[Outcome]:
    """Run `count` instances of `flow`, `inflight` at a time; `input_for(i)` is the i-th input.

    Raises the first error a driver met (a start refused, an instance still RUNNING after
    `timeout_s`): a loop that lost an instance has no figure to give. `check`, called twice a
    second while the loop runs, may raise to stop it sooner (a worker process that died); the
    drivers' pending waits end when their client closes.
    """
    lock = threading.Lock()
    next_index = [0]
    outcomes: list[Outcome] = []
    errors: list[BaseException] = []

    def take() -> int | None:
        with lock:
            if errors or next_index[0] >= count:
                return None
            next_index[0] += 1
            return next_index[0] - 1

    def loop() -> None:
        try:
            while (i := take()) is not None:
                begun = time.perf_counter()
                started = client.start(flow, input_for(i))
                view = client.wait(started.instance_id, timeout=timeout_s)
                latency = time.perf_counter() - begun
                with lock:
                    outcomes.append(Outcome(started.instance_id, str(view.status), latency))
        except BaseException as exc:  # surfaced below, in the caller's thread
            with lock:
                errors.append(exc)

    threads = [
        threading.Thread(target=loop, name=f"bench-driver-{n}", daemon=True)
        for n in range(max(0, min(inflight, count)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(None if check is None else 0.5)
            if check is not None:
                check()
    if errors:
        raise errors[0]
    return outcomes
