"""The clock an engine reads: the database's own (production), or one it is given (tests).

Every time the engine uses (lease expiries, timers, the leader's term, event times) is read by
SQL from `Database.now_sql`, inlined in the statements. Given a `Clock`, that expression reads
the clock instead: on SQLite a function `wiggle_now()` registered on each connection, on
PostgreSQL a session setting refreshed at the start of every transaction. The statements stay
exactly as they are, so a test with a `VirtualClock` runs the same SQL as production.

A `VirtualClock` stands still until it is moved. Moving it tells whoever watches it (an engine
wakes its ticker), so a server's ticker fires what fell due at once instead of at its next
routine wake-up; an in-process driver simply calls `Engine.tick()` after moving it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

__all__ = ["DEFAULT_START_MS", "Clock", "VirtualClock"]

#: Where a VirtualClock starts unless told otherwise: 2026-01-01T00:00:00Z, so runs repeat.
DEFAULT_START_MS = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)


@runtime_checkable
class Clock(Protocol):
    """What an engine needs of a clock it is given."""

    def now_ms(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback` (no arguments) after every change of the time."""
        ...

    def unwatch(self, callback: Callable[[], None]) -> None: ...


class VirtualClock:
    """A clock that moves only when told: `advance(ms)` or `set(ms)`. Thread-safe."""

    def __init__(self, start_ms: int = DEFAULT_START_MS) -> None:
        self._lock = threading.Lock()
        self._now = int(start_ms)
        self._watchers: list[Callable[[], None]] = []

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        """Move forward by `ms` (not negative); returns the new time."""
        if ms < 0:
            raise ValueError(f"a clock cannot advance by a negative amount ({ms} ms)")
        with self._lock:
            self._now += int(ms)
            now = self._now
        self._changed()
        return now

    def set(self, ms: int) -> None:
        """Jump to `ms`, forwards or backwards (a runner reusing one engine for many scenarios
        sets each scenario's start)."""
        with self._lock:
            self._now = int(ms)
        self._changed()

    def watch(self, callback: Callable[[], None]) -> None:
        with self._lock:
            self._watchers.append(callback)

    def unwatch(self, callback: Callable[[], None]) -> None:
        with self._lock:
            if callback in self._watchers:
                self._watchers.remove(callback)

    def _changed(self) -> None:
        with self._lock:
            watchers = list(self._watchers)
        for callback in watchers:
            callback()

    def __repr__(self) -> str:
        at = datetime.fromtimestamp(self.now_ms() / 1000, tz=UTC).isoformat()
        return f"VirtualClock({at})"
