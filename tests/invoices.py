"""The shipped invoice-approval flow and its people (definitions/people/), as the console's
task tests use them: invoices started as the admin, and a step's task found once it is there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.waiting import wait_until
from wiggle.client import Client, HumanTask

__all__ = ["CREDENTIALS", "DEFINITIONS", "PEOPLE", "SAMPLE", "start_invoice", "task_of", "token"]

DEFINITIONS = Path(__file__).resolve().parents[1] / "definitions"
PEOPLE = DEFINITIONS / "people"
CREDENTIALS = PEOPLE / "credentials.toml"
SAMPLE = json.loads((DEFINITIONS / "samples" / "invoice-approval.json").read_text())
#: Seconds: a generous bound for a loaded two-core machine, not an expected time.
WAIT_S = 20


def token(person: str) -> str:
    """The token of one of definitions/people/ (public: the walkthrough's, nobody's secret)."""
    return (PEOPLE / f"{person}.token").read_text().strip()


def task_of(admin: Client, instance_id: str, step: str, state: str = "OPEN") -> HumanTask:
    """The task of `step` in `instance_id` once it is in `state`, with its audit trail."""

    def found() -> HumanTask | None:
        for t in admin.list_tasks(
            instance_id=instance_id, all_states=True, admin=True, person="admin"
        ):
            if t.node_id == step and t.state == state:
                return admin.get_task(t.task_id, admin=True, person="admin")
        return None

    return wait_until(found, WAIT_S, f"the {step} task of {instance_id} {state}")


def start_invoice(admin: Client, invoice_id: str, **changes: Any) -> str:
    """Start an invoice (the sample's, changed) and wait until its lead's task is open."""
    value = {**SAMPLE, "invoice_id": invoice_id, **changes}
    iid = admin.start("invoice-approval", value).instance_id
    task_of(admin, iid, "lead_approval")
    return iid
