"""The console in a real browser (headless Chromium through Selenium) against a real server.

Each test starts its own instances and waits on what the page shows (never on a fixed sleep).
The pages' screenshots are written to docs/console/ (README shows two of them).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.browser.live import live_attr, live_click, live_text, live_texts
from tests.hourly import minute_away

pytestmark = pytest.mark.timeout(120)

WAIT = 20  # seconds: a generous bound for a loaded two-core machine, not an expected time

HOSTILE = [
    "<script>window.__xss = 1</script>",
    '<img src="x" onerror="window.__xss = 2">',
    '"><svg onload="window.__xss = 3">',
]


def _wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT)


def _awaiting(stack: Any, note: str = "") -> str:
    started = stack.client.start("approval", {"amount": 120, "note": note})
    stack.wait(started.instance_id, lambda v: any(t.state == "AWAITING" for t in v.tokens))
    return started.instance_id


def _css(driver: Any, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def test_the_list_shows_started_instances_and_refreshes_keeping_its_filters(stack, browser, shot):
    first = _awaiting(stack)
    broken = stack.client.start("breaks", {"message": "no funds"}).instance_id
    stack.wait(broken, lambda v: v.status.finished)
    browser.get(f"{stack.console_url}/instances")
    rows = live_text(browser, "#instances")
    assert first in rows and broken in rows
    shot(browser, "instances")

    # Filter by flow through the form: only that flow's instances remain.
    field = _css(browser, "#filters input[name=flow]")
    field.clear()
    field.send_keys("approval")
    _css(browser, "#filters button[type=submit]").click()
    _wait(browser).until(ec.url_contains("flow=approval"))
    assert first in live_text(browser, "#instances")
    assert broken not in live_text(browser, "#instances")

    # An instance started after the page loaded appears without a reload, filter still applied.
    later = _awaiting(stack)
    _wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, f'tr[data-instance="{later}"]'))
    )
    assert broken not in live_text(browser, "#instances")
    assert "flow=approval" in browser.current_url
    assert _css(browser, "#filters input[name=flow]").get_attribute("value") == "approval"


def test_the_instance_page_draws_the_graph_with_the_current_node_highlighted(stack, browser, shot):
    instance_id = _awaiting(stack)
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    current = "svg.flow-graph g.node.current"
    assert live_attr(browser, current, "data-node") == "approve"
    assert live_attr(browser, current, "data-state") == "AWAITING"
    prepared = 'svg.flow-graph g.node[data-node="prepare"]'
    assert live_attr(browser, prepared, "data-state") == "DONE"
    assert live_text(browser, "#status") == "RUNNING"
    assert '"prepared": true' in live_text(browser, "#context")  # the latest, not the input
    assert "step_completed" in live_text(browser, "#timeline")
    assert live_attr(browser, '#tokens li[data-node="approve"]', "data-state") == "AWAITING"
    shot(browser, "instance")


def test_a_signal_sent_from_the_page_moves_the_instance_on(stack, browser, shot):
    instance_id = _awaiting(stack)
    browser.get(f"{stack.console_url}/instances/{instance_id}")

    # A payload that is not JSON is refused on the page; nothing is sent.
    Select(_css(browser, "#signal-name")).select_by_value("approve")
    _css(browser, "#signal-payload").send_keys("{oops")
    _css(browser, "#signal-form button[type=submit]").click()
    assert (
        "not valid JSON"
        in _wait(browser).until(ec.presence_of_element_located((By.ID, "signal-error"))).text
    )
    assert stack.client.describe(instance_id).status == "RUNNING"
    # The refusal's page refreshes from the instance (it once refreshed from the POST's address,
    # failed, and put a "not up to date" note above the form while it was being retyped).
    _wait(browser).until(
        lambda d: _css(d, "#instance-live").get_attribute("data-refreshed") is not None
    )
    assert not browser.find_elements(By.CSS_SELECTOR, ".stale-note")

    payload = _css(browser, "#signal-payload")
    payload.clear()
    payload.send_keys('{"approved_by": "ops"}')
    _css(browser, "#signal-form button[type=submit]").click()
    confirm = _wait(browser).until(ec.presence_of_element_located((By.ID, "confirm")))
    assert "approve" in confirm.text and instance_id in confirm.text
    assert stack.client.describe(instance_id).status == "RUNNING"  # not before the confirmation
    _css(browser, "#confirm-button").click()

    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "status"), "COMPLETED"))
    assert '"settled": true' in live_text(browser, "#context")
    assert stack.client.describe(instance_id).status == "COMPLETED"


def test_cancel_from_the_page_asks_first_then_cancels(stack, browser, shot):
    instance_id = _awaiting(stack)
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    _css(browser, "#cancel-reason").send_keys("customer withdrew")
    _css(browser, "#cancel-form button[type=submit]").click()
    confirm = _wait(browser).until(ec.presence_of_element_located((By.ID, "confirm")))
    assert "customer withdrew" in confirm.text
    assert stack.client.describe(instance_id).status == "RUNNING"
    _css(browser, "#confirm-button").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "status"), "CANCELLED"))
    assert "customer withdrew" in live_text(browser, "#reason")
    assert "actions" not in {
        e.get_attribute("id") for e in browser.find_elements(By.TAG_NAME, "section")
    }


def test_flows_page_lists_versions_and_starts_an_instance_checked_against_the_schema(
    stack, browser, shot
):
    browser.get(f"{stack.console_url}/flows")
    assert _css(browser, 'section.flow[data-flow="approval"]')
    shot(browser, "flows")
    browser.get(f"{stack.console_url}/flows/approval")
    assert _css(browser, 'svg.flow-graph g.node[data-node="approve"]')
    box = _css(browser, "#start-input")
    box.clear()
    box.send_keys('{"amount": "a lot"}')
    _css(browser, "#start-form button[type=submit]").click()
    problems = _wait(browser).until(ec.presence_of_element_located((By.ID, "start-problems")))
    assert "/amount" in problems.text and "number" in problems.text

    box = _css(browser, "#start-input")
    box.clear()
    box.send_keys('{"amount": 5}')
    _css(browser, "#start-form button[type=submit]").click()
    _wait(browser).until(ec.url_contains("/instances/"))
    instance_id = browser.current_url.split("/instances/", 1)[1].split("?", 1)[0]
    assert stack.client.describe(instance_id).flow == "approval"
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "current-node"), "approve"))


def test_workers_page(stack, browser, shot):
    browser.get(f"{stack.console_url}/workers")
    table_or_note = browser.find_elements(By.ID, "workers") or browser.find_elements(
        By.CSS_SELECTOR, "p.note"
    )
    assert table_or_note
    shot(browser, "workers")


def test_hostile_flow_name_context_and_error_message_are_inert(stack, browser, shot):
    note = "".join(HOSTILE)
    waiting = _awaiting(stack, note=note)
    broken = stack.client.start("breaks", {"message": note}).instance_id
    stack.wait(broken, lambda v: v.status.finished)
    hostile = quote(HOSTILE[2], safe="")
    pages = [
        f"/instances/{waiting}",
        f"/instances/{broken}",
        f"/instances?flow={quote(HOSTILE[0], safe='')}&q={hostile}",
        f"/flows/{quote(HOSTILE[1], safe='')}",
        f"/instances/{hostile}",
        "/incidents",  # the hostile error message is an incident's reason
        f"/incidents?flow={quote(HOSTILE[0], safe='')}",
        "/queues",
        f"/instances?where={hostile}",  # the search box
        f"/bulk?action=retry&where=id~{hostile}&where=flow={quote(HOSTILE[0], safe='')}",
        f"/bulk?action=signal&signal={hostile}&where=flow=approval&payload={hostile}",
        f"/migrations?flow={quote(HOSTILE[1], safe='')}",
        "/batches",
    ]
    for path in pages:
        browser.get(stack.console_url + path)
        assert browser.execute_script("return window.__xss === undefined"), path
        assert not browser.find_elements(By.CSS_SELECTOR, "main script, main img, main svg[onload]")
    # The hostile text is shown as text, where it belongs.
    browser.get(f"{stack.console_url}/instances/{waiting}")
    assert HOSTILE[0] in _css(browser, "#context").text
    browser.get(f"{stack.console_url}/instances/{broken}")
    assert _css(browser, "#status").text == "FAILED"
    assert HOSTILE[1] in _css(browser, "#reason").text
    browser.get(f"{stack.console_url}/instances?flow={quote(HOSTILE[0], safe='')}")
    assert _css(browser, "#filters input[name=flow]").get_attribute("value") == HOSTILE[0]
    assert browser.execute_script("return window.__xss === undefined")


# -- schedules ------------------------------------------------------------------------------

BERLIN = ZoneInfo("Europe/Berlin")
SCHEDULE_HOSTILE = '<img src="x" onerror="window.__xss = 1">'


def _schedule(minute: int) -> str:
    """Every hour at `minute`, Berlin time; `flaky` completes when its key is not broken. The
    minute is chosen when the test begins (tests/hourly.py): no regular fire comes due while
    the page is read as having none, and a trigger is the newest fire."""
    return f"""
