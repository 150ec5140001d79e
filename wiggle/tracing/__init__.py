"""OpenTelemetry tracing of instances across the server and the workers (docs/observability.md).

Off unless the standard OTEL_* variables turn it on (`enabled`); while off nothing here imports
OpenTelemetry. `Tracing.from_env()` (opentelemetry-sdk, the `wiggle[otel]` extra) builds the
tracer provider the server or a worker exports through; `wiggle.tracecontext` holds the pure
identities every process derives alike.
"""

from __future__ import annotations

from wiggle.tracing._attributes import step_attributes
from wiggle.tracing._env import Layout, enabled, layout

__all__ = ["Layout", "enabled", "layout", "step_attributes"]
