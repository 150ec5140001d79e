"""Repair and migration through the console in Chromium, against a real server and worker:
retry of a failed instance once its fault is fixed, reset to a node picked on the graph, a bulk
retry by filter (the search box, the preview, the typed count, the batch's progress), and a
migration's plan review and apply. The screenshots of these pages are docs/console.md's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.browser.live import live_attrs, live_text

pytestmark = pytest.mark.timeout(180)

WAIT = 20  # seconds: a generous bound for a loaded two-core machine, not an expected time


def _wait(driver: Any) -> WebDriverWait:
    return WebDriverWait(driver, WAIT)


def _css(driver: Any, selector: str) -> Any:
    return driver.find_element(By.CSS_SELECTOR, selector)


def _failed(stack: Any, broken: set[str], key: str) -> str:
    """A flaky instance that failed while its key was broken."""
    broken.add(key)
    instance_id = stack.client.start("flaky", {"key": key}).instance_id
    stack.wait(instance_id, lambda v: v.status == "FAILED")
    return instance_id


def _click_node(driver: Any, node_id: str) -> None:
    """A click on the node's label in the drawn graph (the live part may be swapped between
    finding it and clicking it: then find it again)."""
    for _ in range(20):
        try:
            _css(driver, f'svg.flow-graph g.node[data-node="{node_id}"] text').click()
            return
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"could not click node {node_id}")


def _picked(driver: Any) -> list[str]:
    # Read in one script: the live part may be swapped between finding the nodes and reading
    # their attributes (a stale element).
    picked: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll('svg.flow-graph g.node.picked'))"
        ".map(g => g.getAttribute('data-node'))"
    )
    return picked


def _confirmed_batch_done(driver: Any, button: str, count: str) -> str:
    """Types `count` to confirm, presses `button`, follows the batch's page until it ends;
    how many instances it did."""
    _css(driver, "#confirm-count").send_keys(count)
    _css(driver, button).click()
    _wait(driver).until(ec.url_contains("/batches/"))
    _wait(driver).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, "#batch-live [data-finished]"))
    )
    return str(_css(driver, "#progress").get_attribute("data-done"))


def _kinds(stack: Any, instance_id: str) -> list[str]:
    return [e.kind for e in stack.client.describe(instance_id, events=True).events]


def test_retry_from_the_page_resumes_a_failed_instance_once_its_fault_is_fixed(
    stack, browser, broken
):
    instance_id = _failed(stack, broken, "retry-1")
    broken.discard("retry-1")  # the fix
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    assert _css(browser, "#status").text == "FAILED"
    _css(browser, "#retry-form button[type=submit]").click()
    confirm = _wait(browser).until(ec.presence_of_element_located((By.ID, "confirm")))
    assert "the store of retry-1 is down" in confirm.text
    assert stack.client.describe(instance_id).status == "FAILED"  # not before the confirmation
    _css(browser, "#confirm-button").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "notice"), "retried"))
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "status"), "COMPLETED"))
    kinds = _kinds(stack, instance_id)
    assert kinds.count("instance_retried") == 1 and kinds.count("step_failed") == 1
    assert '"stored": true' in _css(browser, "#context").text


def test_reset_to_a_node_picked_on_the_graph(stack, browser, shot):
    instance_id = stack.client.start("approval", {"amount": 70}).instance_id
    stack.wait(instance_id, lambda v: any(t.state == "AWAITING" for t in v.tokens))
    browser.get(f"{stack.console_url}/instances/{instance_id}")

    # A node it has not reached is not offered: the page says why, nothing is picked.
    _click_node(browser, "settle")
    _wait(browser).until(
        ec.text_to_be_present_in_element((By.ID, "reset-pick-note"), "has not reached it")
    )
    assert Select(_css(browser, "#reset-node")).first_selected_option.get_attribute("value") == ""

    _click_node(browser, "prepare")
    select = Select(_css(browser, "#reset-node"))
    assert select.first_selected_option.get_attribute("value") == "prepare"
    assert _picked(browser) == ["prepare"]
    # The pick survives the live part's refresh (the graph is redrawn under it).
    refreshed = _css(browser, "#instance-live").get_attribute("data-refreshed")
    _wait(browser).until(
        lambda d: _css(d, "#instance-live").get_attribute("data-refreshed") != refreshed
    )
    assert _picked(browser) == ["prepare"]
    shot(browser, "instance-reset")

    _css(browser, "#reset-form button[type=submit]").click()
    shown = _wait(browser).until(ec.presence_of_element_located((By.ID, "reset-input")))
    assert '"amount": 70' in shown.text and "prepared" not in shown.text
    _css(browser, "#confirm-button").click()
    _wait(browser).until(ec.text_to_be_present_in_element((By.ID, "notice"), "reset"))
    assert "instance_reset" in _kinds(stack, instance_id)
    # prepare ran again and the instance waits at the await once more.
    view = stack.wait(
        instance_id,
        lambda v: (
            any(t.state == "AWAITING" for t in v.tokens)
            and _kinds(stack, instance_id).count("step_completed") == 2
        ),
    )
    assert view.status == "RUNNING"
    _wait(browser).until(
        ec.text_to_be_present_in_element((By.CSS_SELECTOR, "#timeline"), "instance_reset")
    )


def test_a_bulk_retry_by_filter_previews_asks_for_the_count_and_shows_its_progress(
    stack, browser, shot, broken
):
    keys = [f"bulk-{n}" for n in range(3)]
    failed = {_failed(stack, broken, key) for key in keys}
    _failed(stack, broken, "other-1")  # failed too, but not matched by the search
    broken.difference_update(keys)  # the fix (other-1 stays broken)
    browser.get(f"{stack.console_url}/instances?flow=flaky&status=FAILED")
    search = _css(browser, "#where")
    search.send_keys("key~bulk-")
    _css(browser, "#filters button[type=submit]").click()
    _wait(browser).until(ec.url_contains("where="))
    rows = {
        r for (r,) in live_attrs(browser, "#instances tbody tr[data-instance]", "data-instance")
    }
    assert rows == failed
    assert "key=bulk-" in live_text(browser, "#instances")  # the search values, per row
    shot(browser, "instances-search")

    _css(browser, "#bulk summary").click()
    Select(_css(browser, "#bulk-action")).select_by_value("retry")
    _css(browser, "#bulk-form button[type=submit]").click()
    matched = _wait(browser).until(ec.presence_of_element_located((By.ID, "matched")))
    assert matched.text == "3"
    listed = {a.text for a in browser.find_elements(By.CSS_SELECTOR, "#first-ids a")}
    assert listed == failed
    shot(browser, "bulk-preview")

    # A wrong count starts nothing.
    _css(browser, "#confirm-count").send_keys("30")
    _css(browser, "#bulk-go").click()
    problem = _wait(browser).until(ec.presence_of_element_located((By.ID, "bulk-problems")))
    assert "type 3" in problem.text
    assert all(stack.client.describe(i).status == "FAILED" for i in failed)
    assert _confirmed_batch_done(browser, "#bulk-go", "3") == "3"
    for instance_id in failed:
        stack.wait(instance_id, lambda v: v.status == "COMPLETED")
    shot(browser, "batch")
    browser.get(f"{stack.console_url}/batches")
    assert "retry" in _css(browser, "#batches").text
    shot(browser, "batches")


def test_a_migration_plan_is_reviewed_then_applied_and_the_instances_finish_on_v2(
    stack, browser, shot, approval_v2
):
    old = stack.client.get_definition("approval").version
    ids = [f"mig-{n}-{time.monotonic_ns()}" for n in range(2)]
    for instance_id in ids:
        stack.client.start("approval", {"amount": 5}, instance_id=instance_id)
        stack.wait(instance_id, lambda v: any(t.state == "AWAITING" for t in v.tokens))
    stack.client.deploy(approval_v2.encode(), filename="approval.yaml")
    new = stack.client.get_definition("approval").version
    assert new != old

    browser.get(f"{stack.console_url}/migrations")
    Select(_css(browser, "#migrate-flow")).select_by_value("approval")
    _css(browser, "#flow-form button[type=submit]").click()
    _wait(browser).until(ec.presence_of_element_located((By.ID, "plan-form")))
    _css(browser, "#plan-where").send_keys("id~mig-")
    shot(browser, "migrations")
    _css(browser, "#plan-button").click()
    _wait(browser).until(ec.url_contains("/migrations/plans/"))
    assert _css(browser, "#count-migrate").text == "2"
    assert _css(browser, "#count-blocked").text == "0"
    added = _css(browser, 'svg.flow-graph g.node[data-node="audit"]')
    assert added.get_attribute("data-state") == "ADDED"
    assert _css(browser, '#diff-nodes tr[data-node="audit"]').get_attribute("data-change") == (
        "added"
    )
    moving = {
        r.get_attribute("data-instance")
        for r in browser.find_elements(By.CSS_SELECTOR, "#moving tr[data-instance]")
    }
    assert moving == set(ids)
    shot(browser, "migration-plan")

    assert _confirmed_batch_done(browser, "#apply-button", "2") == "2"
    assert _css(browser, "#rollback-form")  # a migration offers its rollback
    for instance_id in ids:
        assert stack.client.describe(instance_id).version == new
        stack.client.signal(instance_id, "approve", {"by": "ops"})
        view = stack.wait(instance_id, lambda v: v.status == "COMPLETED")
        assert view.context["audited"] is True  # v2's step ran


def test_a_node_inside_a_parallel_block_is_not_offered_and_the_page_names_the_block(stack, browser):
    """A declined order failed at `authorise`, inside the payment branch: the picker offers the
    block, not the step, and a click on the step says which block to reset to."""
    path = Path(__file__).resolve().parents[2] / "definitions" / "samples"
    declined = {
        **orjson.loads((path / "order-fulfilment.json").read_bytes()),
        "card": "4000000000000002",
    }
    instance_id = stack.client.start("order-fulfilment", declined).instance_id
    stack.wait(instance_id, lambda v: v.status == "FAILED", timeout=60)
    browser.get(f"{stack.console_url}/instances/{instance_id}")
    offered = [o.get_attribute("value") for o in Select(_css(browser, "#reset-node")).options]
    assert "validate" in offered and "parallel-1" in offered and "authorise" not in offered
    _click_node(browser, "authorise")
    _wait(browser).until(
        ec.text_to_be_present_in_element(
            (By.ID, "reset-pick-note"), "inside parallel block parallel-1: reset to parallel-1"
        )
    )
    assert _picked(browser) == []
    _click_node(browser, "parallel-1")
    assert Select(_css(browser, "#reset-node")).first_selected_option.get_attribute("value") == (
        "parallel-1"
    )
    assert _picked(browser) == ["parallel-1"]
