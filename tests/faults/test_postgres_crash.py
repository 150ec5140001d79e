"""PostgreSQL killed (-9, the postmaster and its backends at once) mid-load, then restarted.

Its own throwaway server, so the crash touches nothing else. While it is down the Wiggle server
answers UNAVAILABLE, workers resend within their leases, leases that run out cost an attempt;
after the restart (WAL recovery) everything finishes, nothing twice.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from faultkit import (
    MODES,
    Checker,
    Cluster,
    deploy,
    executions_so_far,
    kill_postmaster,
    linear_flow,
    loop_flow,
    read_stats,
    scale,
    start_many,
    wait_until,
)

from wiggle._postgres import create_database, sqlalchemy_url

pytestmark = pytest.mark.timeout(300)


class CrashablePostgres:
    """A pgserver instance of our own, which can be crashed and started again in place."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver  # type: ignore[import-untyped]

            self.dir = tempfile.mkdtemp(prefix="wiggle-pgcrash-")
            self.server: Any = pgserver.get_server(self.dir, cleanup_mode="stop")
        self.url = sqlalchemy_url(str(self.server.get_uri()))

    def postmaster(self) -> int:
        with open(os.path.join(self.dir, "postmaster.pid")) as f:
            return int(f.readline())

    def crash(self) -> int:
        """kill -9 the postmaster and every backend: no shutdown, no checkpoint."""
        return kill_postmaster(self.postmaster())

    def restart(self) -> int:
        """Start it again on the same data directory and socket (crash recovery runs)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with self.server._lock:  # pgserver's own start path, as on first use
                self.server.ensure_postgres_running()
        return self.postmaster()

    def close(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.cleanup()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def crashable(tmp_path) -> Iterator[tuple[CrashablePostgres, Cluster, Checker]]:
    pg = CrashablePostgres()
    database = create_database(pg.url, prefix="wiggle_crash")
    cluster = Cluster(database, tmp_path)
    checker = Checker(database)
    try:
        yield pg, cluster, checker
    finally:
        cluster.close()
        checker.close()
        pg.close()


def test_postgres_crash_and_restart_mid_load(crashable, ledger):
    pg, cluster, checker = crashable
    _, address = cluster.server()
    flows = deploy(
        address,
        *(loop_flow(f"pg-loop-{m.lower()}", m, target=4, attempts=30) for m in MODES),
        *(linear_flow(f"pg-line-{m.lower()}", m, steps=5, attempts=30) for m in MODES),
    )
    cluster.worker(address, concurrency=8, batch=2)
    n = scale(5, 25)
    ids: list[str] = []
    for flow in flows:
        ids += start_many(address, flow, [{"target": 4, "sleep": 0.05}] * n)
    wait_until(
        lambda: executions_so_far(cluster.ledger) >= len(ids) * 5 // 4, 120, "a quarter done"
    )
    old = pg.crash()
    time.sleep(1.0)  # the outage itself: the database is down for this long
    new = pg.restart()
    checker.wait_finished(ids, timeout=scale(120, 300))

    unavailable = sum(
        n for key, n in read_stats(cluster.stats).items() if key.startswith("refused:")
    )
    tally = checker.tally(
        "PostgreSQL kill -9 and restart",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"postmaster {old} killed, {new} restarted; {unavailable} calls refused meanwhile",
    )
    ledger(tally)
    assert new != old
    contexts = checker.contexts(ids)
    loops = [ctx for ctx, _ in contexts.values() if "n" in ctx]
    assert loops and all(ctx["n"] == 4 for ctx in loops)
