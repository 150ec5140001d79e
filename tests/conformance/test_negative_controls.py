"""Negative controls: the corpus must fail a worker that breaks the protocol.

Each broken worker (broken_worker.py) is the Python worker with one rule broken. Each test runs
the few cases that reach that rule, in the modes where it matters, and requires failed rows whose
problems name the broken rule. The outcome (status, context) of most of these runs is right:
only the judged orchestration, or the steps that ran, give the flaw away.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.conformance.broken_worker import FLAWS, STARVED_S
from wiggle.conformance import (
    RunnerOptions,
    format_table,
    load_case,
    load_cases,
    run_corpus,
    summarise,
)

BROKEN = Path(__file__).with_name("broken_worker.py")

CONTROLS = [
    pytest.param(
        "never-chains",
        "modes/linear,modes/predicates",
        ["LOCAL_SYNC", "LOCAL_ASYNC"],
        ["the worker did not chain", "missing report: advance a b c / end"],
        id="never-chains",
    ),
    pytest.param(
        "async-flushes-only-at-the-end",
        "modes/checkpoint,modes/batch-full,limits/size-flush",
        ["LOCAL_ASYNC"],
        [
            "checkpoint b was not flushed before the next step ran",
            "steps in one AdvanceRun; the batch size is 5",
            "missing report: advance g1 g2 g3 g4",
        ],
        id="async-flushes-only-at-the-end",
    ),
    pytest.param(
        "ignores-checkpoint",
        "modes/checkpoint,modes/checkpoint-and-batch",
        ["LOCAL_ASYNC"],
        ["checkpoint b was not flushed", "checkpoint s2 was not flushed"],
        id="ignores-checkpoint",
    ),
    pytest.param(
        "keeps-running-after-lease-lost",
        "lease/cancel-stops-the-run",
        ["LOCAL_ASYNC"],
        ["step b ran 1 times; expected it not to run"],
        id="keeps-running-after-lease-lost",
    ),
    pytest.param(
        "predicate-as-context",
        "modes/predicates,modes/filtered",
        ["LOCAL_SYNC", "LOCAL_ASYNC"],
        ["predicate ok: its boolean was sent as a context", "missing report: advance ok=true"],
        id="predicate-as-context",
    ),
    pytest.param(
        "resends-without-seq",
        "lost/complete-task,lost/advance-run",
        ["SERVER", "LOCAL_ASYNC"],
        [
            "reports without seq (CompleteTask seq 0)",
            # Resent without its number, a turn of the loop is applied twice.
            "status FAILED (loop 'lt' exceeded max_iterations 2); expected COMPLETED",
        ],
        id="resends-without-seq",
    ),
    pytest.param(
        "never-resends",
        "lost/final-report,lost/report-batch",
        ["SERVER", "LOCAL_ASYNC"],
        [
            "the answer to CompleteTask seq 1 was lost and it was never resent",
            "the answer to AdvanceRun seq 1 was lost and it was never resent",
        ],
        id="never-resends",
    ),
    pytest.param(
        "resends-with-a-new-seq",
        "lost/complete-task,lost/advance-run",
        ["SERVER", "LOCAL_SYNC"],
        [
            "the answer to CompleteTask seq 1 was lost; the worker then sent CompleteTask seq 2",
            "the answer to AdvanceRun seq 1 was lost; the worker then sent AdvanceRun seq 2",
        ],
        id="resends-with-a-new-seq",
    ),
    pytest.param(
        "exits-without-handing-back",
        "drain/sigterm-local-run",
        ["LOCAL_SYNC", "LOCAL_ASYNC"],
        ["missing report: advance c / shutdown", "missing report: advance a b c / shutdown"],
        id="exits-without-handing-back",
    ),
    pytest.param(
        "skips-result-limits",
        "limits/over-size,limits/over-deep",
        ["SERVER", "LOCAL_SYNC"],
        [
            "CompleteTask of g carried a 70044-byte result, over max_payload_bytes (65536)",
            "AdvanceRun of n carried a result nested deeper than 128 levels",
        ],
        id="skips-result-limits",
    ),
    pytest.param(
        "retries-results-too-deep-to-encode",
        "limits/over-deep",
        ["SERVER"],
        ["step n ran 3 times; expected 1", "retries of n waited [50, 50] ms; expected []"],
        id="retries-results-too-deep-to-encode",
    ),
    pytest.param(
        "keeps-refused-tasks",
        "refused/release-at-once",
        ["SERVER", "LOCAL_SYNC"],
        ["retries of a waited"],  # the lease ran out: a retry, an attempt spent
        id="keeps-refused-tasks",
    ),
    pytest.param(
        "cancels-its-poll",
        "drain/release-unstarted",
        ["SERVER"],
        ["missing report: release a / shutdown", "retries of a waited"],
        id="cancels-its-poll",
    ),
    pytest.param(
        "runs-tasks-received-while-draining",
        "drain/release-unstarted",
        ["SERVER", "LOCAL_ASYNC"],
        ["missing report: release a / shutdown"],
        id="runs-tasks-received-while-draining",
    ),
    pytest.param(
        "hands-back-at-expressions",
        "expressions/choice,expressions/set",
        ["LOCAL_SYNC", "LOCAL_ASYNC"],
        ["but the run could go on to if-1", "but the run could go on to set-1"],
        id="hands-back-at-expressions",
    ),
]


#: The flaws whose control is a test of its own below, on a case of its own.
OWN_CONTROLS = {"starts-late-after-lease-lost"}


def test_every_flaw_has_a_control() -> None:
    assert {p.values[0] for p in CONTROLS} | OWN_CONTROLS == set(FLAWS)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("flaw", "cases", "modes", "evidence"), CONTROLS)
def test_the_corpus_fails_a_broken_worker(
    flaw: str, cases: str, modes: list[str], evidence: list[str]
) -> None:
    worker = f"{shlex.quote(sys.executable)} {shlex.quote(str(BROKEN))} {flaw}"
    rows = summarise(
        run_corpus(
            load_cases(cases),
            RunnerOptions(modes=modes, databases=["sqlite"], worker=worker),
        )
    )
    failed = [r for r in rows if not r.passed]
    assert failed, f"the corpus passed a worker that {FLAWS[flaw]}:\n{format_table(rows)}"
    problems = "\n".join(p for r in failed for p in r.problems)
    for phrase in evidence:
        assert phrase in problems, f"{phrase!r} not among the problems:\n{format_table(failed)}"


#: lease/cancel-stops-the-run with room to show a starved worker: a 20 s lease (a quarter, 5 s,
#: is what a worker needs left to start a step), a 1 s hold, and a worker that starts b under
#: the lost lease with 19 s of it left but writes b's trace line only 5 s later.
_STARVED_CASE = """\
id: lease/starved-worker
description: A worker that goes on after a cancel, late.
flow:
  wiggle: 1
  name: lease-starved-worker
  steps:
    - {task: hold, id: slow, timeout: 20s}
    - {task: append, id: b}
runs:
  - input: {hold_ms: 1000}
    cancel: {when: "started:slow"}
    expect:
      status: CANCELLED
      steps: {slow: 1}
      watch_leases: true
"""


@pytest.mark.timeout(300)
def test_a_step_run_late_under_a_lost_lease_is_seen(tmp_path: Path) -> None:
    """The runner watches until the run's lease has ended (watch_leases), not for a fixed time
    after the end: a step started too late shows however long the machine delayed it. Before
    watch_leases, the runner stopped watching 8.5 s after the end (settle_ms) and once passed
    keeps-running-after-lease-lost, whose step b landed later on a busy machine."""
    assert STARVED_S > 3  # beyond the default settle time by far
    path = tmp_path / "cases/lease/starved-worker.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(_STARVED_CASE)
    worker = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(BROKEN))} starts-late-after-lease-lost"
    )
    rows = summarise(
        run_corpus(
            [load_case(path)],
            RunnerOptions(modes=["LOCAL_ASYNC"], databases=["sqlite"], worker=worker),
        )
    )
    assert [r.passed for r in rows] == [False], format_table(rows)
    problems = "\n".join(rows[0].problems)
    assert "step b ran 1 times; expected it not to run" in problems, format_table(rows)
