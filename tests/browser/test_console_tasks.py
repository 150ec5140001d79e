"""The console's Tasks pages in a real browser (headless Chromium through Selenium): people of
definitions/people/ log in with their own tokens and approve the shipped invoice-approval flow.

The stack is this module's own: a server with that credentials file, the flow's worker and a
console that logs people in with it. Each test starts its own invoices, and finds its tasks the
way a person does, by their titles in the inbox (never by an id it was told).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.conftest import DEFINITIONS
from tests.browser.live import live_attr, live_text, live_texts
from tests.invoices import PEOPLE, start_invoice, task_of, token
from tests.waiting import wait_until
from wiggle.client import Client, HumanTask
from wiggle.console import Backend, ConsoleServer, ConsoleSettings
from wiggle.console._taskform import REQUIRED
from wiggle.engine import Engine
from wiggle.server import Server, ServerConfig
from wiggle.worker import Worker, load_handlers

pytestmark = pytest.mark.timeout(180)

WAIT = 20  # seconds: a generous bound for a loaded two-core machine, not an expected time


@dataclass
class People:
    admin: Client  # the admin credential: starts invoices, reads what happened
    console_url: str

    def invoice(self, invoice_id: str, **changes: Any) -> str:
        return start_invoice(self.admin, invoice_id, **changes)

    def task(self, instance_id: str, step: str, state: str = "OPEN") -> HumanTask:
        return task_of(self.admin, instance_id, step, state)


@pytest.fixture(scope="module")
def people() -> Iterator[People]:
    tmp = tempfile.mkdtemp(prefix="wiggle-console-tasks-")
    engine = Engine(f"sqlite:///{tmp}/wiggle.db")
    config = ServerConfig(
        address="127.0.0.1:0", grace_s=0.5, credentials=PEOPLE / "credentials.toml"
    )
    server = Server(engine, config)
    address = f"127.0.0.1:{server.start()}"
    registry = load_handlers(DEFINITIONS / "handlers" / "invoice_approval.py")
    worker = Worker(
        address, registry=registry, queues=("finance",), token=token("worker"), poll_wait_ms=1_000
    )
    worker.start()
    admin = Client(address, token=token("admin"))
    admin.deploy(
        (DEFINITIONS / "invoice-approval.yaml").read_bytes(), filename="invoice-approval.yaml"
    )
    backend = Backend(address, token=token("console"))
    settings = ConsoleSettings(
        refresh_ms=500,
        require_login=True,
        credentials=str(PEOPLE / "credentials.toml"),
        flows_dir=str(DEFINITIONS),
    )
    console = ConsoleServer(backend, "127.0.0.1", 0, settings)
    console.start()
    try:
        yield People(admin, console.url)
    finally:
        console.stop()
        backend.close()
        admin.close()
        worker.stop()
        server.stop(grace=0.2)
        engine.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT)


def _css(driver: Any, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def log_in(driver: Any, people: People, person: str) -> None:
    """Log out whoever is logged in, then log in with `person`'s token, as a person does."""
    driver.delete_all_cookies()
    driver.get(f"{people.console_url}/")
    _wait(driver).until(lambda d: d.find_elements(By.ID, "token"))
    _css(driver, "#token").send_keys(token(person))
    _css(driver, "#login-form button[type=submit]").click()
    try:
        _wait(driver).until(lambda d: d.find_elements(By.ID, "whoami"))
    except TimeoutException:
        # Where the login went instead (a clean clone's busy run once stopped here with no
        # more than a timeout to show): the page the browser is on, and what it says.
        body = driver.find_elements(By.TAG_NAME, "body")
        said = body[0].text[:2000] if body else driver.page_source[:2000]
        pytest.fail(f"{person} not logged in after {WAIT} s: at {driver.current_url}\n{said}")
    assert live_text(driver, "#whoami").startswith(person)


