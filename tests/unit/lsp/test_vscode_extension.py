"""editors/vscode passes the server every setting it reads and acts on the server's commands
(the extension's build, `npm ci && npm run compile`, is not part of the suite: docs/editors.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from wiggle.lsp import _lens

ROOT = Path(__file__).resolve().parents[3]
EXTENSION = ROOT / "editors/vscode"


def test_the_extension_offers_every_setting_of_the_server() -> None:
    manifest = json.loads((EXTENSION / "package.json").read_text())
    offered = set(manifest["contributes"]["configuration"]["properties"])
    lsp = ROOT / "wiggle/lsp"
    server = (lsp / "_server.py").read_text() + (lsp / "_lens.py").read_text()
    read = set(re.findall(r"(?:settings|found)\.get\(\"(\w+)\"", server))
    assert read == {"address", "tokenFile", "debounceMs", "unregisteredActivities"}
    assert offered == {f"wiggle.{name}" for name in read} | {"wiggle.command"}
    source = (EXTENSION / "src/extension.ts").read_text()
    for name in read:
        assert re.search(rf'{name}: config\.get<\w+>\("{name}"\)', source), name


def test_the_extension_shows_what_the_servers_commands_answer() -> None:
    source = (EXTENSION / "src/extension.ts").read_text()
    assert f'"{_lens.CMD_RENDER}"' in source and f'"{_lens.CMD_VERSION}"' in source
    assert '"wiggle/render"' in source
