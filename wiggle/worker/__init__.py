"""The Python worker SDK: write handlers, run them against a Wiggle server.

```python
from wiggle.worker import activity, step, NonRetryable, Worker

@activity
def validate(ctx):
    return {**ctx, "valid": True}

Worker("localhost:7233", queues=["default"]).run()   # SIGTERM / SIGINT drain, then return
```

What a crash costs depends on the flow's execution mode, because it decides when step results
reach the server (an unclean death is SIGKILL, OOM, a lost host):

    mode         results reach the server                  an unclean death re-runs
    SERVER       after every step (CompleteTask/FailTask)  the step in flight
    LOCAL_SYNC   after every step, before the next starts  the step in flight
    LOCAL_ASYNC  at handback, after a `checkpoint` step,   every step since the last flush
                 and every `local_batch_size` steps

Execution is at least once in every mode, so steps must tolerate running twice; under
LOCAL_ASYNC a whole run may repeat. Put side effects that must not repeat (a charge, an email) in
SERVER or LOCAL_SYNC flows, behind an idempotency key built from `step()` (instance id, node id),
or right after a `checkpoint`. A graceful stop (`Worker.stop()`, SIGTERM) loses nothing: local
runs hand back at their next step boundary with everything they computed.
"""

from __future__ import annotations

from wiggle.worker._activities import Activity, Registry, activity, default_registry, run_handler
from wiggle.worker._context import StepInfo, step
from wiggle.worker._eager import EagerSlot
from wiggle.worker._errors import NonRetryable, NotInActivity
from wiggle.worker._loader import load_handlers
from wiggle.worker._worker import TlsConfig, Worker

__all__ = [
    "Activity",
    "EagerSlot",
    "NonRetryable",
    "NotInActivity",
    "Registry",
    "StepInfo",
    "TlsConfig",
    "Worker",
    "activity",
    "default_registry",
    "load_handlers",
    "run_handler",
    "step",
]
