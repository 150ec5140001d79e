"""`wiggle lsp` end to end: one server over stdio for the module, driven by a real LSP client
(pytest-lsp) on a workspace with handlers in Python, Go, Java and TypeScript (lspkit.WORKSPACE).

Diagnostics are compared with what `wiggle validate` prints for the same text; completion,
hover, definition, references, symbols, code lens and the rendered picture are asked of the
shipped-like fixture flow; the last tests change files on disk under the server.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types

from tests.integration.lsp.lspkit import (
    Client,
    at,
    change_document,
    close_document,
    diagnostics_of,
    end_of,
    open_document,
    server_config,
    start,
    until,
    write_workspace,
)
from wiggle.cli import main
from wiggle.compiler import load_flow_file

pytestmark = pytest.mark.asyncio(loop_scope="module")

BROKEN = """\
wiggle: 1
name: broken-orders
queue: orders
steps:
  - task: validate
    timeout: 0s
  - filter: {if: "ctx.total >"}
  - task: charge_card
    retries: 3
  - await: approved
    on_timeout:
      - task: notify_customer
  - task: validate
"""

FIXED = """\
wiggle: 1
name: broken-orders
queue: orders
steps:
  - task: validate
    timeout: 5s
  - filter: {if: "ctx.total > 0"}
  - task: charge_card
    retry: {max_attempts: 3}
  - await: approved
    timeout: 1d
    on_timeout:
      - task: notify_customer
  - task: validate
    id: validate_again
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_workspace(tmp_path_factory.mktemp("workspace"))


@pytest_lsp.fixture(scope="module", config=server_config())
async def client(lsp_client: Client, workspace: Path):
    await start(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


def _doc(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


async def _complete(
    client: Client, uri: str, position: types.Position
) -> list[types.CompletionItem]:
    found = await client.text_document_completion_async(
        types.CompletionParams(text_document=_doc(uri), position=position)
    )
    assert isinstance(found, types.CompletionList)
    return list(found.items)


def _configure(client: Client, settings: dict[str, object]) -> None:
    """Send the settings (the server asks a Wiggle server afresh after each)."""
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"wiggle": settings})
    )


def _validate_says(path: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, int, str]]:
    """(0-based line, 0-based column, message) of each problem `wiggle validate` prints."""
    assert main(["validate", str(path)]) == 1
    found = []
    for line in capsys.readouterr().err.splitlines():
        parsed = re.fullmatch(r".*?:(\d+):(\d+): (.*)", line)
        assert parsed is not None, line
        found.append((int(parsed[1]) - 1, int(parsed[2]) - 1, parsed[3]))
    return found


