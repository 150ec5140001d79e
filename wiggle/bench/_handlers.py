"""The activities the benchmarks' workers run: each step bumps a counter in the context.

An input carrying `fail_at` makes the step that sees `n == fail_at` fail for good: the
throughput benchmark's `--inject-failure` starts one such instance to show that a run with a
FAILED instance is refused rather than measured.
"""

from __future__ import annotations

from typing import Any

from wiggle.worker import NonRetryable, activity


@activity("bench_step")
def bench_step(ctx: Any) -> Any:
    n = ctx.get("n", 0)
    if ctx.get("fail_at") == n:
        raise NonRetryable(f"injected failure at n={n}")
    return {**ctx, "n": n + 1}


@activity("bench_n_is_even")
def bench_n_is_even(ctx: Any) -> bool:
    """The predicate of the expressions benchmark's choices: what an expression replaces."""
    return bool(ctx.get("n", 0) % 2 == 0)
