"""The console's repair pages over a real server (SQLite and PostgreSQL): retry and reset on the
instance page (a node picker that offers only what the engine accepts), the step inputs in the
step history, the search box and search values, bulk actions (preview, typed confirmation, the
batch's progress, pause / resume / cancel) and migrations (plan review, apply a canary,
rollback). Every refusal is a message on the page, never a traceback."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from html import unescape
from urllib.parse import urlsplit

import pytest
from starlette.testclient import TestClient

from wiggle.client import Batch
from wiggle.console import Backend, ConsoleSettings, create_app
from wiggle.engine import StepFailure
from wiggle.server import EmbeddedStack, embedded_stack

FAN = """
wiggle: 1
name: fan
search:
  order: /order_id
  total: {pointer: /total, type: number}
steps:
  - task: a
  - parallel:
      x:
        - task: b
      y:
        - task: c
    combine: m
  - task: d
"""

CHARGE = """
wiggle: 1
name: charge
steps:
  - task: charge
"""

GATE_V1 = """
wiggle: 1
name: gate
steps:
  - task: prepare
    queue: nobody
  - await: go
  - task: book
    queue: elsewhere
"""

# v2: `prepare` is gone (a token there is blocked), `audit` follows `book`.
GATE_V2 = """
wiggle: 1
name: gate
steps:
  - await: go
  - task: book
    queue: elsewhere
  - task: audit
    queue: elsewhere
