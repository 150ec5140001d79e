"""What the console draws and says, in Chromium, for the shipped flows and the cases issue 18
found wrong: a failed step drawn DONE, counts inflated, passed nodes left grey, signal and cancel
left on a finished instance, an "Updated" that never moved, a favicon 404. And the new pages
(incidents, queues, a flow's heat map, step history), whose screenshots docs/console.md shows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import orjson
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser.live import live_attr, live_attrs, live_text

pytestmark = pytest.mark.timeout(180)

WAIT = 20  # seconds: a generous bound for a loaded two-core machine, not an expected time


def sample(stem: str, **changes: Any) -> Any:
    """The shipped sample input of definitions/samples/STEM.json, with `changes`."""
    path = Path(__file__).resolve().parents[2] / "definitions" / "samples" / f"{stem}.json"
    return {**orjson.loads(path.read_bytes()), **changes}


def _wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT)


def _css(driver: Any, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def _node(node_id: str) -> str:
    return f'svg.flow-graph g.node[data-node="{node_id}"]'


def _drawn(driver: Any, node_id: str) -> tuple[str | None, str | None]:
    # One read of both: the graph is in the page's live part, swapped at each refresh.
    [(state, counts)] = live_attrs(driver, _node(node_id), "data-state", "data-counts")
    return state, counts


def _finished(stack: Any, flow: str, value: Any) -> str:
    instance_id = stack.client.start(flow, value).instance_id
    stack.wait(instance_id, lambda v: v.status.finished, timeout=60)
    return instance_id


def test_a_declined_order_draws_the_failed_step_failed_and_the_cut_branch_cancelled(
    stack, browser, shot
):
    """The console drew `authorise` and `reserve_stock` DONE 1."""
    declined = sample("order-fulfilment", card="4000000000000002")
    instance_id = _finished(stack, "order-fulfilment", declined)
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    assert _drawn(browser, "authorise") == ("FAILED", "FAILED:1")
    assert _drawn(browser, "reserve_stock") == ("CANCELLED", "CANCELLED:1")
    assert _drawn(browser, "validate") == ("DONE", "DONE:1")
    assert _drawn(browser, "capture") == (None, None)  # never reached
    assert "current" in (live_attr(browser, _node("authorise"), "class") or "")
    assert live_text(browser, "#current-node") == "authorise"
    failed_row = '#history tr[data-node="authorise"]'
    assert live_attr(browser, failed_row, "data-outcome") == "failed"
    assert "card declined by the issuer" in live_text(browser, failed_row)
    # A step of the branch the failure cut off, if a worker had leased it, was drawn "running"
    # in the step history of the ended instance.
    outcomes = dict(live_attrs(browser, "#history tr[data-outcome]", "data-node", "data-outcome"))
    assert "running" not in outcomes.values(), outcomes
    assert outcomes.get("reserve_stock", "cut off") == "cut off", outcomes
    shot(browser, "instance-failed")


def test_for_each_counts_each_page_once(stack, browser, shot):
    """document-pipeline's 4-page sample showed ocr_page DONE 5 and the join DONE 4."""
    instance_id = _finished(stack, "document-pipeline", sample("document-pipeline"))
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    assert _drawn(browser, "ocr_page") == ("DONE", "DONE:4")
    assert _drawn(browser, "classify_page") == ("DONE", "DONE:3")  # the blank page filtered
    assert _drawn(browser, "for_each-1.join") == ("DONE", "DONE:1")
    assert _drawn(browser, "end") == ("DONE", "DONE:1")


def test_the_sleep_for_each_and_subflow_an_instance_passed_are_lit(stack, browser, shot):
    """nightly-batch left its sleep, for_each and subflow grey, its combine DONE 4."""
    instance_id = _finished(stack, "nightly-batch", sample("nightly-batch"))
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    assert _drawn(browser, "sleep-1") == ("DONE", "DONE:1")
    assert _drawn(browser, "for_each-1") == ("DONE", "DONE:1")
    assert _drawn(browser, "nightly-batch-item") == ("DONE", "DONE:3")
    assert _drawn(browser, "for_each-1.join") == ("DONE", "DONE:1")