def open_task(driver: Any, people: People, title: str) -> None:
    """From the inbox, open the task with this title."""
    driver.get(f"{people.console_url}/tasks")
    _wait(driver).until(lambda d: title in live_texts(d, "#tasks a.task-link"))
    clicked = driver.execute_script(  # found and clicked at once: the list refreshes itself
        "const a = Array.from(document.querySelectorAll('#tasks a.task-link'))"
        "  .find(e => e.innerText === arguments[0]);"
        " if (a) a.click(); return Boolean(a);",
        title,
    )
    assert clicked, title
    _wait(driver).until(lambda d: d.find_elements(By.ID, "task-title"))
    assert live_text(driver, "#task-title") == title


def answer(driver: Any, approved: bool, comment: str = "") -> None:
    value = "true" if approved else "false"
    _css(driver, f"#answer-form input[name='answer/approved'][value='{value}']").click()
    field = _css(driver, "#field-comment")
    field.clear()
    if comment:
        field.send_keys(comment)
    _css(driver, "#complete-button").click()


def test_two_people_each_see_their_own_tasks_and_approve_an_invoice_in_turn(people, browser, shot):
    iid = people.invoice("INV-B-1")
    # Another department's invoice: its lead's task is for marketing's leads, not ana's.
    other = people.invoice("INV-B-2", department="marketing", supplier="Print Shop")

    log_in(browser, people, "ana")
    assert browser.current_url.endswith("/tasks")
    titles = live_texts(browser, "#tasks a.task-link")
    assert "Approve invoice INV-B-1 from Acme Tools Ltd" in titles
    assert not [t for t in titles if "INV-B-2" in t]  # marketing's lead task is not hers
    assert live_texts(browser, "header.top nav a") == ["Tasks"]
    shot(browser, "tasks")

    open_task(browser, people, "Approve invoice INV-B-1 from Acme Tools Ltd")
    assert "18,500.00 EUR" in live_text(browser, "#instructions")
    assert '"invoice_id": "INV-B-1"' in live_text(browser, "#task-context")
    assert "members of engineering-leads" in live_text(browser, "#task-for")
    shot(browser, "task")

    # No without a comment: the engine's validator refuses it, and what was chosen stays.
    answer(browser, approved=False)
    _wait(browser).until(lambda d: d.find_elements(By.ID, "refusal"))
    assert "'comment' is a required property" in live_text(browser, "#refusal")
    assert _css(browser, "input[name='answer/approved'][value='false']").is_selected()
    assert live_text(browser, "[data-field='/comment'] .field-problem") == REQUIRED
    assert people.task(iid, "lead_approval").state == "OPEN"
    shot(browser, "task-refused")

    answer(browser, approved=True, comment="Matches PO-7781.")
    _wait(browser).until(lambda d: d.find_elements(By.ID, "notice"))
    assert "your answer completed this task" in live_text(browser, "#notice")
    # The instance moved on: its live part shows it waiting at finance's task.
    _wait(browser).until(lambda d: "finance_approval" in live_text(d, "#task-live"))
    assert live_attr(browser, "#task-facts", "data-state") == "COMPLETED"
    assert live_text(browser, "#completed-by") == "ana"
    shot(browser, "task-done")
    people.task(iid, "finance_approval")

    log_in(browser, people, "ben")
    titles = live_texts(browser, "#tasks a.task-link")
    assert "Finance approval: invoice INV-B-1 (18,500.00 EUR)" in titles
    assert not [t for t in titles if t.startswith("Approve invoice")]  # the leads' are not his
    open_task(browser, people, "Finance approval: invoice INV-B-1 (18,500.00 EUR)")
    assert "0 have so far" in live_text(browser, "#approvals-note")
    answer(browser, approved=True)
    _wait(browser).until(lambda d: d.find_elements(By.ID, "notice"))
    assert "needs more people to answer" in live_text(browser, "#notice")
    assert "You have answered it already" in live_text(browser, "#why-not")
    assert not browser.find_elements(By.ID, "answer-form")

    log_in(browser, people, "carla")
    open_task(browser, people, "Finance approval: invoice INV-B-1 (18,500.00 EUR)")
    assert "ben" in live_text(browser, "#task-approvals")
    answer(browser, approved=True, comment="Budget line 4410.")
    _wait(browser).until(lambda d: d.find_elements(By.ID, "notice"))
    assert "your answer completed this task" in live_text(browser, "#notice")
    _wait(browser).until(lambda d: live_attr(d, "#task-instance", "data-status") == "COMPLETED")
    done = people.admin.describe(iid)
    assert done.context["status"] == "approved"
    assert [a["by"] for a in done.context["finance"]] == ["ben", "carla"]
    shot(browser, "task-approved")
    people.admin.cancel(other, "test over")


