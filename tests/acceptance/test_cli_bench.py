"""`wiggle bench throughput` as a subprocess, small and bounded, on SQLite and PostgreSQL.

These tests check what the benchmark claims (verification, the refusal to print a figure for a
failed run, that its counters are read), never how fast anything is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

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
