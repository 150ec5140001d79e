"""Every Python package in the tree is installed: pyproject lists packages explicitly."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_package_directory_is_declared() -> None:
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "wiggle").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert found - _declared() == set()


def test_the_renderer_is_installed_from_tools() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["package-dir"]["wiggle_render"] == "tools/render"
    assert (ROOT / "tools" / "render" / "__init__.py").is_file()
