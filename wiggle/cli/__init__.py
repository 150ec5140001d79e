"""The `wiggle` command: parse, delegate, print.

Each group of subcommands lives in its own module with a `register(subparsers)` function that
adds its parsers and sets `handler` (a function taking the parsed namespace and returning the exit
code). `main(argv)` is what the console script and the tests call. Errors are Wiggle errors: one
line on stderr (a flow's problems as FILE:LINE:COL lines), exit status 1; with `--json` the same
error is also a JSON document on stdout.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from wiggle.errors import FlowError, Unavailable, WiggleError

__all__ = ["main"]

# Modules that contribute subcommands, in the order they appear in --help.
_COMMAND_MODULES = (
    "wiggle.cli._flow_commands",  # validate, hash, compile, render
    "wiggle.cli._run_command",  # run
    "wiggle.cli._server_command",  # server
    "wiggle.cli._worker_command",  # worker
    "wiggle.cli._client_commands",  # deploy, start, signal, cancel
    "wiggle.cli._inspect_commands",  # status, list, wait, workers
    "wiggle.cli._repair_commands",  # retry, reset, batch
    "wiggle.cli._migrate_commands",  # diff, migrate
    "wiggle.cli._schedule_commands",  # schedule
    "wiggle.cli._task_commands",  # task
    "wiggle.cli._console_command",  # console
    "wiggle.cli._prune_command",  # prune
    "wiggle.cli._conformance_command",  # conformance
    "wiggle.cli._test_command",  # test
    "wiggle.cli._bench_command",  # bench
    "wiggle.cli._trace_command",  # trace-receiver
    "wiggle.cli._lsp_command",  # lsp
)

# Most specific first: the stable code a --json error carries (the wire's ErrorCode names).
_CODES: tuple[tuple[str, str], ...] = (
    ("FlowError", "FLOW_INVALID"),
    ("DefinitionNotFound", "DEFINITION_NOT_FOUND"),
    ("InstanceNotFound", "INSTANCE_NOT_FOUND"),
    ("BatchNotFound", "BATCH_NOT_FOUND"),
    ("ScheduleNotFound", "SCHEDULE_NOT_FOUND"),
    ("InputRejected", "INPUT_REJECTED"),
    ("SignalNotAwaited", "SIGNAL_NOT_AWAITED"),
    ("WrongPath", "WRONG_PATH"),
    ("InvalidRequest", "INVALID_REQUEST"),
    ("StaleLease", "STALE_LEASE"),
    ("InstanceNotRunning", "INSTANCE_NOT_RUNNING"),
    ("InstanceExists", "INSTANCE_EXISTS"),
    ("RepairRefused", "REPAIR_REFUSED"),
    ("PayloadTooLarge", "PAYLOAD_TOO_LARGE"),
    ("Unauthenticated", "UNAUTHENTICATED"),
    ("Unavailable", "UNAVAILABLE"),
)


def error_code(exc: WiggleError) -> str:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return next((code for name, code in _CODES if name in names), "ERROR")


def _hint(exc: WiggleError) -> str:
    if isinstance(exc, Unavailable):
        return (
            "is `wiggle server` running at that address? Point --address "
            "(or WIGGLE_ADDRESS) at it, or start one."
        )
    return ""


def _report(exc: WiggleError, as_json: bool) -> None:
    from wiggle.cli._output import dump

    if isinstance(exc, FlowError):
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
    else:
        print(f"wiggle: {exc}", file=sys.stderr)
    hint = _hint(exc)
    if hint:
        print(f"wiggle: hint: {hint}", file=sys.stderr)
    if as_json:
        error: dict[str, object] = {"code": error_code(exc), "message": str(exc)}
        if isinstance(exc, FlowError):
            error["diagnostics"] = [str(d) for d in exc.diagnostics]
        if hint:
            error["hint"] = hint
        print(dump({"error": error}))


class _Parser(argparse.ArgumentParser):
    """Usage errors as a JSON document too when the command line asks for --json."""

    json_errors = False

    def error(self, message: str) -> None:  # type: ignore[override]
        if _Parser.json_errors:
            from wiggle.cli._output import dump

            print(dump({"error": {"code": "USAGE", "message": message}}))
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = _Parser(
        prog="wiggle",
        description="Wiggle: durable workflows where the workflow is data, not code.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
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
    argv = list(sys.argv[1:] if argv is None else argv)
    _Parser.json_errors = "--json" in argv
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(handler(args))
    except WiggleError as exc:
        _report(exc, bool(getattr(args, "json", False)))
        return 1
    except KeyboardInterrupt:
        return 130
