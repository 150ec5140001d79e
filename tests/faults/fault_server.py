"""A Wiggle server process for the fault suite: the real Server over a real Engine, plus an
interceptor that can lose answers and that counts what the server refused.

    python fault_server.py --database URL --address HOST:PORT [--lose P] [--lose-methods M,...]
                           [--seed N] [--stats FILE] [--leader-ttl S] [--node-id ID]
                           [--database-profile distributed] [--inject-serialization P]
                           [--inject-drop P] [--clock-offset S] [--note-fires]

`--lose P`: after a listed method has run (and committed), answer UNAVAILABLE instead of its
response with probability P, as a connection lost after the commit would. Every lost answer
and every refusal with a Wiggle error code is appended to the stats file, one line each
(`lost METHOD`, `refused CODE METHOD`), so the counts survive a kill -9.
`--acks`: note each step the server acknowledged (acks.py) in the stats file.
`--inject-serialization P`, `--inject-drop P`: the commit fault injector of the distributed
simulation (injector.py) on the engine's connections; at a graceful stop the injector's counts
(`injected FATE N`) and the engine's retries (`retried REASON N`, under the distributed profile)
are appended to the stats file.
`--clock-offset S`: the engine reads this machine's clock S seconds ahead, through the engine's
clock seam (wiggle.engine.model.clock), instead of the database's: a cluster whose servers all
come back with the clock jumped ahead saw, by every time it reads, an outage S seconds longer.
`--note-fires`: note each schedule decision the ticker made (`schedule decided NODE NAME`:
committed, `schedule passed NODE NAME`: the schedule was no longer due, another engine decided
it first; `schedule fence NODE NAME`: its fenced cursor update failed) in the stats file.
Prints `listening on HOST:PORT` once it serves; stops gracefully on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
from acks import ack_lines, reported, where
from injector import Injector

from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig

REPORTS = ("CompleteTask", "FailTask", "AdvanceRun", "ReleaseTask", "ReportBatch")


class Faults(grpc.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(
        self, lose: float, methods: set[str], seed: int, stats: str | None, acks: Any = None
    ) -> None:
        self._acks = acks  # the engine, when the steps acknowledged are to be noted (acks.py)
        self._lose = lose
        self._methods = methods
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._fd = os.open(stats, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if stats else None

    def note(self, line: str) -> None:
        if self._fd is not None:
            os.write(self._fd, (line + "\n").encode())

    def _before(self, name: str, request: Any) -> tuple[list[Any], dict[str, Any]]:
        """The completing reports of `request` and where their tasks stand, when acks are
        noted (an unreachable database notes nothing: the report fails too, or is not counted)."""
        if self._acks is None:
            return [], {}
        reports = reported(name, request)
        try:
            return reports, where(self._acks, [r[0] for r in reports if r is not None])
        except Exception:
            return [], {}

    def _loses(self) -> bool:
        with self._lock:
            return self._random.random() < self._lose

    def intercept_service(
        self, continuation: Callable[[Any], Any], details: grpc.HandlerCallDetails
    ) -> Any:
        handler = continuation(details)
        if handler is None or handler.unary_unary is None:
            return handler
        name = details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary

        def behavior(request: Any, context: grpc.ServicerContext) -> Any:
            reports, at = self._before(name, request)
            try:
                response = inner(request, context)
            except BaseException:
                code = dict(context.trailing_metadata() or ()).get("wiggle-error-code", "")
                if code:
                    self.note(f"refused {code} {name}")
                raise
            if name == "ReportBatch":  # refusals inside a batch are answers, not trailers
                for answer in response.answers:
                    if answer.WhichOneof("answer") == "error" and answer.error.error_code:
                        self.note(f"refused {answer.error.error_code} ReportBatch")
            if name in self._methods and self._loses():
                self.note(f"lost {name}")
                context.abort(grpc.StatusCode.UNAVAILABLE, "fault: answer lost after commit")
            if reports:
                ok = [True] * len(reports)
                if name == "ReportBatch":
                    ok = [a.WhichOneof("answer") != "error" for a in response.answers]
                for line in ack_lines(reports, at, ok):
                    self.note(line)
            return response

        return grpc.unary_unary_rpc_method_handler(
            behavior,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


class ShiftedClock:
    """This machine's clock, `offset_s` ahead (the engine's Clock protocol). It never jumps
    while an engine reads it, so it has nothing to tell a watcher."""

    def __init__(self, offset_s: float) -> None:
        self.offset_ms = int(offset_s * 1000)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def watch(self, callback: Callable[[], None]) -> None:
        pass

    def unwatch(self, callback: Callable[[], None]) -> None:
        pass


def note_fires(faults: Faults, node: str) -> None:
    """Note the outcome of each schedule decision the ticker runs (`--note-fires`): after its
    transaction, so `decided` is a committed decision."""
    from wiggle.engine.ops import firing, ticker

    outcome = threading.local()
    decide = firing.fire_due
    once = ticker._once

    def fire_due(*args: Any, **kwargs: Any) -> bool:
        outcome.value = "fence"  # unless it returns: it raised FenceLost, which _once swallows
        done = decide(*args, **kwargs)
        outcome.value = "decided" if done else "passed"
        return done

    def counted_once(ctx: Any, fn: Any) -> int:
        if getattr(fn, "func", None) is not fire_due:
            return once(ctx, fn)
        outcome.value = "passed"
        done = once(ctx, fn)
        faults.note(f"schedule {outcome.value} {node} {fn.keywords['name']}")
        return done

    firing.fire_due = fire_due  # type: ignore[assignment]
    ticker._once = counted_once  # type: ignore[assignment]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--database", required=True)
    parser.add_argument("--address", default="127.0.0.1:0")
    parser.add_argument("--lose", type=float, default=0.0)
    parser.add_argument("--lose-methods", default=",".join(REPORTS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--stats", default=None)
    parser.add_argument("--leader-ttl", type=float, default=2.0)
    parser.add_argument("--node-id", default=None)
    parser.add_argument("--mode", default="SERVER")
    parser.add_argument("--database-profile", default="default")
    parser.add_argument("--inject-serialization", type=float, default=0.0)
    parser.add_argument("--inject-drop", type=float, default=0.0)
    parser.add_argument("--acks", action="store_true")
    parser.add_argument("--clock-offset", type=float, default=None)
    parser.add_argument("--note-fires", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(process)d %(name)s: %(message)s"
    )
    from wiggle.graph import ExecutionMode

    engine = Engine(
        args.database,
        node_id=args.node_id,
        leader_ttl_s=args.leader_ttl,
        default_mode=ExecutionMode(args.mode),
        database_profile=args.database_profile,
        clock=None if args.clock_offset is None else ShiftedClock(args.clock_offset),
    )
    injector = None
    if args.inject_serialization or args.inject_drop:
        injector = Injector(args.inject_serialization, args.inject_drop, seed=args.seed)
        injector.install(engine.db.sa)
    acks = engine if args.acks else None
    faults = Faults(args.lose, set(args.lose_methods.split(",")), args.seed, args.stats, acks)
    if args.note_fires:
        note_fires(faults, engine.node_id)
    server = Server(
        engine,
        ServerConfig(address=args.address, grace_s=2.0),
        close_engine=True,
        interceptors=[faults],
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server.start()
    print(f"listening on {server.address}", flush=True)
    while not stop.wait(0.5):
        pass
    server.stop()
    # Both counts after the stop: the drain and the leader's goodbye are transactions too, and
    # a failure injected into one of them is retried (and counted) while the server stops.
    retries = dict(getattr(engine.db, "retries", {}))
    for fate, n in sorted((injector.counts if injector else {}).items()):
        faults.note(f"injected {fate} {n}")
    for reason, n in sorted(retries.items()):
        faults.note(f"retried {reason} {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
