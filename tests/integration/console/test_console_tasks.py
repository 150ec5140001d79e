"""The console's Tasks pages over a real server (SQLite and PostgreSQL) with the people of
definitions/people/ and the shipped invoice-approval flow, through Starlette's test client: who
a login is and what it may open, the inbox and its filters, the answer built from the form's
fields and the engine's refusals shown beside it, a form sent twice, claim / release /
reassign, the context beside a task, and a console without a login."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from tests.invoices import CREDENTIALS, start_invoice, task_of, token
from tests.waiting import wait_until
from wiggle.client import Client, HumanTask
from wiggle.console import Backend, ConsoleSettings, create_app
from wiggle.console._taskform import REQUIRED
from wiggle.server import embedded_stack
from wiggle.worker import Worker, load_handlers

ROOT = Path(__file__).resolve().parents[3]
DEFINITIONS = ROOT / "definitions"
BASE = "http://127.0.0.1:8080"


@dataclass
class Stack:
    address: str
    admin: Client

    def invoice(self, invoice_id: str, **changes: Any) -> str:
        return start_invoice(self.admin, invoice_id, **changes)

    def task(self, instance_id: str, step: str, state: str = "OPEN") -> HumanTask:
        return task_of(self.admin, instance_id, step, state)

    def console(self, *, own_token: str | None = "console") -> Console:
        backend = Backend(self.address, token=token(own_token) if own_token else None)
        settings = ConsoleSettings(require_login=True, credentials=str(CREDENTIALS))
        app = create_app(backend, settings)
        return Console(TestClient(app, base_url=BASE, follow_redirects=False), backend)


@dataclass
class Console:
    http: TestClient
    backend: Backend

    @property
    def csrf(self) -> str:
        if not self.http.cookies.get("wiggle_csrf"):
            self.http.get("/login")
        return str(self.http.cookies.get("wiggle_csrf"))

    def log_in(self, person: str) -> Any:
        self.http.cookies.clear()
        return self.http.post("/login?next=/", data={"csrf": self.csrf, "token": token(person)})

    def post(self, path: str, **fields: str) -> Any:
        return self.http.post(path, data={"csrf": self.csrf, **fields})

    def request_id(self, task_id: str, form: str = "complete") -> str:
        page = self.http.get(f"/tasks/{task_id}").text
        found = re.search(rf'name="request_id" value="([^"]+-{form})"', page)
        assert found, f"no {form} form on the page"
        return found.group(1)


@pytest.fixture
def stack(database_url: str) -> Iterator[Stack]:
    with embedded_stack(database_url, credentials=CREDENTIALS) as st:
        admin = Client(st.address, token=token("admin"))
        admin.deploy((DEFINITIONS / "invoice-approval.yaml").read_bytes())
        registry = load_handlers(DEFINITIONS / "handlers" / "invoice_approval.py")
        worker = Worker(
            st.address, registry=registry, queues=("finance",), token=token("worker"),
            poll_wait_ms=500,
        )  # fmt: skip
        worker.start()
        try:
            yield Stack(st.address, admin)
        finally:
            worker.stop()
            admin.close()


def _tasks(page: str) -> list[str]:
    return re.findall(r'<tr data-task="([^"]+)"', page)


def _refusal(page: str) -> str:
    found = re.search(r'id="refusal"[^>]*>(.*?)</p>', page, re.S)
    assert found, "no refusal on the page"
    return unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def _error(page: str) -> str:
    found = re.search(r'id="error">(.*?)</p>', page, re.S)
    assert found, "no error on the page"
    return unescape(found.group(1))


def test_a_login_is_its_credential_and_a_person_sees_only_the_tasks_pages(stack):
    iid = stack.invoice("INV-I-1")
    console = stack.console()
    try:
        assert console.http.get("/tasks").headers["location"] == "/login?next=%2Ftasks"
        wrong = console.post("/login?next=/", token="nope")
        assert wrong.status_code == 401 and "wrong token" in wrong.text

        ana = console.log_in("ana")
        assert ana.status_code == 303 and ana.headers["location"] == "/tasks"
        inbox = console.http.get("/tasks").text
        assert 'id="whoami">ana (engineering-leads)<' in inbox
        assert re.findall(r"<nav>(.*?)</nav>", inbox, re.S)[0].count("<a ") == 1
        for path in ("/instances", f"/instances/{iid}", "/flows", "/batches", "/schedules"):
            page = console.http.get(path)
            assert page.status_code == 403, path
            assert "ana may see only their human tasks" in _error(page.text)
        assert console.http.get("/").headers["location"] == "/tasks"
        cancel = console.post(f"/instances/{iid}/cancel", reason="not mine", confirmed="1")
        assert cancel.status_code == 403
        assert stack.admin.describe(iid).status == "RUNNING"

        assert console.log_in("admin").headers["location"] == "/"
        assert console.http.get("/instances").status_code == 200
        assert 'href="/tasks"' in console.http.get("/instances").text
    finally:
        console.backend.close()


def test_the_inbox_shows_each_person_their_tasks_and_filters_them(stack):
    ours = stack.invoice("INV-I-2")
    theirs = stack.invoice("INV-I-3", department="marketing")
    lead = stack.task(ours, "lead_approval")
    other = stack.task(theirs, "lead_approval")
    console = stack.console()
    try:
        console.log_in("ana")
        assert _tasks(console.http.get("/tasks").text) == [lead.task_id]
        assert _tasks(console.http.get("/tasks?show=groups").text) == [lead.task_id]
        assert _tasks(console.http.get("/tasks?show=mine").text) == []  # for her group only
        refused = console.http.get("/tasks?show=all")
        assert refused.status_code == 400 and "show &#39;all&#39; is not one of" in refused.text
        assert console.http.get("/tasks?state=later").status_code == 400

        console.log_in("admin")
        everything = console.http.get("/tasks").text  # an admin sees every task by default
        assert set(_tasks(everything)) == {lead.task_id, other.task_id}
        assert _tasks(console.http.get(f"/tasks?instance={theirs}").text) == [other.task_id]
        assert _tasks(console.http.get("/tasks?flow=another-flow").text) == []
        assert _tasks(console.http.get("/tasks?show=").text) == []  # nothing is for "admin"
        # Soonest due first: both are due a day after they were created, ours first.
        assert _tasks(everything) == [lead.task_id, other.task_id]

        console.log_in("ana")
        rid = console.request_id(lead.task_id)
        done = console.post(f"/tasks/{lead.task_id}/complete", request_id=rid,
                            **{"answer/approved": "true"})  # fmt: skip
        assert done.status_code == 303
        assert _tasks(console.http.get("/tasks").text) == []
        assert _tasks(console.http.get("/tasks?state=completed").text) == [lead.task_id]
        assert _tasks(console.http.get("/tasks?state=any").text) == [lead.task_id]
    finally:
        console.backend.close()


def test_the_answer_is_built_from_the_fields_and_a_refusal_keeps_what_was_typed(stack):
    iid = stack.invoice("INV-I-4")
    lead = stack.task(iid, "lead_approval")
    console = stack.console()
    try:
        console.log_in("ana")
        page = console.http.get(f"/tasks/{lead.task_id}").text
        assert 'name="answer/approved" value="true"' in page
        assert '<textarea name="answer/comment"' in page
        assert "18,500.00 EUR" in page and "&#34;invoice_id&#34;: &#34;INV-I-4&#34;" in page
        rid = console.request_id(lead.task_id)

        typed = {"answer/approved": "false", "answer/comment": "   "}
        refused = console.post(f"/tasks/{lead.task_id}/complete", request_id=rid, **typed)
        assert refused.status_code == 400
        assert _refusal(refused.text) == "Not accepted: 'comment' is a required property"
        assert 'value="false" checked' in refused.text  # what was chosen is kept
        assert f'data-field="/comment">{REQUIRED}<' in refused.text
        assert stack.task(iid, "lead_approval").actions == []

        typed = {"answer/approved": "false", "answer/comment": "Wrong <cost> centre"}
        sent = console.post(f"/tasks/{lead.task_id}/complete", request_id=rid, **typed)
        assert sent.status_code == 303
        assert sent.headers["location"] == f"/tasks/{lead.task_id}?done=completed"
        page = console.http.get(sent.headers["location"]).text
        assert "your answer completed this task" in page
        assert "Wrong &lt;cost&gt; centre" in page and "<cost>" not in page
        done = stack.task(iid, "lead_approval", state="COMPLETED")
        assert done.answer == {"approved": False, "comment": "Wrong <cost> centre"}
        ended = wait_until(lambda: (v := stack.admin.describe(iid)).status.finished and v, 20,
                           "the invoice to end")  # fmt: skip
        assert ended.context["why"] == "not approved by the department: Wrong <cost> centre"
    finally:
        console.backend.close()


def test_an_answer_to_a_closed_or_someone_elses_task_says_why_and_does_nothing(stack):
    iid = stack.invoice("INV-I-5")
    lead = stack.task(iid, "lead_approval")
    console = stack.console()
    try:
        console.log_in("ben")  # finance, not a lead
        page = console.http.get(f"/tasks/{lead.task_id}")
        assert page.status_code == 403 and "'ben' may not see human task" in _error(page.text)
        sent = console.post(f"/tasks/{lead.task_id}/complete", request_id="ben-1",
                            **{"answer/approved": "true"})  # fmt: skip
        assert sent.status_code == 403 and "'ben' may not see human task" in _error(sent.text)
        assert stack.task(iid, "lead_approval").actions == []

        console.log_in("ana")
        stale = console.request_id(lead.task_id)  # a form ana keeps open
        console.log_in("admin")
        page = console.http.get(f"/tasks/{lead.task_id}").text
        # The admin started the invoice (exclude: [starter]): only being an admin lets them.
        assert "As a person you could not: You may not answer it: you are excluded" in page
        first = console.request_id(lead.task_id)
        assert console.post(f"/tasks/{lead.task_id}/complete", request_id=first,
                            **{"answer/approved": "true"}).status_code == 303  # fmt: skip
        console.log_in("ana")
        late = console.post(f"/tasks/{lead.task_id}/complete", request_id=stale,
                            **{"answer/approved": "true", "answer/comment": "me too"})  # fmt: skip
        assert late.status_code == 409
        assert "was completed by 'admin' at" in _refusal(late.text)
        assert "me too" in late.text  # kept, though there is no form to send it again
        assert [a.actor for a in stack.task(iid, "lead_approval", "COMPLETED").actions] == ["admin"]

        finance = stack.task(iid, "finance_approval")
        console.log_in("ben")
        rid = console.request_id(finance.task_id)
        assert console.post(f"/tasks/{finance.task_id}/complete", request_id=rid,
                            **{"answer/approved": "true"}).status_code == 303  # fmt: skip
        again = console.post(f"/tasks/{finance.task_id}/complete", request_id="ben-2",
                             **{"answer/approved": "true"})  # fmt: skip
        assert again.status_code == 409 and "ben" in _refusal(again.text)
        page = console.http.get(f"/tasks/{finance.task_id}").text
        assert "You have answered it already; it waits for 1 more." in page
        assert 'id="answer-form"' not in page
    finally:
        console.backend.close()


def test_the_same_form_sent_twice_is_applied_once(stack):
    iid = stack.invoice("INV-I-6", amount_cents=500000)
    lead = stack.task(iid, "lead_approval")
    console = stack.console()
    try:
        console.log_in("ana")
        rid = console.request_id(lead.task_id)
        fields = {"request_id": rid, "answer/approved": "true"}
        first = console.post(f"/tasks/{lead.task_id}/complete", **fields)
        second = console.post(f"/tasks/{lead.task_id}/complete", **fields)
        assert first.headers["location"] == f"/tasks/{lead.task_id}?done=completed"
        assert second.headers["location"] == f"/tasks/{lead.task_id}?done=completed&replayed=1"
        assert "nothing was done twice" in console.http.get(second.headers["location"]).text
        done = stack.task(iid, "lead_approval", "COMPLETED")
        assert [(a.actor, a.action) for a in done.actions] == [("ana", "complete")]
        ended = wait_until(lambda: (v := stack.admin.describe(iid, events=True)).status.finished
                           and v, 20, "the invoice to end")  # fmt: skip
        assert [e.kind for e in ended.events].count("human_task_completed") == 1
    finally:
        console.backend.close()


def test_claim_release_and_an_admins_reassign(stack):
    iid = stack.invoice("INV-I-7")
    lead = stack.task(iid, "lead_approval")
    console = stack.console()
    try:
        console.log_in("ana")
        claimed = console.post(f"/tasks/{lead.task_id}/claim",
                               request_id=console.request_id(lead.task_id, "claim"))  # fmt: skip
        assert claimed.headers["location"] == f"/tasks/{lead.task_id}?done=claimed"
        page = console.http.get(f"/tasks/{lead.task_id}").text
        assert "claimed by ana" in page and 'id="release-form"' in page
        assert 'id="claim-form"' not in page
        released = console.post(f"/tasks/{lead.task_id}/release",
                                request_id=console.request_id(lead.task_id, "release"))  # fmt: skip
        assert released.headers["location"] == f"/tasks/{lead.task_id}?done=released"
        assert stack.task(iid, "lead_approval").state == "OPEN"

        refused = console.post(f"/tasks/{lead.task_id}/reassign", to="ana", request_id="a-1")
        assert refused.status_code == 403
        assert "may not call ReassignHumanTask" in _refusal(refused.text)

        console.log_in("admin")
        assert 'id="reassign-form"' in console.http.get(f"/tasks/{lead.task_id}").text
        moved = console.post(f"/tasks/{lead.task_id}/reassign", to="dora", request_id="adm-1")
        assert moved.headers["location"] == f"/tasks/{lead.task_id}?done=reassigned"
        assert stack.task(iid, "lead_approval").assignee == "dora"
        assert [a.action for a in stack.task(iid, "lead_approval").actions] == [
            "claim",
            "unclaim",
            "reassign",
        ]
    finally:
        console.backend.close()


def test_the_context_beside_a_task_is_read_with_the_consoles_own_credential(stack):
    iid = stack.invoice("INV-I-8")
    lead = stack.task(iid, "lead_approval")
    console = stack.console(own_token=None)  # a console with no credential of its own
    try:
        console.log_in("ana")
        page = console.http.get(f"/tasks/{lead.task_id}").text
        assert 'id="task-context"' not in page
        assert "The instance cannot be shown" in page
        assert 'id="answer-form"' in page  # she can still answer
        console.log_in("admin")  # who reads instances with their own token
        page = console.http.get(f"/tasks/{lead.task_id}").text
        assert 'id="task-context"' in page and "INV-I-8" in page
        assert f'href="/instances/{iid}"' in page
    finally:
        console.backend.close()


def test_a_console_without_a_login_acts_as_an_admin_named_by_as(database_url):
    with embedded_stack(database_url) as st:
        st.client.deploy(
            b"wiggle: 1\nname: ask\nsteps:\n  - human: check\n    title: Check it\n"
            b"    form: {type: object, properties: {ok: {type: boolean}}}\n"
            b"    candidates: {groups: [ops]}\n"
        )
        iid = st.client.start("ask", {}).instance_id
        backend = Backend(st.address)
        app = create_app(backend, ConsoleSettings(person="olga"))
        console = TestClient(app, base_url=BASE, follow_redirects=False)
        try:
            (task_id,) = wait_until(lambda: _tasks(console.get("/tasks").text), 20, "the task")
            page = console.get(f"/tasks/{task_id}").text
            assert 'type="checkbox" name="answer/ok"' in page  # an optional boolean
            rid = re.search(r'name="request_id" value="([^"]+-complete)"', page)
            assert rid is not None
            csrf = console.cookies.get("wiggle_csrf")
            sent = console.post(
                f"/tasks/{task_id}/complete", data={"csrf": csrf, "request_id": rid.group(1)}
            )
            assert sent.status_code == 303
            done = st.client.get_task(task_id, admin=True, person="olga")
            assert done.completed_by == "olga" and done.answer == {"ok": False}
            assert st.client.describe(iid).status == "COMPLETED"
        finally:
            backend.close()
