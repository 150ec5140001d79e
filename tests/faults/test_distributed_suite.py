"""The engine suite's PostgreSQL tests again, every engine under the distributed database profile,
at SERIALIZABLE and at READ COMMITTED (tests/integration/engine/conftest.py): each rule the suite
checks (fencing, leases, timers exactly once, group commit, repairs, migrations, pruning) holds as a
distributed engine would run it. A pytest run in a subprocess; its ledger line counts the tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from faultkit import Tally

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.full_only(
        "tests/faults/test_distributed_corpus.py::"
        "test_the_corpus_under_the_profile_and_injected_faults"
    ),
]

_PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _count(summary: str, word: str) -> int:
    """How many tests pytest's summary line says `word` (passed, failed)."""
    found = re.search(rf"(\d+) {word}", summary)
    return int(found[1]) if found else 0


@pytest.mark.parametrize("isolation", ["serializable", "read committed"])
def test_the_engine_suite_under_the_profile(postgres_url: str, ledger, isolation: str):
    env = {
        **os.environ,
        "WIGGLE_TEST_POSTGRES_URL": postgres_url,
        "WIGGLE_TEST_DATABASE_PROFILE": "distributed",
        "WIGGLE_TEST_ISOLATION": "serializable" if isolation == "serializable" else "",
    }
    run = subprocess.run(
        [*_PYTEST, "-m", "postgres", "tests/integration/engine"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1100,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-400:]
    passed, failed = (_count(summary, word) for word in ("passed", "failed"))
    tally = Tally(
        f"engine suite under the distributed profile, {isolation}",
        started=passed + failed,
        completed=passed,
        failed=failed,
        fault=summary,
    )
    ledger(tally)
    assert run.returncode == 0 and passed >= 250, run.stdout[-4000:]