async def test_diagnostics_are_the_problems_validate_prints_at_their_places(
    client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "broken.yaml"  # outside the workspace: no other test meets it
    path.write_text(BROKEN)
    uri = open_document(client, path)
    found = await diagnostics_of(client, uri, 1)
    shown = [(d.range.start.line, d.range.start.character, d.message) for d in found]
    assert shown == _validate_says(path, capsys)
    assert len(shown) == 5
    assert (5, 13, "duration '0s' must be greater than zero") in shown
    # An expression's problem is placed inside the string, at the place the checker names.
    assert (6, 29, "expression: Syntax error: the expression ends too early") in shown
    assert {d.severity for d in found} == {types.DiagnosticSeverity.Error}
    unknown = next(d for d in found if "unknown key" in d.message)
    assert (unknown.range.start.line, unknown.range.end.character) == (8, 11)  # `retries`

    change_document(client, uri, FIXED, 2)
    assert await diagnostics_of(client, uri, 2) == []
    change_document(client, uri, FIXED + "  - task: [half\n", 3)
    (syntax,) = await diagnostics_of(client, uri, 3)
    assert syntax.message.startswith("syntax error")
    assert syntax.range.start.line >= 15
    close_document(client, uri)


async def test_an_activity_no_handler_registers_is_a_warning(
    client: Client, workspace: Path
) -> None:
    text = "wiggle: 1\nname: lonely\nsteps:\n  - task: validate\n  - task: ship_by_owl\n"
    uri = open_document(client, workspace / "scratch/lonely.yaml", text)
    (warning,) = await diagnostics_of(client, uri, 1)
    assert warning.severity == types.DiagnosticSeverity.Warning
    assert warning.source == "wiggle workspace"
    assert "no handler in the workspace registers activity 'ship_by_owl'" in warning.message
    assert (warning.range.start.line, warning.range.start.character) == (4, 10)
    _configure(client, {"unregisteredActivities": False})
    change_document(client, uri, text + "\n", 2)
    assert await diagnostics_of(client, uri, 2) == []
    _configure(client, {})
    close_document(client, uri)


async def test_changes_typed_faster_than_a_check_are_checked_once_at_the_end(
    client: Client, workspace: Path
) -> None:
    path = workspace / "scratch/typing.yaml"
    uri = open_document(client, path, FIXED)
    await diagnostics_of(client, uri, 1)
    for version in range(2, 22):
        change_document(client, uri, FIXED.replace("timeout: 1d", f"timeout: {version}d"), version)
    assert await diagnostics_of(client, uri, 21) == []
    checked = [p.version for p in client.published if p.uri == uri and p.version != 1]
    assert len(checked) < 20 and checked[-1] == 21
    close_document(client, uri)


async def test_bad_input_gets_a_diagnostic_and_the_server_goes_on(
    client: Client, workspace: Path
) -> None:
    huge = workspace / "scratch/huge.yaml"
    uri = open_document(client, huge, "wiggle: 1\n" + "# padding\n" * 120_000)
    (size,) = await diagnostics_of(client, uri, 1)
    assert re.match(r"document is \d+ bytes; the limit is 1048576 bytes", size.message)
    close_document(client, uri)

    binary = workspace / "scratch/binary.yaml"
    uri = open_document(client, binary, "wiggle: 1\nname: \x00\x01\x02\xff\n")
    (character,) = await diagnostics_of(client, uri, 1)
    assert "U+0000 is not allowed" in character.message
    hovered = await client.text_document_hover_async(
        types.HoverParams(text_document=_doc(uri), position=types.Position(line=1, character=7))
    )
    assert hovered is None
    assert await _complete(client, uri, types.Position(line=1, character=9)) == []
    close_document(client, uri)

    # Not a Wiggle document: nothing to say about it.
    other = workspace / "scratch/compose.yaml"
    uri = open_document(client, other, "services:\n  web: {image: nginx}\n")
    assert await diagnostics_of(client, uri, 1) == []
    close_document(client, uri)


async def test_completion_offers_the_activities_registered_in_four_languages(
    client: Client, workspace: Path
) -> None:
    text = (workspace / "flows/orders.yaml").read_text() + "  - task: \n  - filter: \n"
    uri = open_document(client, workspace / "scratch/orders-edit.yaml", text)
    await diagnostics_of(client, uri, 1)
    items = {i.label: i for i in await _complete(client, uri, end_of(text, "  - task: "))}
    languages = {
        "validate": "python",
        "in_stock": "python",
        "refund": "python",  # from the handler file that does not parse
        "charge_card": "go",
        "is_foreign": "go",
        "reserve_stock": "java",
        "has_stock_check": "java",
        "print_label": "typescript",
        "notify_customer": "typescript",
    }
    for name, language in languages.items():
        assert name in items, name
        assert language in (items[name].detail or ""), (name, items[name].detail)
    assert "commented_out" not in items
    predicates = await _complete(client, uri, end_of(text, "  - filter: "))
    first = sorted(predicates, key=lambda i: i.sort_text or "")[:3]
    assert {i.label for i in first} == {"in_stock", "is_foreign", "has_stock_check"}
    close_document(client, uri)


async def test_completion_of_blocks_keys_values_and_queues(client: Client, workspace: Path) -> None:
    text = (
        "wiggle: 1\nname: edit\nexecution: \nsteps:\n  - task: validate\n"
        "    queue: \n    retry: {max_attempts: 5, }\n  - \n"
    )
    uri = open_document(client, workspace / "scratch/keys.yaml", text)
    new_step = types.Position(line=7, character=4)
    blocks = {i.label for i in await _complete(client, uri, new_step)}
    assert blocks == {
        "task",
        "filter",
        "choice",
        "parallel",
        "for_each",
        "sleep",
        "await",
        "subflow",
        "loop",
        "set",
        "human",
    }
    modes = {i.label for i in await _complete(client, uri, end_of(text, "execution: "))}
    assert modes == {"SERVER", "LOCAL_SYNC", "LOCAL_ASYNC", "DEFAULT"}
    queues = {i.label for i in await _complete(client, uri, end_of(text, "    queue: "))}
    assert {"orders", "warehouse", "ledger"} <= queues
    retry = {i.label for i in await _complete(client, uri, end_of(text, "max_attempts: 5, "))}
    assert retry == {"backoff", "initial", "max"}
    close_document(client, uri)


async def test_completion_in_a_scenario_file_offers_signals_and_node_ids(
    client: Client, workspace: Path
) -> None:
    path = workspace / "flows/orders.scenarios.yaml"
    text = (
        path.read_text()
        .replace("signal: approved", "signal: ")
        .replace("visits: [validate, in_stock, charge_card]", "visits: [validate, ]")
    )
    uri = open_document(client, path, text)
    await diagnostics_of(client, uri, 1)
    signals = {i.label for i in await _complete(client, uri, end_of(text, "signal: "))}
    assert signals == {"approved"}
    nodes = {i.label for i in await _complete(client, uri, end_of(text, "[validate, "))}
    assert {"validate", "in_stock", "charge_card", "approved", "settle-account"} <= nodes
    assert "end" not in nodes
    close_document(client, uri)


async def test_a_schedule_is_checked_and_its_flow_completed_and_found(
    client: Client, workspace: Path
) -> None:
    path = workspace / "schedules/nightly.schedule.yaml"
    uri = open_document(client, path, path.read_text().replace('"0 2 * * *"', '"61 2 * * *"'))
    (bad,) = await diagnostics_of(client, uri, 1)
    assert bad.message == "cron '61 2 * * *': a bad minute: minutes take 0-59"
    assert (bad.range.start.line, bad.range.start.character) == (3, 6)
    typing = path.read_text().replace("flow: orders", "flow: ")
    change_document(client, uri, typing, 3)
    names = {i.label for i in await _complete(client, uri, end_of(typing, "flow: "))}
    assert names == {"orders", "settle-account"}
    change_document(client, uri, path.read_text(), 4)
    assert await diagnostics_of(client, uri, 4) == []
    found = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=_doc(uri), position=end_of(path.read_text(), "flow: o")
        )
    )
    assert [loc.uri for loc in found or []] == [(workspace / "flows/orders.yaml").as_uri()]
    close_document(client, uri)


