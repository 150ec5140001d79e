"""The pytest plugin of `wiggle.testing`: the `flow_test` fixture.

Installed as a `pytest11` entry point, so every project with Wiggle installed has the fixture
without a conftest (where plugin autoloading is off: `pytest_plugins =
["wiggle.testing.pytest_plugin"]` in a conftest). Importing this module does not import the
engine: it comes with the first `flow_test(...)` call.

```python
def test_onboarding_escalates(flow_test):
    run = flow_test("flows/onboarding.yaml", handlers="flows/handlers.py")
    run.start({"customer_id": "C-1", ...})
    run.advance("3d")
    run.assert_visits("kyc_result", "open_compliance_ticket")
```
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from wiggle.testing._flowtest import FlowTest

__all__ = ["flow_test"]


def _near_test(base: Path, value: Any) -> Any:
    """A relative path that exists beside the test file is taken from there; anything else is
    left as it is (a path from the working directory, a module name, a Registry...)."""
    if isinstance(value, str | os.PathLike) and not os.path.isabs(value):
        beside = base / value
        if beside.exists():
            return beside
    return value


@pytest.fixture
def flow_test(request: pytest.FixtureRequest) -> Iterator[Callable[..., FlowTest]]:
    """A factory of `wiggle.testing.FlowTest`s (same arguments), each closed after the test.
    Relative paths are looked for beside the test file first, then in the working directory."""
    from wiggle.testing._flowtest import FlowTest

    base = Path(str(request.path)).parent
    made: list[FlowTest] = []

    def make(flow: Any, **kwargs: Any) -> FlowTest:
        if "handlers" in kwargs:
            kwargs["handlers"] = _near_test(base, kwargs["handlers"])
        if "flows" in kwargs:
            kwargs["flows"] = [_near_test(base, f) for f in kwargs["flows"]]
        run = FlowTest(_near_test(base, flow), **kwargs)
        made.append(run)
        return run

    yield make
    for run in made:
        run.close()
