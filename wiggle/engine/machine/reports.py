"""What a worker reports: complete, fail and advance_run, as one batch transition.

A SERVER-mode CompleteTask is an AdvanceRun of one step with `final`; both go through
`apply_steps`. The batch is validated against the graph before anything is written (a wrong path
changes nothing), then applied in order: the successful prefix, then either the failed step's
retry policy, or the token kept leased at the next worker node (`final` false), or the token
released and driven to its next park.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, bindparam, select

from wiggle.errors import ReportOutOfOrder, StaleLease, WrongPath
from wiggle.graph import Predicate, Task
from wiggle.traversal import Handback, Move, classify, successor

from ..model.data import type_name
from ..model.types import (
    AdvanceResult,
    InstanceStatus,
    Json,
    Report,
    ReportKind,
    StepFailure,
    StepOutcome,
    TokenState,
)
from ..store import schema as s
from .drive import branch_filtered, fail_token_instance, place
from .failures import apply_failure
from .park import inst_from_row, ready_again
from .search import note_context_change
from .tx import TOKEN_COLUMNS, Inst, Tok, Tx

__all__ = [
    "apply_plan",
    "apply_steps",
    "lock_token",
    "plan_steps",
    "record_seq",
    "refuse_unless_current",
    "refuse_unless_granted",
    "resent",
]

_i = s.instances
ROOT = s.instances.alias("root")
_r = ROOT
# The instance's columns are read from the *locked* alias: on PostgreSQL, a statement that had
# to wait for the lock re-reads only the locked row (EvalPlanQual); the other joined rows keep
# the values of its snapshot, which may predate the transaction that held the lock.
# Only what a transition needs: the instance's context (its input) can be large.
INSTANCE_FIELDS = (
    "id",
    "root_id",
    "flow",
    "version",
    "status",
    "mode",
    "parent_instance_id",
    "parent_token_id",
)
INSTANCE_LABELLED = [_r.c[name].label(f"i_{name}") for name in INSTANCE_FIELDS]


def lock_token(tx: Tx) -> Any:
    """SELECT the token and its instance, locking the root instance's row (PostgreSQL)."""
    t = s.tokens
    return tx.db.cached(
        "lock_token",
        lambda: (
            select(*TOKEN_COLUMNS, *INSTANCE_LABELLED, _i.c.id.label("own_id"), tx.db.now)
            .select_from(t.join(_i, _i.c.id == t.c.instance_id).join(_r, _r.c.id == _i.c.root_id))
            .where(t.c.id == bindparam("tid"))
            .with_for_update(of=_r)
        ),
    )


def read_locked(tx: Tx, conn: Connection, task_id: str) -> tuple[Tok, Inst] | None:
    """Lock by token id; sets `tx.now` from the database clock read in the same statement."""
    row = conn.execute(lock_token(tx), {"tid": task_id}).first()
    if row is None:
        return None
    m = row._mapping
    tx.now = int(m["now_ms"])
    inst_map = {k[2:]: v for k, v in m.items() if k.startswith("i_")}
    if m["own_id"] != inst_map["id"]:
        # The instance row was read before the root's lock was granted; read it again now.
        fresh = conn.execute(select(*_i.c).where(_i.c.id == m["own_id"])).first()
        assert fresh is not None
        inst_map = dict(fresh._mapping)
    inst = inst_from_row(tx, inst_map)
    return tx.adopt(row), inst


def fence_lease(tok: Tok, lease: str) -> None:
    """The lease (and the node it was issued at) must still hold in the token's UPDATE."""
    tok.fence = {"lease": lease, "state": TokenState.LEASED.value, "node_id": tok.node_id}


@dataclass
class Plan:
    completed: list[tuple[str, int, bool | None]]  # (node, attempt, predicate value)
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
        if isinstance(node, Predicate):
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
            plan.completed.append((cur, attempt, None))
        counts = dict(move.loop_counts)
        plan.end = move
        if move.next_node is None:
            cur, stopped = None, f"{st.node_id!r} ended the token ({move.handback})"
            continue
        nxt = graph.nodes[move.next_node]
        if isinstance(nxt, Task | Predicate):
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
        assert isinstance(pred, Predicate)
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


def _move_to(tok: Tok, node: Any) -> None:
    """The leased token moves on to the next worker step of the same run."""
    tok.node_id = node.id
    tok.attempt = 1
    tok.queue = node.queue
    tok.activity = node.activity
    tok.timeout_ms = node.timeout_ms
    tok.has_input = False
    tok.input = None


def server_outcome(tok: Tok, inst: Inst, result: Json) -> StepOutcome:
    """CompleteTask's single result as a step (a predicate's result is its boolean)."""
    node = inst.graph.nodes[tok.node_id]
    if isinstance(node, Predicate):
        if isinstance(result, bool):
            return StepOutcome(tok.node_id, predicate=result)
        return StepOutcome(tok.node_id, context=result)  # plan_steps turns it into a failure
    return StepOutcome(tok.node_id, context=result)


def refuse_unless_granted(r: Report, tok: Tok | None, inst: Inst | None) -> None:
    """PermissionDenied unless the sender's grant covers the task's queue and, for a run of
    locally run steps, the queue of every step in it. Read under the task's lock, before the
    report changes anything; an unknown task is left to `refuse_unless_current` (answered alike
    whoever asks)."""
    if r.grant is None or tok is None or inst is None:
        return
    r.grant.check(tok.queue or "", "report on a task of")
    if r.kind is ReportKind.ADVANCE:
        for step in r.steps:
            node = inst.graph.nodes.get(step.node_id)
            if isinstance(node, Task | Predicate):
                r.grant.check(node.queue, "report a step of")


def refuse_unless_current(tok: Tok | None, inst: Inst | None, task_id: str, lease: str) -> bool:
    """Raise StaleLease unless `lease` is the token's; False when the instance has finished."""
    if tok is None or inst is None:
        raise StaleLease(task_id, "no such task")
    if tok.lease != lease:
        raise StaleLease(task_id)
    if inst.status is not InstanceStatus.RUNNING:
        return False
    if tok.state is not TokenState.LEASED:
        raise StaleLease(task_id, f"the task is {tok.state.value}, not leased")
    return True


def resent(tok: Tok | None, inst: Inst | None, task_id: str, lease: str, seq: int) -> bool:
    """Whether report `seq` under `lease` was applied already (docs/worker-protocol.md,
    "Report identity"): then it must be answered again, never applied a second time.

    The token remembers the last seq applied under its current lease (`report_seq`) and the
    lease its last final report ended (`released_lease`). A seq that skips one the server has
    not applied is refused: the worker lost track of what it sent.
    """
    if seq <= 0 or tok is None or inst is None:
        return False  # no identity: a legacy report, checked as before
    if tok.lease == lease and tok.state is TokenState.LEASED:
        if seq <= tok.report_seq:
            return True
        if seq > tok.report_seq + 1 and inst.status is InstanceStatus.RUNNING:
            raise ReportOutOfOrder(task_id, seq, tok.report_seq)
        return False
    return tok.released_lease == lease


def record_seq(tok: Tok, lease: str, seq: int) -> None:
    """After applying report `seq`: remember it under the lease, or as the released lease."""
    if seq <= 0:
        return
    tok.report_seq = seq if tok.state is TokenState.LEASED and tok.lease == lease else 0
    if tok.report_seq == 0:
        tok.released_lease = lease