async def test_hover_tells_what_a_step_compiles_to_and_where_its_handler_is(
    client: Client, workspace: Path
) -> None:
    path = workspace / "flows/orders.yaml"
    text = path.read_text()
    uri = open_document(client, path)
    await diagnostics_of(client, uri, 1)
    step = await client.text_document_hover_async(
        types.HoverParams(text_document=_doc(uri), position=at(text, "charge_card", 2))
    )
    assert step is not None and isinstance(step.contents, types.MarkupContent)
    shown = step.contents.value
    assert "node `charge_card`" in shown and "task" in shown
    assert "queue `orders`" in shown and "timeout 30s" in shown
    assert "5 attempts, exponential from 100ms to at most 10s" in shown
    assert "mode LOCAL_SYNC" in shown
    assert "workers/go/main.go:11" in shown  # func chargeCard
    name = await client.text_document_hover_async(
        types.HoverParams(text_document=_doc(uri), position=at(text, "name: orders", 7))
    )
    assert name is not None and isinstance(name.contents, types.MarkupContent)
    assert load_flow_file(path).version in name.contents.value
    close_document(client, uri)


async def test_hover_on_a_block_names_its_own_handlers_not_its_branches(
    client: Client, workspace: Path
) -> None:
    """On a parallel block: its fork and join nodes and the combine's handler. The steps inside
    its branches have hovers of their own; listing their handlers here would bury the one the
    author pointed at."""
    path = workspace / "flows/settle-account.yaml"
    text = path.read_text()
    uri = open_document(client, path)
    await diagnostics_of(client, uri, 1)
    block = await client.text_document_hover_async(
        types.HoverParams(text_document=_doc(uri), position=at(text, "combine: print_label", 12))
    )
    assert block is not None and isinstance(block.contents, types.MarkupContent)
    shown = block.contents.value
    assert "fork" in shown and "join" in shown and "activity `print_label`" in shown
    assert "handler `print_label`" in shown
    assert "reserve_stock" not in shown, shown
    close_document(client, uri)


def _line_of(path: Path, needle: str) -> tuple[int, int]:
    for number, line in enumerate(path.read_text().splitlines()):
        if needle in line:
            return number, line.index(needle)
    raise AssertionError(needle)


