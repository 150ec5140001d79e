"""The minute an hourly schedule of a test fires at: chosen when the test begins, far enough
ahead that no regular fire comes due while the test runs.

A schedule that fired at a fixed minute (0, 15) met the wall clock now and then: a clean-clone
run applied one at 08:14:58, its regular 08:15 fire came two seconds later, was skipped for the
overlap with the test's own trigger, and that skip became the newest fire the test read.
"""

from __future__ import annotations

import datetime

__all__ = ["minute_away"]


def minute_away(minutes: int = 20) -> int:
    """The minute of the hour `minutes` from now (UTC; every zone the tests use is a whole
    number of hours from it)."""
    return (datetime.datetime.now(datetime.UTC).minute + minutes) % 60
