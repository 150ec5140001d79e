"""The fault suite's kit: real processes, the side-effect ledger, the checker and the ledger line.

Processes are the real ones: `fault_server.py` (the Server over an Engine, with an interceptor
that can lose answers and counts refusals), `fault_worker.py` (a Worker running the activities of
`fault_handlers.py`), `wiggle run`. The checker reads the engine's own tables; the ledger is what
the activities wrote, one line per execution. A scenario ends with a `Tally`: the ledger line.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from links import ResettingProxy as ResettingProxy  # the scenarios import it from here

from tests.waiting import wait_until as wait_until  # likewise
from wiggle._ports import free_port as free_port  # the scenarios import it from here

HERE = Path(__file__).parent
FULL = os.environ.get("WIGGLE_FAULTS", "") == "full"


def scale(short: int, full: int) -> int:
    """A count for the short suite (scripts/test.sh) or the full one (scripts/faults.sh)."""
    return full if FULL else short


# -- processes -----------------------------------------------------------------------------------


class Proc:
    """A child process whose stdout and stderr lines are collected in the background."""

    def __init__(
        self,
        args: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ):
        self.args = args
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=cwd,
            user=user,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        self.proc.stdout.close()
        with self._cond:
            self._cond.notify_all()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        with self._cond:
            return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """The first output line matching `pattern` (waiting for it to be written)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for line in self.lines:
                    found = re.search(pattern, line)
                    if found:
                        return found
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not self._reader.is_alive()):
                    raise AssertionError(
                        f"no {pattern!r} from {self.args[1:3]} within {timeout} s:\n"
                        + "".join(self.lines[-40:])
                    )
                self._cond.wait(min(left, 0.5))

    def signal(self, signum: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signum)

    def kill9(self) -> int:
        """kill -9, then reap: returns the exit status (-9)."""
        self.signal(signal.SIGKILL)
        return self.proc.wait(30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (SIGCONT first, in case it is stopped), then wait; kill -9 past `timeout`."""
        if self.proc.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)
        finally:
            self._reader.join(10)


class Cluster:
    """The processes of one scenario, all stopped (or killed) when it ends."""

    def __init__(self, database: str, work: Path) -> None:
        self.database = database
        self.work = work
        self.ledger = work / "ledger.txt"
        self.stats = work / "stats.txt"
        self.fixed = work / "fixed"  # the `gate` activity passes once this file exists
        self.procs: list[Proc] = []

    def server(
        self,
        *,
        port: int | None = None,
        lose: float = 0.0,
        lose_methods: str | None = None,
        node_id: str | None = None,
        leader_ttl: float = 2.0,
        seed: int = 1,
        profile: str = "default",
        inject: tuple[float, float] = (0.0, 0.0),
        acks: bool = False,
        database: str | None = None,
        clock_offset: float | None = None,
        note_fires: bool = False,
    ) -> tuple[Proc, str]:
        """A fault server; `inject`: (serialisation failures, dropped COMMITs) per commit;
        `clock_offset`: its engine's clock that many seconds ahead of this machine's;
        `note_fires`: its schedule decisions noted in the stats file (fault_server.py)."""
        args = [
            sys.executable,
            str(HERE / "fault_server.py"),
            "--database",
            database or self.database,
            "--address",
            f"127.0.0.1:{port or 0}",
            "--lose",
            str(lose),
            "--seed",
            str(seed),
            "--stats",
            str(self.stats),
            "--leader-ttl",
            str(leader_ttl),
        ]
        if lose_methods:
            args += ["--lose-methods", lose_methods]
        if profile != "default":
            args += ["--database-profile", profile]
        if acks:
            args.append("--acks")
        if any(inject):
            args += ["--inject-serialization", str(inject[0]), "--inject-drop", str(inject[1])]
        if node_id:
            args += ["--node-id", node_id]
        if clock_offset is not None:
            args += ["--clock-offset", str(clock_offset)]
        if note_fires:
            args.append("--note-fires")
        proc = Proc(args)
        self.procs.append(proc)
        address = proc.wait_for(r"listening on (\S+)").group(1)
        return proc, address

    def servers(self, *node_ids: str, **options: Any) -> dict[str, tuple[Proc, int, str]]:
        """One server per node id, each on a port of its own: node id -> (process, port,
        address); `options` as `server`'s. `kill_the_leader` restarts the leader on its port,
        so workers reconnect."""
        out: dict[str, tuple[Proc, int, str]] = {}
        for node_id in node_ids:
            port = free_port()
            proc, address = self.server(port=port, node_id=node_id, **options)
            out[node_id] = (proc, port, address)
        return out

    def kill_the_leader(
        self, checker: Checker, servers: dict[str, tuple[Proc, int, str]]
    ) -> tuple[str, int]:
        """kill -9 whichever of `servers` holds the lead now (the lead moves when a loaded
        machine starves a renewal), then start a server in its place on its port. Returns the
        killed leader's node id and term."""
        holder, term = checker.leader()
        assert holder in servers, f"the leader {holder!r} is none of {sorted(servers)}"
        proc, port, _ = servers[holder]
        assert proc.kill9() == -9
        self.server(port=port, node_id=f"{holder}-again")
        return holder, term

    def worker(
        self,
        address: str,
        *,
        queues: Iterable[str] = ("default",),
        concurrency: int = 8,
        batch: int = 64,
    ) -> Proc:
        args = [sys.executable, str(HERE / "fault_worker.py"), address]
        for queue in queues:
            args += ["--queue", queue]
        args += ["--concurrency", str(concurrency), "--batch", str(batch)]
        env = {"WIGGLE_FAULT_LEDGER": str(self.ledger), "WIGGLE_FAULT_FIXED": str(self.fixed)}
        proc = Proc(args, env=env)
        self.procs.append(proc)
        proc.wait_for(r"^ready")
        return proc

    def close(self) -> None:
        for proc in reversed(self.procs):
            if proc.proc.poll() is None:
                proc.stop(timeout=20)


def kill_postmaster(pid: int) -> int:
    """kill -9 a PostgreSQL postmaster and every backend at once: no shutdown, no checkpoint,
    nothing flushed that was not flushed already. Returns `pid`."""
    import psutil

    victims = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for proc in victims:
        proc.send_signal(signal.SIGKILL)
    psutil.wait_procs(victims, timeout=30)
    return pid


# -- the ledger and the server's own counts ------------------------------------------------------


@dataclass(frozen=True)
class Execution:
    instance: str
    key: str  # NODE#N
    attempt: int
    pid: int
    mode: str

    @property
    def node(self) -> str:
        return self.key.split("#", 1)[0]


def read_ledger(path: Path) -> list[Execution]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        instance, key, attempt, pid, mode = line.split()
        out.append(Execution(instance, key, int(attempt), int(pid), mode))
    return out


def read_stats(path: Path) -> Counter[str]:
    """`lost METHOD` / `refused CODE METHOD` lines counted as `lost`, `lost:METHOD`,
    `refused:CODE`; a stopped server's `injected FATE N` and `retried REASON N` as
    `injected:FATE` and `retried:REASON` (summed over servers); `schedule OUTCOME NODE NAME`
    (`--note-fires`) as `schedule:OUTCOME` and `schedule:OUTCOME:NODE`."""
    counts: Counter[str] = Counter()
    if not path.exists():
        return counts
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[0] == "lost":
            counts["lost"] += 1
            counts[f"lost:{parts[1]}"] += 1
        elif parts[0] == "refused":
            counts[f"refused:{parts[1]}"] += 1
        elif parts[0] in ("injected", "retried"):
            counts[f"{parts[0]}:{parts[1]}"] += int(parts[2])
        elif parts[0] == "schedule":
            counts[f"schedule:{parts[1]}"] += 1
            counts[f"schedule:{parts[1]}:{parts[2]}"] += 1
    return counts


# -- the checker ---------------------------------------------------------------------------------


@dataclass
class Tally:
    """What a scenario did, from the engine's tables, the ledger and the server's counts."""

    scenario: str
    started: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    stuck: int = 0  # still RUNNING at the end
    lost: int = 0  # started, but not in the database
    reexec: dict[str, int] = field(default_factory=dict)  # mode -> executions beyond the first
    stale_refused: int = 0
    duplicate_events: int = 0
    timers_fired: int = 0
    fault: str = ""  # the evidence that the fault fired

    def line(self) -> str:
        reexec = " ".join(f"{m}={n}" for m, n in sorted(self.reexec.items())) or "-"
        return (
            f"{self.scenario}: started {self.started} completed {self.completed} "
            f"failed {self.failed} stuck {self.stuck} lost {self.lost} | re-executions {reexec} | "
            f"stale refused {self.stale_refused} | duplicate events {self.duplicate_events} | "
            f"timers fired {self.timers_fired} | fault: {self.fault}"
        )


def _engine(database: str) -> sa.Engine:
    from wiggle._postgres import sqlalchemy_url

    url = database if database.startswith("sqlite") else sqlalchemy_url(database)
    return sa.create_engine(url, poolclass=sa.pool.NullPool)


class Checker:
    """Reads the engine's tables (never through the server: the checker must not depend on the
    thing it checks)."""

    def __init__(self, database: str) -> None:
        self.sa = _engine(database)

    def close(self) -> None:
        self.sa.dispose()

    def statuses(self, ids: Iterable[str]) -> dict[str, str]:
        ids = list(ids)
        out: dict[str, str] = {}
        with self.sa.connect() as conn:
            for i in range(0, len(ids), 500):
                rows = conn.execute(
                    sa.text("SELECT id, status FROM wiggle_instances WHERE id IN :ids").bindparams(
                        sa.bindparam("ids", expanding=True)
                    ),
                    {"ids": ids[i : i + 500]},
                ).all()
                out.update({r.id: r.status for r in rows})
        return out

    def wait_finished(self, ids: Iterable[str], timeout: float) -> dict[str, str]:
        """Poll the tables until every instance has finished, or `timeout` passed."""
        ids = list(ids)
        deadline = time.monotonic() + timeout
        while True:
            found = self.statuses(ids)
            if (
                all(found.get(i, "RUNNING") != "RUNNING" for i in ids)
                or time.monotonic() > deadline
            ):
                return found
            time.sleep(0.2)

    def events(self, ids: Iterable[str], kinds: Iterable[str]) -> list[Any]:
        ids = list(ids)
        rows: list[Any] = []
        with self.sa.connect() as conn:
            for i in range(0, len(ids), 500):
                rows += conn.execute(
                    sa.text(
                        "SELECT instance_id, kind, node_id, attempt, at_ms, detail "
                        "FROM wiggle_events WHERE instance_id IN :ids AND kind IN :kinds "
                        "ORDER BY seq"
                    ).bindparams(
                        sa.bindparam("ids", expanding=True), sa.bindparam("kinds", expanding=True)
                    ),
                    {"ids": ids[i : i + 500], "kinds": list(kinds)},
                ).all()
        return rows

    def contexts(self, ids: Iterable[str]) -> dict[str, Any]:
        import orjson

        ids = list(ids)
        out: dict[str, Any] = {}
        with self.sa.connect() as conn:
            for i in range(0, len(ids), 500):
                rows = conn.execute(
                    sa.text(
                        "SELECT id, context, reason FROM wiggle_instances WHERE id IN :ids"
                    ).bindparams(sa.bindparam("ids", expanding=True)),
                    {"ids": ids[i : i + 500]},
                ).all()
                out.update({r.id: (orjson.loads(r.context), r.reason) for r in rows})
        return out

    def leader(self) -> tuple[str, int]:
        with self.sa.connect() as conn:
            row = conn.execute(sa.text("SELECT holder, term FROM wiggle_leader")).one()
        return row.holder, int(row.term)

    def tally(
        self,
        scenario: str,
        ids: list[str],
        ledger: Path,
        stats: Path | None = None,
        *,
        modes: dict[str, str] | None = None,
        fault: str = "",
    ) -> Tally:
        """The ledger line of a scenario. `modes`: instance -> execution mode (for the
        re-execution counts; taken from the ledger when not given)."""
        statuses = self.statuses(ids)
        t = Tally(scenario, started=len(ids), fault=fault)
        for instance in ids:
            status = statuses.get(instance)
            if status is None:
                t.lost += 1
            elif status == "COMPLETED":
                t.completed += 1
            elif status == "FAILED":
                t.failed += 1
            elif status == "CANCELLED":
                t.cancelled += 1
            else:
                t.stuck += 1
        executions = [e for e in read_ledger(ledger) if e.instance in set(ids)]
        runs: Counter[tuple[str, str]] = Counter((e.instance, e.key) for e in executions)
        mode_of = dict(modes or {})
        for e in executions:
            mode_of.setdefault(e.instance, e.mode)
        reexec: Counter[str] = Counter()
        for (instance, _key), n in runs.items():
            reexec[mode_of.get(instance, "?")] += n - 1
        t.reexec = {m: n for m, n in reexec.items()}
        for m in set(mode_of.values()):
            t.reexec.setdefault(m, 0)
        # Duplicate events: a step completed more often than it had distinct executions (a
        # report applied twice), or one timer (instance, node, attempt) fired twice.
        keys_per_node: dict[tuple[str, str], set[str]] = defaultdict(set)
        for e in executions:
            keys_per_node[(e.instance, e.node)].add(e.key)
        events = self.events(ids, ["step_completed", "timer_fired"])
        completed: Counter[tuple[str, str]] = Counter()
        fired: Counter[tuple[str, str, int]] = Counter()
        for ev in events:
            if ev.kind == "step_completed":
                completed[(ev.instance_id, ev.node_id)] += 1
            elif ev.kind == "timer_fired":  # a sleep, an await deadline, a retry's backoff
                fired[(ev.instance_id, ev.node_id, ev.attempt)] += 1
        for where, n in completed.items():
            t.duplicate_events += max(0, n - len(keys_per_node.get(where, ())))
        for n in fired.values():
            t.duplicate_events += max(0, n - 1)
        t.timers_fired = sum(fired.values())
        if stats is not None:
            counts = read_stats(stats)
            t.stale_refused = counts["refused:STALE_LEASE"]
        return t


def reexecuted_keys(ledger: Path, instance: str) -> set[str]:
    runs = Counter(e.key for e in read_ledger(ledger) if e.instance == instance)
    return {key for key, n in runs.items() if n > 1}


# -- flows and load ------------------------------------------------------------------------------

MODES = ("SERVER", "LOCAL_SYNC", "LOCAL_ASYNC")


def _step(name: str, timeout: str, attempts: int, extra: str = "") -> str:
    return (
        f"  - {{task: {name}, timeout: {timeout}, "
        f"retry: {{max_attempts: {attempts}, initial: 50ms, max: 200ms}}{extra}}}"
    )


def linear_flow(
    name: str,
    mode: str,
    *,
    steps: int = 6,
    timeout: str = "2s",
    attempts: int = 10,
    checkpoint: str = "s2",
) -> str:
    """`steps` tasks s0.. in a row; `checkpoint` flushes a LOCAL_ASYNC run after that step."""
    lines = [f"wiggle: 1\nname: {name}\nexecution: {mode}\nsteps:"]
    for i in range(steps):
        extra = ", checkpoint: true" if f"s{i}" == checkpoint else ""
        lines.append(_step(f"s{i}", timeout, attempts, extra))
    return "\n".join(lines) + "\n"


def loop_flow(name: str, mode: str, *, target: int, timeout: str = "2s", attempts: int = 10) -> str:
    """`inc` while `more` (n < target): exactly `target` iterations, and `max_iterations` so
    tight that one batch applied twice fails the instance."""
    return (
        f"wiggle: 1\nname: {name}\nexecution: {mode}\nsteps:\n"
        f"  - loop:\n"
        f"      steps:\n"
        f"        - {{task: inc, timeout: {timeout}, retry: {{max_attempts: {attempts}, "
        f"initial: 50ms, max: 200ms}}}}\n"
        f"      while: more\n"
        f"      max_iterations: {target}\n"
        f"    timeout: {timeout}\n"
        f"    retry: {{max_attempts: {attempts}, initial: 50ms, max: 200ms}}\n"
        f"  - {{task: after, timeout: {timeout}}}\n"
    )


def deploy(address: str, *sources: str) -> list[tuple[str, str]]:
    """Register flows through a server; returns (name, version) of each."""
    from wiggle.client import Client
    from wiggle.compiler import load_flow

    out = []
    with Client(address) as client:
        for source in sources:
            flow = load_flow(source.encode())
            client.deploy(flow)
            out.append((flow.name, flow.version))
    return out


def start_many(address: str, flow: tuple[str, str], inputs: Iterable[Any]) -> list[str]:
    from wiggle.client import Client

    with Client(address) as client:
        return [client.start(flow[0], value, version=flow[1]).instance_id for value in inputs]


def executions_so_far(ledger: Path) -> int:
    return len(read_ledger(ledger))