schedule: console-hourly
description: 'Fetch and store every hour {SCHEDULE_HOSTILE}'
flow: flaky
time_zone: Europe/Berlin
cron: "{minute} * * * *"
input:
  key: scheduled
"""


@pytest.mark.timeout(180)
def test_the_schedule_pages_trigger_pause_and_backfill(stack, browser, shot):
    """The list with the next fire in the schedule's zone; its page (timetable, next times); a
    trigger clicked and its instance followed to "started by schedule"; pause with a note and
    unpause; a backfill previewed, started and followed on its batch's page."""
    minute = minute_away(20)
    stack.client.apply_schedule(_schedule(minute).encode(), filename="console-hourly.schedule.yaml")
    browser.get_log("browser")  # drop what earlier tests left

    # The list: the schedule, its flow, active, its next fire in Berlin time, its counts.
    browser.get(f"{stack.console_url}/schedules")
    assert _css(browser, 'header nav a[href="/schedules"]').get_attribute("class") == "on"
    # Both pages swap their live parts while open: each read is one script (tests/browser/live.py).
    row = '#schedules tr[data-schedule="console-hourly"]'
    assert live_text(browser, f"{row} .badge") == "active"
    next_fire = live_text(browser, f"{row} td.next-fire code")
    assert re.fullmatch(rf"\d{{4}}-\d\d-\d\dT\d\d:{minute:02d}:00\+0[12]:00", next_fire), next_fire
    assert live_text(browser, f'{row} a[href="/flows/flaky"]') == "flaky"
    assert SCHEDULE_HOSTILE in live_text(browser, row)  # the description, as text
    shot(browser, "schedules")

    # Its page: the timetable, the next ten fire times in its zone, no fire yet.
    live_click(browser, f"{row} a.schedule-link")
    _wait(browser).until(ec.url_contains("/schedules/console-hourly"))
    assert live_text(browser, '#timetable tr[data-key="cron"] code') == f"{minute} * * * *"
    assert live_text(browser, "#schedule-zone") == "Europe/Berlin"
    upcoming = live_texts(browser, "#upcoming li[data-ms]")
    assert len(upcoming) == 10
    assert all(re.search(rf"T\d\d:{minute:02d}:00\+0[12]:00", text) for text in upcoming)
    assert "No fire yet" in live_text(browser, "#fires")

    # Trigger: the page says what the fire did, and links the instance it started.
    _css(browser, "#trigger-button").click()
    result = _wait(browser).until(ec.presence_of_element_located((By.ID, "trigger-result")))
    assert result.get_attribute("data-outcome") == "STARTED"
    instance_id = _css(browser, "#triggered-instance").text
    assert re.fullmatch(r"console-hourly-\d{8}T\d{6}Z", instance_id), instance_id
    assert live_text(browser, '#fires tr[data-triggered="1"]').startswith(
        _css(browser, "#trigger-result code").text
    )
    shot(browser, "schedule")
    stack.wait(instance_id, lambda v: v.status == "COMPLETED")

    # The instance it started names the schedule and the nominal time, in Berlin time.
    _css(browser, "#triggered-instance").click()
    origin = _wait(browser).until(ec.presence_of_element_located((By.ID, "schedule-origin")))
    assert "Started by schedule console-hourly for nominal time" in origin.text
    assert re.search(r"T\d\d:\d\d:\d\d\+0[12]:00 \(Europe/Berlin\)", origin.text), origin.text
    _css(browser, '#schedule-origin a[href="/schedules/console-hourly"]').click()
    _wait(browser).until(ec.presence_of_element_located((By.ID, "pause-form")))

    # Pause with a note (hostile: it stays text), then unpause.
    _css(browser, "#pause-note-input").send_keys(f"maintenance {SCHEDULE_HOSTILE}")
    _css(browser, "#pause-button").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "notice"), "paused"))
    assert live_attr(browser, "#schedule-state", "data-paused") == "1"
    assert live_text(browser, "#pause-note") == f"maintenance {SCHEDULE_HOSTILE}"
    assert stack.client.describe_schedule("console-hourly").paused
    _css(browser, "#unpause-button").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "notice"), "unpaused"))
    assert live_attr(browser, "#schedule-state", "data-paused") == "0"

    # Backfill three past hours: the preview lists them in Berlin time; started, it is a batch.
    hour = dt.datetime.now(dt.UTC).replace(minute=minute, second=0, microsecond=0)
    _css(browser, "#backfill summary").click()
    start, end = hour - dt.timedelta(hours=5), hour - dt.timedelta(hours=3)
    for field, at in (("#backfill-from", start), ("#backfill-to", end)):
        _css(browser, field).clear()
        _css(browser, field).send_keys(at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    Select(_css(browser, "#backfill-overlap")).select_by_value("allow_all")
    _css(browser, "#backfill-preview").click()
    _wait(browser).until(ec.presence_of_element_located((By.ID, "preview")))
    assert _css(browser, "#backfill-count").text == "3"
    assert _css(browser, "#backfill-already").text == "0"
    assert _css(browser, "#backfill-first").text == start.astimezone(BERLIN).isoformat()
    assert _css(browser, "#backfill-last").text == end.astimezone(BERLIN).isoformat()
    assert len(browser.find_elements(By.CSS_SELECTOR, "#backfill-times li")) == 3
    assert not stack.client.list_batches(action="backfill")  # the preview changed nothing
    _css(browser, "#backfill-go").click()
    _wait(browser).until(ec.url_contains("/batches/"))
    _wait(browser).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#batch-live [data-finished]"))
    )
    assert live_attr(browser, "#progress", "data-done") == "3"
    assert live_text(browser, "#batch-action").startswith("backfill")
    live_click(browser, "#batch-schedule")
    _wait(browser).until(ec.url_contains("/schedules/console-hourly"))
    assert live_texts(browser, "#fires td.fire-by").count("backfill") == 3

    assert browser.execute_script("return window.__xss === undefined")
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