"""


@pytest.fixture
def stack(database_url: str) -> Iterator[tuple[EmbeddedStack, TestClient]]:
    with embedded_stack(database_url) as st:
        for flow in (FAN, CHARGE, GATE_V1):
            st.client.deploy(flow.encode())
        backend = Backend(st.address)
        app = create_app(backend, ConsoleSettings())
        try:
            client = TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False)
            client.get("/instances")  # the CSRF cookie
            yield st, client
        finally:
            backend.close()


def _csrf(console: TestClient) -> str:
    return str(console.cookies["wiggle_csrf"])


def _fail(st: EmbeddedStack, message: str = "card declined") -> str:
    iid = st.client.start("charge", {}).instance_id
    (task,) = st.engine.poll(["default"], "w1", 1)
    st.engine.fail(task.task_id, task.lease, StepFailure(message, non_retryable=True))
    return iid


def _run(st: EmbeddedStack, node: str, queue: str = "default") -> None:
    (task,) = st.engine.poll([queue], "w1", 1)
    assert task.node_id == node
    st.engine.complete(task.task_id, task.lease, {**(task.input or {}), node: True})


def _finished(st: EmbeddedStack, batch_id: str) -> Batch:
    deadline = time.monotonic() + 30
    while True:
        b = st.client.get_batch(batch_id)
        if b.state not in ("RUNNING", "PAUSED"):
            return b
        assert time.monotonic() < deadline, f"batch {batch_id} stuck: {b}"
        time.sleep(0.05)


def _section(page: str, marker: str, end: str) -> str:
    return page[page.index(marker) :].split(end, 1)[0]


def test_retry_from_the_instance_page_asks_then_runs_the_failed_step_again(stack):
    st, console = stack
    iid = _fail(st)
    page = console.get(f"/instances/{iid}").text
    assert 'id="retry-form"' in page and 'id="signal-form"' not in page
    asked = console.post(f"/instances/{iid}/retry", data={"csrf": _csrf(console)})
    assert asked.status_code == 200 and 'id="confirm"' in asked.text
    assert "card declined" in asked.text
    assert st.client.describe(iid).status == "FAILED"  # not before the confirmation
    done = console.post(f"/instances/{iid}/retry", data={"csrf": _csrf(console), "confirm": "yes"})
    assert done.status_code == 303 and done.headers["location"].endswith("?notice=retried")
    assert st.client.describe(iid).status == "RUNNING"
    (task,) = st.engine.poll(["default"], "w1", 1)
    assert task.node_id == "charge" and task.attempt == 1

    # Retrying it again (it runs) is refused by the server: a message on the page.
    again = console.post(f"/instances/{iid}/retry", data={"csrf": _csrf(console), "confirm": "yes"})
    assert again.status_code == 409
    error = re.search(r'<p class="problem" id="action-error"[^>]*>([^<]*)</p>', again.text)
    assert error is not None and "Retry refused" in error.group(1) and "RUNNING" in error.group(1)
    assert "Traceback" not in again.text
    # Without the CSRF token nothing happens.
    assert console.post(f"/instances/{iid}/retry", data={"confirm": "yes"}).status_code == 403


def test_reset_offers_the_top_level_nodes_passed_and_says_why_not_the_others(stack):
    st, console = stack
    iid = st.client.start("fan", {"order_id": "A-1", "total": 10}).instance_id
    _run(st, "a")
    _run(st, "b")  # one branch done; c still READY
    page = console.get(f"/instances/{iid}").text
    picker = _section(page, 'id="reset-node"', "</select>")
    offered = re.findall(r'<option value="([^"]+)"', picker)
    assert offered == ["a", "parallel-1"]  # in the order they were entered
    why = dict(re.findall(r'<span data-node="([^"]+)">([^<]*)</span>', page))
    assert "inside parallel block parallel-1" in why["b"]
    assert "has not reached it" in why["d"]

    # A node the picker did not offer (a form sent by hand) is refused with the reason.
    inside = console.post(f"/instances/{iid}/reset", data={"csrf": _csrf(console), "node": "b"})
    assert inside.status_code == 409
    assert "Cannot reset to b: inside parallel block parallel-1" in unescape(inside.text)
    # ... and had the page let it through, the engine's own refusal is shown the same way.
    sent = console.post(
        f"/instances/{iid}/reset", data={"csrf": _csrf(console), "node": "b", "confirm": "yes"}
    )
    assert sent.status_code == 409 and "Reset refused" in sent.text and "Traceback" not in sent.text

    asked = console.post(f"/instances/{iid}/reset", data={"csrf": _csrf(console), "node": "a"})
    assert asked.status_code == 200 and 'id="reset-input"' in asked.text
    assert "A-1" in _section(asked.text, 'id="reset-input"', "</pre>")
    done = console.post(
        f"/instances/{iid}/reset", data={"csrf": _csrf(console), "node": "a", "confirm": "yes"}
    )
    assert done.status_code == 303 and done.headers["location"].endswith("?notice=reset")
    view = st.client.describe(iid)
    assert [t.node_id for t in view.tokens if t.state != "DONE"] == ["a"]
    assert any(e.kind == "instance_reset" for e in st.client.describe(iid, events=True).events)


def test_a_cancelled_instance_offers_no_reset(stack):
    st, console = stack
    iid = st.client.start("fan", {}).instance_id
    _run(st, "a")
    st.client.cancel(iid, "enough")
    page = console.get(f"/instances/{iid}").text
    assert 'id="reset-form"' not in page and 'id="retry-form"' not in page


def test_the_step_history_shows_the_input_each_step_got_last(stack):
    st, console = stack
    iid = st.client.start("fan", {"order_id": "A-7", "total": 1}).instance_id
    _run(st, "a")
    page = console.get(f"/instances/{iid}").text
    got = _section(page, '<details class="last-input" data-node="a">', "</details>")
    assert "the input this step got last" in got and "A-7" in got
    assert '"a": true' not in unescape(got)  # its input, not what it returned


def test_the_search_box_takes_the_filter_language_and_the_list_shows_search_values(stack):
    st, console = stack
    small = st.client.start("fan", {"order_id": "A-1", "total": 10}).instance_id
    big = st.client.start("fan", {"order_id": "A-2", "total": 9000}).instance_id
    other = st.client.start("charge", {}).instance_id
    page = console.get("/instances", params={"where": "total>5000"}).text
    assert re.findall(r'<tr data-instance="([^"]+)"', page) == [big]
    row = _section(page, f'<tr data-instance="{big}"', "</tr>")
    assert 'data-name="order">order=<b>A-2</b>' in row and "total=<b>9000</b>" in row
    both = console.get("/instances", params={"where": "flow=fan order=A-1 status=RUNNING"}).text
    assert re.findall(r'<tr data-instance="([^"]+)"', both) == [small]
    assert other not in both
    # The box shows the search again; a condition the server cannot use is a 400 naming it.
    assert 'value="flow=fan order=A-1 status=RUNNING"' in both
    bad = console.get("/instances", params={"where": "colour=blue"})
    assert bad.status_code == 400 and "colour" in unescape(bad.text)
    assert 'id="instances"' not in bad.text
    quote = console.get("/instances", params={"where": 'reason~"unclosed'})
    assert quote.status_code == 400 and "not closed" in quote.text
    detail = console.get(f"/instances/{big}").text
    assert 'id="search"' in detail and "order=<b>A-2</b>" in detail


def test_a_bulk_retry_previews_asks_for_the_number_then_runs_as_a_batch(stack):
    st, console = stack
    failed = [_fail(st) for _ in range(3)]
    st.client.start("gate", {})  # running, of another flow: not matched
    listed = console.get("/instances", params={"flow": "charge", "status": "FAILED"}).text
    bulk = _section(listed, 'id="bulk-form"', "</form>")
    assert re.findall(r'name="where" value="([^"]+)"', bulk) == ["flow=charge", "status=FAILED"]
    timed = console.get("/instances", params={"flow": "charge", "since": "2020-01-01T00:00"}).text
    assert 'id="bulk-problem"' in timed and 'id="bulk-form"' not in timed

    where = [("where", "flow=charge"), ("where", "status=FAILED")]
    preview = console.get("/bulk", params=[("action", "retry"), *where])
    assert preview.status_code == 200
    assert '<b id="matched">3</b>' in preview.text
    assert re.search(r'data-status="FAILED">FAILED <b>3</b>', preview.text)
    assert set(re.findall(r'<li><a href="/instances/([^"]+)"', preview.text)) == set(failed)
    assert all(st.client.describe(i).status == "FAILED" for i in failed)  # nothing changed

    form = {"csrf": _csrf(console), "action": "retry", "where": ["flow=charge", "status=FAILED"]}
    wrong = console.post("/bulk/start", data={**form, "matched": "3", "confirm_count": "30"})
    assert wrong.status_code == 400 and "type 3" in wrong.text
    _fail(st)  # a fourth fails meanwhile: the number confirmed is no longer the number matched
    moved = console.post("/bulk/start", data={**form, "matched": "3", "confirm_count": "3"})
    assert moved.status_code == 409 and "now matches 4 instances, not the 3" in moved.text
    started = console.post("/bulk/start", data={**form, "matched": "4", "confirm_count": "4"})
    assert started.status_code == 303
    batch_path = urlsplit(started.headers["location"]).path
    batch_id = batch_path.rsplit("/", 1)[1]
    finished = _finished(st, batch_id)
    assert (finished.done, finished.action) == (4, "retry")
    page = console.get(batch_path).text
    assert 'data-done="4"' in page and "data-finished" in page
    assert f'data-batch="{batch_id}"' in console.get("/batches").text
    assert all(st.client.describe(i).status == "RUNNING" for i in failed)


def test_bulk_refusals_are_messages(stack):
    _st, console = stack
    nothing = console.get("/bulk", params=[("action", "cancel"), ("where", "flow=nobody")])
    assert nothing.status_code == 200 and 'id="nothing"' in nothing.text
    unknown = console.get("/bulk", params=[("action", "retry"), ("where", "colour=blue")])
    assert unknown.status_code == 400 and "colour" in unescape(unknown.text)
    no_node = console.get("/bulk", params=[("action", "reset"), ("where", "flow=fan")])
    assert no_node.status_code == 400 and "needs the node" in no_node.text
    bad_json = console.get(
        "/bulk", params=[("action", "signal"), ("signal", "go"), ("payload", "{x"), ("where", "a")]
    )
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.text
    empty = console.get("/bulk", params=[("action", "retry")])
    assert empty.status_code == 400 and "give the filter" in empty.text


def test_a_bulk_reset_over_one_flow_offers_its_nodes_and_refuses_the_others(stack):
    """The node of a bulk reset was typed, and a node the flow does not have (or one inside a
    parallel block) was only found out instance by instance, as each item of the batch failed.
    With one flow in the filter the form lists the nodes a reset may name and refuses others
    before anything is previewed or started."""
    st, console = stack
    iid = st.client.start("fan", {"order_id": "A-1"}).instance_id
    _run(st, "a")
    listed = console.get("/instances", params={"flow": "fan"}).text
    form = _section(listed, 'id="bulk-form"', "</form>")
    offered = re.findall(r'<option value="([^"]+)"', _section(form, 'id="bulk-node"', "</select>"))
    graph = st.client.get_definition("fan").graph
    top_level = [n for n, node in graph["nodes"].items() if node["kind"] != "end"]
    assert offered and set(offered) <= set(top_level)
    assert {"a", "d"} <= set(offered) and not {"b", "c"} & set(offered)
    other = console.get("/instances", params={"status": "RUNNING"}).text  # no flow: typed
    assert '<input name="node" id="bulk-node"' in _section(other, 'id="bulk-form"', "</form>")

    where = [("where", "flow=fan")]
    inside = console.get("/bulk", params=[("action", "reset"), ("node", "b"), *where])
    assert inside.status_code == 400 and "inside parallel block" in unescape(inside.text)
    missing = console.get("/bulk", params=[("action", "reset"), ("node", "zz"), *where])
    assert missing.status_code == 400 and "flow fan has no node 'zz'" in unescape(missing.text)
    fine = console.get("/bulk", params=[("action", "reset"), ("node", "a"), *where])
    assert fine.status_code == 200 and '<b id="matched">1</b>' in fine.text
    data = {"csrf": _csrf(console), "action": "reset", "node": "b", "where": ["flow=fan"]}
    refused = console.post("/bulk/start", data={**data, "matched": "1", "confirm_count": "1"})
    assert refused.status_code == 400 and "inside parallel block" in unescape(refused.text)
    assert st.client.list_batches(action="reset") == []
    assert st.client.describe(iid).status == "RUNNING"


def test_a_batch_pauses_resumes_and_cancels_from_its_page(stack):
    st, console = stack
    for _ in range(3):
        _fail(st)
    batch = st.client.start_bulk("retry", ["flow=charge"], rate_per_s=0.01)
    path = f"/batches/{batch.batch_id}"
    assert 'class="batch-pause"' in console.get(path).text
    paused = console.post(f"{path}/pause", data={"csrf": _csrf(console)})
    assert paused.status_code == 303 and st.client.get_batch(batch.batch_id).state == "PAUSED"
    assert 'class="batch-resume"' in console.get(path).text
    console.post(f"{path}/resume", data={"csrf": _csrf(console)})
    assert st.client.get_batch(batch.batch_id).state == "RUNNING"
    console.post(f"{path}/cancel", data={"csrf": _csrf(console)})
    assert st.client.get_batch(batch.batch_id).state == "CANCELLED"
    page = console.get(path).text
    assert "data-finished" in page and 'class="batch-pause"' not in page
    assert console.get("/batches/nope").status_code == 404


def test_incidents_link_a_bulk_retry_of_their_group(stack):
    st, console = stack
    for _ in range(2):
        _fail(st, "card declined")
    _fail(st, "bank offline")
    page = console.get("/incidents").text
    group = _section(page, 'data-count="2"', "</tr>")
    link = re.search(r'class="retry-all" href="([^"]+)"', group)
    assert link is not None
    preview = console.get(unescape(link.group(1)))
    assert preview.status_code == 200 and '<b id="matched">2</b>' in preview.text


def test_a_migration_is_planned_reviewed_applied_as_a_canary_and_rolled_back(stack):
    st, console = stack
    waiting = []
    for _ in range(2):
        iid = st.client.start("gate", {}).instance_id
        _run(st, "prepare", "nobody")
        waiting.append(iid)
    stuck = st.client.start("gate", {}).instance_id  # stays at prepare: removed in v2
    v1 = st.client.get_definition("gate").version
    st.client.deploy(GATE_V2.encode())
    v2 = st.client.get_definition("gate").version
    assert v2 != v1

    form = console.get("/migrations", params={"flow": "gate"}).text
    assert f'name="from" value="{v1}" checked' in form
    assert f'name="to" value="{v2}" checked' in form
    bad = console.post(
        "/migrations/plan",
        data={"csrf": _csrf(console), "flow": "gate", "to": v2, "map": "prepare=nowhere"},
    )
    assert bad.status_code == 400 and "nowhere" in unescape(bad.text)
    made = console.post(
        "/migrations/plan", data={"csrf": _csrf(console), "flow": "gate", "to": v2, "from": v1}
    )
    assert made.status_code == 303
    review_path = made.headers["location"]
    review = console.get(review_path).text
    assert '<b id="count-migrate">2</b>' in review and '<b id="count-blocked">1</b>' in review
    assert 'data-rule="removed-node"' in review
    blocked = _section(review, f'<tr data-instance="{stuck}"', "</tr>")
    assert "<code>prepare</code>" in blocked
    assert '<tr data-node="audit" data-change="added">' in review
    assert '<tr data-node="prepare" data-change="removed">' in review
    assert re.search(r'data-node="audit"[^>]*data-state="ADDED"', review)
    assert f"compared with {v1[:19]} · removed: prepare" in review  # the picture's caption

    apply_path = review_path + "/apply"
    wrong = console.post(
        apply_path,
        data={"csrf": _csrf(console), "scope": "canary", "limit": "1", "confirm_count": "2"},
    )
    assert wrong.status_code == 400 and "type 1" in wrong.text
    assert all(st.client.describe(i).version == v1 for i in waiting)
    canary = console.post(
        apply_path,
        data={"csrf": _csrf(console), "scope": "canary", "limit": "1", "confirm_count": "1"},
    )
    assert canary.status_code == 303
    batch_id = canary.headers["location"].split("/batches/", 1)[1].split("?", 1)[0]
    assert _finished(st, batch_id).done == 1
    assert sorted(st.client.describe(i).version for i in waiting) == sorted([v1, v2])
    page = console.get(f"/batches/{batch_id}").text
    assert 'id="rollback-form"' in page

    asked = console.post(f"/migrations/batches/{batch_id}/rollback", data={"csrf": _csrf(console)})
    assert asked.status_code == 200 and 'id="confirm"' in asked.text
    rolled = console.post(
        f"/migrations/batches/{batch_id}/rollback",
        data={"csrf": _csrf(console), "confirm": "yes"},
    )
    assert rolled.status_code == 303
    back_id = rolled.headers["location"].split("/batches/", 1)[1].split("?", 1)[0]
    assert _finished(st, back_id).action == "rollback"
    assert all(st.client.describe(i).version == v1 for i in waiting)
    assert f'data-batch="{back_id}"' in console.get("/migrations").text
    gone = console.get("/migrations/plans/0123456789ab")
    assert gone.status_code == 404 and "make the plan again" in gone.text


CREDENTIALS = """
[[credential]]
name = "root"
scopes = ["admin"]
token_sha256 = "{admin}"

