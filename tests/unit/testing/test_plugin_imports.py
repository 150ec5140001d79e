"""The pytest plugin stays cheap to load: every pytest session of an environment with Wiggle
installed loads it, and it must not bring the engine (SQLAlchemy, grpc) in before a test uses
the fixture."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("grpc", "sqlalchemy", "wiggle.engine", "wiggle.worker", "wiggle.testing._flowtest")


def test_loading_the_plugin_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import wiggle.testing.pytest_plugin\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_public_names_load_on_first_use() -> None:
    import wiggle.testing

    assert sorted(wiggle.testing.__all__) == [
        "FlowTest",
        "Harness",
        "MODES",
        "ScenarioError",
        "check_scenarios",
        "load_scenario_file",
    ]
    assert all(getattr(wiggle.testing, name) is not None for name in wiggle.testing.__all__)
