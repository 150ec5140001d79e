"""The package version, in a module of its own so that any module may read it without importing
the package (whose `__init__` names the worker, client and compiler)."""

__version__ = "0.1.0"
