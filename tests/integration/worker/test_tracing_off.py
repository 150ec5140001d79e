"""With tracing off (no OTEL_* variable), a server and a worker load nothing of the
OpenTelemetry SDK: the hot path pays nothing for tracing (docs/observability.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_tracing_off_imports_no_opentelemetry_sdk() -> None:
    """A server and a worker started with tracing off load nothing of the OpenTelemetry SDK."""
    code = """
import os, sys
for k in [k for k in os.environ if k.startswith("OTEL_")]:
    del os.environ[k]
from wiggle.server import Server, ServerConfig, embedded_stack
from wiggle.worker import Worker
with embedded_stack() as stack:
    w = Worker(stack.address, queues=["q"])
    w.start()
    w.stop()
assert not [m for m in sys.modules if m.startswith("opentelemetry.sdk")], sorted(sys.modules)
assert "opentelemetry.trace" not in sys.modules
print("clean")
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert out.returncode == 0 and "clean" in out.stdout, out.stderr
