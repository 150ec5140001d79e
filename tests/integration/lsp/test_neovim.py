"""Neovim, headless, with `wiggle lsp` as its language server for a flow: the editor receives
the compiler's diagnostics at their lines and columns (Debian's neovim, from scripts/setup.sh).

The Lua is the configuration docs/editors.md gives, in the form this Neovim understands
(`vim.lsp.start` from 0.8 on, `vim.lsp.start_client` and `buf_attach_client` before).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

FLOW = """\
wiggle: 1
name: typo
steps:
  - task: validate
    timout: 30s
  - sleep: 0s
"""

SCRIPT = """\
local config = {
  name = "wiggle",
  cmd = { os.getenv("WIGGLE_LSP_PYTHON"), "-m", "wiggle", "lsp" },
  root_dir = vim.fn.getcwd(),
}
if vim.lsp.start then
  vim.lsp.start(config)
else
  vim.lsp.buf_attach_client(0, vim.lsp.start_client(config))
end
local done = vim.wait(60000, function() return #vim.diagnostic.get(0) >= 2 end, 20)
local found = {}
for _, d in ipairs(vim.diagnostic.get(0)) do
  table.insert(found, { line = d.lnum, col = d.col, message = d.message, source = d.source })
end
table.sort(found, function(a, b) return a.line < b.line end)
local out = io.open(os.getenv("WIGGLE_LSP_OUT"), "w")
out:write(vim.fn.json_encode({ done = done, diagnostics = found }))
out:close()
vim.cmd("qa!")
"""


def test_neovim_shows_the_diagnostics_of_a_flow(tmp_path: Path) -> None:
    nvim = shutil.which("nvim")
    assert nvim is not None, "Neovim is missing: bash scripts/setup.sh installs it"
    (tmp_path / "flow.yaml").write_text(FLOW)
    (tmp_path / "check.lua").write_text(SCRIPT)
    out = tmp_path / "diagnostics.json"
    env = {**os.environ, "WIGGLE_LSP_PYTHON": sys.executable, "WIGGLE_LSP_OUT": str(out)}
    subprocess.run(
        [nvim, "--headless", "--clean", "flow.yaml", "-c", "luafile check.lua"],
        cwd=tmp_path,
        env=env,
        check=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    seen = json.loads(out.read_text())
    assert seen["done"] is True
    assert seen["diagnostics"] == [
        {
            "line": 4,
            "col": 4,
            "message": "unknown key 'timout' (expected one of: checkpoint, description, id, "
            "queue, retry, task, timeout)",
            "source": "wiggle",
        },
        {
            "line": 5,
            "col": 11,
            "message": "duration '0s' must be greater than zero",
            "source": "wiggle",
        },
    ]
