"""The floor of one idle SERVER or LOCAL_SYNC step with no engine at all: a unary gRPC call from
one process to a grpcio sync server in another (as a worker reports to `wiggle server`), whose
handler commits to PostgreSQL, one call in flight.

Rows, each the same call with a handler doing more:
- `rpc`: the call alone (the handler answers at once);
- `rpc + 1 insert`: the handler commits one INSERT (autocommit), the bare psycopg reference;
- `rpc + step shape`: the handler runs the statements an idle step runs, with the engine's
  round trips (BEGIN sent with a lock read of the instance row; the token's fenced UPDATE and
  an event INSERT sent with COMMIT), through psycopg's pipeline mode, with no logic around them.

Then the same work with no call at all, in this process (the embedded layout's floor):
- `1 insert`: one INSERT committed (autocommit), bare psycopg's step;
- `step shape`: the idle step's statements in the engine's two round trips, as above;
- `step, 1 trip`: the same statements in one round trip (BEGIN, the lock read, the UPDATE, the
  INSERT and COMMIT in one pipeline exchange): the most a report fenced without waiting for its
  lock read could save.

Prints per step: wall time, the CPU of the client, the server and PostgreSQL, and 20 steps'
worth (a 20-step flow). Each step's work is checked: one row inserted, or one token update and
one event, per step. docs/performance.md sets Wiggle's step against it: what is left above the
step rows is the engine's and the SDK's own work.

    python scripts/bench_step_floor.py [--database postgresql://...] [--calls 2000]

Without `--database` a throwaway PostgreSQL is started (pgserver) and removed afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import struct
import time
from collections.abc import Callable
from concurrent import futures
from contextlib import ExitStack
from typing import Any

import grpc
import psycopg

from wiggle._postgres import (
    create_database,
    drop_database,
    libpq_url,
    postgres_server,
    sqlalchemy_url,
)
from wiggle.bench._counters import pg_counters

SCHEMA = """
CREATE TABLE floor_instances (id text PRIMARY KEY, status text NOT NULL, updated bigint);
CREATE TABLE floor_tokens (id text PRIMARY KEY, instance_id text NOT NULL, node text NOT NULL,
                           lease text, seq int NOT NULL, context jsonb NOT NULL);
CREATE TABLE floor_events (seq bigserial PRIMARY KEY, instance_id text NOT NULL, kind text NOT
                           NULL, node text, detail jsonb);
CREATE TABLE floor_steps (n bigserial PRIMARY KEY, output jsonb NOT NULL);
INSERT INTO floor_instances VALUES ('i1', 'RUNNING', 0);
INSERT INTO floor_tokens VALUES ('t1', 'i1', 's0', 'L', 0, '{"n": 0}');
"""
ROWS = ("rpc", "rpc + 1 insert", "rpc + step shape")
LOCAL_ROWS = ("1 insert", "step shape", "step, 1 trip")
PAYLOAD = b"x" * 100  # about a lone report's size


def _same(data: bytes) -> bytes:
    return data


class _Floor:
    """The work of each row on one autocommit connection (each method one step)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.steps = 0

    def insert(self, request: bytes, context: object = None) -> bytes:
        self.conn.execute("INSERT INTO floor_steps (output) VALUES (%s::jsonb)", ('{"n": 1}',))
        return request

    def step_shape(self, request: bytes, context: object = None) -> bytes:
        """Two round trips: the lock read (with BEGIN) answered before the write is sent."""
        with self.conn.pipeline() as pipe:
            self.conn.execute("BEGIN")
            cur = self._lock_read()
            pipe.sync()
            cur.fetchone()
            self._write()
        return request

    def step_one_trip(self, request: bytes, context: object = None) -> bytes:
        """One round trip: the write is sent without waiting for the lock read's row."""
        with self.conn.pipeline():
            self.conn.execute("BEGIN")
            cur = self._lock_read()
            self._write()
        if cur.fetchone() is None:
            raise SystemExit("the lock read found no instance row")
        return request

    def _lock_read(self) -> psycopg.Cursor[Any]:
        return self.conn.execute(
            "SELECT status FROM floor_instances WHERE id = %s FOR UPDATE", ("i1",)
        )

    def _write(self) -> None:
        self.steps += 1
        self.conn.execute(
            "UPDATE floor_tokens SET node = %s, seq = seq + 1, context = %s::jsonb "
            "WHERE id = %s AND lease = %s",
            (f"s{self.steps % 20}", '{"n": 1}', "t1", "L"),
        )
        self.conn.execute(
            "INSERT INTO floor_events (instance_id, kind, node, detail) "
            "VALUES (%s, 'step_completed', %s, %s::jsonb)",
            ("i1", "s0", "{}"),
        )
        self.conn.execute("COMMIT")


