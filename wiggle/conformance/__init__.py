"""The conformance corpus runner and the Python conformance activities (spec/conformance/).

`load_cases` reads and validates the case files; `run_corpus` runs them under each execution
mode on each database against a worker process (or, given EMBEDDED_WORKER, the Python worker
in the runner's process, calling its node in process); `summarise` turns the results into the
table `wiggle conformance` prints. `check_flow` runs one flow of the user's under every mode and
reports how the modes differ. `python -m wiggle.conformance` is the Python conformance worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wiggle._lazy import lazy_getattr

if TYPE_CHECKING:
    from wiggle.conformance._activities import build_registry
    from wiggle.conformance._cases import Case, CaseError, default_spec_dir, load_case, load_cases
    from wiggle.conformance._check import RunResult
    from wiggle.conformance._embedded_worker import EMBEDDED_WORKER
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

# Each public name and the module that holds it. Loaded on first use, so that the worker
# (`python -m wiggle.conformance`) does not pay for the runner, the case loader and their
# JSON Schema validation each time it starts: the corpus starts it dozens of times.
_WHERE = {
    "Case": "wiggle.conformance._cases",
    "CaseError": "wiggle.conformance._cases",
    "EMBEDDED_WORKER": "wiggle.conformance._embedded_worker",
    "FlowCheck": "wiggle.conformance._flowcheck",
    "FlowPlan": "wiggle.conformance._flowcheck",
    "FlowSignal": "wiggle.conformance._flowcheck",
    "MODES": "wiggle.conformance._runner",
    "ModeOutcome": "wiggle.conformance._flowcheck",
    "PYTHON_WORKER": "wiggle.conformance._worker_process",
    "Row": "wiggle.conformance._report",
    "RunResult": "wiggle.conformance._check",
    "RunnerOptions": "wiggle.conformance._runner",
    "build_registry": "wiggle.conformance._activities",
    "check_flow": "wiggle.conformance._flowcheck",
    "check_flows": "wiggle.conformance._flowcheck",
    "default_spec_dir": "wiggle.conformance._cases",
    "format_table": "wiggle.conformance._report",
    "load_case": "wiggle.conformance._cases",
    "load_cases": "wiggle.conformance._cases",
    "run_corpus": "wiggle.conformance._runner",
    "summarise": "wiggle.conformance._report",
}

__all__ = [
    "EMBEDDED_WORKER",
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


__getattr__ = lazy_getattr(__name__, _WHERE)
