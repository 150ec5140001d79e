"""The `wiggle` command: parse, delegate, print.

Each group of subcommands lives in its own module with a `register(subparsers)` function that
adds its parsers and sets `handler` (a function taking the parsed namespace and returning the exit
code). `main(argv)` is what the console script and the tests call.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from wiggle.errors import WiggleError

__all__ = ["main"]

# Modules that contribute subcommands, in the order they appear in --help.
_COMMAND_MODULES = (
    "wiggle.cli._flow_commands",  # validate, hash, compile, render
    "wiggle.cli._run_command",  # run
    "wiggle.cli._remote_commands",  # server, worker, deploy, start, signal, cancel, status
    "wiggle.cli._console_command",  # console
    "wiggle.cli._prune_command",  # prune
    "wiggle.cli._conformance_command",  # conformance
    "wiggle.cli._bench_command",  # bench
)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="wiggle",
        description="Wiggle: durable workflows where the workflow is data, not code.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:  # a real import error inside the module: show it
                raise
            continue  # not written yet
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args))
    except WiggleError as exc:
        print(f"wiggle: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
