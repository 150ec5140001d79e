"""What removing a day of history costs as the history grows (docs/performance.md, "Retention").

    python scripts/bench_retention.py                            # 100,000 and 1,000,000
    python scripts/bench_retention.py --instances 300000 --days 30
    python scripts/bench_retention.py --database postgresql://user@host/db

For each size N: a fresh database (a throwaway PostgreSQL from pgserver unless --database, with
fsync on), N finished instances of a one-step flow written by the engine in bulk
(write_history: the instance row, its DONE token, its four events), their ends spread evenly
over --days days; then `Engine.prune` of everything older than days - 1 (the oldest day,
N / days instances), and a second round that finds nothing (what the server's
retention does every minute once it has caught up). Per round: seconds, instances and rows
removed, and PostgreSQL's own counts over it (pg_statio / pg_stat_user_tables deltas: index and
heap blocks touched, rows read by sequential scans), which a loaded machine does not distort.
Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from wiggle._postgres import create_database, drop_database, libpq_url, postgres_server
from wiggle.compiler import load_flow
from wiggle.engine import Engine
from wiggle.engine.ops.prune import write_history

DAY_MS = 86_400_000
FLOW = load_flow("wiggle: 1\nname: retained\nsteps:\n  - task: a\n")


_COUNTS = """
SELECT coalesce(sum(heap_blks_read + heap_blks_hit), 0),
       coalesce(sum(idx_blks_read + idx_blks_hit), 0),
       (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables)
FROM pg_statio_user_tables
"""


@contextmanager
def database(url: str | None) -> Iterator[str]:
    with postgres_server() if url is None else _given(url) as base:
        made = create_database(base, prefix="wiggle_retention")
        try:
            yield made
        finally:
            drop_database(made)


@contextmanager
def _given(url: str) -> Iterator[str]:
    yield url


def fill(engine: Engine, url: str, version: str, count: int, days: int) -> None:
    """`count` finished instances whose ends are spread over the last `days` days (the engine
    writes them: write_history), then what autovacuum would do after a while."""
    write_history(engine.db, version, count, {}, {}, ended_over_ms=days * DAY_MS)
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def counters(url: str) -> tuple[int, int, int]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_force_next_flush()")
        row = conn.execute(_COUNTS).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2])


def settled(engine: Engine, url: str) -> tuple[int, int, int]:
    """The counters once every backend the engine used has published its statistics (an
    exiting backend does at once; a live one only every second or so)."""
    engine.db.sa.dispose()
    time.sleep(0.5)
    return counters(url)


def prune_round(engine: Engine, url: str, older_than_ms: int) -> dict[str, Any]:
    before = settled(engine, url)
    began = time.perf_counter()
    result = engine.prune(older_than_ms)
    seconds = time.perf_counter() - began
    after = settled(engine, url)
    heap, index, seq = (a - b for a, b in zip(after, before, strict=True))
    return {
        "seconds": round(seconds, 3),
        "instances": result.instances,
        "events": result.events,
        "heap_blocks": heap,
        "index_blocks": index,
        "seq_rows_read": seq,
    }


def run(url: str | None, count: int, days: int) -> dict[str, Any]:
    with database(url) as made:
        engine = Engine(made)
        try:
            version, _ = engine.register(FLOW)
            began = time.perf_counter()
            fill(engine, made, version, count, days)
            filled = time.perf_counter() - began
            one_day = prune_round(engine, made, (days - 1) * DAY_MS)
            nothing = prune_round(engine, made, (days - 1) * DAY_MS)
        finally:
            engine.close()
    return {
        "instances": count,
        "days": days,
        "fill_s": round(filled, 1),
        "day": one_day,
        "empty_round": nothing,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, action="append")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--database", default=None, help="a PostgreSQL URL (default: pgserver)")
    args = parser.parse_args()
    for count in args.instances or [100_000, 1_000_000]:
        print(json.dumps(run(args.database, count, args.days)), flush=True)


if __name__ == "__main__":
    main()
