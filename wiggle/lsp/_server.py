"""`wiggle lsp`: the language server's wiring (pygls over stdio) to the features.

Settings come from the client's `initializationOptions` and `workspace/didChangeConfiguration`
(under `wiggle`): `address` and `tokenFile` of a Wiggle server for the code lens (else the
WIGGLE_* connection variables), `debounceMs` for the checks, `unregisteredActivities: false` to
leave out the warnings of activities no handler of the workspace registers. Custom: the
`wiggle/render` request and the `wiggle.render`, `wiggle.version` and `wiggle.migrationPlan`
commands.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from wiggle import __version__
from wiggle.compiler import CompiledFlow
from wiggle.lsp import _completion, _hover, _lens, _navigation, _render, _symbols
from wiggle.lsp._analysis import Analyser, Analysis
from wiggle.lsp._context import cursor_at
from wiggle.lsp._diagnostics import diagnostics
from wiggle.lsp._documents import Checks, Snapshot
from wiggle.lsp._handlers import language_of
from wiggle.lsp._index import WorkspaceIndex, flow_entry
from wiggle.lsp._kinds import Kind
from wiggle.lsp._locate import hit
from wiggle.lsp._text import Lines

__all__ = ["WiggleServer", "build_server", "serve"]

_log = logging.getLogger(__name__)

#: Files whose change on disk the server wants to hear of.
WATCHED = "**/*.{py,go,java,ts,mts,cts,js,mjs,cjs,yaml,yml,json}"
#: A text larger than this gets its size diagnostic and nothing else (completion, outline).
LARGEST_TEXT = 4 << 20


class WiggleServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("wiggle-lsp", __version__)
        self.index = WorkspaceIndex()
        self.analyser = Analyser(self.read_text)
        self.settings: dict[str, Any] = {}
        self.deployments = _lens.Deployments(self.settings)
        self.io = ThreadPoolExecutor(max_workers=2, thread_name_prefix="wiggle-io")
        self.checks = Checks(self.analyser, self.snapshot, self.publish)
        self.roots: list[str] = []
        self.indexing: asyncio.Future[None] | None = None

    # -- documents -------------------------------------------------------------------------------

    def snapshot(self, uri: str) -> Snapshot | None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        return Snapshot(uri, to_fs_path(uri) or uri, doc.version, doc.source)

    def read_text(self, path: str) -> str | None:
        """Another file's text: its buffer when open, else the disk."""
        for doc in list(self.workspace.text_documents.values()):
            if (to_fs_path(doc.uri) or "") == path:
                return str(doc.source)
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read(LARGEST_TEXT)
        except OSError:
            return None

    def lines(self, text: str) -> Lines:
        return Lines(
            text, str(self.workspace.position_encoding or types.PositionEncodingKind.Utf16)
        )

    async def publish(self, snap: Snapshot, analysis: Analysis) -> None:
        warn = self.settings.get("unregisteredActivities", True) is not False
        found = diagnostics(analysis, self.lines(snap.text), self.index if warn else None)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=snap.uri, diagnostics=found, version=snap.version)
        )
        # After the diagnostics, which do not wait for it: what the flow now names.
        if analysis.kind is Kind.FLOW and analysis.source is not None:
            self.index.update_flow(flow_entry(snap.path, analysis.document, analysis.source))

    async def build_index(self) -> None:
        """Index the workspace folders, then check the open documents again (the warnings of
        activities no handler registers need the index) and say what was found."""
        began = time.perf_counter()
        await self.in_io(self.index.scan, list(self.roots))
        registrations = self.index.registrations()
        activities = len({r.name for _, r in registrations})
        flows = len(self.index.flows())
        message = (
            f"wiggle: indexed {len(registrations)} handler registrations of {activities} "
            f"activities and {flows} flows in {self.index.files_seen} files "
            f"({time.perf_counter() - began:.1f} s)"
        )
        self.window_log_message(
            types.LogMessageParams(type=types.MessageType.Info, message=message)
        )
        self.recheck_open()

    def recheck_open(self) -> None:
        for uri in self.checks.open_uris():
            self.checks.changed(uri)

    def root(self) -> str | None:
        return self.roots[0] if self.roots else None

    async def in_io(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.io, fn, *args)

    def configure(self, options: Any) -> None:
        if isinstance(options, dict):
            found = options.get("wiggle", options)
            if isinstance(found, dict):
                self.settings.clear()
                self.settings.update(found)
                self.deployments.forget()
                debounce = found.get("debounceMs")
                if isinstance(debounce, int | float) and debounce >= 0:
                    self.checks.debounce_s = debounce / 1000


