"""The console's schedule pages through Starlette's test client over a fake backend (no
server): the list, one schedule (timetable, next times in its zone, recent fires), pause with a
note, unpause, trigger and its result, a backfill previewed then started, the instance page's
"started by schedule", escaping, CSRF, a credential without the admin scope and an unknown
schedule; and their pure parts (instants typed, the timetable's rows, the id's shape)."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

import pytest
from starlette.testclient import TestClient

from wiggle.client import (
    BackfillPreview,
    Batch,
    Definition,
    Instance,
    InstanceStatus,
    ScheduleFire,
    ScheduleInfo,
)
from wiggle.compiler import load_flow
from wiggle.console import create_app
from wiggle.console._schedules import (
    backfill_request,
    parse_instant,
    schedule_of,
    shown_times,
    timetable,
)
from wiggle.errors import InvalidRequest, PermissionDenied, ScheduleNotFound

HOSTILE = "<script>alert(1)</script>"

#: 2026-10-19T00:30:00Z, 02:30 in Berlin (summer time, +02:00).
NIGHT = 1792369800000
HOUR = 3_600_000
DAY = 24 * HOUR

DOCUMENT = {
    "schedule": "nightly-batch",
    "description": f"Settle every account {HOSTILE}",
    "flow": "nightly-batch",
    "time_zone": "Europe/Berlin",
    "cron": "30 2 * * *",
    "dst": {"skipped": "after", "repeated": "first"},
    "overlap": "skip",
    "catch_up": {"missed": "latest", "window": "12h"},
    "input": {"accounts": ["ACC-1"]},
}


def _fire(nominal: int, outcome: str = "STARTED", **more: Any) -> ScheduleFire:
    values: dict[str, Any] = {
        "nominal_ms": nominal,
        "until_ms": nominal,
        "count": 1,
        "due_ms": nominal,
        "outcome": outcome,
        "reason": "",
        "instance_id": None,
        "triggered": False,
        "decided_at_ms": nominal + 5,
    }
    values.update(more)
    return ScheduleFire(**values)


RECENT = [
    _fire(
        NIGHT + DAY,
        "SKIPPED",
        reason=f"overlap: nightly-batch-20261019T003000Z is still running {HOSTILE}",
    ),
    _fire(NIGHT, instance_id="nightly-batch-20261019T003000Z"),
    _fire(
        NIGHT - 3 * DAY,
        "SKIPPED",
        until_ms=NIGHT - DAY,
        count=3,
        reason="skipped while paused",
    ),
    _fire(NIGHT - 4 * DAY + 7, instance_id="nightly-batch-20261015T003007Z", triggered=True),
]


def _schedule(name: str = "nightly-batch", **more: Any) -> ScheduleInfo:
    values: dict[str, Any] = {
        "name": name,
        "flow": "nightly-batch",
        "document": {**DOCUMENT, "schedule": name},
        "digest": "sha256:" + "c" * 64,
        "paused": False,
        "note": "",
        "time_zone": "Europe/Berlin",
        "next_due_ms": NIGHT + 2 * DAY,
        "running_instance_id": "nightly-batch-20261019T003000Z",
        "buffered": 0,
        "fired": 7,
        "skipped": 4,
        "created_at_ms": NIGHT - 10 * DAY,
        "updated_at_ms": NIGHT - 10 * DAY,
        # The next ten nights at 02:30 in Berlin: summer time ends on the 25th (after 02:30).
        "upcoming": [
            f"2026-10-{day}T02:30:00+0{2 if day <= 25 else 1}:00" for day in range(21, 31)
        ],
        "recent": list(RECENT),
    }
    values.update(more)
    return ScheduleInfo(**values)


def _batch(batch_id: str = "b-1") -> Batch:
    params = {"schedule": "nightly-batch", "overlap": "allow_all", "from_ms": 1, "to_ms": 2}
    return Batch(
        batch_id, "backfill", params, ["schedule=nightly-batch"], "console", "RUNNING", 50.0,
        3, 0, 0, 0, 1, 1, 0,
    )  # fmt: skip


class FakeBackend:
    """Two schedules (one paused, with a hostile note); records every action."""

    def __init__(self) -> None:
        self.actions: list[tuple[Any, ...]] = []
        self.schedules = {
            "nightly-batch": _schedule(),
            "hourly": _schedule(
                "hourly",
                paused=True,
                note=f"ledger migration {HOSTILE}",
                next_due_ms=None,
                running_instance_id=None,
                upcoming=[],
                recent=[],
                time_zone="America/New_York",
            ),
        }
        self.backfill_times = [NIGHT - 2 * DAY, NIGHT - DAY]
        self.trigger_fire = _fire(
            NIGHT + 99_000, instance_id="nightly-batch-20261019T003139Z", triggered=True
        )

    def list_schedules(self) -> list[ScheduleInfo]:
        return list(self.schedules.values())

    def describe_schedule(self, name: str, upcoming: int = 10, recent: int = 20) -> ScheduleInfo:
        if name not in self.schedules:
            raise ScheduleNotFound(name)
        return self.schedules[name]

    def pause_schedule(self, name: str, note: str) -> ScheduleInfo:
        self.describe_schedule(name)
        self.actions.append(("pause", name, note))
        return self.schedules[name]

    def unpause_schedule(self, name: str) -> ScheduleInfo:
        self.describe_schedule(name)
        self.actions.append(("unpause", name))
        return self.schedules[name]

    def trigger_schedule(self, name: str) -> ScheduleFire:
        found = self.describe_schedule(name)
        self.actions.append(("trigger", name))
        self.schedules[name] = _schedule(name, recent=[self.trigger_fire, *found.recent])
        return self.trigger_fire

    def preview_backfill(self, name: str, from_ms: int, to_ms: int) -> BackfillPreview:
        self.describe_schedule(name)
        if to_ms > NIGHT + 10 * DAY:
            raise InvalidRequest("the backfill's end is in the future; the timetable fires those")
        return BackfillPreview(name, list(self.backfill_times), 2, "Europe/Berlin")

    def start_backfill(self, name: str, from_ms: int, to_ms: int, **options: Any) -> Batch:
        self.actions.append(("backfill", name, from_ms, to_ms, options))
        return _batch()

    def list_instances(self, query: Any) -> Any:
        from wiggle.console._backend import InstancePage

        return InstancePage([], "", {})


def _client(backend: FakeBackend | None = None) -> tuple[TestClient, FakeBackend]:
    backend = backend or FakeBackend()
    app = create_app(backend)  # type: ignore[arg-type]
    return TestClient(app, base_url="http://127.0.0.1:8080", follow_redirects=False), backend


def _csrf(client: TestClient) -> str:
    client.get("/schedules")
    return client.cookies["wiggle_csrf"]


def test_the_list_shows_every_schedule_with_its_next_fire_in_its_zone():
    client, _ = _client()
    page = client.get("/schedules")
    assert page.status_code == 200
    text = page.text
    assert '<a href="/schedules" class="on">Schedules</a>' in text  # the nav link, lit
    assert 'href="/schedules/nightly-batch"' in text and 'href="/schedules/hourly"' in text
    assert 'href="/flows/nightly-batch"' in text
    # 2026-10-21T00:30Z is 02:30 in Berlin, summer time.
    assert "2026-10-21T02:30:00+02:00" in text
    assert 'data-schedule="hourly" data-paused="1"' in text and "none while paused" in text
    assert 'href="/instances/nightly-batch-20261019T003000Z"' in text
    assert '<td class="fired">7</td>' in text and '<td class="skipped">4</td>' in text
    assert "America/New_York" in text
    assert HOSTILE not in text and "&lt;script&gt;" in text
    live = client.get("/schedules", headers={"x-wiggle-fragment": "1"})
    assert live.status_code == 200 and "<html" not in live.text and 'id="schedules"' in live.text


def test_a_schedule_page_shows_its_timetable_next_times_and_recent_fires():
    client, _ = _client()
    page = client.get("/schedules/nightly-batch")
    assert page.status_code == 200
    text = page.text
    assert '<tr data-key="cron"><th>cron</th><td><code>30 2 * * *</code></td></tr>' in text
    assert "skipped: after, repeated: first" in text
    assert "missed: latest, window 12h" in text
    assert text.count('<li data-ms="') == 10  # the next ten fire times, in its zone
    assert "2026-10-21T02:30:00+02:00" in text and "2026-10-26T02:30:00+01:00" in text
    # The recent fires, newest first, as the server ordered them.
    rows = [text.index(f'data-nominal="{f.nominal_ms}"') for f in RECENT]
    assert rows == sorted(rows)
    assert 'href="/instances/nightly-batch-20261019T003000Z" class="fire-instance"' in text
    assert '<span class="note skipped-count">(3 times)</span>' in text
    assert "skipped while paused" in text
    assert 'data-triggered="1"' in text and '<td class="fire-by">triggered</td>' in text
    assert '<td class="fire-by">timetable</td>' in text
    # Pause with a note, trigger, backfill: each form posts with the CSRF token.
    for form in ("pause-form", "trigger-form"):
        start = text.index(f'id="{form}"')
        assert 'name="csrf" value="' in text[start : start + 300]
    assert 'id="backfill-form"' in text
    assert HOSTILE not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_a_paused_schedule_shows_its_note_and_offers_unpause():
    client, _ = _client()
    text = client.get("/schedules/hourly").text
    assert 'id="schedule-state" data-paused="1"' in text
    assert "ledger migration &lt;script&gt;" in text and HOSTILE not in text
    assert 'id="unpause-form"' in text and 'id="pause-form"' not in text
    assert "None while it is paused." in text


def test_pause_with_a_note_and_unpause_act_and_say_so():
    client, backend = _client()
    token = _csrf(client)
    paused = client.post("/schedules/nightly-batch/pause", data={"csrf": token, "note": " why "})
    assert paused.status_code == 303
    assert paused.headers["location"] == "/schedules/nightly-batch?notice=paused"
    assert backend.actions == [("pause", "nightly-batch", "why")]
    assert "Schedule paused" in client.get(paused.headers["location"]).text
    unpaused = client.post("/schedules/hourly/unpause", data={"csrf": token})
    assert unpaused.headers["location"] == "/schedules/hourly?notice=unpaused"
    assert backend.actions[-1] == ("unpause", "hourly")


def test_trigger_fires_once_and_the_page_shows_the_fire():
    client, backend = _client()
    token = _csrf(client)
    fired = client.post("/schedules/nightly-batch/trigger", data={"csrf": token})
    assert fired.status_code == 303
    assert fired.headers["location"] == f"/schedules/nightly-batch?triggered={NIGHT + 99_000}"
    assert backend.actions == [("trigger", "nightly-batch")]
    page = client.get(fired.headers["location"]).text
    assert 'id="trigger-result" data-outcome="STARTED"' in page
    assert '<a href="/instances/nightly-batch-20261019T003139Z" id="triggered-instance">' in page
    assert "2026-10-19T02:31:39+02:00" in page  # the nominal time, in its zone


def test_a_skipped_trigger_says_why_and_a_refused_one_is_a_message():
    client, backend = _client()
    token = _csrf(client)
    backend.trigger_fire = _fire(
        NIGHT + 1000, "SKIPPED", triggered=True, reason=f"overlap: x is still running {HOSTILE}"
    )
    fired = client.post("/schedules/nightly-batch/trigger", data={"csrf": token})
    page = client.get(fired.headers["location"]).text
    assert 'data-outcome="SKIPPED"' in page and "overlap: x is still running" in page
    assert HOSTILE not in page

    def refuse(name: str) -> ScheduleFire:
        raise InvalidRequest(f"schedule {name} already fired for now; trigger again in a second")

    backend.trigger_schedule = refuse  # type: ignore[method-assign]
    refused = client.post("/schedules/nightly-batch/trigger", data={"csrf": token})
    assert refused.status_code == 409
    assert "Trigger refused: schedule nightly-batch already fired" in refused.text
    assert 'id="action-error"' in refused.text
    # Its live part refreshes from the schedule's page, not from the POST's address (GET: 405).
    live_url = re.search(r'data-refresh="([^"]+)"', refused.text)
    assert live_url is not None
    live = client.get(unescape(live_url.group(1)), headers={"x-wiggle-fragment": "1"})
    assert live.status_code == 200 and "nightly-batch" in live.text


def test_a_triggered_link_shows_only_a_recorded_fire():
    client, _ = _client()
    page = client.get("/schedules/nightly-batch?triggered=12345").text
    assert 'data-outcome=""' in page and "no longer among the recent ones" in page
    for junk in ("x", "²", "9" * 40):
        page = client.get("/schedules/nightly-batch", params={"triggered": junk})
        assert page.status_code == 200 and 'id="trigger-result"' not in page.text


def test_a_backfill_is_previewed_then_started_as_a_batch():
    client, backend = _client()
    token = _csrf(client)
    preview = client.get(
        "/schedules/nightly-batch/backfill",
        params={"from": "2026-10-16T00:00:00Z", "to": "2026-10-18T23:59:59Z", "rate": "5"},
    )
    assert preview.status_code == 200
    text = preview.text
    assert '<b id="backfill-count">2</b>' in text and '<b id="backfill-already">2</b>' in text
    assert '<dd id="backfill-first"><code>2026-10-17T02:30:00+02:00</code></dd>' in text
    assert '<dd id="backfill-last"><code>2026-10-18T02:30:00+02:00</code></dd>' in text
    assert "2026-10-16T02:00:00+02:00" in text  # the range, in the schedule's zone
    assert backend.actions == []  # a preview changes nothing
    from_ms = 1792108800000  # 2026-10-16T00:00:00Z
    to_ms = 1792367999000  # 2026-10-18T23:59:59Z
    assert f'name="from_ms" value="{from_ms}"' in text and f'name="to_ms" value="{to_ms}"' in text
    form = {
        "csrf": token,
        "from_ms": str(from_ms),
        "to_ms": str(to_ms),
        "overlap": "skip",
        "rate": "5",
        "count": "2",
    }
    started = client.post("/schedules/nightly-batch/backfill", data=form)
    assert started.status_code == 303
    assert started.headers["location"] == "/batches/b-1?notice=started"
    ((action, name, first, last, options),) = backend.actions
    assert (action, name, first, last) == ("backfill", "nightly-batch", from_ms, to_ms)
    assert options["overlap"] == "skip" and options["rate_per_s"] == 5.0
    assert options["requested_by"].startswith("console")


def test_a_backfill_whose_count_moved_is_shown_again_not_started():
    client, backend = _client()
    token = _csrf(client)
    form = {"csrf": token, "from_ms": "1", "to_ms": "2", "count": "5"}
    moved = client.post("/schedules/nightly-batch/backfill", data=form)
    assert moved.status_code == 409
    assert "now names 2 nominal times to fire, not the 5 you confirmed" in moved.text
    assert 'id="backfill-start"' in moved.text  # the new preview, to confirm again
    assert backend.actions == []


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ({"from": "yesterday", "to": "2026-10-18T00:00:00Z"}, "from: &#39;yesterday&#39; is not"),
        ({"from": "2026-10-18T00:00:00Z", "to": "2026-10-17T00:00:00Z"}, "ends ("),
        ({}, "give the range&#39;s first and last instant"),
        ({"from": "2026-10-18T00:00Z", "to": "2026-10-18T01:00Z", "overlap": "x"}, "overlap"),
        ({"from": "2026-10-18T00:00Z", "to": "2026-10-18T01:00Z", "rate": "fast"}, "per second"),
        ({"from": "2099-01-01T00:00:00Z", "to": "2099-01-02T00:00:00Z"}, "in the future"),
    ],
)
def test_a_backfill_that_cannot_be_previewed_says_why(query, problem):
    client, backend = _client()
    page = client.get("/schedules/nightly-batch/backfill", params=query)
    assert page.status_code == 400
    assert 'id="backfill-problems"' in page.text and problem in page.text
    assert 'id="backfill-start"' not in page.text and backend.actions == []


def test_a_post_without_the_csrf_token_acts_on_nothing():
    client, backend = _client()
    token = _csrf(client)
    for action in ("pause", "unpause", "trigger", "backfill"):
        data = {"note": "x", "from_ms": "1", "to_ms": "2", "count": "2"}
        response = client.post(f"/schedules/nightly-batch/{action}", data=data)
        assert response.status_code == 403 and "CSRF" in response.text
        forged = client.post(f"/schedules/nightly-batch/{action}", data={**data, "csrf": "x" * 43})
        assert forged.status_code == 403
        foreign = client.post(
            f"/schedules/nightly-batch/{action}",
            data={**data, "csrf": token},
            headers={"origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
    assert backend.actions == []


def test_an_unknown_schedule_is_a_404_page_not_a_traceback():
    client, backend = _client()
    token = _csrf(client)
    for response in (
        client.get("/schedules/no-such"),
        client.get("/schedules/no-such", headers={"x-wiggle-fragment": "1"}),
        client.get("/schedules/no-such/backfill", params={"from": "2026-10-01T00:00:00Z"}),
        client.post("/schedules/no-such/trigger", data={"csrf": token}),
        client.post("/schedules/no-such/pause", data={"csrf": token, "note": ""}),
        client.get("/schedules/%3Cb%3Ex"),
    ):
        assert response.status_code == 404, response.text
        assert "no schedule named" in response.text
        assert "Traceback" not in response.text and "<b>x" not in response.text
    assert "&lt;b&gt;x" in client.get("/schedules/%3Cb%3Ex").text
    assert backend.actions == []


def test_a_credential_without_the_admin_scope_is_refused_with_the_servers_reason():
    client, backend = _client()
    token = _csrf(client)
    why = "credential 'reader' (client) may not call WiggleAdmin"

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise PermissionDenied(why)

    for name in ("list_schedules", "describe_schedule", "trigger_schedule", "pause_schedule"):
        setattr(backend, name, refuse)
    listed = client.get("/schedules")
    assert listed.status_code == 403 and why.replace("'", "&#39;") in listed.text
    assert client.get("/schedules/nightly-batch").status_code == 403
    assert client.post("/schedules/nightly-batch/trigger", data={"csrf": token}).status_code == 403
    paused = client.post("/schedules/nightly-batch/pause", data={"csrf": token, "note": ""})
    assert paused.status_code == 403
    assert backend.actions == []


FLOW = load_flow(b"wiggle: 1\nname: nightly-batch\nsteps:\n  - task: settle\n")


class InstanceBackend(FakeBackend):
    """Also answers one instance, of the flow the schedules start."""

    def __init__(self, instance_id: str, flow: str = "nightly-batch") -> None:
        super().__init__()
        self.view = Instance(
            instance_id, flow, FLOW.version, InstanceStatus.COMPLETED, {}, "", "SERVER", "",
            NIGHT, NIGHT + 1000, input={},
        )  # fmt: skip
        self.described: list[str] = []

    def describe(self, instance_id: str) -> Instance:
        return self.view

    def describe_schedule(self, name: str, upcoming: int = 10, recent: int = 20) -> ScheduleInfo:
        self.described.append(name)
        return super().describe_schedule(name, upcoming, recent)

    def get_definition(self, name: str, version: str) -> Definition:
        return Definition(name, FLOW.version, FLOW.canonical, 1)


def test_the_instance_page_names_the_schedule_and_nominal_time_that_started_it():
    backend = InstanceBackend("nightly-batch-20261019T003000Z")
    client, _ = _client(backend)  # type: ignore[arg-type]
    page = client.get("/instances/nightly-batch-20261019T003000Z").text
    assert 'id="schedule-origin" data-schedule="nightly-batch"' in page
    assert 'Started by schedule <a href="/schedules/nightly-batch">nightly-batch</a>' in page
    assert "for nominal time <code>2026-10-19T02:30:00+02:00</code>" in page
    assert "(Europe/Berlin)" in page
    # The live part leaves it out (read once), so the refresh asks nothing more.
    calls = len(backend.described)
    live = client.get(
        "/instances/nightly-batch-20261019T003000Z", headers={"x-wiggle-fragment": "1"}
    )
    assert "schedule-origin" not in live.text and len(backend.described) == calls


@pytest.mark.parametrize(
    ("instance_id", "flow", "asked"),
    [
        ("order-1", "nightly-batch", False),  # not the shape of a scheduled instance's id
        ("nightly-batch-2026-10-19", "nightly-batch", False),
        ("nightly-batch-20261019T003000Z", "other-flow", True),  # a look-alike of another flow
        ("gone-20261019T003000Z", "nightly-batch", True),  # no such schedule (deleted)
    ],
)
def test_an_instance_no_schedule_started_says_nothing_of_one(instance_id, flow, asked):
    backend = InstanceBackend(instance_id, flow)
    client, _ = _client(backend)  # type: ignore[arg-type]
    page = client.get(f"/instances/{instance_id}")
    assert page.status_code == 200 and "schedule-origin" not in page.text
    assert bool(backend.described) is asked


def test_the_batch_page_of_a_backfill_links_its_schedule():
    client, backend = _client()
    backend.get_batch = lambda batch_id: _batch(batch_id)  # type: ignore[attr-defined]
    backend.list_batches = lambda limit, action: [_batch()]  # type: ignore[attr-defined]
    page = client.get("/batches/b-1").text
    assert '<a href="/schedules/nightly-batch" id="batch-schedule">' in page
    assert "/instances?where=" not in page  # a backfill's filter is no instance filter
    assert 'href="/schedules/nightly-batch"' in client.get("/batches").text


# -- the pure parts --------------------------------------------------------------------------


def test_instants_are_typed_in_rfc_3339_or_in_the_schedules_zone():
    utc = 1792369800000  # 2026-10-19T00:30:00Z
    assert parse_instant("2026-10-19T00:30:00Z", "Europe/Berlin") == (utc, "")
    assert parse_instant("2026-10-19T02:30:00+02:00", "UTC") == (utc, "")
    assert parse_instant("2026-10-19T02:30", "Europe/Berlin") == (utc, "")  # its local time
    assert parse_instant("2026-10-19 00:30:00", "UTC") == (utc, "")
    assert parse_instant("2026-01-19T02:30:00", "Europe/Berlin")[0] == 1768786200000  # +01:00
    assert "is not an instant" in parse_instant("soon", "UTC")[1]
    assert "out of range" in parse_instant("1900-01-01T00:00:00Z", "UTC")[1]
    req, problems = backfill_request({"from_ms": "10", "to_ms": "20", "count": "1"}, "UTC")
    assert problems == [] and (req.from_ms, req.to_ms) == (10, 20)
    assert backfill_request({"from_ms": "-1", "to_ms": "20"}, "UTC")[1] == [
        "the confirmed range is not two instants in milliseconds"
    ]
    for junk in ("9" * 20, "²"):
        assert "not two instants" in backfill_request({"from_ms": junk, "to_ms": "1"}, "UTC")[1][0]


def test_the_timetable_rows_say_what_the_document_says_and_the_defaults():
    rows = dict(
        timetable(
            {
                "cron": ["0 9 * * mon-fri", "@daily"],
                "interval": [{"every": "6h", "offset": "30m"}],
                "calendar": [{"days_of_week": ["mon-fri"], "hours": [9, "13-17"]}],
                "except": [{"dates": ["2026-12-25"]}],
                "jitter": "5m",
            }
        )
    )
    assert rows["interval"] == "every 6h, offset 30m"
    assert rows["calendar"] == "days_of_week mon-fri; hours 9, 13-17"
    assert rows["except"] == "dates 2026-12-25"
    assert rows["jitter"] == "5m"
    assert rows["overlap"] == "skip" and rows["catch up"] == "missed: latest"
    assert rows["clock changes"] == "skipped: after, repeated: first"
    assert rows["version"] == "latest"
    crons = [v for k, v in timetable({"cron": ["a", "b"]}) if k == "cron"]
    assert crons == ["a", "b"]


def test_a_long_backfill_lists_its_first_and_last_times():
    times = [k * HOUR for k in range(50)]
    shown = shown_times(times, "UTC")
    assert len(shown) == 21 and shown[10] == "… 30 more …"
    assert shown[0] == "1970-01-01T00:00:00+00:00" and shown[-1] == "1970-01-03T01:00:00+00:00"
    assert len(shown_times(times[:20], "UTC")) == 20


def test_a_scheduled_instances_id_names_its_schedule_and_nominal_time():
    assert schedule_of("nightly-batch-20261019T003000Z") == ("nightly-batch", NIGHT)
    assert schedule_of("a-20261019T003000Z") == ("a", NIGHT)
    assert schedule_of("-20261019T003000Z") is None
    assert schedule_of("Upper-20261019T003000Z") is None  # not a schedule's name
    assert schedule_of("nightly-batch-20261319T003000Z") is None  # month 13
    assert schedule_of("short") is None
