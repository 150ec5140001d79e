"""The retention duty: the leader prunes instances that finished longer ago than the setting.

Every server with a retention setting runs one of these threads, but only the process that
holds leadership (as of its ticker's last election) prunes, so a cluster prunes once. A round
runs every `interval_s`, batch by batch with a pause between batches so that pruning never
crowds out the server's own transactions; stopping the server ends a round at the next batch.
"""

from __future__ import annotations

import logging
import threading

from wiggle._trouble import Trouble
from wiggle.engine import Engine
from wiggle.errors import Unavailable

__all__ = ["Retention"]

_log = logging.getLogger("wiggle.server")

#: Seconds between two rounds: history accrues slowly, and a round that finds nothing costs one
#: indexed read.
INTERVAL_S = 60.0
#: Seconds between two batches of a round.
PAUSE_S = 0.1
BATCH = 200


class Retention:
    def __init__(
        self,
        engine: Engine,
        retention_ms: int,
        *,
        interval_s: float = INTERVAL_S,
        pause_s: float = PAUSE_S,
        batch: int = BATCH,
    ) -> None:
        self._engine = engine
        self._retention_ms = retention_ms
        self._interval_s = interval_s
        self._pause_s = pause_s
        self._batch = batch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wiggle-retention", daemon=True)
        self.rounds = 0  # rounds this process ran as the leader (tests wait on it)
        self.rounds_done = threading.Condition()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _between(self) -> bool:
        return not self._stop.wait(self._pause_s)

    def run_once(self) -> int:
        """One round if this process leads; the number of instances removed."""
        if not self._engine.is_leader:
            return 0
        result = self._engine.prune(self._retention_ms, batch=self._batch, between=self._between)
        if result.instances:
            _log.info(
                "retention: removed %d instances that finished before %d (%d events)",
                result.instances,
                result.cutoff_ms,
                result.events,
            )
        with self.rounds_done:
            self.rounds += 1
            self.rounds_done.notify_all()
        return result.instances

    def _run(self) -> None:
        trouble = Trouble(
            _log,
            down=f"retention round failed ({{why}}); trying again every {self._interval_s:.0f} s",
            up="retention rounds work again after {seconds:.1f} s",
            expected=(Unavailable,),
        )
        while not self._stop.wait(self._interval_s):
            try:
                self.run_once()
            except Exception as exc:
                trouble.failed(exc)
            else:
                trouble.succeeded()
