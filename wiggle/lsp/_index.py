"""The workspace as the language server knows it: which activities each handler file registers,
and what each flow file is called and names (activities, queues).

Built once by walking the workspace folders (in a thread, so the editor never waits for it),
then kept up to date one file at a time: the server calls `update` when a file is saved or the
client reports it changed on disk (workspace/didChangeWatchedFiles), and `update_flow` with each
analysis of an open flow. Nothing re-reads the workspace on a keystroke. Every method may be
called from any thread.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from wiggle.compiler import MAX_BYTES, SourceMap, load_document
from wiggle.errors import FlowError
from wiggle.lsp import _flowdoc
from wiggle.lsp._handlers import Registration, language_of, scan
from wiggle.lsp._kinds import Kind, kind_of

__all__ = ["FlowEntry", "Use", "WorkspaceIndex"]

_log = logging.getLogger(__name__)

#: Folders never walked: tools' caches, dependencies and build output (which would repeat the
#: sources' registrations).
SKIPPED_FOLDERS = frozenset(
    {"node_modules", "__pycache__", "target", "dist", "build", "out", "venv", "site-packages"}
)
#: A workspace larger than this is indexed only this far (a home folder opened by mistake).
MAX_FILES = 20_000
_MAX_SOURCE_BYTES = 2 * MAX_BYTES
HEAD_BYTES = 64 * 1024  # as much as `kind_of` looks at


@dataclass(frozen=True)
class Use:
    """An activity a flow file names, and where (1-based line and column of its name)."""

    name: str
    role: str
    line: int
    column: int


@dataclass(frozen=True)
class FlowEntry:
    path: str
    name: str | None
    uses: tuple[Use, ...]
    queues: frozenset[str]


def flow_entry(path: str, doc: Any, source: SourceMap) -> FlowEntry:
    """What the index keeps of a flow document read at `path`."""
    name = doc.get("name") if isinstance(doc, dict) else None
    uses = tuple(Use(u.name, u.role, *source.value(u.path)) for u in _flowdoc.activity_uses(doc))
    return FlowEntry(
        path, name if isinstance(name, str) else None, uses, frozenset(_flowdoc.queues(doc))
    )


def _read(path: str, limit: int) -> str | None:
    """The text of a file, or None when it is too large, binary or unreadable."""
    try:
        if os.path.getsize(path) > limit:
            return None
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


class WorkspaceIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._handlers: dict[str, tuple[Registration, ...]] = {}
        self._flows: dict[str, FlowEntry] = {}
        self.ready = threading.Event()
        self.files_seen = 0
        self.roots: tuple[str, ...] = ()  # once scanned, files elsewhere are not indexed

    def covers(self, path: str) -> bool:
        """Whether `path` is in the workspace (every path is, before a scan names folders)."""
        if not self.roots:
            return True
        return any(
            path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots
        )

    # -- building ------------------------------------------------------------------------------

    def scan(self, roots: Iterable[str]) -> None:
        """Index every file under `roots` (the workspace folders); sets `ready` at the end."""
        self.roots = tuple(os.path.abspath(root) for root in roots)
        try:
            for path in _walk(roots):
                self.files_seen += 1
                if self.files_seen > MAX_FILES:
                    _log.warning("indexed the first %d files of the workspace only", MAX_FILES)
                    break
                self.update(path)
        finally:
            self.ready.set()

    def update(self, path: str, text: str | None = None) -> None:
        """Read one file again (`text` when given, else from disk); a file gone is forgotten."""
        if not self.covers(path):
            return
        language = language_of(path)
        if language is not None:
            found = text if text is not None else _read(path, _MAX_SOURCE_BYTES)
            registrations = tuple(scan(language, found)) if found is not None else ()
            with self._lock:
                if registrations:
                    self._handlers[path] = registrations
                else:
                    self._handlers.pop(path, None)
            return
        if text is None and not self._looks_like_a_flow(path):
            self.remove(path)
            return
        found = text if text is not None else _read(path, MAX_BYTES)
        if found is None or kind_of(path, found) is not Kind.FLOW:
            self.remove(path)
            return
        try:
            loaded = load_document(found, path)
        except FlowError:
            return  # mid-edit: keep what the last readable version named
        self.update_flow(flow_entry(path, loaded.value, loaded.source))

    @staticmethod
    def _looks_like_a_flow(path: str) -> bool:
        """Whether the file's head says it is a flow: a data file is not read whole."""
        if not path.endswith((".yaml", ".yml", ".json")):
            return False
        try:
            with open(path, "rb") as handle:
                head = handle.read(HEAD_BYTES)
        except OSError:
            return False
        return kind_of(path, head.decode("utf-8", "replace")) is Kind.FLOW

    def update_flow(self, entry: FlowEntry) -> None:
        if not self.covers(entry.path):
            return
        with self._lock:
            self._flows[entry.path] = entry

    def remove(self, path: str) -> None:
        with self._lock:
            self._handlers.pop(path, None)
            self._flows.pop(path, None)

    # -- questions -----------------------------------------------------------------------------

    def registrations(self, name: str | None = None) -> list[tuple[str, Registration]]:
        """(file, registration) of activity `name` (of every activity without one)."""
        with self._lock:
            items = list(self._handlers.items())
        return [(p, r) for p, found in sorted(items) for r in found if name in (None, r.name)]

    def flows(self, name: str | None = None) -> list[FlowEntry]:
        with self._lock:
            entries = list(self._flows.values())
        return sorted((e for e in entries if name in (None, e.name)), key=lambda e: e.path)

    def uses(self, activity: str) -> list[tuple[FlowEntry, Use]]:
        """Every place a flow of the workspace names `activity`."""
        return [(e, u) for e in self.flows() for u in e.uses if u.name == activity]

    def queues(self) -> set[str]:
        return {q for e in self.flows() for q in e.queues}


def _walk(roots: Iterable[str]) -> Iterator[str]:
    seen: set[str] = set()
    for root in roots:
        for folder, folders, files in os.walk(root):
            folders[:] = sorted(
                f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS
            )
            for name in sorted(files):
                path = os.path.join(folder, name)
                if path not in seen and (
                    language_of(name) is not None or name.endswith((".yaml", ".yml", ".json"))
                ):
                    seen.add(path)
                    yield path