async def test_definition_goes_to_the_handler_in_each_language_and_to_a_subflow(
    client: Client, workspace: Path
) -> None:
    flows = {
        "orders": workspace / "flows/orders.yaml",
        "settle": workspace / "flows/settle-account.yaml",
    }
    for path in flows.values():
        open_document(client, path)
    handlers = workspace / "workers"
    expected = {
        ("orders", "task: validate"): (handlers / "python/handlers.py", "validate(ctx)"),
        ("orders", "filter: in_stock"): (handlers / "python/handlers.py", "check_stock"),
        ("orders", "task: charge_card"): (handlers / "go/main.go", "chargeCard(ctx"),
        ("orders", "when: is_foreign"): (handlers / "go/main.go", '"is_foreign"'),
        ("orders", "task: reserve_stock"): (handlers / "java/Warehouse.java", '"reserve_stock"'),
        ("settle", "task: has_stock_check"): (
            handlers / "java/Warehouse.java",
            "hasStock(JsonNode",
        ),
        ("orders", "task: print_label"): (handlers / "ts/worker.ts", "printLabel(ctx"),
        ("settle", "combine: print_label"): (handlers / "ts/worker.ts", "printLabel(ctx"),
        ("orders", "task: notify_customer"): (handlers / "ts/worker.ts", "notify(ctx"),
        ("orders", "subflow: settle-account"): (flows["settle"], "wiggle: 1"),
    }
    for (flow, step), (target, needle) in expected.items():
        text = flows[flow].read_text()
        found = await client.text_document_definition_async(
            types.DefinitionParams(
                text_document=_doc(flows[flow].as_uri()), position=end_of(text, step)
            )
        )
        assert isinstance(found, list) and len(found) == 1, (step, found)
        assert found[0].uri == target.as_uri(), step
        line, column = _line_of(target, needle)
        assert (found[0].range.start.line, found[0].range.start.character) == (line, column), step
    for path in flows.values():
        close_document(client, path.as_uri())


async def test_references_lead_from_a_handler_to_the_steps_that_use_it(
    client: Client, workspace: Path
) -> None:
    go = workspace / "workers/go/main.go"
    text = go.read_text()
    uri = open_document(client, go)
    found = await client.text_document_references_async(
        types.ReferenceParams(
            text_document=_doc(uri),
            position=at(text, '"charge_card"', 3),
            context=types.ReferenceContext(include_declaration=False),
        )
    )
    orders = workspace / "flows/orders.yaml"
    assert [(r.uri, r.range.start.line) for r in found or []] == [
        (orders.as_uri(), _line_of(orders, "charge_card")[0])
    ]
    java = workspace / "workers/java/Warehouse.java"
    found = await client.text_document_references_async(
        types.ReferenceParams(
            text_document=_doc(java.as_uri()),
            position=at(java.read_text(), "hasStock(JsonNode"),
            context=types.ReferenceContext(include_declaration=True),
        )
    )
    settle = workspace / "flows/settle-account.yaml"
    assert {r.uri for r in found or []} == {settle.as_uri(), java.as_uri()}
    close_document(client, uri)


async def test_document_symbols_outline_the_blocks(client: Client, workspace: Path) -> None:
    path = workspace / "flows/orders.yaml"
    open_document(client, path)
    found = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=_doc(path.as_uri()))
    )
    assert found is not None
    (flow,) = found
    assert isinstance(flow, types.DocumentSymbol) and flow.name == "flow orders"
    steps = flow.children or []
    assert [s.name for s in steps] == [
        "task validate",
        "filter in_stock",
        "task charge_card",
        "choice",
        "await approved",
        "subflow settle-account",
        "task notify_customer",
    ]
    choice = steps[3]
    assert [(c.name, [g.name for g in c.children or []]) for c in choice.children or []] == [
        ("when is_foreign", ["task reserve_stock"]),
        ("otherwise", ["task print_label"]),
    ]
    charge = steps[2]
    assert (charge.range.start.line, charge.range.end.line) == (7, 9)  # the step and its options
    close_document(client, path.as_uri())


async def _lenses(client: Client, path: Path) -> list[types.CodeLens]:
    found = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=_doc(path.as_uri()))
    )
    return list(found or [])


