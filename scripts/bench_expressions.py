"""Benchmark expressions against predicate activities, and one evaluation in each language.

    python scripts/bench_expressions.py                    # everything (a few minutes)
    python scripts/bench_expressions.py --skip-languages   # the engine half only
    python scripts/bench_expressions.py --database postgresql://user@host/db --rounds 1

The engine half: a 20-step flow, five blocks of (task, choice, task in the arm taken, task),
so 15 tasks and 5 choices an instance, written twice: each choice's arm `when: bench_n_is_even`
(a predicate activity a worker runs) or `if: ctx.n % 2 == 0` (CEL, evaluated by the server in
SERVER mode and by the worker in LOCAL_SYNC). Both flavours in SERVER and LOCAL_SYNC on one
PostgreSQL (a throwaway pgserver unless --database), one `wiggle server` and --workers `wiggle
worker` processes of --concurrency slots, driven in a closed loop at 64 and at 1 instance in
flight (each driver thread starts an instance, waits for its result, starts the next). Every
result is checked from the database (status COMPLETED, n == 15), and so is every instance's
path (the 15 task nodes of the arms the rule picks, from wiggle_events). Figures per row:
steps/s (20 an instance), p50 start-to-result, and per instance the server's RPCs by method,
its transactions and PostgreSQL's commits: counts that hold from run to run where times move;
each figure is the median over --rounds rounds.

The language half: µs per evaluation of `ctx.amount_cents >= 1000000 && ctx.country != "NL"`
compiled once, in Python (cel-expr-python), Go (cel-go, `go test -bench`), Java (dev.cel, the
SDK's ExpressionBench after `mvn package`) and TypeScript (@bufbuild/cel, after `npm run
build`). A language whose toolchain or build is missing is reported as such, not guessed.

Not a test: times depend on the machine. docs/performance.md has a run's table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from wiggle._postgres import given_or_throwaway
from wiggle.bench._counters import pg_counters, server_counts
from wiggle.bench._loop import Outcome, drive
from wiggle.bench._processes import free_port, running, wait_serving
from wiggle.client import Client

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = 5
TASKS = BLOCKS * 3
STEPS = BLOCKS * 4  # 15 tasks and 5 choices
BENCH_EXPRESSION = 'ctx.amount_cents >= 1000000 && ctx.country != "NL"'
BENCH_CONTEXT = {"amount_cents": 1250000, "country": "DE"}
# A backend publishes its statistics within a second while busy and within ten once idle.
PG_STATS_SETTLE_S = 11.0
TASK_NODE = re.compile(r"_(before|after|on_even|on_odd)$")


def flow_source(flavour: str, mode: str) -> str:
    """The 20-step flow; `flavour` is "predicate" or "expression"."""
    arm = "when: bench_n_is_even" if flavour == "predicate" else "if: ctx.n % 2 == 0"
    lines = [
        "wiggle: 1",
        f"name: bench-choices-{flavour}-{mode.lower().replace('_', '-')}",
        f"execution: {mode}",
        "steps:",
    ]
    for k in range(BLOCKS):
        lines += [
            f"  - {{task: bench_step, id: b{k}_before}}",
            "  - choice:",
            f"      - {{{arm}, id: b{k}_even, steps: [{{task: bench_step, id: b{k}_on_even}}]}}",
            f"    otherwise: [{{task: bench_step, id: b{k}_on_odd}}]",
            f"  - {{task: bench_step, id: b{k}_after}}",
        ]
    return "\n".join(lines) + "\n"


def expected_tasks() -> list[str]:
    """The task nodes an instance started with n = 0 runs: before block k, n = 3k + 1."""
    return [
        node
        for k in range(BLOCKS)
        for node in (
            f"b{k}_before",
            f"b{k}_on_even" if (3 * k + 1) % 2 == 0 else f"b{k}_on_odd",
            f"b{k}_after",
        )
    ]


# ------------------------------------------------------------------------------- the engine half


@dataclass
class Stack:
    client: Client
    metrics_port: int
    url: str

    def reading(self) -> dict[str, float]:
        """The server's RPCs by method and transactions, and PostgreSQL's commits, now."""
        got: dict[str, float] = {}
        for key, value in server_counts(self.metrics_port).items():
            key = "server transactions" if key.startswith("transactions ") else key
            got[key] = got.get(key, 0.0) + value
        got["pg commits"] = float(pg_counters(self.url).commits)
        return got


def run_loop(client: Client, flow: str, count: int, inflight: int) -> list[Outcome]:
    """`count` instances in the benchmarks' closed loop; each must have COMPLETED."""
    outcomes = drive(client, flow, count, inflight, lambda _: {"n": 0}, timeout_s=120)
    failed = [o for o in outcomes if o.status != "COMPLETED"]
    if failed:
        raise RuntimeError(f"{flow}: {len(failed)} instances did not complete, first {failed[0]}")
    return outcomes


