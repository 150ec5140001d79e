"""The house's shape, read from the imports (docs/internals.md, "Layout").

Every import counts: at module level, inside a function, and under `TYPE_CHECKING` (an import
only the type checker runs still ties the two modules together, and the next edit turns it into
one that runs). Two rules:

- no import cycle anywhere in `wiggle/`;
- inside `wiggle/engine/`, a layer imports only the layers below it:
  model < store < machine < reads < ops < the facade (the package's own top-level modules).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "wiggle"

#: The engine's layers, lowest first; the facade (top-level modules of wiggle/engine) is above all.
ENGINE_LAYERS = ("model", "store", "machine", "reads", "ops")
FACADE = len(ENGINE_LAYERS)


def _module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(base: Path) -> dict[str, Path]:
    return {_module_name(p, base): p for p in sorted(base.rglob("*.py"))}


def _imports(name: str, path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The modules of `known` that `name` (at `path`) imports, every kind of import counted."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:  # `from . import module`
                    yield sub
                elif target in known:
                    yield target


def _graph(base: Path) -> dict[str, set[str]]:
    known = _modules(base)
    return {
        name: {t for t in _imports(name, path, known) if t != name} for name, path in known.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _engine_layer(module: str) -> int | None:
    """The layer of a module of wiggle.engine (None: not in the engine)."""
    parts = module.split(".")
    if parts[:2] != ["wiggle", "engine"]:
        return None
    if len(parts) >= 3 and parts[2] in ENGINE_LAYERS:
        return ENGINE_LAYERS.index(parts[2])
    return FACADE


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, targets in sorted(graph.items()):
        mine = _engine_layer(module)
        if mine is None:
            continue
        for target in sorted(targets):
            theirs = _engine_layer(target)
            if theirs is not None and theirs > mine:
                out.append(f"{module} imports {target}, a higher layer")
    return out


def test_no_import_cycle_in_wiggle() -> None:
    assert _cycles(_graph(PACKAGE)) == []


def test_the_engine_imports_run_down_its_layers() -> None:
    assert _layer_violations(_graph(PACKAGE)) == []


def test_every_engine_module_is_in_a_layer() -> None:
    engine = PACKAGE / "engine"
    folders = {p.name for p in engine.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(ENGINE_LAYERS)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "wiggle" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path / "wiggle"


@pytest.mark.parametrize(
    "text",
    [
        "from .b import thing\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import thing\n",
        "def f():\n    from . import b\n",
        "import wiggle.b\n",
    ],
)
def test_a_cycle_is_found_whatever_the_import(tmp_path: Path, text: str) -> None:
    base = _tree(tmp_path, {"__init__.py": "", "a.py": text, "b.py": "from . import a\n"})
    assert _cycles(_graph(base)) == [["wiggle.a", "wiggle.b"]]


def test_a_lower_layer_importing_a_higher_one_is_found(tmp_path: Path) -> None:
    base = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "engine/__init__.py": "from ._engine import Engine\n",
            "engine/_engine.py": "from .store import db\n",
            "engine/store/__init__.py": "",
            "engine/store/db.py": "from ..ops.prune import x\n",
            "engine/machine/__init__.py": "",
            "engine/machine/tx.py": "from wiggle.engine import Engine\n",
            "engine/ops/__init__.py": "",
            "engine/ops/prune.py": "from ..store.db import y\n",
        },
    )
    assert _layer_violations(_graph(base)) == [
        "wiggle.engine.machine.tx imports wiggle.engine, a higher layer",
        "wiggle.engine.store.db imports wiggle.engine.ops.prune, a higher layer",
    ]


def _private_imports(graph: dict[str, set[str]], package: str) -> list[str]:
    """Modules of another package that `package` reaches past that package's public face: a
    module whose name has a private part, or the engine's layers."""
    out = []
    for module, targets in sorted(graph.items()):
        if module != package and not module.startswith(package + "."):
            continue
        for target in sorted(targets):
            if target == package or target.startswith(package + "."):
                continue
            inner = target.split(".")[1:]
            if any(part.startswith("_") for part in inner) or _engine_layer(target) not in (
                None,
                FACADE,
            ):
                out.append(f"{module} imports {target}")
    return out


def test_wiggle_testing_imports_only_public_modules_of_other_packages() -> None:
    assert _private_imports(_graph(PACKAGE), "wiggle.testing") == []


def test_a_private_import_is_found(tmp_path: Path) -> None:
    base = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "testing/__init__.py": "from wiggle.compiler._loader import x\n",
            "compiler/__init__.py": "",
            "compiler/_loader.py": "",
        },
    )
    assert _private_imports(_graph(base), "wiggle.testing") == [
        "wiggle.testing imports wiggle.compiler._loader"
    ]


def test_wiggle_lsp_imports_only_public_modules_of_other_packages() -> None:
    # wiggle._connection is the one copy of the connection rules every client reads (the CLI's
    # flags, the worker, the language server's code lens).
    shared = "wiggle._connection"
    found = _private_imports(_graph(PACKAGE), "wiggle.lsp")
    assert [line for line in found if not line.endswith(f" imports {shared}")] == []
