"""Time validate + compile + hash of a generated 1,000-step flow (best of N runs).

python scripts/bench_compile.py [--steps 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import time

from wiggle.compiler import load_flow
from wiggle.compiler._schema import forget_valid_steps


def unit(i: int) -> tuple[list[str], int]:
    """One group of mixed blocks (YAML lines at top-level indent) and how many steps it holds."""
    lines = [
        f"  - task: validate_{i}",
        "    retry: {max_attempts: 5, backoff: exponential, initial: 100ms, max: 10s}",
        f"  - filter: in_stock_{i}",
        "  - parallel:",
        f"      payment: [{{task: authorise_{i}}}, {{task: capture_{i}, checkpoint: true}}]",
        f"      shipping: [{{task: reserve_{i}}}, {{sleep: 5m}}]",
        f"    combine: merge_{i}",
        f"  - for_each: /items/{i}",
        f"    steps: [{{task: ocr_{i}}}, {{subflow: child-flow, id: child_{i}}}]",
        f"    combine: gather_{i}",
        "    max_concurrency: 4",
        "  - choice:",
        f"      - when: is_big_{i}",
        f"        steps: [{{task: big_{i}}}]",
        f"    otherwise: [{{sleep: {{until: /wake/{i}}}}}]",
        f"  - await: approved_{i}",
        "    timeout: 2d",
        f"    on_timeout: [{{task: escalate_{i}}}]",
        f"  - loop: {{steps: [{{task: poll_{i}}}], while: again_{i}, max_iterations: 20}}",
    ]
    # task, filter, parallel(+4), for_each(+2), choice(+2), await(+1), loop(+1)
    return lines, 17


def generate(steps: int) -> str:
    lines = ["wiggle: 1", "name: bench", "queue: work", "steps:"]
    count, i = 0, 0
    while count < steps:
        block, n = unit(i)
        lines.extend(block)
        count += n
        i += 1
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    text = generate(args.steps)
    load_flow(text)  # warm-up: builds the schema validators once, as a long-lived process would
    best = float("inf")
    for _ in range(args.repeat):
        forget_valid_steps()  # a first compile: no step of it known valid yet
        started = time.perf_counter()
        flow = load_flow(text, "bench.yaml")
        best = min(best, time.perf_counter() - started)
    nodes = len(flow.document["nodes"])
    print(
        f"validate+compile+hash: {best * 1000:.1f} ms best of {args.repeat} "
        f"({args.steps}+ steps, {nodes} nodes, {len(text)} bytes, {flow.version[:19]}...)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