def _serve(url: str, ready: Any, stop: Any) -> None:
    """The server process: one connection, one handler per row, and `Cpu` (its CPU time)."""
    conn = psycopg.connect(url, autocommit=True)
    floor = _Floor(conn)

    def echo(request: bytes, context: object) -> bytes:
        return request

    def cpu(request: bytes, context: object) -> bytes:
        return struct.pack("d", time.process_time())

    kw: dict[str, Any] = {"request_deserializer": _same, "response_serializer": _same}
    handlers = {
        name: grpc.unary_unary_rpc_method_handler(fn, **kw)
        for name, fn in (
            ("Echo", echo),
            ("Insert", floor.insert),
            ("Step", floor.step_shape),
            ("Cpu", cpu),
        )
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.Step", handlers),))
    ready.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    stop.wait()
    server.stop(grace=None)
    conn.close()


def _measure(
    label: str,
    call: Callable[[bytes], bytes],
    server_cpu: Callable[[], float] | None,
    url: str,
    n: int,
    warm: int,
) -> None:
    for _ in range(warm):
        call(PAYLOAD)
    pg = pg_counters(url)
    remote = server_cpu() if server_cpu is not None else 0.0
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        call(PAYLOAD)
    wall_ms = (time.perf_counter() - wall) * 1000 / n
    client_ms = (time.process_time() - cpu) * 1000 / n
    server = "    -" if server_cpu is None else f"{(server_cpu() - remote) * 1000 / n:5.3f}"
    after = pg_counters(url)
    pg_ms = (
        "  n/a"
        if pg.cpu_s is None or after.cpu_s is None
        else (f"{(after.cpu_s - pg.cpu_s) * 1000 / n:5.3f}")
    )
    print(
        f"{label:<18} {wall_ms:6.3f} ms wall  CPU: client {client_ms:5.3f}  server "
        f"{server}  PostgreSQL {pg_ms}  "
        f"20 steps: {20 * wall_ms:5.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", help="a PostgreSQL URL (default: a throwaway server)")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with ExitStack() as stack:
        base = args.database or stack.enter_context(postgres_server())
        url = create_database(base, prefix="wiggle_floor")
        stack.callback(drop_database, url)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            conn.execute(SCHEMA)
        spawn = multiprocessing.get_context("spawn")
        ready, stop = spawn.Queue(), spawn.Event()
        proc = spawn.Process(target=_serve, args=(libpq_url(url), ready, stop), daemon=True)
        proc.start()
        stack.callback(proc.join, 10)
        stack.callback(stop.set)
        channel = stack.enter_context(grpc.insecure_channel(f"127.0.0.1:{ready.get(timeout=60)}"))

        def method(name: str) -> Callable[[bytes], bytes]:
            return channel.unary_unary(
                f"/floor.Step/{name}", request_serializer=_same, response_deserializer=_same
            )

        cpu_call = method("Cpu")

        def server_cpu() -> float:
            return float(struct.unpack("d", cpu_call(b""))[0])

        print("one call in flight, client and server in two processes, PostgreSQL on loopback:")
        for r in range(args.rounds):
            print(f"round {r + 1}")
            for label, name in zip(ROWS, ("Echo", "Insert", "Step"), strict=True):
                _measure(
                    label, method(name), server_cpu, sqlalchemy_url(url), args.calls, args.warmup
                )
        print("no call: the steps in this process (the embedded layout's floor):")
        local = _Floor(stack.enter_context(psycopg.connect(libpq_url(url), autocommit=True)))
        for r in range(args.rounds):
            print(f"round {r + 1}")
            for label, step in zip(
                LOCAL_ROWS, (local.insert, local.step_shape, local.step_one_trip), strict=True
            ):
                _measure(label, step, None, sqlalchemy_url(url), args.calls, args.warmup)
        per_row = args.rounds * (args.calls + args.warmup)
        _check(libpq_url(url), inserts=2 * per_row, steps=3 * per_row)


def _check(url: str, *, inserts: int, steps: int) -> None:
    """Every measured step did its work: the rows it wrote are there."""
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT count(*) FROM floor_steps").fetchone()
        events = conn.execute("SELECT count(*) FROM floor_events").fetchone()
        seq = conn.execute("SELECT seq FROM floor_tokens WHERE id = 't1'").fetchone()
    got = (rows and rows[0], events and events[0], seq and seq[0])
    if got != (inserts, steps, steps):
        raise SystemExit(
            f"expected {inserts} inserts and {steps} events and token updates, found {got}"
        )
    print(f"checked: {inserts} inserts, {steps} token updates and events")


if __name__ == "__main__":
    main()