async def test_code_lens_shows_the_version_and_render_returns_the_svg(
    client: Client, workspace: Path
) -> None:
    path = workspace / "flows/orders.yaml"
    open_document(client, path)
    found = await _lenses(client, path)
    version = load_flow_file(path).version
    titles = [lens.command.title for lens in found if lens.command]
    assert titles[0].startswith(f"version {version[:19]}")
    assert {lens.range.start.line for lens in found} == {1}  # above `name:`
    exact = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="wiggle.version", arguments=[path.as_uri()])
    )
    assert exact == {"name": "orders", "version": version}
    picture = await client.protocol.send_request_async("wiggle/render", {"uri": path.as_uri()})
    svg = picture.svg
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "charge_card" in svg
    close_document(client, path.as_uri())


async def test_code_lens_with_a_server_says_deployed_and_live_instances_on_older_versions(
    client: Client, workspace: Path
) -> None:
    from wiggle.server import embedded_stack

    path = workspace / "flows/orders.yaml"
    open_document(client, path)
    older = path.read_text().replace("  - task: notify_customer\n", "")
    with embedded_stack() as stack:
        stack.client.deploy(workspace / "flows/settle-account.yaml")
        stack.client.deploy(older.encode(), filename="orders-v1.yaml")
        stack.client.start("orders", {}, instance_id="order-1")  # waits: no worker runs it
        _configure(client, {"address": stack.address})

        async def lenses() -> list[str]:
            return [lens.command.title for lens in await _lenses(client, path) if lens.command]

        titles = await lenses()
        assert f"not deployed on {stack.address}" in titles
        assert (
            "1 live instance on older versions (deploy this version to plan a migration)" in titles
        )

        stack.client.deploy(path)
        _configure(client, {"address": stack.address})
        titles = await lenses()
        assert f"deployed on {stack.address}" in titles
        assert "1 live instance on older versions: migration plan" in titles
        plan = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="wiggle.migrationPlan", arguments=[path.as_uri()])
        )
        assert "1 live instance(s)" in plan["summary"]
        assert "migrate  1" in plan["summary"]

        # An instance on a version registered after this one is not on an older version.
        newer = path.read_text() + "  - task: validate\n    id: validate_again\n"
        stack.client.deploy(newer.encode(), filename="orders-v3.yaml")
        stack.client.start("orders", {}, instance_id="order-3")
        _configure(client, {"address": stack.address})
        assert "1 live instance on older versions: migration plan" in await lenses()
        _configure(client, {})
    close_document(client, path.as_uri())


def _published_count(client: Client, uri: str) -> int:
    return sum(1 for p in client.published if p.uri == uri)


async def test_files_changed_on_disk_update_the_index_and_the_open_documents(
    client: Client, workspace: Path
) -> None:
    scenarios = workspace / "flows/orders.scenarios.yaml"
    uri = open_document(client, scenarios, version=2)  # it was open before, as version 1
    assert await diagnostics_of(client, uri, 2) == []
    python = workspace / "workers/python/handlers.py"
    where = types.ReferenceParams(
        text_document=_doc(python.as_uri()),
        position=at(python.read_text(), "def validate", 5),
        context=types.ReferenceContext(include_declaration=False),
    )
    orders = workspace / "flows/orders.yaml"
    before = await client.text_document_references_async(where)
    assert [r.uri for r in before or []] == [orders.as_uri()]

    # The flow changes on disk (a checkout, another editor): its first step is renamed.
    orders.write_text(orders.read_text().replace("task: validate", "task: validate_order"))
    # And a Go worker appears with a new activity.
    refunds = workspace / "workers/go/refunds.go"
    refunds.write_text(
        'package main\n\nfunc more(w worker.Worker) { w.Register("refund_order", nil) }\n'
    )
    published = _published_count(client, uri)
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[
                types.FileEvent(uri=orders.as_uri(), type=types.FileChangeType.Changed),
                types.FileEvent(uri=refunds.as_uri(), type=types.FileChangeType.Created),
            ]
        )
    )
    await until(client, lambda: _published_count(client, uri) > published, "a new check")
    problems = [d.message for d in client.diagnostics[uri]]
    assert problems == ["flow 'orders' has no node 'validate' (did you mean 'validate_order'?)"]
    after = await client.text_document_references_async(where)
    assert not after  # the flow no longer names it
    text = "wiggle: 1\nname: more\nsteps:\n  - task: \n"
    edit = open_document(client, workspace / "scratch/more.yaml", text)
    labels = {i.label for i in await _complete(client, edit, end_of(text, "task: "))}
    assert {"refund_order", "validate"} <= labels
