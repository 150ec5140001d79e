"""A worker under test that ends on its own fails the cases at once, saying why, instead of
spending every case's deadline waiting for polls and steps that never come."""

from __future__ import annotations

import shlex
import sys
import time

import pytest

from wiggle.conformance import RunnerOptions, load_cases, run_corpus

SAYS_AND_EXITS = f"{shlex.quote(sys.executable)} -c 'print(\"no such flaw\"); raise SystemExit(2)'"


@pytest.mark.timeout(120)
def test_a_worker_that_exits_at_start_fails_every_case_with_its_status_and_output() -> None:
    cases = load_cases("expressions/choice,expressions/set")
    t0 = time.monotonic()
    results = run_corpus(
        cases, RunnerOptions(modes=["LOCAL_SYNC"], databases=["sqlite"], worker=SAYS_AND_EXITS)
    )
    took = time.monotonic() - t0
    assert {r.case_id for r in results} == {c.id for c in cases}
    for r in results:
        assert not r.passed
        assert any("exited with status 2" in p and "no such flaw" in p for p in r.problems), r
    # Not a timing assertion of speed: far under one worker-ready wait (60 s), which the old
    # runner spent before running every case to its deadline.
    assert took < 50, took
