"""Logging a failure that repeats: one line when it starts, one when it is over.

A loop that retries (the server's ticker and retention rounds, a worker's calls while its server
is away) would otherwise log every attempt: a 20 s database outage made 21 ERROR lines with 63
tracebacks. `Trouble` says when the failing starts (and again only when a different kind of
failure follows) and when it works again. An expected failure (the database or the server cannot
be reached right now) is one WARNING line with its message, once per episode; anything else is a
bug and gets its traceback, once per kind of exception while the episode lasts.
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["Trouble"]


class Trouble:
    """The episodes of one repeating failure, logged on `log`.

    `down` and `up` are the two lines, formatted with `why` (the failure, in one line) and
    `seconds` (how long it lasted). Thread-safe: many threads failing in one episode make one
    line."""

    def __init__(
        self,
        log: logging.Logger,
        *,
        down: str,
        up: str,
        expected: tuple[type[BaseException], ...] = (),
    ) -> None:
        self._log = log
        self._down = down
        self._up = up
        self._expected = expected
        self._lock = threading.Lock()
        self._since: float | None = None
        self._seen: set[type[BaseException] | None] = set()  # None: the expected failure

    def failed(self, exc: BaseException, why: str = "") -> None:
        """An attempt failed with `exc` (`why`: how to say it, by default its message)."""
        expected = isinstance(exc, self._expected)
        kind = None if expected else type(exc)
        with self._lock:
            if self._since is None:
                self._since = time.monotonic()
            if kind in self._seen:
                return
            self._seen.add(kind)
        if expected:
            self._log.warning(self._down.format(why=why or _one_line(exc)))
        else:
            why = f"{type(exc).__name__}: {why or _one_line(exc)}"
            self._log.error(self._down.format(why=why), exc_info=exc)

    def succeeded(self) -> None:
        """An attempt worked: the end of an episode, if one was under way."""
        if self._since is None:  # the common case, without taking the lock
            return
        with self._lock:
            since, self._since = self._since, None
            self._seen.clear()
        if since is not None:
            self._log.warning(self._up.format(seconds=time.monotonic() - since))

    @property
    def down(self) -> bool:
        return self._since is not None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
