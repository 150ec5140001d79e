"""What the commands print, without running them: counts in the right number."""

from __future__ import annotations

import datetime

import pytest

from wiggle.cli._output import counted
from wiggle.cli._prune_command import summary
from wiggle.engine import PruneResult


def test_counted() -> None:
    assert [counted(n, "instance") for n in (0, 1, 2)] == [
        "0 instances",
        "1 instance",
        "2 instances",
    ]
    assert counted(1, "child", "children") == "1 child"
    assert counted(2, "child", "children") == "2 children"


@pytest.mark.parametrize(
    ("counts", "line"),
    [
        (
            (1, 1, 1, 0),
            "would remove 1 finished instance that ended before 2024-06-01 00:00:00 UTC, "
            "with 1 token, 1 event and 0 signals",
        ),
        (
            (3, 5, 12, 1),
            "would remove 3 finished instances that ended before 2024-06-01 00:00:00 UTC, "
            "with 5 tokens, 12 events and 1 signal",
        ),
    ],
)
def test_the_summary_counts_in_the_right_number(counts, line):
    cutoff = datetime.datetime(2024, 6, 1, tzinfo=datetime.UTC)
    result = PruneResult(*counts, cutoff_ms=int(cutoff.timestamp() * 1000), dry_run=True)
    assert summary(result, cutoff) == line