def verify(url: str, ids: list[str]) -> None:
    """Every instance ended with n == 15 and ran exactly the task nodes its choices pick."""
    want = sorted(expected_tasks())
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as c:
        wrong_result = c.execute(
            "SELECT id, context FROM wiggle_instances WHERE id = ANY(%s) "
            "AND (status <> 'COMPLETED' OR context::jsonb <> %s::jsonb)",
            (ids, json.dumps({"n": TASKS})),
        ).fetchall()
        if wrong_result:
            raise RuntimeError(
                f"{len(wrong_result)} instances ended wrong, first {wrong_result[0]}"
            )
        rows = c.execute(
            "SELECT instance_id, node_id FROM wiggle_events "
            "WHERE kind = 'step_completed' AND instance_id = ANY(%s)",
            (ids,),
        ).fetchall()
    paths: dict[str, list[str]] = {}
    for instance, node in rows:
        if TASK_NODE.search(node):  # the choices' own nodes (predicates) are not tasks
            paths.setdefault(instance, []).append(node)
    paths = {instance: sorted(nodes) for instance, nodes in paths.items()}
    wrong = [i for i in ids if paths.get(i) != want]
    if wrong:
        raise RuntimeError(
            f"{len(wrong)} of {len(ids)} instances took another path, first {wrong[0]}: "
            f"{paths.get(wrong[0])} (expected {want})"
        )


