"""The conformance corpus under the distributed database profile, at SERIALIZABLE, with the commit
fault injector (injector.py) on every session's engine: every case, every mode, with the Python
conformance worker, must end exactly as its expectation says, which is what it does without the
profile. The ledger line counts the cases' instances and the faults injected. Only the full
suite (scripts/faults.sh) runs it: the short one proves the same rule (the profile's transactions
under injected serialization failures and dropped commits, nothing lost or doubled) with
test_distributed_sim's serializable scenario, at a tenth of the cost."""

from __future__ import annotations

import threading

import pytest
from faultkit import Tally
from injector import Injector, serializable

from wiggle.conformance import (
    MODES,
    PYTHON_WORKER,
    RunnerOptions,
    format_table,
    load_cases,
    run_corpus,
    summarise,
)
from wiggle.engine import Engine

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.full_only(
        "tests/faults/test_distributed_sim.py::"
        "test_the_profile_under_injected_commit_faults[serializable]"
    ),
]

#: Per commit: serialisation failures, and connections dropped around the COMMIT.
INJECT = (0.10, 0.02)


def test_the_corpus_under_the_profile_and_injected_faults(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str, ledger
):
    monkeypatch.setenv("WIGGLE_TEST_POSTGRES_URL", postgres_url)
    injectors: list[Injector] = []
    retries: list[Engine] = []
    lock = threading.Lock()

    def faulty(engine: Engine) -> None:
        serializable(engine.db.url)
        injector = Injector(*INJECT, seed=len(injectors) + 1)
        injector.install(engine.db.sa)
        with lock:
            injectors.append(injector)
            retries.append(engine)

    cases = load_cases()
    results = run_corpus(
        cases,
        RunnerOptions(
            modes=MODES,
            databases=["postgres"],
            worker=PYTHON_WORKER,
            # Fewer cases at once than the plain corpus: at SERIALIZABLE their transactions
            # also conflict with each other, and on a loaded machine the retries could push a
            # cancel past the step it must land during (cancel/running holds it 4 s for that).
            parallel=8,
            verbose=True,
            database_profile="distributed",
            on_engine=faulty,
        ),
    )
    rows = summarise(results)
    failed = [r for r in rows if not r.passed]
    fired = sum((i.counts for i in injectors), start=type(injectors[0].counts)())
    ran_again = sum((e.db.retries for e in retries), start=type(fired)())  # type: ignore[attr-defined]
    tally = Tally(
        "corpus under the distributed profile, serializable, injected commit faults",
        started=len(rows),
        completed=len(rows) - len(failed),
        failed=len(failed),
        fault=(
            f"{fired['commits']} commits, {fired['serialization']} failed serialization, "
            f"{fired['drop_after']} dropped after COMMIT, {fired['drop_before']} before; run "
            "again: " + ", ".join(f"{k} {n}" for k, n in sorted(ran_again.items()))
        ),
    )
    ledger(tally, failed_ok=len(rows))  # the table below says which failed
    assert len(rows) == len(cases) * (len(MODES) + 1)
    assert not failed, "\n" + format_table(failed)
    assert fired["serialization"] >= 20 and fired["drop_after"] + fired["drop_before"] >= 5, fired
