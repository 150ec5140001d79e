"""Steps known valid are not validated again (an editor compiles the same flow after every
change), and that never hides a problem: only verdicts without errors are kept."""

from __future__ import annotations

import pytest

from wiggle.compiler import analyse_flow, load_flow
from wiggle.compiler._schema import _VALID_STEPS, forget_valid_steps
from wiggle.errors import FlowError

FLOW = """\
wiggle: 1
name: cache
steps:
  - task: a
    timeout: 5s
  - parallel:
      x: [{task: b}]
    combine: c
"""


def _messages(text: str) -> list[str]:
    return [d.message for d in analyse_flow(text).problems]


def test_a_step_known_valid_is_remembered_and_an_invalid_one_never() -> None:
    forget_valid_steps()
    assert _messages(FLOW) == []
    remembered = len(_VALID_STEPS)
    assert remembered == 3  # the task, the parallel, the step inside its branch
    broken = FLOW.replace("timeout: 5s", "timeout: 5 s")
    first = _messages(broken)
    assert first == _messages(broken)  # reported again, worded alike
    assert first == [
        "'5 s' is not a valid duration: write a whole number and a unit: 250ms, 30s, 5m, 2h or 1d"
    ]
    assert len(_VALID_STEPS) == remembered  # the broken step was not kept


def test_the_same_step_in_another_place_is_judged_by_its_own_content() -> None:
    forget_valid_steps()
    load_flow(FLOW)
    # The branch's step becomes invalid: its parallel is validated again, and says so.
    broken = FLOW.replace("x: [{task: b}]", "x: [{task: b, retries: 2}]")
    with pytest.raises(FlowError, match="unknown key 'retries'"):
        load_flow(broken)
    # 1 and 1.0 are different documents: a step is known by its exact JSON.
    with pytest.raises(FlowError):
        load_flow(FLOW.replace("  - task: a\n", "  - task: a\n    retry: {max_attempts: 2.0}\n"))
    load_flow(FLOW.replace("  - task: a\n", "  - task: a\n    retry: {max_attempts: 2}\n"))
