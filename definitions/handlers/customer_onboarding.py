"""Handlers for definitions/customer-onboarding.yaml.

The KYC provider and the compliance desk answer through signals, so these handlers only record
what was asked and what came back; `record_kyc` and `record_compliance_decision` receive
`{"context": ..., "signal": ...}` as every `apply` activity does.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity

Context = dict[str, Any]

# Countries this example's regulator lets the business serve.
SUPPORTED_COUNTRIES = {"GB", "IE", "FR", "DE", "NL", "ES", "IT"}


@activity
def create_account(ctx: Context) -> Context:
    if ctx["country"] not in SUPPORTED_COUNTRIES:
        raise NonRetryable(f"cannot open accounts in {ctx['country']}")
    return {**ctx, "account": {"id": f"acct-{ctx['customer_id']}", "status": "locked"}}


@activity
def request_kyc(ctx: Context) -> Context:
    return {**ctx, "kyc": {"status": "requested", "documents": len(ctx["documents"])}}


@activity
def record_kyc(received: Context) -> Context:
    ctx, signal = received["context"], received["signal"]
    status = signal.get("status")
    if status not in ("approved", "rejected"):
        raise NonRetryable(f"KYC provider sent an unknown status {status!r}")
    kyc = {**ctx["kyc"], "status": status, "reference": signal.get("reference")}
    return {**ctx, "kyc": kyc}


@activity
def open_compliance_ticket(ctx: Context) -> Context:
    ticket = f"COMP-{ctx['customer_id']}"
    return {**ctx, "kyc": {**ctx["kyc"], "status": "escalated", "ticket": ticket}}


@activity
def record_compliance_decision(received: Context) -> Context:
    ctx, signal = received["context"], received["signal"]
    status = "approved" if signal.get("approve") else "rejected"
    kyc = {**ctx["kyc"], "status": status, "decided_by": signal.get("officer")}
    return {**ctx, "kyc": kyc}


@activity
def expire_application(ctx: Context) -> Context:
    return {**ctx, "kyc": {**ctx["kyc"], "status": "expired"}}


@activity
def kyc_approved(ctx: Context) -> bool:
    return bool(ctx["kyc"]["status"] == "approved")


@activity
def activate_account(ctx: Context) -> Context:
    return {**ctx, "account": {**ctx["account"], "status": "active"}}


@activity
def send_welcome_email(ctx: Context) -> Context:
    return {**ctx, "emailed": {"to": ctx["email"], "template": "welcome"}}


@activity
def close_account(ctx: Context) -> Context:
    return {**ctx, "account": {**ctx["account"], "status": "closed"}}


@activity
def send_refusal_email(ctx: Context) -> Context:
    reason = "expired" if ctx["kyc"]["status"] == "expired" else "not_verified"
    return {**ctx, "emailed": {"to": ctx["email"], "template": f"refusal_{reason}"}}


# -- version 2 (definitions/v2/customer-onboarding.yaml) -------------------------------------

# Countries whose residents need a manual sanctions review, as far as this example knows.
SANCTIONS_REVIEW = {"KP", "IR"}


@activity
def screen_sanctions(ctx: Context) -> Context:
    """Screen the applicant against sanctions lists once KYC has answered."""
    hit = ctx["country"] in SANCTIONS_REVIEW
    screening = {"status": "review" if hit else "clear", "lists": ["UN", "EU", "OFAC"]}
    kyc = ctx["kyc"] if not hit else {**ctx["kyc"], "status": "rejected"}
    return {**ctx, "sanctions": screening, "kyc": kyc}
