"""Test a flow like code: scenario files, a virtual clock and path coverage (docs/testing.md).

    load_scenario_file(path)   a scenario file, checked against its flow (FlowError, located)
    check_scenarios(text, path)  the same checks of a scenario file's text (an editor's buffer),
                               optionally without importing its handlers
    FlowTest(flow, ...)        one instance on the real engine, in-process, on a virtual clock
                               (or, after apply_schedule, the instances a schedule fires)
    Harness()                  the clock and one in-memory engine per mode, shared by runs
    MODES                      SERVER, LOCAL_SYNC, LOCAL_ASYNC

`wiggle test` is the command; `wiggle.testing.pytest_plugin` gives pytest the `flow_test`
fixture. The names load on first use, so the pytest plugin (loaded by every pytest session of
an environment with Wiggle installed) does not bring the engine in until a test asks for it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from wiggle.testing._flowtest import MODES, FlowTest, Harness, ScenarioError
    from wiggle.testing._load import check_scenarios, load_scenario_file

__all__ = ["MODES", "FlowTest", "Harness", "ScenarioError", "check_scenarios", "load_scenario_file"]

_HOMES = {
    "MODES": "_flowtest",
    "FlowTest": "_flowtest",
    "Harness": "_flowtest",
    "ScenarioError": "_flowtest",
    "check_scenarios": "_load",
    "load_scenario_file": "_load",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'wiggle.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"wiggle.testing.{home}"), name)
    globals()[name] = value
    return value
