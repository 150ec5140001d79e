"""Handlers for definitions/invoice-approval.yaml.

Amounts are integer cents. The auto-approval limit and who is asked are not here: the flow
compares the amount itself (`if: ctx.amount_cents < 100000`) and its human steps name the
people. Their answers land in the context: `lead` (the team lead's, or the department head's,
`{"approved": ..., "comment": ...}`), `finance` (the two answers of finance, each with who gave
it: `record_finance_answers`) and `cfo` (the CFO's office's, when finance was silent).
`invoice_approved` reads them.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity

Context = dict[str, Any]

FINANCE_APPROVAL_FROM_CENTS = 1_000_000  # 10,000.00 (the flow's needs_finance says so too)


def _amount_text(cents: int, currency: str) -> str:
    return f"{cents // 100:,}.{cents % 100:02d} {currency}"


@activity
def register_invoice(ctx: Context) -> Context:
    if ctx["amount_cents"] <= 0:
        raise NonRetryable("an invoice amount must be positive")
    amount = _amount_text(ctx["amount_cents"], ctx["currency"])
    return {**ctx, "status": "registered", "amount_text": amount}


@activity
def auto_approve(ctx: Context) -> Context:
    return {**ctx, "status": "approved", "approved_by": ["auto"]}


def _why_not(ctx: Context) -> str:
    """Why an invoice that went to people is not approved ('' when it is)."""
    lead = ctx.get("lead")
    if lead is None:
        return "nobody in the department answered in time"
    if not lead.get("approved"):
        return f"not approved by the department: {lead.get('comment', '')}"
    if ctx["amount_cents"] < FINANCE_APPROVAL_FROM_CENTS:
        return ""
    if "finance" in ctx:
        noes = [a for a in ctx["finance"] if not a.get("approved")]
        if noes:
            return f"not approved by finance ({noes[0]['by']}): {noes[0].get('comment', '')}"
        return ""
    if ctx.get("cfo") is None:
        return "finance did not answer in time"
    if not ctx["cfo"].get("approved"):
        return f"not approved by the CFO's office: {ctx['cfo'].get('comment', '')}"
    return ""


@activity
def record_finance_answers(received: Context) -> Context:
    """The finance task's answers (a task that needs two approvals hands the flow the list of
    them, each `{"by", "answer", "at_ms"}`), kept as `{"by", "approved", "comment"}`."""
    answers = [{"by": a["by"], **a["answer"]} for a in received["signal"]]
    return {**received["context"], "finance": answers}


@activity
def invoice_approved(ctx: Context) -> bool:
    if ctx["status"] == "approved":  # approved on the spot
        return True
    return _why_not(ctx) == ""


@activity
def schedule_payment(ctx: Context) -> Context:
    return {**ctx, "status": "approved", "payment": {"scheduled": True, "run": "next-payment-run"}}


@activity
def return_to_submitter(ctx: Context) -> Context:
    return {**ctx, "status": "rejected", "returned_to": ctx["submitted_by"], "why": _why_not(ctx)}


@activity
def archive_invoice(ctx: Context) -> Context:
    return {**ctx, "archived": f"archive/invoices/{ctx['invoice_id']}"}


# -- version 2 (definitions/v2/invoice-approval.yaml) ----------------------------------------


@activity
def notify_submitter(ctx: Context) -> Context:
    outcome = "paid" if ctx.get("payment") else "returned"
    return {**ctx, "notified": {"to": ctx["submitted_by"], "outcome": outcome}}
