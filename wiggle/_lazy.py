"""Public names a package loads on first use (PEP 562), so that importing the package stays
cheap for the processes that need only part of it."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_getattr"]


def lazy_getattr(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package` that imports each name of `homes` from the module
    named beside it the first time it is asked for, and keeps it in the package. A home
    `"module:other"` gives the package's name to that module's `other` (an alias)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attribute = home.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        setattr(importlib.import_module(package), name, value)
        return value

    return __getattr__
