"""The background duty loop: leader election, due timers, expired leases.

Every server process runs one; the engine elects a leader over a table, so on a shared
database the duties happen once however many servers tick.
"""

from __future__ import annotations

import logging
import threading

from wiggle._trouble import Trouble
from wiggle.engine import Engine
from wiggle.errors import Unavailable

__all__ = ["Ticker"]

_log = logging.getLogger("wiggle.server")

#: Upper bound on a sleep: another server may create earlier timers, and a standby must notice
#: a dead leader, neither of which this process hears about. Timers armed in this process end
#: the sleep at once (Engine.wait_for_timers).
MAX_SLEEP_S = 1.0
MIN_SLEEP_S = 0.01
ERROR_SLEEP_S = 1.0


class Ticker:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wiggle-ticker", daemon=True)
        # A database outage is one line when it starts and one when it is over; anything else
        # is a bug, and its traceback is logged (once per kind while it repeats).
        self.trouble = Trouble(
            _log,
            down=f"tick failed ({{why}}); retrying every {ERROR_SLEEP_S:.0f} s",
            up="ticking again after {seconds:.1f} s",
            expected=(Unavailable,),
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._engine.wake()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                done = self._engine.tick()
                delay = 0.0 if done else self._engine.next_wakeup_s()
            except Exception as exc:
                # Stalled commits are the engine's to say, once; a tick refused for them is
                # not another condition.
                if not (isinstance(exc, Unavailable) and self._engine.commits_stalled):
                    self.trouble.failed(exc)
                delay = ERROR_SLEEP_S
            else:
                self.trouble.succeeded()
            # Work done means more may be due at once: go round again without sleeping.
            if delay > 0 and not self._stop.is_set():
                self._engine.wait_for_timers(min(max(delay, MIN_SLEEP_S), MAX_SLEEP_S))
