"""A failed attempt of a step: retried after its backoff, or the end of its instance."""

from __future__ import annotations

from typing import Any

from wiggle.graph import Await, Join, Node, Predicate, Task

from ..model.types import StepFailure, TokenState
from .drive import fail_token_instance
from .park import ready_again
from .tx import Inst, Tok, Tx

__all__ = ["apply_failure", "retry_of"]


def retry_of(node: Node) -> Any:
    if isinstance(node, Await):
        assert node.apply is not None
        return node.apply.retry
    assert isinstance(node, Task | Predicate | Join)
    return node.retry


def apply_failure(tx: Tx, inst: Inst, tok: Tok, failure: StepFailure) -> None:
    """A failed attempt of the step at `tok.node_id`: retry after the backoff, or fail."""
    node = inst.graph.nodes[tok.node_id]
    retry = retry_of(node)
    tx.event(
        inst.id,
        "step_failed",
        tok.node_id,
        tok.attempt,
        message=failure.message,
        error_type=failure.error_type,
        non_retryable=failure.non_retryable,
        **tok.where,
    )
    tok.lease_owner = None
    if failure.non_retryable or tok.attempt >= retry.max_attempts:
        tries = "" if failure.non_retryable else f" after {tok.attempt} attempt(s)"
        fail_token_instance(tx, inst, tok, f"step {tok.node_id!r} failed{tries}: {failure.message}")
        return
    delay = retry.delay_ms(tok.attempt)
    tok.attempt += 1
    tx.event(inst.id, "step_retried", tok.node_id, tok.attempt, delay_ms=delay)
    if delay <= 0:
        ready_again(tx, tok)
        return
    tok.state = TokenState.WAITING
    tok.wait_kind = "retry"
    tok.wake_at_ms = tx.now + delay
    tx.wakeups.timer_armed = True
    tok.lease = None
    tok.lease_expires_at_ms = None
    tx.save(tok)
