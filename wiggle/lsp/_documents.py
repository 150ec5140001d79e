"""The open documents' checks: when each runs, and the newest result of each.

A change does not check the document at once: the check starts after `debounce_s` without a
newer change, and while a check runs, the changes that arrive meanwhile are folded into one more
check of the newest text when it ends. A result is published only if the document is still at
the version that was checked (diagnostics of older text would point at the wrong places), so
typing faster than a check takes costs at most one check in flight and one waiting. Checks run
one at a time in a thread of their own: the server goes on answering requests meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from wiggle.lsp._analysis import Analyser, Analysis
from wiggle.lsp._kinds import Kind, kind_of

__all__ = ["Checks", "Snapshot"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Snapshot:
    """A document as the editor holds it now."""

    uri: str
    path: str
    version: int | None
    text: str

    @property
    def kind(self) -> Kind:
        return kind_of(self.path, self.text)


@dataclass
class _State:
    task: asyncio.Task[None] | None = None
    latest: Analysis | None = None
    changed_at: float = 0.0  # when the newest change arrived (perf_counter)


class Checks:
    def __init__(
        self,
        analyser: Analyser,
        snapshot: Callable[[str], Snapshot | None],
        publish: Callable[[Snapshot, Analysis], Awaitable[None]],
        *,
        debounce_s: float = 0.0,
    ) -> None:
        self.analyser = analyser
        self.snapshot = snapshot
        self.publish = publish
        self.debounce_s = debounce_s
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="wiggle-check")
        self._states: dict[str, _State] = {}

    def changed(self, uri: str) -> None:
        """The document at `uri` changed (or opened): check it soon."""
        state = self._states.setdefault(uri, _State())
        state.changed_at = time.perf_counter()
        if state.task is not None and not state.task.done():
            return  # the check in flight looks at the version again before publishing
        state.task = asyncio.ensure_future(self._run(uri, state))

    def closed(self, uri: str) -> None:
        state = self._states.pop(uri, None)
        if state is not None and state.task is not None:
            state.task.cancel()

    def open_uris(self) -> list[str]:
        return list(self._states)

    async def _run(self, uri: str, state: _State) -> None:
        try:
            await asyncio.sleep(self.debounce_s)
            while True:
                snap = self.snapshot(uri)
                if snap is None:
                    return
                analysis = await self.analyse(snap)
                state.latest = analysis
                now = self.snapshot(uri)
                if now is None or now.version != snap.version or now.text != snap.text:
                    await asyncio.sleep(self.debounce_s)
                    continue  # typed on meanwhile: check the newest text instead
                await self.publish(snap, analysis)
                _log.info(
                    "checked %s v%s in %.1f ms, published %.1f ms after the change arrived",
                    snap.path,
                    snap.version,
                    analysis.seconds * 1000,
                    (time.perf_counter() - state.changed_at) * 1000,
                )
                return
        except asyncio.CancelledError:
            raise
        except Exception:  # never let a failure end the server; the log says what it was
            _log.exception("checking %s failed", uri)

    async def analyse(self, snap: Snapshot) -> Analysis:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self.analyser.analyse, snap.kind, snap.path, snap.text
        )

    async def current(self, snap: Snapshot) -> Analysis:
        """An analysis of exactly `snap`'s text: the newest one when it is, else a new one."""
        state = self._states.get(snap.uri)
        if state is not None and state.latest is not None and state.latest.text == snap.text:
            return state.latest
        analysis = await self.analyse(snap)
        if state is not None:
            state.latest = analysis
        return analysis

    def latest(self, uri: str) -> Analysis | None:
        state = self._states.get(uri)
        return state.latest if state is not None else None

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