def _uri_of(args: Any) -> str:
    first = args[0] if isinstance(args, list | tuple) and args else args
    if isinstance(first, dict):
        first = first.get("uri", "")
    return str(getattr(first, "uri", first) or "")


def build_server() -> WiggleServer:
    server = WiggleServer()

    @server.feature(types.INITIALIZE)
    def initialize(params: types.InitializeParams) -> None:
        server.configure(params.initialization_options)
        folders = [to_fs_path(f.uri) for f in params.workspace_folders or []]
        if not folders and params.root_uri:
            folders = [to_fs_path(params.root_uri)]
        elif not folders and params.root_path:
            folders = [params.root_path]
        server.roots = [f for f in folders if f]

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        server.indexing = asyncio.ensure_future(server.build_index())
        caps = server.client_capabilities.workspace
        watched = caps.did_change_watched_files if caps else None
        if watched is not None and watched.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=WATCHED)]
            )
            registration = types.Registration(
                id="wiggle-watched-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=options,
            )
            await server.client_register_capability_async(
                types.RegistrationParams(registrations=[registration])
            )

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def configuration(params: types.DidChangeConfigurationParams) -> None:
        server.configure(params.settings)
        server.recheck_open()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(params: types.DidOpenTextDocumentParams) -> None:
        server.checks.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(params: types.DidChangeTextDocumentParams) -> None:
        server.checks.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        server.checks.closed(uri)
        server.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )
        # What the index knew of it came from the buffer: the file on disk is the truth now.
        path = to_fs_path(uri)
        if path:
            await server.in_io(server.index.update, path)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(params: types.DidSaveTextDocumentParams) -> None:
        snap = server.snapshot(params.text_document.uri)
        if snap is not None:
            await server.in_io(server.index.update, snap.path, snap.text)
            server.recheck_open()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def watched_files(params: types.DidChangeWatchedFilesParams) -> None:
        for change in params.changes:
            path = to_fs_path(change.uri)
            if not path:
                continue
            if change.type == types.FileChangeType.Deleted:
                server.index.remove(path)
            else:
                await server.in_io(server.index.update, path)
        server.recheck_open()

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[":", " ", "-", "[", ","]),
    )
    def completion(params: types.CompletionParams) -> types.CompletionList | None:
        snap = server.snapshot(params.text_document.uri)
        if snap is None or len(snap.text) > LARGEST_TEXT or snap.kind is Kind.OTHER:
            return None
        lines = server.lines(snap.text)
        line, column = lines.at(params.position)
        cursor = cursor_at(lines.lines, line, column)
        start = lines.position(line, cursor.start)
        edit = types.Range(start=start, end=params.position)
        tested = None
        if snap.kind is Kind.SCENARIOS:
            latest = server.checks.latest(snap.uri)
            if latest is not None and latest.flow is not None:
                tested = latest.flow.flow
        items = _completion.complete(snap.kind, cursor, edit, server.index, tested)
        return types.CompletionList(is_incomplete=False, items=items)

    async def located(uri: str, position: types.Position) -> tuple[Analysis, Lines, Any] | None:
        snap = server.snapshot(uri)
        if snap is None or len(snap.text) > LARGEST_TEXT or snap.kind is Kind.OTHER:
            return None
        analysis = await server.checks.current(snap)
        if analysis.source is None:
            return None
        lines = server.lines(snap.text)
        line, column = lines.at(position)
        found = hit(analysis.source, lines, line, column)
        return (analysis, lines, found) if found is not None else None

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(params: types.HoverParams) -> types.Hover | None:
        found = await located(params.text_document.uri, params.position)
        if found is None:
            return None
        analysis, lines, at = found
        return _hover.hover(analysis, lines, at, server.index, server.root())

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(params: types.DefinitionParams) -> list[types.Location] | None:
        found = await located(params.text_document.uri, params.position)
        if found is None:
            return None
        analysis, _, at = found
        return _navigation.definition(analysis, at, server.index) or None

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    async def references(params: types.ReferenceParams) -> list[types.Location] | None:
        uri = params.text_document.uri
        declarations = params.context.include_declaration
        path = to_fs_path(uri) or uri
        if language_of(path) is not None:
            snap = server.snapshot(uri)
            text = snap.text if snap is not None else server.read_text(path)
            if text is None:
                return None
            lines = server.lines(text)
            line, column = lines.at(params.position)
            reg = _navigation.registration_at(path, text, line, column)
            if reg is None:
                return None
            return _navigation.references(server.index, reg.name, declarations=declarations)
        found = await located(uri, params.position)
        if found is None:
            return None
        activity = _navigation.activity_at(found[0], found[2])
        if activity is None:
            return None
        return _navigation.references(server.index, activity, declarations=declarations)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def symbols(params: types.DocumentSymbolParams) -> list[types.DocumentSymbol] | None:
        snap = server.snapshot(params.text_document.uri)
        if snap is None or len(snap.text) > LARGEST_TEXT or snap.kind is Kind.OTHER:
            return None
        analysis = await server.checks.current(snap)
        return _symbols.symbols(analysis, server.lines(snap.text))

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    async def code_lens(params: types.CodeLensParams) -> list[types.CodeLens] | None:
        snap = server.snapshot(params.text_document.uri)
        if snap is None or snap.kind is not Kind.FLOW or len(snap.text) > LARGEST_TEXT:
            return None
        analysis = await server.checks.current(snap)
        if analysis.flow is None or analysis.flow.flow is None or analysis.source is None:
            return None
        flow = analysis.flow.flow
        view = await server.in_io(server.deployments.view, flow.name)
        line = analysis.source.key(("name",))[0] - 1
        return _lens.lenses(snap.uri, max(line, 0), flow, view)

    async def compiled(uri: str) -> tuple[CompiledFlow | None, dict[str, Any]]:
        snap = server.snapshot(uri)
        if snap is None:
            path = to_fs_path(uri) or uri
            text = server.read_text(path)
            if text is None:
                return None, {"error": f"cannot read {path}"}
            snap = Snapshot(uri, path, None, text)
        analysis = await server.checks.current(snap)
        flow = analysis.flow.flow if analysis.flow is not None else None
        if snap.kind is not Kind.FLOW or flow is None:
            count = len(analysis.problems)
            return None, {"error": f"not a valid flow ({count} problem{'s' * (count != 1)})"}
        return flow, {}

    async def render(uri: str) -> dict[str, Any]:
        flow, error = await compiled(uri)
        if flow is None:
            return error
        picture: dict[str, Any] = await server.in_io(_render.svg, flow)
        return picture

    @server.feature("wiggle/render")
    async def render_request(params: Any) -> dict[str, Any]:
        return await render(_uri_of(params))

    @server.command(_lens.CMD_RENDER)
    async def render_command(*args: Any) -> dict[str, Any]:
        return await render(_uri_of(list(args)))

    @server.command(_lens.CMD_VERSION)
    async def version_command(*args: Any) -> dict[str, Any]:
        flow, error = await compiled(_uri_of(list(args)))
        return error if flow is None else {"name": flow.name, "version": flow.version}

    @server.command(_lens.CMD_MIGRATION_PLAN)
    async def plan_command(*args: Any) -> dict[str, Any]:
        flow, error = await compiled(_uri_of(list(args)))
        if flow is None:
            return error
        summary: str = await server.in_io(server.deployments.plan, flow.name, flow.version)
        server.window_show_message(
            types.ShowMessageParams(type=types.MessageType.Info, message=summary)
        )
        return {"summary": summary}

    @server.feature(types.SHUTDOWN)
    def shutdown(params: None) -> None:
        server.checks.shutdown()
        server.io.shutdown(wait=False, cancel_futures=True)

    return server


def serve() -> int:
    """Serve one client over stdin and stdout until it exits."""
    logging.basicConfig(level=os.environ.get("WIGGLE_LSP_LOG", "WARNING").upper())
    build_server().start_io()
    return 0
