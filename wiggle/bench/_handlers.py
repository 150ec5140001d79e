"""The activities the benchmarks' workers run: each step bumps a counter in the context."""

from __future__ import annotations

from typing import Any

from wiggle.worker import activity


@activity("bench_step")
def bench_step(ctx: Any) -> Any:
    return {**ctx, "n": ctx.get("n", 0) + 1}
