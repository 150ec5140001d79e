"""The Tasks pages over a fake backend (no server): the inbox's order and its overdue mark, what
a task's page offers whom, and escaping."""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any

from starlette.testclient import TestClient

from wiggle.client import HumanTask, Instance, InstanceStatus
from wiggle.console import ConsoleSettings, create_app
from wiggle.console._identity import Identity
from wiggle.console._tasks import may_act
from wiggle.errors import PermissionDenied

NOW = int(time.time() * 1000)
HOUR = 3_600_000
HOSTILE = "<script>window.__xss = 1</script>"

BASE = HumanTask(
    task_id="t-later", instance_id="i-1", node_id="approve", flow="invoices", version="sha256:1",
    title="Approve it", instructions=f"Look at it {HOSTILE}",
    form={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    assignee=None, candidate_people=[], candidate_groups=["leads"], excluded=[], approvals=1,
    created_at_ms=NOW - HOUR, due_at_ms=NOW + 5 * HOUR, deadline_at_ms=None, state="OPEN",
    claimed_by=None, completed_by=None, completed_at_ms=None, answer=None, approved=[],
)  # fmt: skip
OVERDUE = replace(BASE, task_id="t-overdue", title=f"Overdue {HOSTILE}", due_at_ms=NOW - HOUR)
UNDATED = replace(BASE, task_id="t-undated", title="No due time", due_at_ms=None)


class FakeBackend:
    def __init__(self) -> None:
        self.tasks = {t.task_id: t for t in (UNDATED, BASE, OVERDUE)}
        self.asked: list[tuple[str, bool]] = []

    def list_tasks(self, who: Identity, *, admin: bool = False, **_: Any) -> list[HumanTask]:
        self.asked.append((who.person, admin))
        return list(self.tasks.values())

    def get_task(self, who: Identity, task_id: str) -> HumanTask:
        if task_id not in self.tasks:
            raise PermissionDenied(f"{who.person!r} may not see human task {task_id!r}")
        return self.tasks[task_id]

    def describe(self, instance_id: str) -> Instance:
        return Instance(instance_id, "invoices", "sha256:1", InstanceStatus.RUNNING,
                        {"note": HOSTILE}, "", "SERVER", "", 1, 2)  # fmt: skip


def _console(person: str | None = None) -> tuple[TestClient, FakeBackend]:
    backend = FakeBackend()
    app = create_app(backend, ConsoleSettings(person=person))  # type: ignore[arg-type]
    return TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False), backend


def test_the_inbox_is_soonest_due_first_and_marks_what_is_overdue():
    console, backend = _console("olga")
    page = console.get("/tasks").text
    assert re.findall(r'<tr data-task="([^"]+)"', page) == ["t-overdue", "t-later", "t-undated"]
    assert re.findall(r'data-task="([^"]+)"[^>]*data-overdue="1"', page) == ["t-overdue"]
    assert "badge task-overdue" in page
    assert HOSTILE not in page and "Overdue &lt;script&gt;" in page
    assert backend.asked == [("olga", True)]  # a console without a login lists as an admin


def test_a_task_page_escapes_what_it_shows_and_offers_the_form():
    console, _ = _console()
    page = console.get("/tasks/t-later").text
    assert HOSTILE not in page and "Look at it &lt;script&gt;" in page
    assert 'id="answer-form"' in page and 'id="claim-form"' in page
    assert 'id="reassign-form"' in page  # the console itself is an admin
    refused = console.get("/tasks/t-nope")
    assert refused.status_code == 403 and "may not see human task" in refused.text


def test_who_may_answer_a_task():
    ana = Identity("ana", ("leads",), frozenset({"person"}))
    ben = Identity("ben", ("finance",), frozenset({"person"}))
    boss = Identity("boss", (), frozenset({"admin"}))
    assert may_act(BASE, ana) == (True, "")
    assert may_act(BASE, ben) == (False, "It is not for you.")
    assert may_act(BASE, boss) == (True, "")
    excluded = replace(BASE, excluded=["ana", "boss"])
    assert "excluded" in may_act(excluded, ana)[1]
    allowed, note = may_act(excluded, boss)  # an admin may, and is told why only as an admin
    assert allowed and note.startswith("As a person you could not: You may not answer it")
    assert note.endswith("As an admin you may.")
    claimed = replace(BASE, state="CLAIMED", claimed_by="carla")
    assert may_act(claimed, ana) == (False, "carla has claimed it: only they can answer it now.")
    twice = replace(BASE, approvals=2, approved=[{"by": "ana", "answer": {}, "at_ms": NOW}])
    assert may_act(twice, ana) == (False, "You have answered it already; it waits for 1 more.")
    assert may_act(replace(BASE, state="COMPLETED"), boss) == (False, "")
