"""What the expression evaluator's unit tests share."""

from __future__ import annotations

import pytest

from wiggle.expressions import _cel

#: The time limit of the tests whose evaluations end well within the profile's (TIME_LIMIT_S).
ROOMY_TIME_LIMIT_S = 60.0


@pytest.fixture
def roomy_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluations under a time limit of a minute instead of the profile's second, for the tests
    that are not about the limit. The limit is wall-clock time, which a loaded machine stretches
    many times over: an evaluation of 10,000 iterations or a 2 MB search takes a tenth of a second
    on an idle machine and can take a second on a busy one. A search or a loop that is not linear
    takes minutes on the vectors that check it, so it still fails under this limit."""
    monkeypatch.setattr(_cel, "TIME_LIMIT_S", ROOMY_TIME_LIMIT_S)


#: The limit of the vectors that must reach one: what they check is that an evaluation of ten
#: seconds or more is stopped with the limit's error, which a tenth of a second shows as well as
#: the profile's second does, in a tenth of the CPU (test_time_limit.py checks the profile's).
BRIEF_TIME_LIMIT_S = 0.1


@pytest.fixture
def brief_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Evaluations under a time limit of a tenth of a second (BRIEF_TIME_LIMIT_S)."""
    monkeypatch.setattr(_cel, "TIME_LIMIT_S", BRIEF_TIME_LIMIT_S)
