"""Handlers for definitions/nightly-batch.yaml and its child definitions/nightly-batch-item.yaml.

One module serves both flows, as one worker would in production. Balances are a fixed table;
interest is simple daily interest in integer cents, rounded down.
"""

from __future__ import annotations

from typing import Any

from wiggle import NonRetryable, activity

Context = dict[str, Any]

# account id -> (balance in cents, postings today)
LEDGER = {"ACC-1": (250_000, 3), "ACC-2": (1_000_000, 0), "ACC-3": (42_500, 1)}
DAILY_RATE_PER_MILLION = 110  # 0.011 % a day

# The bank's off-peak window opens at 01:00 UTC on the night after the run date.
WINDOW_OPENS = "T01:00:00Z"


@activity
def plan_batch(ctx: Context) -> Context:
    unknown = [a for a in ctx["accounts"] if a not in LEDGER]
    if unknown:
        raise NonRetryable(f"unknown accounts: {', '.join(unknown)}")
    return {**ctx, "window": {"opens_at": ctx["run_date"] + WINDOW_OPENS}}


@activity
def snapshot_ledger(ctx: Context) -> Context:
    return {**ctx, "snapshot": f"ledger@{ctx['run_date']}"}


@activity
def summarise_run(joined: Context) -> Context:
    """The for_each's combine: one child result per account, in account order. A child that was
    filtered (no activity) completed early, so its result carries no interest."""
    settled = [r for r in joined["results"] if "interest_cents" in r]
    skipped = [r["account"] for r in joined["results"] if "interest_cents" not in r]
    interest = sum(r["interest_cents"] for r in settled)
    return {**joined["context"], "settled": settled, "skipped": skipped, "interest_cents": interest}


@activity
def reconcile_totals(ctx: Context) -> Context:
    expected = sum(r["interest_cents"] for r in ctx["settled"])
    if expected != ctx["interest_cents"]:
        raise NonRetryable(f"totals disagree: {expected} != {ctx['interest_cents']}")
    return {**ctx, "reconciled": True}


@activity
def publish_report(ctx: Context) -> Context:
    return {**ctx, "report": f"reports/nightly/{ctx['run_date']}.csv"}


# -- the child flow: one account -------------------------------------------------------------


@activity
def load_account(account_id: str) -> Context:
    balance, postings = LEDGER[account_id]
    return {"account": account_id, "balance_cents": balance, "postings": postings}


@activity
def has_activity(ctx: Context) -> bool:
    return bool(ctx["postings"] > 0)


@activity
def compute_interest(ctx: Context) -> Context:
    return {**ctx, "interest_cents": ctx["balance_cents"] * DAILY_RATE_PER_MILLION // 1_000_000}


@activity
def post_entries(ctx: Context) -> Context:
    return {**ctx, "posted": True}


@activity
def send_statement(ctx: Context) -> Context:
    return {**ctx, "statement": f"statements/{ctx['account']}"}


# -- version 2 (definitions/v2/nightly-batch.yaml, nightly-batch-item.yaml) ------------------


@activity
def archive_report(ctx: Context) -> Context:
    return {**ctx, "archived": f"archive/{ctx['report']}"}


@activity
def archive_statement(ctx: Context) -> Context:
    return {**ctx, "statement_archived": f"archive/{ctx['statement']}"}
