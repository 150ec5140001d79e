"""The conformance corpus runner and the Python conformance activities (spec/conformance/).

`load_cases` reads and validates the case files; `run_corpus` runs them under each execution
mode on each database against a worker process; `summarise` turns the results into the table
`wiggle conformance` prints. `check_flow` runs one flow of the user's under every mode and
reports how the modes differ. `python -m wiggle.conformance` is the Python conformance worker.
"""

from __future__ import annotations

from wiggle.conformance._activities import build_registry
from wiggle.conformance._cases import Case, CaseError, default_spec_dir, load_case, load_cases
from wiggle.conformance._check import RunResult
from wiggle.conformance._flowcheck import (
    FlowCheck,
    FlowPlan,
    FlowSignal,
    ModeOutcome,
    check_flow,
    check_flows,
)
from wiggle.conformance._report import Row, format_table, summarise
from wiggle.conformance._runner import MODES, RunnerOptions, run_corpus
from wiggle.conformance._worker_process import PYTHON_WORKER

__all__ = [
    "MODES",
    "PYTHON_WORKER",
    "Case",
    "CaseError",
    "FlowCheck",
    "FlowPlan",
    "FlowSignal",
    "ModeOutcome",
    "Row",
    "RunResult",
    "RunnerOptions",
    "build_registry",
    "check_flow",
    "check_flows",
    "default_spec_dir",
    "format_table",
    "load_case",
    "load_cases",
    "run_corpus",
    "summarise",
]
