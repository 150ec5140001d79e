"""`wiggle bench throughput` as a subprocess, small and bounded, on SQLite and PostgreSQL.

These tests check what the benchmark claims (verification, the refusal to print a figure for a
failed run, that its counters are read), never how fast anything is.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

# One mode, a handful of instances: each run starts one server and one worker process.
SMALL = [
    "--instances", "4", "--warmup", "2", "--inflight", "3", "--steps", "3",
    "--workers", "1", "--concurrency", "3", "--settle", "0", "--timeout", "60",
]  # fmt: skip


def _wiggle(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIGGLE_")}
    if "WIGGLE_TEST_POSTGRES_URL" in os.environ:
        env["WIGGLE_TEST_POSTGRES_URL"] = os.environ["WIGGLE_TEST_POSTGRES_URL"]
    return subprocess.run(
        [sys.executable, "-m", "wiggle", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


def test_a_failed_instance_means_no_figure_and_a_non_zero_exit(database_url):
    run = _wiggle(
        "bench", "throughput", "--database", database_url, "--modes", "SERVER", *SMALL,
        "--inject-failure",
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    rows = [line for line in run.stdout.splitlines() if line.startswith("SERVER")]
    assert rows == []  # the header may be there; no figure is
    assert "verified" not in run.stdout
    assert "SERVER failed verification; no figures for it" in run.stderr
    assert "1 of 6 instances did not complete (FAILED 1)" in run.stderr
    assert "injected failure" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_failed_instance_in_json_is_a_failure_without_figures(tmp_path):
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    run = _wiggle(
        "bench", "throughput", "--database", url, "--modes", "LOCAL_ASYNC", *SMALL,
        "--inject-failure", "--json",
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    document = json.loads(run.stdout)
    assert document["runs"] == []
    [failed] = document["failed"]
    assert failed["mode"] == "LOCAL_ASYNC"
    assert any("FAILED 1" in problem for problem in failed["problems"])


@pytest.mark.postgres_too
def test_a_verified_run_prints_its_figures(durable_database_url):
    # A server that syncs its WAL (the suite's own throwaway runs without fsync): the run has
    # WAL syncs to count.
    database_url = durable_database_url
    is_pg = database_url.startswith("postgresql")
    run = _wiggle(
        "bench", "throughput", "--database", database_url, "--modes", "LOCAL_SYNC", *SMALL,
        "--history", "30", "--json",
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["failed"] == []
    [figures] = document["runs"]
    assert (figures["mode"], figures["instances"], figures["steps"]) == ("LOCAL_SYNC", 4, 3)
    assert figures["steps_per_s"] == pytest.approx(figures["inst_per_s"] * 3)
    assert 0 < figures["p50_ms"] <= figures["p99_ms"]
    # CPU time comes in clock ticks: a run this small may show 0 for a process.
    assert figures["worker_cpu_s"] >= 0 and figures["server_cpu_s"] >= 0
    if is_pg:
        assert figures["commits_per_step"] > 0 and figures["wal_syncs_per_step"] > 0
        assert document["config"]["postgres_settings"].startswith("fsync=")
        if "WIGGLE_TEST_POSTGRES_URL" not in os.environ:  # a local server: its CPU is readable
            assert figures["pg_cpu_ms_per_step"] > 0
    else:
        assert figures["commits_per_step"] is None and figures["pg_cpu_ms_per_step"] is None

    # The history it wrote ended two days ago; the benchmark's own instances just now.
    pruned = _wiggle("prune", "--finished-before", "1d", "--database", database_url, "--json")
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["instances"] == 30


def test_one_in_flight_counts_what_each_instance_cost(tmp_path):
    """`wiggle bench latency --steps`: every result checked, and each instance's RPCs as the
    protocol says: a SERVER or LOCAL_SYNC step is one report, a LOCAL_ASYNC run one report in
    all; one start and one wait per instance."""
    done = _wiggle(
        "bench", "latency", "--database", "sqlite", "--steps", "3",
        "--instances", "3", "--warmup", "1", "--workers", "2", "--concurrency", "4",
        "--rounds", "2", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["workers"], got["concurrency"], got["rounds"]) == (2, 4, 2)
    rows = {r["mode"]: r for r in got["rows"]}
    assert set(rows) == {"SERVER", "LOCAL_SYNC", "LOCAL_ASYNC"}
    for mode, reports in (("SERVER", 3), ("LOCAL_SYNC", 3), ("LOCAL_ASYNC", 1)):
        row = rows[mode]
        assert row["instances"] == 3 and row["steps"] == 3
        cost = row["per_instance"]
        assert cost["rpc StartInstance"] == 1 and cost["rpc WaitInstance"] == 1, (mode, cost)
        assert cost["rpc ReportBatch"] == reports, (mode, cost)
        assert cost["transactions write"] >= reports, (mode, cost)
        assert set(row["cpu_ms_per_step"]) == {"server", "worker", "client"}, row
        p50s = sorted(r["p50_ms"] for r in row["rounds"])
        assert len(p50s) == 2 and row["p50_ms"] == round((p50s[0] + p50s[1]) / 2, 2), row


def test_one_in_flight_embedded_counts_the_calls_made_in_process(tmp_path):
    """`--embedded`: node, worker and client in the bench's own process. Every result checked;
    a step is one in-process report (no batching: nothing to save without a socket), and the
    CPU is one process's."""
    done = _wiggle(
        "bench", "latency", "--database", "sqlite", "--steps", "3", "--embedded",
        "--instances", "3", "--warmup", "1", "--concurrency", "4", "--rounds", "1", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert (got["layout"], got["workers"], got["concurrency"]) == ("embedded", 0, 4)
    rows = {r["mode"]: r for r in got["rows"]}
    for mode, report, reports in (
        ("SERVER", "CompleteTask", 3),
        ("LOCAL_SYNC", "AdvanceRun", 3),
        ("LOCAL_ASYNC", "AdvanceRun", 1),
    ):
        cost = rows[mode]["per_instance"]
        assert cost["rpc StartInstance"] == 1 and cost["rpc WaitInstance"] == 1, (mode, cost)
        assert cost[f"rpc {report}"] == reports, (mode, cost)
        assert set(rows[mode]["cpu_ms_per_step"]) == {"embedded"}, rows[mode]


def test_workers_of_another_program_serve_the_run(tmp_path):
    """`--worker-command`: the command runs through the shell once per worker process, with its
    server, queue, slots and index in its environment; here it is the Python worker, started as
    any other program would be. `--rpcs` counts the servers' calls per step."""
    seen = tmp_path / "seen"
    command = (
        f'echo "$WIGGLE_BENCH_WORKER $WIGGLE_BENCH_QUEUE $WIGGLE_BENCH_CONCURRENCY '
        f'$WIGGLE_ADDRESS" >> {shlex.quote(str(seen))}; '
        f"{shlex.quote(sys.executable)} -m wiggle worker --handlers wiggle.bench._handlers "
        '--queue "$WIGGLE_BENCH_QUEUE" --concurrency "$WIGGLE_BENCH_CONCURRENCY" '
        "--log-level warning"
    )
    run = _wiggle(
        "bench", "throughput", "--database", f"sqlite:///{tmp_path / 'bench.db'}",
        "--modes", "SERVER", *SMALL, "--workers", "2", "--servers", "2",
        "--worker-command", command, "--rpcs", "--json",
    )  # fmt: skip

    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["config"]["worker_command"] == command
    [figures] = document["runs"]
    assert (figures["mode"], figures["instances"], figures["steps"]) == ("SERVER", 4, 3)
    assert figures["worker_cpu_s"] >= 0
    rpcs = figures["rpcs_per_step"]
    # One start and one wait per measured instance; each step's report in some ReportBatch.
    assert rpcs["StartInstance"] == pytest.approx(1 / 3) and rpcs["WaitInstance"] == 1 / 3
    assert 0 < rpcs["ReportBatch"] <= 1 and "CompleteTask" not in rpcs
    assert figures["transactions_per_step"]["write"] > 0
    lines = sorted(seen.read_text().split("\n")[:-1])
    assert [line.split()[:3] for line in lines] == [["0", "default", "3"], ["1", "default", "3"]]
    # The workers are spread over the two servers, as `wiggle worker` processes are.
    assert len({line.split()[3] for line in lines}) == 2


def test_the_java_bench_worker_steps_and_fails_as_the_python_one(java_worker_jar):
    """sdk/java/bench/BenchWorker.java run from source against the SDK jar: every instance
    verified, and the one started with `fail_at` fails for good at that step."""
    source = Path(__file__).resolve().parents[2] / "sdk/java/bench/BenchWorker.java"
    command = shlex.join(["java", "-cp", str(java_worker_jar), str(source)])
    run = _wiggle(
        "bench", "throughput", "--database", "sqlite", "--modes", "SERVER", *SMALL,
        "--worker-command", command, "--inject-failure",
    )  # fmt: skip

    assert run.returncode == 1, run.stderr
    problems = [line.strip() for line in run.stderr.splitlines() if line.startswith("  ")]
    # The five other instances verified: the failed one is the run's only problem.
    assert len(problems) == 2, run.stderr
    assert problems[0].startswith("1 of 6 instances did not complete (FAILED 1)")
    assert "step 's2' failed: injected failure at n=1" in problems[0]
    assert problems[1].startswith("1 of 6 instances lack exactly one step_completed event")
