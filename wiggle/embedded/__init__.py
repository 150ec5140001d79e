"""Wiggle inside a Python process: the engine, its services and a worker, called directly.

    Engine(database=None, *, activities=None, queues=("default",), listen=None, ...)
        .deploy(flow) .start(flow, input) .wait(id) .run(flow, input) .signal(id, name, payload)
        .cancel(id) .describe(id) .client (every call of wiggle.client.Client) .close()

    in_process_worker(stub, queues=..., registry=...): the worker an Engine runs, over a stub

docs/embedded.md says when to choose it, what it costs, and how remote workers join.
"""

from __future__ import annotations

from wiggle.embedded._engine import IN_PROCESS, Engine, in_process_worker

__all__ = ["IN_PROCESS", "Engine", "in_process_worker"]