def measure(
    stack: Stack, flavour: str, mode: str, inflight: int, count: int, settle_s: float
) -> dict[str, Any]:
    flow = stack.client.deploy(flow_source(flavour, mode).encode()).name
    run_loop(stack.client, flow, max(inflight, count // 10), inflight)  # warm-up
    time.sleep(settle_s)
    before = stack.reading()
    begun = time.perf_counter()
    outcomes = run_loop(stack.client, flow, count, inflight)
    took = time.perf_counter() - begun
    time.sleep(settle_s)
    after = stack.reading()
    verify(stack.url, [o.instance_id for o in outcomes])
    latencies = [o.latency_s for o in outcomes]
    spent = {k: (after[k] - before.get(k, 0.0)) / count for k in after}
    return {
        "flavour": flavour,
        "mode": mode,
        "inflight": inflight,
        "instances": count,
        "steps_per_s": count * STEPS / took,
        "p50_ms": statistics.median(latencies) * 1000,
        "per_instance": {k: v for k, v in sorted(spent.items()) if v > 0.004},
    }


def median_row(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    keys = sorted({k for r in rounds for k in r["per_instance"]})
    return {
        **rounds[0],
        "steps_per_s": statistics.median(r["steps_per_s"] for r in rounds),
        "p50_ms": statistics.median(r["p50_ms"] for r in rounds),
        "per_instance": {
            k: statistics.median(r["per_instance"].get(k, 0.0) for r in rounds) for k in keys
        },
        "rounds_steps_per_s": [round(r["steps_per_s"]) for r in rounds],
    }


def engine_half(args: argparse.Namespace) -> list[dict[str, Any]]:
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(given_or_throwaway(args.database))
        address = f"127.0.0.1:{free_port()}"
        metrics_port = free_port()
        server = ["server", "--database", url, "--address", address]
        server += ["--metrics-address", f"127.0.0.1:{metrics_port}", "--log-level", "warning"]
        stack.enter_context(running([server]))
        wait_serving(address)
        worker = ["worker", "--handlers", "wiggle.bench._handlers", "--address", address]
        worker += ["--concurrency", str(args.concurrency), "--log-level", "warning"]
        stack.enter_context(running([worker] * args.workers))
        client = stack.enter_context(Client(address))
        on = Stack(client, metrics_port, url)
        cells = [
            (flavour, mode, inflight, count)
            for inflight, count in ((64, args.instances), (1, args.instances_at_one))
            for mode in ("SERVER", "LOCAL_SYNC")
            for flavour in ("predicate", "expression")
        ]
        runs: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {c: [] for c in cells}
        for n in range(args.rounds):
            # Each round begins with another cell, so none is always measured first.
            for cell in cells[n % len(cells) :] + cells[: n % len(cells)]:
                runs[cell].append(measure(on, *cell, args.settle))
                print(f"  measured {cell} round {n + 1}", file=sys.stderr)
        return [median_row(runs[c]) for c in cells]


def print_engine(rows: list[dict[str, Any]]) -> None:
    print(f"\n20-step flow, 5 choices; medians of the rounds; per instance counts ({STEPS} steps)")
    print(
        "| in flight | mode | choices | steps/s | vs predicates | p50 ms | RPCs | of them "
        "| server tx | PG commits |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    base: dict[tuple[str, int], float] = {}
    for row in rows:
        key = (row["mode"], row["inflight"])
        if row["flavour"] == "predicate":
            base[key] = row["steps_per_s"]
        per = row["per_instance"]
        rpcs = {k.removeprefix("rpc "): v for k, v in per.items() if k.startswith("rpc ")}
        ratio = row["steps_per_s"] / base[key] if key in base else 1.0
        main = ", ".join(f"{k} {v:.1f}" for k, v in sorted(rpcs.items(), key=lambda kv: -kv[1])[:3])
        print(
            f"| {row['inflight']} | {row['mode']} | {row['flavour']} | {row['steps_per_s']:,.0f} "
            f"| {ratio:.2f} | {row['p50_ms']:.1f} | {sum(rpcs.values()):.1f} | {main} "
            f"| {per.get('server transactions', 0):.1f} | {per.get('pg commits', 0):.1f} |"
        )
    print(
        "(steps/s per round: "
        + "; ".join(
            f"{r['inflight']} {r['mode']} {r['flavour']} {r['rounds_steps_per_s']}" for r in rows
        )
        + ")"
    )


# ----------------------------------------------------------------------------- the language half


def python_us(n: int = 200_000) -> float:
    from wiggle.expressions import compile_expression

    expression = compile_expression(BENCH_EXPRESSION, condition=True)
    best = float("inf")
    for _ in range(5):
        begun = time.perf_counter()
        for _ in range(n):
            if expression.condition(BENCH_CONTEXT) is not True:
                raise RuntimeError("the benchmark expression is not true")
        best = min(best, (time.perf_counter() - begun) / n * 1e6)
    return best


def _run(cmd: list[str], cwd: Path) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {(done.stderr or done.stdout)[-800:]}")
    return done.stdout


def go_us() -> float:
    out = _run(
        ["go", "test", "-run", "^$", "-bench", "BenchmarkEvaluate", "-count", "5", "./expr"],
        ROOT / "sdk" / "go",
    )
    per_op = [float(m) for m in re.findall(r"BenchmarkEvaluate\S*\s+\d+\s+([\d.]+) ns/op", out)]
    if not per_op:
        raise RuntimeError(f"no BenchmarkEvaluate line in: {out[-400:]}")
    return min(per_op) / 1000


def java_us() -> float:
    java = ROOT / "sdk" / "java"
    if not (java / "target" / "test-classes").is_dir():
        raise RuntimeError("sdk/java is not built (mvn -f sdk/java/pom.xml package)")
    cp_file = java / "target" / "cp.txt"
    if not cp_file.exists():
        classpath = ["dependency:build-classpath", f"-Dmdep.outputFile={cp_file}"]
        _run(["mvn", "-B", "-q", "-ntp", *classpath], java)
    cp = f"target/classes:target/test-classes:{cp_file.read_text().strip()}"
    out = _run(["java", "-cp", cp, "dev.wiggle.expressions.ExpressionBench"], java)
    got = [float(m) for m in re.findall(r"([\d.]+) µs per evaluation", out)]
    if not got:
        raise RuntimeError(f"no figure in: {out[-400:]}")
    return min(got[1:] or got)  # the first round warms the JIT


def typescript_us() -> float:
    ts = ROOT / "sdk" / "typescript"
    if not (ts / "dist" / "esm" / "index.js").exists():
        raise RuntimeError("sdk/typescript is not built (npm run build)")
    out = _run(["node", "scripts/bench-expressions.mjs"], ts)
    got = [float(m) for m in re.findall(r"([\d.]+) µs per evaluation", out)]
    if not got:
        raise RuntimeError(f"no figure in: {out[-400:]}")
    return min(got[1:] or got)


def language_half() -> None:
    print(f"\nOne evaluation of {BENCH_EXPRESSION}, compiled once (best of the rounds)")
    print("| language | library | µs per evaluation |")
    print("|---|---|---|")
    for language, library, measure_us in (
        ("Python", "cel-expr-python", python_us),
        ("Go", "cel-go", go_us),
        ("Java", "dev.cel", java_us),
        ("TypeScript", "@bufbuild/cel", typescript_us),
    ):
        try:
            figure = f"{measure_us():.2f}"
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            figure = f"not measured: {exc}"
        print(f"| {language} | {library} | {figure} |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="a PostgreSQL URL (default: a throwaway pgserver)")
    parser.add_argument("--instances", type=int, default=640, help="measured at 64 in flight")
    parser.add_argument("--instances-at-one", type=int, default=60, help="measured at 1 in flight")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--settle",
        type=float,
        default=PG_STATS_SETTLE_S,
        help="seconds before each reading, for PostgreSQL's statistics (default %(default)s)",
    )
    parser.add_argument("--skip-engine", action="store_true")
    parser.add_argument("--skip-languages", action="store_true")
    parser.add_argument("--json", action="store_true", help="the engine rows as JSON too")
    args = parser.parse_args()
    if not args.skip_engine:
        rows = engine_half(args)
        print_engine(rows)
        if args.json:
            print(json.dumps(rows, indent=2))
    if not args.skip_languages:
        language_half()
    return 0


if __name__ == "__main__":
    sys.exit(main())
