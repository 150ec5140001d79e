"""Load a handlers file or module and collect the activities it defines.

`wiggle run --handlers X` and `wiggle worker --handlers X` accept a path to a Python file or a
dotted module name. The activities are those the module registered while it was imported, plus
any decorated function found among its globals (which covers a module imported earlier).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

from wiggle.worker._activities import Registry, _captures, marked_name

__all__ = ["load_handlers"]


def load_handlers(spec: str | os.PathLike[str]) -> Registry:
    """Import `spec` (a `.py` path or a module name); returns the activities it defines.

    Raises ImportError (ModuleNotFoundError, FileNotFoundError as an ImportError) with the
    path or name in the message when it cannot be loaded; errors inside the module propagate.
    """
    registry = Registry()
    _captures.append(registry)
    try:
        module = _import(spec)
    finally:
        _captures.remove(registry)
    for value in list(vars(module).values()):
        name = marked_name(value)
        if name is not None and callable(value) and name not in registry:
            registry.register(value, name)
    return registry


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".py") or os.sep in spec or (os.altsep is not None and os.altsep in spec)


def _import(spec: str | os.PathLike[str]) -> ModuleType:
    text = os.fspath(spec)
    if not _looks_like_path(text):
        return importlib.import_module(text)
    path = Path(text).resolve()
    if not path.is_file():
        raise ImportError(f"handlers file {text} does not exist", path=text)
    # One module name per file, so loading the same file twice reuses the first import.
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    name = f"wiggle_handlers_{path.stem.replace('-', '_').replace('.', '_')}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None or module_spec.loader is None:
        raise ImportError(f"cannot load handlers file {text}", path=text)
    # Siblings of the file import the way they would under `python FILE`.
    parent = str(path.parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module
