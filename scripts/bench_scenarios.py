"""Benchmark `wiggle test`: scenarios of a 20-step flow with a 30-day await, every mode.

    python scripts/bench_scenarios.py                 # 100 scenarios x 3 modes
    python scripts/bench_scenarios.py --scenarios 300 --modes SERVER

Writes the flow, its handlers and a scenario file into a temporary directory and runs them the
way `wiggle test` does (the real engine in-process, SQLite in memory, a virtual clock). Half the
scenarios get their signal after a day, half wait out the 30-day deadline and take the
escalation path. Prints the wall time and CPU time of the run, and per scenario and mode. Not a
test: the numbers depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from wiggle.testing._flowtest import MODES
from wiggle.testing._runner import run_files

STEPS = 20


def flow_text() -> str:
    before = "".join(f"  - task: step\n    id: s{i:02d}\n" for i in range(STEPS // 2))
    after = "".join(f"  - task: step\n    id: t{i:02d}\n" for i in range(STEPS // 2))
    return (
        "wiggle: 1\nname: bench-scenarios\nsteps:\n"
        + before
        + "  - await: approval\n    timeout: 30d\n    on_timeout: [{task: escalate}]\n"
        + after
    )


HANDLERS = """\
from wiggle import activity


@activity
def step(ctx):
    return {**ctx, "n": ctx["n"] + 1}


@activity
def escalate(ctx):
    return {**ctx, "escalated": True}
"""


def scenarios_text(count: int) -> str:
    out = ["wiggle_test: 1\nflow: flow.yaml\nhandlers: handlers.py\nscenarios:\n"]
    for i in range(count):
        out.append(f"  - name: s{i:04d}\n    input: {{n: 0, i: {i}}}\n")
        if i % 2 == 0:
            out.append("    timeline: [{at: 1d, signal: approval}]\n")
            out.append(f"    expect: {{status: COMPLETED, context_at: {{/n: {STEPS}}}}}\n")
        else:
            out.append("    expect: {status: COMPLETED, context_at: {/escalated: true}}\n")
    return "".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", type=int, default=100)
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = [m.strip().upper() for m in args.modes.split(",") if m.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "flow.yaml").write_text(flow_text())
        (root / "handlers.py").write_text(HANDLERS)
        (root / "bench.scenarios.yaml").write_text(scenarios_text(args.scenarios))
        wall, cpu = time.perf_counter(), time.process_time()
        report = run_files([root / "bench.scenarios.yaml"], modes=modes)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    runs = len(report.runs)
    if report.failed or report.errors or runs != args.scenarios * len(modes):
        raise SystemExit(f"the benchmark's own scenarios failed: {report.failed} of {runs}")
    print(
        f"{args.scenarios} scenarios x {len(modes)} modes ({', '.join(modes)}) of a {STEPS}-step "
        f"flow with a 30-day await: {runs} runs passed"
    )
    print(f"wall {wall:.2f} s, CPU {cpu:.2f} s; per run: wall {1000 * wall / runs:.1f} ms")
    for mode in modes:
        mine = [r.seconds for r in report.runs if r.mode == mode]
        print(f"  {mode:<12} {sum(mine):6.2f} s  ({1000 * sum(mine) / len(mine):.1f} ms a run)")


if __name__ == "__main__":
    main()
