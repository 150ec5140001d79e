"""A steady load of starts through one or more servers, for the failover scenarios: each start
carries a caller-chosen id and is sent again, with the same id, until it is answered, as a
client that must not lose a start does. What it records is the outage as the load saw it.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from typing import Any

from wiggle import errors
from wiggle.client import Client

__all__ = ["Load"]


class Load:
    """Starts instances (caller-chosen ids) round robin over flows and servers until stopped;
    a start that is not answered is sent again, with the same id, until it is."""

    def __init__(
        self,
        addresses: list[str],
        flows: list[tuple[str, str]],
        input: Any,
        *,
        prefix: str = "load",
        pause: float = 0.02,
    ) -> None:
        """`pause`: the time between one start answered and the next sent."""
        self.acked: list[tuple[str, float]] = []  # (instance, when it was answered)
        self.refused: list[float] = []  # when a start was not answered
        self.seen: Counter[str] = Counter()  # what the client was told instead, by error class
        self._stop = threading.Event()
        self._clients = [Client(a, retry_for=1.0) for a in addresses]
        self._flows = flows
        self._input = input
        self._prefix = prefix
        self._pause = pause
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        turns = itertools.cycle(itertools.product(self._clients, self._flows))
        for n in itertools.count():
            if self._stop.is_set():
                return
            client, (name, version) = next(turns)
            instance = f"{self._prefix}-{n:05d}"
            while not self._stop.is_set():
                try:
                    client.start(name, self._input, version=version, instance_id=instance)
                except errors.WiggleError as exc:  # the database is away: the same start again
                    self.refused.append(time.monotonic())
                    self.seen[type(exc).__name__] += 1
                    time.sleep(0.1)
                    continue
                self.acked.append((instance, time.monotonic()))
                break
            time.sleep(self._pause)

    def refused_since(self, moment: float) -> list[float]:
        return [t for t in list(self.refused) if t > moment]

    def answered_since(self, moment: float) -> list[float]:
        return [t for _, t in list(self.acked) if t > moment]

    def outage(self, killed_at: float) -> tuple[float, float]:
        """(when the first start after `killed_at` went unanswered, when the first one after
        that was answered): the outage as the load saw it."""
        down = self.refused_since(killed_at)[0]
        return down, self.answered_since(down)[0]

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(60)
        for client in self._clients:
            client.close()
        return [i for i, _ in self.acked]
