"""The Python worker SDK: write handlers, run them against a Wiggle server.

```python
from wiggle.worker import activity, step, NonRetryable, Worker

@activity
def validate(ctx):
    return {**ctx, "valid": True}

Worker("localhost:7233", queues=["default"]).run()
```
"""

from __future__ import annotations

from wiggle.worker._activities import Activity, Registry, activity, default_registry
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
    "step",
]
