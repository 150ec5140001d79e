"""A migration applied to many waiting instances, the leading server killed (-9) on the way.

Instances wait at an await on version 1; a plan moves them to version 2 (a step added after the
await); once a quarter of the batch is done, the server leading then is killed (and started
again on its port) and the other server finishes it. Each
instance must be migrated exactly once (one instance_migrated event, its tokens and its row on
version 2: none half-migrated), none lost; then, signalled, all complete on version 2.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from faultkit import deploy, scale, start_many, wait_until

from wiggle.client import Client

pytestmark = pytest.mark.timeout(600)

V1 = """
wiggle: 1
name: parked
steps:
  - {task: s0, timeout: 60s}
  - await: go
  - {task: s1, timeout: 60s}
"""
V2 = V1.replace(
    "  - {task: s1, timeout: 60s}\n", "  - {task: s2, timeout: 60s}\n  - {task: s1, timeout: 60s}\n"
)


def test_migration_survives_a_kill9_of_the_leading_server(cluster, checker, ledger):
    servers = cluster.servers("first", "second")
    a1, a2 = servers["first"][2], servers["second"][2]
    v1 = deploy(a1, V1)[0]
    n = scale(200, 1000)
    ids = start_many(a1, v1, [{}] * n)
    cluster.worker(a1, concurrency=16)

    def parked() -> bool:
        with checker.sa.connect() as conn:
            return (
                int(
                    conn.execute(
                        sa.text("SELECT count(*) FROM wiggle_tokens WHERE state = 'AWAITING'")
                    ).scalar_one()
                )
                == n
            )

    wait_until(parked, 300, "every instance at the await")
    cluster.worker(a2, concurrency=16)
    v2 = deploy(a1, V2)[0]
    with Client(a1) as client:
        plan = client.plan_migration("parked", v2[1])
        assert plan["summary"]["migrate"] == n
        batch = client.apply_migration(plan, rate_per_s=n / 10)

    def progress() -> tuple[int, str]:
        with checker.sa.connect() as conn:
            row = conn.execute(
                sa.text("SELECT done, state FROM wiggle_batches WHERE id = :b"),
                {"b": batch.batch_id},
            ).one()
        return int(row[0]), str(row[1])

    wait_until(lambda: progress()[0] >= n // 4, 120, "a quarter of the migration")
    at_kill = progress()[0]
    holder, term = cluster.kill_the_leader(checker, servers)
    wait_until(lambda: progress()[1] == "DONE", 300, "the migration to finish after the kill")

    with checker.sa.connect() as conn:
        half = conn.execute(
            sa.text(
                "SELECT count(*) FROM wiggle_tokens t JOIN wiggle_instances i "
                "ON i.id = t.instance_id WHERE t.state <> 'DONE' AND t.version <> i.version"
            )
        ).scalar_one()
        on_v2 = conn.execute(
            sa.text("SELECT count(*) FROM wiggle_instances WHERE version = :v"), {"v": v2[1]}
        ).scalar_one()
    migrated: dict[str, int] = {}
    for ev in checker.events(ids, ["instance_migrated"]):
        migrated[ev.instance_id] = migrated.get(ev.instance_id, 0) + 1
    twice = sorted(i for i, c in migrated.items() if c > 1)
    never = sorted(i for i in ids if i not in migrated)

    with Client(a2) as client:
        signal = client.start_bulk(
            "signal", ["flow=parked"], params={"name": "go"}, rate_per_s=1000
        )
    wait_until(lambda: client_done(checker, signal.batch_id), 300, "the signals")
    statuses = checker.wait_finished(ids, timeout=300)
    tally = checker.tally(
        "migration, leader kill -9",
        ids,
        cluster.ledger,
        cluster.stats,
        fault=f"kill -9 of the leader ({holder}, term {term}) with {at_kill} of {n} migrated; "
        f"migrated once {len(migrated) - len(twice)}, twice {len(twice)}, never {len(never)}, "
        f"half-migrated {half}",
    )
    ledger(tally)
    assert 0 < at_kill < n, "the kill landed inside the migration"
    assert (twice, never, half, on_v2) == ([], [], 0, n)
    assert set(statuses.values()) == {"COMPLETED"}
    runs = {e.split()[1].split("#")[0] for e in cluster.ledger.read_text().splitlines()}
    assert "s2" in runs  # the step version 2 added ran


def client_done(checker, batch_id: str) -> bool:
    with checker.sa.connect() as conn:
        state = conn.execute(
            sa.text("SELECT state FROM wiggle_batches WHERE id = :b"), {"b": batch_id}
        ).scalar_one()
    return state == "DONE"
