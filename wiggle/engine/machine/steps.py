"""Applying a run of step outcomes to a leased token: one transition.

A SERVER-mode CompleteTask is an AdvanceRun of one step with `final`; both go through
`apply_steps`. The run is checked against the graph before anything is written (a wrong path
changes nothing), then applied in order: the successful prefix, then either the failed step's
retry policy, or the token kept leased at the next worker node (`final` false), or the token
released and driven to its next park.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wiggle.errors import WrongPath
from wiggle.graph import Condition, Predicate, SetValues, Task
from wiggle.traversal import Handback, Move, classify, successor

from ..model.data import type_name
from ..model.types import (
    AdvanceResult,
    Json,
    StepFailure,
    StepOutcome,
)
from .drive import branch_filtered, fail_token_instance, place
from .failures import apply_failure
from .park import ready_again
from .search import note_context_change
from .tx import Inst, Tok, Tx

__all__ = ["Plan", "apply_plan", "apply_steps", "plan_steps"]


@dataclass
class Plan:
    # (node, attempt, value): a predicate's or condition's boolean, a set's computed values
    completed: list[tuple[str, int, bool | dict[str, Json] | None]]
    context: Json
    loop_counts: dict[str, int]
    failure: tuple[str, StepFailure] | None
    end: Move | None  # where the last successful step leads
    # The worker steps the run went on to after the first, each with the context and loop
    # counts it was entered with (kept as step inputs, for reset).
    entered: list[tuple[str, Json, dict[str, int]]] = field(default_factory=list)


def plan_steps(inst: Inst, tok: Tok, steps: Sequence[StepOutcome]) -> Plan:
    """Check the batch against the graph, without writing anything (WrongPath if it strays)."""
    graph = inst.graph
    cur: str | None = tok.node_id
    stopped = ""
    ctx = tok.context
    counts = dict(tok.loop_counts)
    plan = Plan([], ctx, counts, None, None)
    for i, st in enumerate(steps, start=1):
        if cur is None:
            raise WrongPath(f"step {i} ({st.node_id!r}) comes after the run ended ({stopped})")
        if st.node_id != cur:
            raise WrongPath(
                f"step {i} reports node {st.node_id!r}, but the graph path from the leased task "
                f"is at {cur!r}"
            )
        node = graph.nodes[cur]
        attempt = tok.attempt if i == 1 else 1
        if st.failure is not None:
            plan.failure = (cur, st.failure)
            cur, stopped = None, f"{st.node_id!r} failed"
            continue
        if isinstance(node, Predicate | Condition):
            value = st.predicate
            if value is None and st.has_context and isinstance(st.context, bool):
                value = st.context
            if value is None:
                got = type_name(st.context) if st.has_context else "nothing"
                plan.failure = (
                    cur,
                    StepFailure(
                        f"predicate {cur!r} returned {got}, not a JSON boolean",
                        non_retryable=True,
                        error_type="TypeError",
                    ),
                )
                cur, stopped = None, f"{st.node_id!r} failed"
                continue
            move = successor(graph, cur, predicate_value=value, loop_counts=counts)
            plan.completed.append((cur, attempt, value))
        else:
            if not st.has_context:
                raise WrongPath(f"step {i} at {cur!r} must carry the step's result context")
            ctx = st.context
            move = successor(graph, cur, loop_counts=counts)
            if isinstance(node, SetValues):
                # The event keeps what the worker computed, as the server's own evaluation does.
                computed = {k: ctx[k] for k in node.values if isinstance(ctx, dict) and k in ctx}
                plan.completed.append((cur, attempt, computed))
            else:
                plan.completed.append((cur, attempt, None))
        counts = dict(move.loop_counts)
        plan.end = move
        if move.next_node is None:
            cur, stopped = None, f"{st.node_id!r} ended the token ({move.handback})"
            continue
        nxt = graph.nodes[move.next_node]
        if isinstance(nxt, Task | Predicate | Condition | SetValues):
            cur = nxt.id
            plan.entered.append((cur, ctx, counts))
        else:
            cur, stopped = None, f"{nxt.id!r} is a {nxt.kind} the server drives"
    plan.context = ctx
    plan.loop_counts = counts
    return plan


def apply_steps(
    tx: Tx,
    inst: Inst,
    tok: Tok,
    steps: Sequence[StepOutcome],
    *,
    final: bool,
    reason: str | None,
) -> AdvanceResult:
    """Apply a validated batch (see the module docstring). `reason` None: a SERVER report."""
    plan = plan_steps(inst, tok, steps)
    return apply_plan(tx, inst, tok, plan, steps, final=final, reason=reason)


def apply_plan(
    tx: Tx,
    inst: Inst,
    tok: Tok,
    plan: Plan,
    steps: Sequence[StepOutcome],
    *,
    final: bool,
    reason: str | None,
) -> AdvanceResult:
    """Apply a batch `plan_steps` accepted. Raises nothing a caller should answer with: a
    report is either refused before this runs, or applied whole."""
    graph = inst.graph
    # A branch's steps name their branch (a fork's name, a for_each item's index or key), so
    # progress lines can say which item a step ran for.
    where = tok.where
    for node_id, attempt, value in plan.completed:
        if value is None:
            tx.event(inst.id, "step_completed", node_id, attempt, **where)
        elif isinstance(value, dict):
            tx.event(inst.id, "step_completed", node_id, attempt, values=value, **where)
        else:
            tx.event(inst.id, "step_completed", node_id, attempt, predicate=value, **where)
    if tok.parent_token_id is None:
        for node_id, context, counts in plan.entered:
            tx.entered_at(inst.id, node_id, context, counts)
    note_context_change(tx, inst, tok.context, plan.context)
    tok.context = plan.context
    tok.loop_counts = plan.loop_counts
    if plan.failure is not None:
        node_id, failure = plan.failure
        if isinstance(graph.nodes[node_id], Condition | SetValues):
            _expression_failed(tx, inst, tok, node_id, failure)
            return AdvanceResult(inst.status, 0, False)
        if node_id != tok.node_id:
            _move_to(tok, graph.nodes[node_id])
        apply_failure(tx, inst, tok, failure)
        return AdvanceResult(inst.status, 0, False)
    if not steps:
        if not final:
            tok.lease_expires_at_ms = tx.now + tok.timeout_ms
            tx.save(tok)
            return AdvanceResult(inst.status, tok.lease_expires_at_ms, True)
        tx.event(inst.id, "handed_back", tok.node_id, tok.attempt, reason=reason or "")
        ready_again(tx, tok)
        return AdvanceResult(inst.status, 0, False)
    end = plan.end
    assert end is not None
    if end.handback is Handback.FILTERED:
        branch_filtered(tx, inst, tok)
        return AdvanceResult(inst.status, 0, False)
    if end.handback is Handback.LOOP_LIMIT:
        pred = graph.nodes[plan.completed[-1][0]]
        assert isinstance(pred, Predicate | Condition)
        fail_token_instance(
            tx,
            inst,
            tok,
            f"loop {pred.id!r} exceeded max_iterations {pred.max_iterations}",
            retryable=False,
        )
        return AdvanceResult(inst.status, 0, False)
    assert end.next_node is not None
    nxt = graph.nodes[end.next_node]
    if not final and isinstance(nxt, Task | Predicate):
        _move_to(tok, nxt)
        tok.lease_expires_at_ms = tx.now + nxt.timeout_ms
        tx.save(tok)
        return AdvanceResult(inst.status, tok.lease_expires_at_ms, True)
    if reason is not None:
        why = reason or str(classify(graph, nxt.id, [tok.queue or ""]) or "")
        tx.event(inst.id, "handed_back", nxt.id, 0, reason=why)
    tok.node_id = nxt.id
    tok.has_input = False
    tok.input = None
    tok.lease = None
    tok.lease_owner = None
    tok.lease_expires_at_ms = None
    place(tx, inst, tok)
    return AdvanceResult(inst.status, 0, False)


def _expression_failed(tx: Tx, inst: Inst, tok: Tok, node_id: str, failure: StepFailure) -> None:
    """A worker's evaluation of an expression node failed: for good, as the server's would."""
    tok.node_id = node_id
    tx.event(
        inst.id,
        "step_failed",
        node_id,
        1,
        message=failure.message,
        error_type=failure.error_type,
        non_retryable=True,
        **tok.where,
    )
    fail_token_instance(
        tx, inst, tok, f"step {node_id!r} failed: {failure.message}", retryable=False
    )


def _move_to(tok: Tok, node: Any) -> None:
    """The leased token moves on to the next worker step of the same run."""
    tok.node_id = node.id
    tok.attempt = 1
    tok.queue = node.queue
    tok.activity = node.activity
    tok.timeout_ms = node.timeout_ms
    tok.has_input = False
    tok.input = None
