"""The attributes of a step attempt's span (pure: the same names in every SDK)."""

from __future__ import annotations

from typing import Any

__all__ = ["outcome_attributes", "step_attributes"]


def step_attributes(
    *,
    instance_id: str,
    flow: str,
    version: str,
    node_id: str,
    activity: str,
    attempt: int,
    mode: str,
    queue: str,
    task_id: str,
    position: int,
) -> dict[str, Any]:
    """`position`: the step's place in its local run (0 for the task's own step)."""
    return {
        "wiggle.instance.id": instance_id,
        "wiggle.flow.name": flow,
        "wiggle.flow.version": version,
        "wiggle.node.id": node_id,
        "wiggle.activity": activity,
        "wiggle.step.attempt": attempt,
        "wiggle.execution.mode": mode,
        "wiggle.queue": queue,
        "wiggle.task.id": task_id,
        "wiggle.run.position": position,
    }


def outcome_attributes(
    *, failed: bool, predicate: bool | None, error_type: str = "", non_retryable: bool = False
) -> dict[str, Any]:
    """`wiggle.step.outcome`: completed, failed, true or false (a predicate); on a failure the
    semantic conventions' `error.type` and `wiggle.step.non_retryable`."""
    if failed:
        return {
            "wiggle.step.outcome": "failed",
            "error.type": error_type or "Error",
            "wiggle.step.non_retryable": non_retryable,
        }
    if predicate is not None:
        return {"wiggle.step.outcome": "true" if predicate else "false"}
    return {"wiggle.step.outcome": "completed"}
