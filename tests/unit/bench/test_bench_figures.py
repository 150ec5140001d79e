"""The benchmark's pure parts: the verification of a run's rows and the figures' arithmetic."""

from __future__ import annotations

import pytest

from wiggle.bench._report import HEADER, Figures, counts, percentile, row
from wiggle.bench._verify import problems

NODES = ["s1", "s2"]
DONE = '{"n":2}'


def _steps(*ids: str) -> dict[tuple[str, str], int]:
    return {(i, node): 1 for i in ids for node in NODES}


def test_a_run_where_everything_completed_once_verifies():
    rows = [("a", "COMPLETED", DONE, ""), ("b", "COMPLETED", DONE, "")]
    assert problems(["a", "b"], rows, _steps("a", "b"), {"n": 2}, NODES) == []


def test_a_failed_instance_is_a_problem_with_its_reason():
    rows = [("a", "COMPLETED", DONE, ""), ("b", "FAILED", '{"n":1}', "step 's2' failed: boom")]
    steps = {**_steps("a"), ("b", "s1"): 1}
    found = problems(["a", "b"], rows, steps, {"n": 2}, NODES)
    assert (
        found[0]
        == "1 of 2 instances did not complete (FAILED 1), e.g. b FAILED: step 's2' failed: boom"
    )
    assert found[1].startswith("1 of 2 instances lack exactly one step_completed event")


def test_a_missing_instance_a_wrong_context_and_a_step_run_twice_are_problems():
    rows = [("a", "COMPLETED", '{"n":3}', ""), ("b", "COMPLETED", DONE, "")]
    steps = {**_steps("a", "b"), ("b", "s2"): 2}
    found = problems(["a", "b", "c"], rows, steps, {"n": 2}, NODES)
    assert found == [
        "1 of 3 instances are not in the database, e.g. c",
        '1 of 3 completed instances do not end with {"n":2}, e.g. a',
        "1 of 3 instances lack exactly one step_completed event per step node (2 nodes), e.g. b",
    ]


def test_a_step_event_on_a_node_that_is_no_step_is_a_problem():
    rows = [("a", "COMPLETED", DONE, "")]
    steps = {**_steps("a"), ("a", "elsewhere"): 1}
    assert len(problems(["a"], rows, steps, {"n": 2}, NODES)) == 1


def test_percentiles_are_measured_values_by_nearest_rank():
    values = [float(v) for v in range(1, 101)]
    assert (percentile(values, 50), percentile(values, 99), percentile(values, 100)) == (
        50,
        99,
        100,
    )
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_per_step_figures_divide_by_the_measured_steps():
    figures = Figures(
        mode="SERVER", instances=10, steps=20, seconds=2.0, p50_ms=5.0, p99_ms=9.0,
        commits=240, wal_syncs=200, pg_cpu_s=0.4, server_cpu_s=0.6, worker_cpu_s=0.2,
        driver_cpu_s=0.02,
    )  # fmt: skip
    data = figures.as_json()
    assert (data["inst_per_s"], data["steps_per_s"]) == (5.0, 100.0)
    assert (data["commits_per_step"], data["wal_syncs_per_step"]) == (1.2, 1.0)
    assert data["pg_cpu_ms_per_step"] == pytest.approx(2.0)
    assert data["server_cpu_ms_per_step"] == pytest.approx(3.0)
    line = row(figures)
    assert line.split() == [
        "SERVER",
        "5.0",
        "100",
        "5.0",
        "9.0",
        "1.20",
        "1.00",
        "2.00",
        "3.00",
        "1.00",
        "0.10",
    ]
    assert len(line) == len(HEADER)


def test_a_figure_that_was_not_measured_is_na():
    figures = Figures("LOCAL_SYNC", 1, 1, 1.0, 1.0, 1.0, None, None, None, 0.0, 0.0, 0.0)
    assert row(figures).split()[5:8] == ["n/a", "n/a", "n/a"]
    assert figures.as_json()["commits_per_step"] is None


def test_rpcs_and_transactions_are_counted_per_step_when_asked():
    figures = Figures(
        "SERVER", 10, 20, 2.0, 5.0, 9.0, None, None, None, 0.0, 0.0, 0.0,
        rpcs={"ReportBatch": 50.0, "StartInstance": 10.0, "CompleteTask": 0.0},
        transactions={"write": 60.0},
    )  # fmt: skip
    data = figures.as_json()
    # A method never called in the window is left out.
    assert data["rpcs_per_step"] == {"ReportBatch": 0.25, "StartInstance": 0.05}
    assert data["transactions_per_step"] == {"write": 0.3}
    assert counts(figures) == (
        f"{'':<18}RPCs/step: 0.300 (ReportBatch 0.250, StartInstance 0.050); "
        "server transactions/step: write 0.300"
    )
    without = Figures("SERVER", 1, 1, 1.0, 1.0, 1.0, None, None, None, 0.0, 0.0, 0.0)
    assert without.as_json()["rpcs_per_step"] is None and counts(without) is None


def test_a_traced_run_is_marked_and_its_overhead_is_on_minus_off_per_step():
    """--tracing both: the traced row is `MODE +otel`, and the line under it is the CPU per
    step the servers and the workers spent more than the untraced run."""
    from dataclasses import replace

    from wiggle.bench._tracing import overhead, runs_of

    off = Figures("LOCAL_SYNC", 10, 20, 1.0, 1.0, 1.0, None, None, None, 0.2, 0.1, 0.0)
    on = replace(off, instances=20, server_cpu_s=0.5, worker_cpu_s=0.3, tracing=True)
    assert row(on).split()[:2] == ["LOCAL_SYNC", "+otel"] and len(row(on)) == len(HEADER)
    assert row(off).split()[1] != "+otel"
    line = overhead(off, on, spans=660, instances=22)
    assert "+0.500 ms CPU per step (server +0.250, workers +0.250)" in line
    assert "660 spans received, 30.0 per instance" in line
    assert runs_of("both") == (False, True) and runs_of("off") == (False,)