[[credential]]
name = "frontend"
scopes = ["client"]
token_sha256 = "{client}"
"""


def test_a_console_whose_credential_may_not_repair_says_so(database_url, tmp_path):
    """The console runs with the client-scope token: every repair is refused by the server, and
    each page says so (PERMISSION_DENIED), never a traceback."""
    from wiggle.server._credentials import token_digest

    path = tmp_path / "credentials.toml"
    path.write_text(
        CREDENTIALS.format(admin=token_digest("t-admin"), client=token_digest("t-client"))
    )
    with embedded_stack(database_url, token="t-admin", credentials=path) as st:
        st.client.deploy(CHARGE.encode())
        iid = _fail(st)
        backend = Backend(st.address, token="t-client")
        try:
            console = TestClient(
                create_app(backend, ConsoleSettings()),
                base_url="http://127.0.0.1:8080",
                follow_redirects=False,
            )
            assert 'id="retry-form"' in console.get(f"/instances/{iid}").text  # it may read
            refused = console.post(
                f"/instances/{iid}/retry", data={"csrf": _csrf(console), "confirm": "yes"}
            )
            assert refused.status_code == 409 and "Retry refused" in refused.text
            error = re.search(r'id="action-error"[^>]*>([^<]*)<', refused.text)
            assert error is not None and "Traceback" not in refused.text
            assert "credential &#39;frontend&#39; (client) may not" in error.group(1)
            preview = console.get("/bulk", params=[("action", "retry"), ("where", "flow=charge")])
            assert preview.status_code == 400 and "(client) may not" in preview.text
            batches = console.get("/batches")
            assert batches.status_code == 403 and 'id="error"' in batches.text
            assert st.client.describe(iid).status == "FAILED"
        finally:
            backend.close()
