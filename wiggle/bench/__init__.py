"""Benchmarks, run with `wiggle bench NAME`: figures are ratios and counts, never test asserts."""

from __future__ import annotations

__all__: list[str] = []
