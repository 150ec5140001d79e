"""Code lens on a flow: its version, and what a server makes of it.

Always: the version of the text as it is now (`sha256:...`, the hash `wiggle hash` prints).
When a server address is configured (the client's `address` setting or WIGGLE_ADDRESS, with the
token and TLS settings every Wiggle client reads): whether that version is registered there,
and how many live (RUNNING) instances run older versions of the flow, with the command that
asks the server for the migration plan's summary (`wiggle migrate plan`'s PlanMigration).
The server is asked through `wiggle.client.Client`, at most once every few seconds per flow,
with a short deadline, from a thread: an editor never waits on a slow or absent server.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types

from wiggle.compiler import CompiledFlow
from wiggle.errors import WiggleError

if TYPE_CHECKING:
    from wiggle.client import Client

__all__ = ["CMD_MIGRATION_PLAN", "CMD_RENDER", "CMD_VERSION", "Deployments", "ServerView", "lenses"]

CMD_VERSION = "wiggle.version"
CMD_RENDER = "wiggle.render"
CMD_MIGRATION_PLAN = "wiggle.migrationPlan"

#: How long an answer about a flow's deployments is reused.
FRESH_S = 5.0
#: How long one call to the server may take before the lens says it could not be reached.
DEADLINE_S = 2.0


@dataclass(frozen=True)
class ServerView:
    """What the server said of a flow's name, or why it said nothing (`error`)."""

    address: str
    versions: tuple[str, ...] = ()
    # (version, its RUNNING instances), newest registered first, as the server lists them
    live_by_version: tuple[tuple[str, int], ...] = ()
    error: str = ""

    def live_older(self, version: str) -> int:
        """RUNNING instances on versions registered before `version` (every other version
        when `version` is not registered: deploying it would make it the newest)."""
        versions = [v for v, _ in self.live_by_version]
        after = versions.index(version) + 1 if version in versions else 0
        return sum(n for _, n in self.live_by_version[after:])


class Deployments:
    """Asks a server about flows, remembering each answer for FRESH_S seconds."""

    def __init__(self, settings: dict[str, object]) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str], tuple[float, ServerView]] = {}

    def address(self) -> str | None:
        """The configured address: the client's setting, else WIGGLE_ADDRESS; None: none."""
        given = self.settings.get("address") or os.environ.get("WIGGLE_ADDRESS")
        return str(given) if given else None

    def _client(self) -> Client:
        from wiggle._connection import Settings, connection
        from wiggle.client import Client

        token_file = self.settings.get("tokenFile")
        conn = connection(
            Settings(
                address=self.address(),
                token_file=str(token_file) if token_file else None,
            )
        )
        return Client(
            conn.address, token=conn.token, tls=conn.tls, timeout=DEADLINE_S, retry_for=0.0
        )

    def view(self, name: str) -> ServerView | None:
        """The server's view of flow `name`; None when no address is configured."""
        address = self.address()
        if address is None:
            return None
        key = (address, name)
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and time.monotonic() - cached[0] < FRESH_S:
            return cached[1]
        view = self._ask(address, name)
        with self._lock:
            self._cache[key] = (time.monotonic(), view)
        return view

    def _ask(self, address: str, name: str) -> ServerView:
        try:
            with self._client() as client:
                found = client.list_definitions(name, counts=True)
        except WiggleError as exc:
            return ServerView(address, error=str(exc).splitlines()[0][:200])
        live = tuple((d.version, int(d.instance_counts.get("RUNNING", 0))) for d in found)
        return ServerView(address, tuple(d.version for d in found), live)

    def plan(self, name: str, version: str) -> str:
        """The summary of the plan that would move `name`'s live instances to `version`."""
        from wiggle.migration import plan_text

        try:
            with self._client() as client:
                plan = client.plan_migration(name, version)
        except WiggleError as exc:
            return f"no plan: {exc}"
        return str(plan_text(plan))

    def forget(self) -> None:
        with self._lock:
            self._cache.clear()


def _lens(line: int, title: str, command: str, arguments: list[object]) -> types.CodeLens:
    where = types.Range(
        start=types.Position(line=line, character=0), end=types.Position(line=line, character=0)
    )
    return types.CodeLens(
        range=where, command=types.Command(title=title, command=command, arguments=arguments)
    )


def lenses(
    uri: str, line: int, flow: CompiledFlow, view: ServerView | None
) -> list[types.CodeLens]:
    """The lenses above a flow's `name:` (0-based `line`)."""
    found = [_lens(line, f"version {flow.version[:19]}…", CMD_VERSION, [uri])]
    found.append(_lens(line, "render", CMD_RENDER, [uri]))
    if view is None:
        return found
    if view.error:
        found.append(_lens(line, f"server {view.address}: {view.error}", CMD_VERSION, [uri]))
        return found
    deployed = flow.version in view.versions
    state = "deployed" if deployed else "not deployed"
    found.append(_lens(line, f"{state} on {view.address}", CMD_VERSION, [uri]))
    older = view.live_older(flow.version)
    if older:
        title = f"{older} live instance{'s' if older != 1 else ''} on older versions"
        if deployed:
            found.append(_lens(line, title + ": migration plan", CMD_MIGRATION_PLAN, [uri]))
        else:
            found.append(
                _lens(
                    line, title + " (deploy this version to plan a migration)", CMD_VERSION, [uri]
                )
            )
    return found
