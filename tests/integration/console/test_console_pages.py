"""The console's pages over a real server (SQLite and PostgreSQL), through Starlette's test
client: what each page says, checked against what the server knows."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from starlette.testclient import TestClient

from wiggle.console import Backend, ConsoleSettings, create_app
from wiggle.engine import StepFailure
from wiggle.server import EmbeddedStack, embedded_stack
from wiggle.tracecontext import trace_id_for

GATE = """
wiggle: 1
name: gate
description: Prepare, wait for the go, book.
input:
  type: object
  properties: {amount: {type: number}}
steps:
  - task: prepare
    queue: nobody
    description: Gets the papers ready.
  - await: go
  - task: book
    queue: elsewhere
"""

CHARGE = """
wiggle: 1
name: charge
steps:
  - task: charge
"""


@pytest.fixture
def stack(database_url: str, tmp_path: Path) -> Iterator[tuple[EmbeddedStack, TestClient]]:
    flows = tmp_path / "flows"
    (flows / "samples").mkdir(parents=True)
    (flows / "gate.yaml").write_text(GATE)
    (flows / "samples" / "gate.json").write_text('{"amount": 42}')
    with embedded_stack(database_url) as st:
        st.client.deploy(GATE.encode())
        st.client.deploy(CHARGE.encode())
        backend = Backend(st.address)
        app = create_app(backend, ConsoleSettings(flows_dir=str(flows)))
        try:
            yield st, TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False)
        finally:
            backend.close()


def _fail(st: EmbeddedStack, message: str) -> str:
    iid = st.client.start("charge", {}).instance_id
    (task,) = st.engine.poll(["default"], "w1", 1)
    st.engine.fail(task.task_id, task.lease, StepFailure(message, non_retryable=True))
    return iid


def _rows(page: str) -> list[str]:
    return re.findall(r'<tr data-instance="([^"]+)"', page)


def test_the_short_version_the_list_shows_finds_the_instances(stack):
    """Filtering by the 12 hex digits the list shows used to find nothing."""
    st, console = stack
    iid = st.client.start("gate", {}).instance_id
    version = st.client.get_definition("gate").version
    short = version.removeprefix("sha256:")[:12]
    assert short in console.get("/instances").text
    page = console.get(f"/instances?version={short}")
    assert page.status_code == 200 and _rows(page.text) == [iid]
    unknown = console.get("/instances?version=beefbeef")
    assert unknown.status_code == 400
    assert "no registered version starts with &#39;beefbeef&#39;" in unknown.text


def test_bad_filters_answer_400_naming_them(stack):
    _st, console = stack
    bogus = console.get("/instances?status=BOGUS&since=notadate")
    assert bogus.status_code == 400
    assert "status &#39;BOGUS&#39; is not one of" in bogus.text
    assert "started since &#39;notadate&#39; is not a date" in bogus.text
    assert 'id="instances"' not in bogus.text  # no list that looks unfiltered


def test_pages_keep_their_size_forward_and_back_with_totals(stack):
    st, console = stack
    ids = []
    for _ in range(5):
        ids.append(st.client.start("gate", {}).instance_id)
        time.sleep(0.002)  # distinct creation instants: newest first is well defined
    newest = list(reversed(ids))
    first = console.get("/instances?page_size=2").text
    assert _rows(first) == newest[:2] and "1\u20132 of 5" in first
    link = re.search(r'href="/instances\?([^"]+)" id="next-page"', first)
    assert link is not None
    params = dict(parse_qsl(link.group(1).replace("&amp;", "&")))
    assert params["page_size"] == "2"
    second = console.get("/instances?" + link.group(1).replace("&amp;", "&")).text
    assert _rows(second) == newest[2:4] and "3\u20134 of 5" in second
    link = re.search(r'href="/instances\?([^"]+)" id="next-page"', second)
    assert link is not None
    third = console.get("/instances?" + link.group(1).replace("&amp;", "&")).text
    assert _rows(third) == newest[4:] and 'id="next-page"' not in third
    back = re.search(r'href="/instances\?([^"]+)" id="previous-page"', third)
    assert back is not None
    again = console.get("/instances?" + back.group(1).replace("&amp;", "&")).text
    assert _rows(again) == newest[2:4]
    oldest_first = console.get("/instances?page_size=5&sort=started&dir=asc").text
    assert _rows(oldest_first) == ids


def test_the_list_shows_why_and_where_an_instance_failed(stack):
    st, console = stack
    iid = _fail(st, "card declined")
    page = console.get("/instances").text
    row = page[page.index(f'<tr data-instance="{iid}"') :].split("</tr>", 1)[0]
    assert "step &#39;charge&#39; failed: card declined" in row
    assert "failed at <code>charge</code>" in row


def test_the_instance_page_moves_its_updated_time_and_drops_its_actions_when_it_ends(stack):
    st, console = stack
    iid = st.client.start("gate", {}).instance_id
    created = st.client.describe(iid).created_at_ms
    while int(time.time() * 1000) <= created + 1:
        time.sleep(0.001)
    (task,) = st.engine.poll(["nobody"], "w1", 1)
    st.engine.complete(task.task_id, task.lease, {"ready": True})
    live = console.get(f"/instances/{iid}", headers={"x-wiggle-fragment": "1"}).text
    newest = max(e.at_ms for e in st.client.describe(iid, events=True).events)
    updated = re.search(r'id="updated"><time [^>]*data-ms="(\d+)"', live)
    assert updated is not None and int(updated.group(1)) == newest > created
    assert 'id="actions"' in live and 'data-keep="RUNNING:go:prepare,go"' in live
    st.client.cancel(iid, "enough")
    ended = console.get(f"/instances/{iid}", headers={"x-wiggle-fragment": "1"}).text
    assert 'id="actions"' not in ended and "data-finished" in ended


def test_a_step_leased_when_the_instance_was_cancelled_is_drawn_cut_off(stack):
    """The history showed a step whose worker was fenced off by a cancel as still running."""
    st, console = stack
    iid = st.client.start("gate", {}).instance_id
    (_task,) = st.engine.poll(["nobody"], "w1", 1)
    st.client.cancel(iid, "enough")
    page = console.get(f"/instances/{iid}").text
    history = page[page.index('id="history"') :].split("</table>", 1)[0]
    row = history[history.index('<tr data-node="prepare"') :].split("</tr>", 1)[0]
    assert 'data-outcome="cut off"' in row and "(instance cancelled)" in row
    assert "running" not in row


def test_step_history_and_signal_payloads(stack):
    st, console = stack
    iid = st.client.start("gate", {}).instance_id
    st.client.signal(iid, "go", {"approved_by": "<ops>"})
    (task,) = st.engine.poll(["nobody"], "w1", 1)
    st.engine.complete(task.task_id, task.lease, {"ready": True})
    page = console.get(f"/instances/{iid}").text
    history = page[page.index('id="history"') :].split("</table>", 1)[0]
    assert '<tr data-node="prepare" data-attempt="1" data-outcome="completed"' in history
    assert "<code>w1</code>" in history
    assert '<tr data-node="book" data-attempt="1" data-outcome' not in history  # not leased yet
    timeline = page[page.index('id="timeline"') :]
    assert "&#34;approved_by&#34;: &#34;&lt;ops&gt;&#34;" in timeline or (
        "&quot;approved_by&quot;: &quot;&lt;ops&gt;&quot;" in timeline
    )


def test_incidents_group_failures_and_link_their_instances(stack):
    st, console = stack
    declined = [_fail(st, "card declined") for _ in range(2)]
    _fail(st, "bank offline")
    page = console.get("/incidents").text
    assert '<b id="failed-total">3</b>' in page
    first = page.index('data-count="2"')
    assert page.index('data-count="1"') > first
    group = page[first:].split("</tr>", 1)[0]
    assert "step &#39;charge&#39; failed: card declined" in group
    assert all(f'href="/instances/{i}"' in group for i in declined)
    assert console.get("/incidents?since=yesterday").status_code == 400


def test_queues_show_ready_work_no_worker_serves(stack):
    st, console = stack
    st.client.start("gate", {})
    st.client.start("charge", {})
    st.engine.note_worker(_note("w9", ("default",)))
    page = console.get("/queues").text
    nobody = page[page.index('<tr data-queue="nobody"') :].split("</tr>", 1)[0]
    assert 'class="unserved"' in nobody and "no worker polls this queue" in nobody
    default = page[page.index('<tr data-queue="default"') :].split("</tr>", 1)[0]
    assert "<code>w9</code>" in default and "unserved" not in default
    assert page.index('data-queue="nobody"') < page.index('data-queue="default"')


def test_the_flow_page_has_its_description_heat_map_and_a_prefilled_start_form(stack, tmp_path):
    st, console = stack
    flows_dir = tmp_path / "flows"
    for _ in range(2):
        st.client.start("gate", {})
    page = console.get("/flows/gate").text
    assert "Prepare, wait for the go, book." in page
    assert "Gets the papers ready." in page
    assert "<code>gate.yaml</code>" in page and str(flows_dir) not in page
    heat = page[page.index('id="heat"') :].split("</table>", 1)[0]
    assert '<tr data-node="prepare">' in heat and "READY 2" in heat
    assert re.search(r'data-node="prepare"[^>]*data-counts="READY:2"', page)
    form = page[page.index('id="start-form"') :].split("</form>", 1)[0]
    assert 'name="instance_id"' in form and "&#34;amount&#34;: 42" in form
    token = console.cookies["wiggle_csrf"]
    version = st.client.get_definition("gate").version
    started = console.post(
        "/flows/gate/start",
        data={"csrf": token, "version": version, "input": '{"amount": 7}', "instance_id": "g-1"},
    )
    assert started.status_code == 303
    assert urlsplit(started.headers["location"]).path == "/instances/g-1"
    assert st.client.describe("g-1").input == {"amount": 7}
    again = console.post(
        "/flows/gate/start",
        data={"csrf": token, "version": version, "input": '{"amount": 7}', "instance_id": "g-1"},
    )
    assert "notice=exists" in again.headers["location"]  # the same start: nothing new
    other = console.post(
        "/flows/gate/start",
        data={"csrf": token, "version": version, "input": "{}", "instance_id": "g-1"},
    )
    assert other.status_code == 400 and "started with another input" in other.text


def _note(worker_id: str, queues: tuple[str, ...]):
    from wiggle.engine import WorkerNote

    return WorkerNote(worker_id, queues, (), 4, "wiggle-test/1")


def test_the_instance_page_links_its_trace_to_the_trace_url(stack):
    """With `--trace-url`, an instance's trace id (its start's traceparent's, else the one
    derived from its id) is a link on its page; without one, no link."""
    st, console = stack
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    continued = st.client.start("charge", {}, traceparent=caller).instance_id
    derived = st.client.start("charge", {}, traceparent="").instance_id
    assert 'id="trace-link"' not in console.get(f"/instances/{continued}").text
    backend = Backend(st.address)
    try:
        settings = ConsoleSettings(trace_url="http://jaeger:16686/trace/{trace_id}")
        linked = TestClient(create_app(backend, settings), base_url="http://127.0.0.1:8080")
        for iid, trace_id in (
            (continued, "0af7651916cd43dd8448eb211c80319c"),
            (derived, trace_id_for(derived)),
        ):
            page = linked.get(f"/instances/{iid}")
            assert page.status_code == 200
            (href,) = re.findall(r'<a href="([^"]+)" id="trace-link"', page.text)
            assert href == f"http://jaeger:16686/trace/{trace_id}"
    finally:
        backend.close()


def test_the_page_a_refused_signal_answers_keeps_refreshing_from_the_instance(stack):
    """A refused signal answers with the instance's page at the form's POST address; its live part
    refreshed from that address (GET: 405), so the page said the server could not be reached and
    inserted that note above the forms while the user retyped the payload and sent it again."""
    st, console = stack
    iid = st.client.start("gate", {}).instance_id
    console.get(f"/instances/{iid}")
    token = console.cookies["wiggle_csrf"]
    refused = console.post(
        f"/instances/{iid}/signal", data={"csrf": token, "name": "go", "payload": "{oops"}
    )
    assert refused.status_code == 400 and "not valid JSON" in refused.text
    live_url = re.search(r'data-refresh="([^"]+)"', refused.text)
    assert live_url is not None
    live = console.get(unescape(live_url.group(1)), headers={"x-wiggle-fragment": "1"})
    assert live.status_code == 200 and 'id="signal-form"' in live.text
