"""The language server's test kit: `wiggle lsp` started over stdio under a real LSP client
(pytest-lsp's), a small workspace with handlers in the four languages, and waits on the
server's own notifications (the diagnostics of one version of one document, the log line that
says the workspace is indexed), never on the clock alone."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

#: How long a test waits for one notification; far more than any check takes.
PATIENCE_S = 60.0

#: The workspace: a flow using an activity of each language, the flow its subflow starts, a
#: scenario file and a schedule of it, and a worker in each of Python, Go, Java and TypeScript.
WORKSPACE = {
    "flows/orders.yaml": """\
        wiggle: 1
        name: orders
        execution: LOCAL_SYNC
        queue: orders
        steps:
          - task: validate
          - filter: in_stock
          - task: charge_card
            retry: {max_attempts: 5, backoff: exponential, initial: 100ms, max: 10s}
            timeout: 30s
          - choice:
              - when: is_foreign
                steps: [{task: reserve_stock, queue: warehouse}]
            otherwise:
              - task: print_label
          - await: approved
            timeout: 2d
          - subflow: settle-account
          - task: notify_customer
        """,
    "flows/settle-account.yaml": """\
        wiggle: 1
        name: settle-account
        queue: ledger
        steps:
          - task: has_stock_check
            id: settle
          - parallel:
              books: [{task: reserve_stock}]
            combine: print_label
        """,
    "flows/orders.scenarios.yaml": """\
        wiggle_test: 1
        flow: orders.yaml
        scenarios:
          - name: shipped
            input: {}
            timeline:
              - at: 1h
                signal: approved
            expect:
              status: COMPLETED
              visits: [validate, in_stock, charge_card]
        """,
    "schedules/nightly.schedule.yaml": """\
        schedule: nightly-orders
        flow: orders
        time_zone: UTC
        cron: "0 2 * * *"
        """,
    "workers/python/handlers.py": """\
        from wiggle import activity


        @activity
        def validate(ctx):
            return ctx


        @activity("in_stock")
        def check_stock(ctx) -> bool:
            return True
        """,
    "workers/go/main.go": """\
        package main

        // w.Register("commented_out", nothing) is not a registration.
        func register(w worker.Worker) {
            w.Register("charge_card", chargeCard)
            w.RegisterPredicate("is_foreign", func(ctx context.Context, in []byte) (bool, error) {
                return false, nil
            })
        }

        func chargeCard(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
            return in, nil
        }
        """,
    "workers/java/Warehouse.java": """\
        final class Warehouse {
          static Worker.Builder register(Worker.Builder b) {
            return b
                .register("reserve_stock", (ctx, step) -> ctx)
                .registerPredicate("has_stock_check", Warehouse::hasStock);
          }

          static boolean hasStock(JsonNode ctx, Step step) {
            return true;
          }
        }
        """,
    "workers/ts/worker.ts": """\
        import { Worker } from "@wiggle-engine/worker";

        const worker = new Worker({ queues: ["orders"], activities: { notify_customer: notify } })
          .activity("print_label", printLabel);

        function printLabel(ctx: object) {
          return ctx;
        }

        function notify(ctx: object) {
          return ctx;
        }
        """,
    # A handler file mid-edit: not Python yet, and still read for what it registers.
    "workers/python/half_written.py": """\
        from wiggle import activity

        @activity("refund")
        def refund(ctx:
        """,
}


def write_workspace(root: Path, files: dict[str, str] = WORKSPACE) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


class Client(LanguageClient):
    """pytest-lsp's client, keeping every diagnostics notification with its version."""

    published: list[types.PublishDiagnosticsParams]
    logs: list[str]
    arrived: asyncio.Event


def _published(client: Client, params: types.PublishDiagnosticsParams) -> None:
    client.published.append(params)
    client.diagnostics[params.uri] = params.diagnostics
    client.arrived.set()


def _logged(client: Client, params: types.LogMessageParams) -> None:
    client.logs.append(params.message)
    client.log_messages.append(params)
    client.arrived.set()


def make_client() -> Client:
    client = Client(converter_factory=default_converter)
    client.published, client.logs = [], []
    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = _published
    features[types.WINDOW_LOG_MESSAGE] = _logged
    register_lsp_features(client, features)
    return client


def server_config(**env: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "wiggle", "lsp"],
        client_factory=make_client,
        server_env=env or None,
    )


def capabilities() -> types.ClientCapabilities:
    """A client that watches files for the server and renders markdown."""
    return types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(
                dynamic_registration=True
            ),
            configuration=True,
        ),
        text_document=types.TextDocumentClientCapabilities(
            hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.Markdown]),
            document_symbol=types.DocumentSymbolClientCapabilities(
                hierarchical_document_symbol_support=True
            ),
        ),
    )


async def start(client: Client, root: Path, options: dict[str, Any] | None = None) -> None:
    """Initialise a session on `root` and wait until the server has indexed it."""
    client.arrived = asyncio.Event()
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities(),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    await until(client, lambda: any("indexed" in line for line in client.logs))


async def until(client: Client, done: Any, what: str = "the server's notification") -> None:
    """Wait until `done()` holds, re-checked at each notification the client receives."""

    async def wait() -> None:
        while not done():
            client.arrived.clear()
            await client.arrived.wait()

    try:
        await asyncio.wait_for(wait(), PATIENCE_S)
    except TimeoutError:
        raise AssertionError(f"waited {PATIENCE_S} s for {what}") from None


async def diagnostics_of(client: Client, uri: str, version: int) -> list[types.Diagnostic]:
    """The diagnostics the server publishes for `version` of the document at `uri`."""

    def found() -> types.PublishDiagnosticsParams | None:
        return next(
            (p for p in reversed(client.published) if p.uri == uri and p.version == version),
            None,
        )

    await until(client, lambda: found() is not None, f"diagnostics of {uri} v{version}")
    params = found()
    assert params is not None
    return list(params.diagnostics)


def open_document(client: Client, path: Path, text: str | None = None, version: int = 1) -> str:
    uri = path.as_uri()
    body = path.read_text() if text is None else text
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="yaml", version=version, text=body
            )
        )
    )
    return uri


def change_document(client: Client, uri: str, text: str, version: int) -> None:
    """Replace the whole text (what an editor sends is equivalent)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def close_document(client: Client, uri: str) -> None:
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


def at(text: str, needle: str, offset: int = 0) -> types.Position:
    """The position `offset` characters into the first `needle` of `text`."""
    for number, line in enumerate(text.splitlines()):
        if needle in line:
            return types.Position(line=number, character=line.index(needle) + offset)
    raise AssertionError(f"{needle!r} is not in the text")


def end_of(text: str, needle: str) -> types.Position:
    return at(text, needle, len(needle))
