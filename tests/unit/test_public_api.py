"""Pins what `wiggle` exports: adding or removing a public name is a deliberate change."""

from __future__ import annotations

import subprocess
import sys

import wiggle

EXPECTED = {
    "Client",
    "CompiledFlow",
    "Conflict",
    "DefinitionNotFound",
    "Diagnostic",
    "ExecutionMode",
    "FlowError",
    "InputRejected",
    "InstanceNotFound",
    "InstanceNotRunning",
    "InvalidRequest",
    "NonRetryable",
    "NotFound",
    "PayloadTooLarge",
    "Registry",
    "StaleLease",
    "StepInfo",
    "Unauthenticated",
    "Unavailable",
    "WiggleError",
    "Worker",
    "WrongPath",
    "__version__",
    "activity",
    "load_flow",
    "load_flow_file",
    "step",
}


def test_exported_names_are_pinned() -> None:
    assert set(wiggle.__all__) == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in wiggle.__all__:
        assert getattr(wiggle, name) is not None, name


def test_importing_wiggle_does_not_load_grpc() -> None:
    # `wiggle validate` and friends import wiggle; they must not pay for grpc.
    code = "import sys, wiggle, wiggle.errors; print('grpc' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_names_raise_attribute_error() -> None:
    try:
        _ = wiggle.no_such_name  # type: ignore[attr-defined]
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
