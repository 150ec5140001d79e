"""Test a flow like code: scenario files, a virtual clock and path coverage (docs/testing.md)."""

from __future__ import annotations

from wiggle.testing._flowtest import MODES, FlowTest, Harness, ScenarioError
from wiggle.testing._load import load_scenario_file

__all__ = ["MODES", "FlowTest", "Harness", "ScenarioError", "load_scenario_file"]