def test_a_person_cannot_open_other_pages_or_another_persons_task(people, browser):
    iid = people.invoice("INV-B-3")
    lead = people.task(iid, "lead_approval")
    log_in(browser, people, "ben")

    browser.get(f"{people.console_url}/instances")
    assert "ben may see only their human tasks" in live_text(browser, "#error")
    browser.get(f"{people.console_url}/tasks/{lead.task_id}")
    assert f"'ben' may not see human task '{lead.task_id}'" in live_text(browser, "#error")

    # The same by POST, with the page's own CSRF token: refused, and nothing done.
    def post(path: str, fields: dict[str, str]) -> list[Any]:
        result: list[Any] = browser.execute_async_script(
            "const [path, fields, done] = arguments;"
            " const body = new FormData();"
            " body.append('csrf', document.querySelector('input[name=csrf]').value);"
            " for (const [k, v] of Object.entries(fields)) body.append(k, v);"
            " fetch(path, {method: 'POST', body, redirect: 'manual'})"
            "   .then(r => r.text().then(t => done([r.status, t])));",
            path,
            fields,
        )
        return result

    status, text = post(
        f"/tasks/{lead.task_id}/complete",
        {"request_id": "b3-complete", "answer/approved": "true"},
    )
    assert status == 403 and "&#39;ben&#39; may not see human task" in text
    status, text = post(f"/instances/{iid}/cancel", {"reason": "not mine", "confirmed": "1"})
    assert status == 403 and "ben may see only their human tasks" in text
    assert people.admin.describe(iid).status == "RUNNING"
    assert people.admin.get_task(lead.task_id, admin=True, person="admin").actions == []
    people.admin.cancel(iid, "test over")


def test_a_form_sent_twice_is_applied_once(people, browser):
    iid = people.invoice("INV-B-4", amount_cents=500000)  # the lead only
    log_in(browser, people, "ana")
    open_task(browser, people, "Approve invoice INV-B-4 from Acme Tools Ltd")
    _css(browser, "#answer-form input[name='answer/approved'][value='true']").click()
    # Both sends of the very same form (its request id too) at once, as a double click does.
    urls: list[str] = browser.execute_async_script(
        "const done = arguments[0]; const form = document.getElementById('answer-form');"
        " const send = () => fetch(form.action, {method: 'POST', body: new FormData(form)});"
        " Promise.all([send(), send()]).then(rs => done(rs.map(r => r.url)));"
    )
    assert sorted("replayed=1" in u for u in urls) == [False, True], urls
    done = people.task(iid, "lead_approval", state="COMPLETED")
    trail = people.admin.get_task(done.task_id, admin=True, person="admin").actions
    assert [(a.actor, a.action) for a in trail] == [("ana", "complete")]
    finished = wait_until(
        lambda: (v := people.admin.describe(iid, events=True)).status.finished and v, WAIT,
        f"{iid} to end",
    )  # fmt: skip
    assert [e.kind for e in finished.events].count("human_task_completed") == 1
    assert finished.context["status"] == "approved"
