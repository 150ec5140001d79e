"""`wiggle lsp` without its optional packages says how to install them instead of a traceback."""

from __future__ import annotations

import sys

import pytest

from wiggle.cli import main


def test_without_pygls_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pygls", None)  # import pygls now raises ImportError
    assert main(["lsp"]) == 1
    said = capsys.readouterr().err
    assert "pip install 'wiggle[lsp]'" in said
    assert "bash scripts/setup.sh" in said
