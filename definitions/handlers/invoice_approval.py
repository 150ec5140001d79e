"""Handlers for definitions/invoice-approval.yaml.

Amounts are integer cents. The auto-approval limit is not here: the flow compares the amount
itself (`if: ctx.amount_cents < 100000`), so no handler runs for it. The approval chain grows
with the amount; each approver answers with an `approval_decision` signal
`{"approver": ..., "approve": true|false, "comment": ...}`.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity

Context = dict[str, Any]

HEAD_APPROVAL_FROM_CENTS = 1_000_000  # 10,000.00
CFO_APPROVAL_FROM_CENTS = 5_000_000  # 50,000.00


@activity
def register_invoice(ctx: Context) -> Context:
    if ctx["amount_cents"] <= 0:
        raise NonRetryable("an invoice amount must be positive")
    return {**ctx, "status": "registered", "decisions": []}


@activity
def auto_approve(ctx: Context) -> Context:
    return {**ctx, "status": "approved", "approved_by": ["auto"]}


@activity
def build_approval_chain(ctx: Context) -> Context:
    chain = [f"{ctx['department']}-lead"]
    if ctx["amount_cents"] >= HEAD_APPROVAL_FROM_CENTS:
        chain.append(f"{ctx['department']}-head")
    if ctx["amount_cents"] >= CFO_APPROVAL_FROM_CENTS:
        chain.append("cfo")
    return {**ctx, "status": "in_approval", "chain": chain, "position": 0}


@activity
def request_approval(ctx: Context) -> Context:
    return {**ctx, "pending_approver": ctx["chain"][ctx["position"]]}


@activity
def record_decision(received: Context) -> Context:
    ctx, signal = received["context"], received["signal"]
    approver = ctx["pending_approver"]
    if signal.get("approver") not in (None, approver):
        # A decision from someone who was not asked must not move the chain along.
        raise NonRetryable(f"decision from {signal.get('approver')!r}, but {approver!r} was asked")
    approve = bool(signal.get("approve"))
    decision = {"approver": approver, "approve": approve, "comment": signal.get("comment", "")}
    out = {**ctx, "decisions": [*ctx["decisions"], decision]}
    if approve:
        out["position"] = ctx["position"] + 1
    else:
        out["status"] = "rejected"
    return out


@activity
def delegate_to_deputy(ctx: Context) -> Context:
    approver = ctx["pending_approver"]
    chain = list(ctx["chain"])
    chain[ctx["position"]] = f"{approver}-deputy"
    timed_out = {"approver": approver, "approve": None, "comment": "no answer in time"}
    return {**ctx, "chain": chain, "decisions": [*ctx["decisions"], timed_out]}


@activity
def awaiting_more_approvals(ctx: Context) -> bool:
    return ctx["status"] != "rejected" and ctx["position"] < len(ctx["chain"])


@activity
def invoice_approved(ctx: Context) -> bool:
    if ctx["status"] == "approved":
        return True
    return ctx["status"] == "in_approval" and ctx["position"] >= len(ctx["chain"])


@activity
def schedule_payment(ctx: Context) -> Context:
    return {**ctx, "status": "approved", "payment": {"scheduled": True, "run": "next-payment-run"}}


@activity
def return_to_submitter(ctx: Context) -> Context:
    return {**ctx, "returned_to": ctx["submitted_by"]}


@activity
def archive_invoice(ctx: Context) -> Context:
    return {**ctx, "archived": f"archive/invoices/{ctx['invoice_id']}"}


# -- version 2 (definitions/v2/invoice-approval.yaml) ----------------------------------------


@activity
def notify_submitter(ctx: Context) -> Context:
    outcome = "paid" if ctx.get("payment") else "returned"
    return {**ctx, "notified": {"to": ctx["submitted_by"], "outcome": outcome}}
