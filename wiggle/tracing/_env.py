"""Whether tracing is on, from the standard OTEL_* variables; no OpenTelemetry import."""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import StrEnum

__all__ = ["Layout", "enabled", "layout"]

_OFF = {"", "none"}


class Layout(StrEnum):
    """How an instance's spans hang together (WIGGLE_TRACE_LAYOUT)."""

    #: A short start span is the parent of every step and server span: no span waits for the
    #: instance to end (the default, for flows that run for days).
    LINKED = "linked"
    #: The instance span lasts from the start to the end (emitted when the instance ends): one
    #: continuous trace, for short flows.
    CONTINUOUS = "continuous"


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """Tracing is on when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) or OTEL_TRACES_EXPORTER names an exporter, unless
    OTEL_SDK_DISABLED is true or OTEL_TRACES_EXPORTER is `none`."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER")
    if exporter is not None and exporter.strip().lower() == "none":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    return bool(endpoint) or (exporter or "").strip().lower() not in _OFF


def layout(env: Mapping[str, str] | None = None) -> Layout:
    env = os.environ if env is None else env
    value = env.get("WIGGLE_TRACE_LAYOUT", "").strip().lower() or Layout.LINKED
    try:
        return Layout(value)
    except ValueError:
        raise ValueError(
            f"WIGGLE_TRACE_LAYOUT must be 'linked' or 'continuous', not {value!r}"
        ) from None
