"""Integration tests of the renderer run the real Graphviz; without it they fail, loudly."""

from __future__ import annotations

from pathlib import Path

import pytest

from wiggle.compiler import CompiledFlow, load_flow_file

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = sorted((ROOT / "definitions").glob("*.yaml"))


@pytest.fixture(scope="session", autouse=True)
def _graphviz_installed() -> None:
    """Fail every test here with the install hint rather than skip: a skipped rendering suite
    would let a machine without Graphviz pass the build."""
    from wiggle_render import GraphvizNotFound, ensure_dot

    try:
        ensure_dot()
    except GraphvizNotFound as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def compiled() -> dict[str, CompiledFlow]:
    """Every flow in definitions/, by file stem."""
    return {path.stem: load_flow_file(path) for path in DEFINITIONS}