def test_actions_keep_what_is_typed_and_go_when_the_instance_ends(stack, browser, shot):
    """The Actions forms stayed after the instance ended; their "Updated" never moved."""
    started = stack.client.start("approval", {"amount": 10})
    instance_id = started.instance_id
    stack.wait(instance_id, lambda v: any(t.state == "AWAITING" for t in v.tokens))
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    created = int(_css(browser, "#started time").get_attribute("data-ms"))
    box = _css(browser, "#signal-payload")
    box.send_keys('{"typed": "by')
    live = _css(browser, "#instance-live")
    before = live.get_attribute("data-refreshed")
    _wait(browser).until(lambda d: live.get_attribute("data-refreshed") != before)
    # The refresh left the field as it was, focus included: typing goes on where it was.
    assert browser.execute_script("return document.activeElement.id") == "signal-payload"
    browser.switch_to.active_element.send_keys(' hand"}')
    assert _css(browser, "#signal-payload").get_attribute("value") == '{"typed": "by hand"}'
    assert _css(browser, "#updated time")  # the part around the actions was refreshed

    stack.client.signal(instance_id, "approve", {"approved_by": "ops"})  # not from the page
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "status"), "COMPLETED"))
    # Signal and cancel go with the running instance; a finished one offers only its reset.
    assert browser.find_elements(By.ID, "signal-form") == []
    assert browser.find_elements(By.ID, "cancel-form") == []
    assert browser.find_elements(By.ID, "reset-form")
    updated = int(_css(browser, "#updated time").get_attribute("data-ms"))
    newest = max(e.at_ms for e in stack.client.describe(instance_id, events=True).events)
    assert updated == newest and updated >= created
    payload = _css(browser, '#timeline li[data-kind="signal_received"]').text
    assert '"approved_by": "ops"' in payload


def test_no_request_fails_in_the_browser_console(stack, browser, shot):
    """/favicon.ico answered 404, which Chromium logs as an error on every page."""
    browser.get_log("browser")  # drop what earlier tests left
    for path in ("/instances", "/incidents", "/queues", "/flows", "/workers"):
        browser.get(stack.console_url + path)
        _wait(browser).until(lambda d: d.execute_script("return document.readyState") == "complete")
    severe = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []


def test_incidents_group_the_failures_and_link_them(stack, browser, shot):
    for message in ("no funds", "no funds", "card expired"):
        _finished(stack, "breaks", {"message": message})
    browser.get(f"{stack.console_url}/incidents?flow=breaks")
    rows = live_attrs(browser, '#incidents tr[data-flow="breaks"]', "data-count", "data-node")
    counts = [int(str(count)) for count, _ in rows]
    assert counts == sorted(counts, reverse=True) and sum(counts) >= 3
    assert rows[0][1] == "explode"
    example = live_attr(browser, '#incidents tr[data-flow="breaks"] a.example', "href")
    assert example is not None
    browser.get(f"{stack.console_url}/incidents")
    shot(browser, "incidents")
    browser.get(urljoin(stack.console_url + "/", example))
    assert _css(browser, "#status").text == "FAILED"


def test_queues_name_the_queue_no_worker_serves(stack, browser, shot):
    stack.client.deploy(
        b"wiggle: 1\nname: stranded\nsteps:\n  - task: sort_mail\n    queue: mailroom\n",
        filename="stranded.yaml",
    )
    stack.client.start("stranded", {})
    browser.get(f"{stack.console_url}/queues")
    # The table is a live part (redrawn every few seconds): each read finds it anew in one
    # script, or an element found before a redraw is stale when read (a loaded run saw it).
    mailroom = 'tr[data-queue="mailroom"]'
    _css(browser, mailroom)
    assert "unserved" in (live_attr(browser, mailroom, "class") or "")
    assert "no worker polls this queue" in live_text(browser, mailroom)
    served = 'tr[data-queue="default"]'
    _css(browser, served)
    assert "unserved" not in (live_attr(browser, served, "class") or "")
    shot(browser, "queues")


def test_a_flows_heat_map_counts_where_its_instances_wait_and_failed(stack, browser, shot):
    for _ in range(2):
        instance_id = stack.client.start("approval", {"amount": 1}).instance_id
        stack.wait(instance_id, lambda v: any(t.state == "AWAITING" for t in v.tokens))
    browser.get(f"{stack.console_url}/flows/approval")
    state, counts = _drawn(browser, "approve")
    assert state == "AWAITING" and counts is not None
    assert int(counts.split(":")[1]) >= 2
    declined = sample("order-fulfilment", card="4000000000000002")
    _finished(stack, "order-fulfilment", declined)
    browser.get(f"{stack.console_url}/flows/order-fulfilment")
    assert "Validate, gate on stock" in _css(browser, "#description").text
    state, counts = _drawn(browser, "authorise")
    assert state == "FAILED"
    assert "A-1001" in _css(browser, "#start-input").get_attribute("value")  # the sample
    assert _css(browser, "#start-id").get_attribute("value") == ""
    shot(browser, "flow")


def test_the_step_history_of_a_document(stack, browser, shot):
    instance_id = _finished(stack, "document-pipeline", sample("document-pipeline"))
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    rows = browser.find_elements(By.CSS_SELECTOR, '#history tr[data-node="ocr_page"]')
    assert len(rows) == 4 and all(r.get_attribute("data-outcome") == "completed" for r in rows)
    browser.execute_script("document.getElementById('history').scrollIntoView()")
    shot(browser, "history")
