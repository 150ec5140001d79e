"""`wiggle schedule`, as a user meets it (docs/schedules.md): apply prints what it did like a
plan, a broken file is refused here with every position, describe shows the next fire times
and the last fires, trigger starts an instance, pause and unpause say so, a schedule fires on a
real server; an unknown schedule and an unreachable server are one clear line, never a
traceback; --json is one document."""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest
from clikit import wiggle

from tests.hourly import minute_away
from tests.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

#: Waits for the server's own ticker: a few seconds at most, never a claim about speed.
FIRE_WAIT_S = 10.0

GATE = "wiggle: 1\nname: gate\ninput: {type: object, required: [kind]}\nsteps:\n  - await: go\n"


def _hourly(minute: int) -> str:
    """A schedule that fires once an hour, at `minute`."""
    return f"""\
schedule: hourly
description: every hour
flow: gate
time_zone: America/New_York
cron: "{minute} * * * *"
input: {{kind: hourly}}
"""


BROKEN = """\
schedule: broken
flow: gate
cron: "61 * * * *"
time_zone: Mars/Olympus
"""


@pytest.fixture
def minutes() -> tuple[int, int]:
    """hourly's minute (20 minutes from now), and the one a test moves it to (40), chosen when
    the test begins."""
    return minute_away(20), minute_away(40)


@pytest.fixture
def work(tmp_path: Path, minutes: tuple[int, int]) -> Path:
    (tmp_path / "gate.yaml").write_text(GATE)
    (tmp_path / "hourly.schedule.yaml").write_text(_hourly(minutes[0]))
    (tmp_path / "broken.schedule.yaml").write_text(BROKEN)
    (tmp_path / "orphan.schedule.yaml").write_text(
        "schedule: orphan\nflow: nowhere\ninterval: {every: 1h}\n"
    )
    return tmp_path


def _ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def _one_line_error(result) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines and lines[0].startswith("wiggle: "), result.stderr
    return lines[0]


def test_apply_describe_trigger_pause_unpause_delete(server, work, minutes):
    address, _ = server
    hourly_minute, changed_minute = minutes
    _ok(wiggle(address, "deploy", "gate.yaml", cwd=work))

    created = _ok(wiggle(address, "schedule", "apply", "hourly.schedule.yaml", cwd=work)).stdout
    # The next fire in the schedule's zone: New York is 4 or 5 hours behind UTC.
    assert re.fullmatch(
        rf"hourly created; next fire \d{{4}}-\d\d-\d\dT\d\d:{hourly_minute:02d}:00-0[45]:00\n",
        created,
    ), created
    again = _ok(wiggle(address, "schedule", "apply", "hourly.schedule.yaml", cwd=work)).stdout
    assert again == "hourly unchanged\n"
    changed_cron = f"{changed_minute} * * * *"
    (work / "hourly.schedule.yaml").write_text(_hourly(changed_minute))
    changed = _ok(wiggle(address, "schedule", "apply", "hourly.schedule.yaml", cwd=work)).stdout
    assert changed.startswith("hourly changed: cron; next fire "), changed
    assert f":{changed_minute:02d}:00-0" in changed

    listed = _ok(wiggle(address, "schedule", "list", cwd=work)).stdout.splitlines()
    assert listed[0].split() == [
        "SCHEDULE", "FLOW", "STATE", "NEXT", "FIRE", "ZONE", "FIRED", "SKIPPED", "LAST", "RUN"
    ]  # fmt: skip
    assert listed[1].split()[:3] == ["hourly", "gate", "active"]
    assert "America/New_York" in listed[1]
    none = _ok(wiggle(address, "schedule", "list", "--flow", "other", cwd=work)).stdout
    assert none == "no schedule of flow 'other'\n"

    text = _ok(wiggle(address, "schedule", "describe", "hourly", cwd=work)).stdout
    assert "schedule  hourly" in text and "about     every hour" in text
    assert f"timetable cron '{changed_cron}'" in text and "state     active" in text
    assert "next 10 fires (America/New_York)" in text
    at_minute = rf"^  \S+T\d\d:{changed_minute:02d}:00-0[45]:00$"
    assert len(re.findall(at_minute, text, re.M)) == 10
    assert "last      no fire yet" in text

    fired = _ok(wiggle(address, "schedule", "trigger", "hourly", cwd=work)).stdout
    found = re.fullmatch(r"hourly fired: started (hourly-\d{8}T\d{6}Z)\n", fired)
    assert found, fired
    iid = found.group(1)
    status = json.loads(_ok(wiggle(address, "status", iid, "--json", cwd=work)).stdout)
    assert (status["flow"], status["status"], status["input"]) == (
        "gate",
        "RUNNING",
        {"kind": "hourly"},
    )
    text = _ok(wiggle(address, "schedule", "describe", "hourly", cwd=work)).stdout
    assert f"last run  {iid}" in text
    assert re.search(rf"^  \S+  STARTED  {iid} \(triggered\)$", text, re.M), text

    paused = wiggle(address, "schedule", "pause", "hourly", "--note", "audit week", cwd=work)
    assert _ok(paused).stdout == "hourly paused: audit week\n"
    text = _ok(wiggle(address, "schedule", "describe", "hourly", cwd=work)).stdout
    assert "state     paused (audit week)" in text and "none while paused" in text
    view = json.loads(
        _ok(wiggle(address, "schedule", "describe", "hourly", "--json", cwd=work)).stdout
    )
    assert (view["paused"], view["note"], view["upcoming"]) == (True, "audit week", [])
    assert view["document"]["cron"] == changed_cron
    assert view["recent"][0]["instance_id"] == iid

    unpaused = _ok(wiggle(address, "schedule", "unpause", "hourly", cwd=work)).stdout
    assert unpaused.startswith("hourly unpaused; next fire "), unpaused

    deleted = _ok(wiggle(address, "schedule", "delete", "hourly", cwd=work)).stdout
    assert deleted == "hourly deleted (the instances it started are left alone)\n"
    assert _ok(wiggle(address, "schedule", "list", cwd=work)).stdout == "no schedule yet\n"
    listed_json = json.loads(_ok(wiggle(address, "schedule", "list", "--json", cwd=work)).stdout)
    assert listed_json == {"schedules": []}


def test_a_broken_file_is_refused_here_with_every_position(work):
    # No server at that address: the file is refused before any call would fail to reach it.
    result = wiggle("127.0.0.1:1", "schedule", "apply", "broken.schedule.yaml", cwd=work)
    assert result.returncode == 1
    assert "cannot reach" not in result.stderr and "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("broken.schedule.yaml:3:7: cron '61 * * * *': a bad minute")
    assert lines[1].startswith("broken.schedule.yaml:4:12: unknown time zone 'Mars/Olympus'")
    as_json = wiggle("127.0.0.1:1", "schedule", "apply", "broken.schedule.yaml", "--json", cwd=work)
    error = json.loads(as_json.stdout)["error"]
    assert error["code"] == "FLOW_INVALID"
    assert [d.split(": ")[0] for d in error["diagnostics"]] == [
        "broken.schedule.yaml:3:7",
        "broken.schedule.yaml:4:12",
    ]


def test_a_schedule_of_an_unregistered_flow_applies_nothing(server, work):
    address, _ = server
    _ok(wiggle(address, "deploy", "gate.yaml", cwd=work))
    result = wiggle(
        address, "schedule", "apply", "hourly.schedule.yaml", "orphan.schedule.yaml", cwd=work
    )
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith(
        "orphan.schedule.yaml:2:7: flow 'nowhere' is not registered on the server"
    ), result.stderr
    # hourly was fine, but nothing is applied when one file is refused.
    assert _ok(wiggle(address, "schedule", "list", cwd=work)).stdout == "no schedule yet\n"


def test_an_unknown_schedule_is_one_clear_line(server, work):
    address, _ = server
    for command in (["describe"], ["pause", "--note", "x"], ["trigger"], ["delete"]):
        result = wiggle(address, "schedule", *command[:1], "ghost", *command[1:], cwd=work)
        line = _one_line_error(result)
        assert line == "wiggle: no schedule named 'ghost' (wiggle schedule list shows them)"
        assert len(result.stderr.splitlines()) == 1
    as_json = wiggle(address, "schedule", "unpause", "ghost", "--json", cwd=work)
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["code"] == "SCHEDULE_NOT_FOUND"


def test_an_unreachable_server_is_one_clear_line(work):
    result = wiggle("127.0.0.1:1", "schedule", "list", cwd=work)
    line = _one_line_error(result)
    assert line.startswith("wiggle: cannot reach the Wiggle server at 127.0.0.1:1")
    as_json = wiggle("127.0.0.1:1", "schedule", "describe", "hourly", "--json", cwd=work)
    assert json.loads(as_json.stdout)["error"]["code"] == "UNAVAILABLE"


@pytest.mark.postgres_too
def test_a_schedule_fires_every_second_on_a_real_server(server, work):
    address, _ = server
    _ok(wiggle(address, "deploy", "gate.yaml", cwd=work))
    (work / "tick.schedule.yaml").write_text(
        "schedule: tick\nflow: gate\ninterval: {every: 1s}\noverlap: allow_all\n"
        "input: {kind: tick}\n"
    )
    _ok(wiggle(address, "schedule", "apply", "tick.schedule.yaml", cwd=work))

    def started() -> list[str]:
        out = _ok(wiggle(address, "schedule", "describe", "tick", "--json", cwd=work)).stdout
        fires = json.loads(out)["recent"]
        ids = [f["instance_id"] for f in fires if f["outcome"] == "STARTED"]
        return ids if len(ids) >= 2 else []

    ids = wait_until(started, FIRE_WAIT_S, "two fires of a schedule due every second")
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"tick-\d{8}T\d{6}Z", i) for i in ids)
    _ok(wiggle(address, "schedule", "pause", "tick", cwd=work))
    view = json.loads(
        _ok(wiggle(address, "schedule", "describe", "tick", "--json", cwd=work)).stdout
    )
    assert view["paused"] and view["next_due_ms"] is None


def test_backfill_previews_then_fires_each_past_time_once(server, work, minutes):
    address, _ = server
    _ok(wiggle(address, "deploy", "gate.yaml", cwd=work))
    _ok(wiggle(address, "schedule", "apply", "hourly.schedule.yaml", cwd=work))
    # The schedule's latest nominal time (hourly, at its minute), in UTC.
    clock = datetime.datetime.now(datetime.UTC)
    now = clock.replace(minute=minutes[0], second=0, microsecond=0)
    if now > clock:
        now -= datetime.timedelta(hours=1)
    start = (now - datetime.timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = (now - datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    args = ("schedule", "backfill", "hourly", "--from", start, "--to", end)
    preview = _ok(wiggle(address, *args, cwd=work)).stdout
    assert preview.startswith("hourly: 3 nominal times to fire (0 in the range already"), preview
    assert preview.rstrip().endswith("add --yes to start the backfill")
    started = _ok(wiggle(address, *args, "--yes", "--json", cwd=work))
    batch = json.loads(started.stdout)
    assert batch["action"] == "backfill" and batch["matched"] == 3

    def finished():
        status = _ok(wiggle(address, "batch", "status", batch["batch_id"], "--json", cwd=work))
        return json.loads(status.stdout)["state"] == "DONE"

    wait_until(finished, timeout=FIRE_WAIT_S, what="the backfill to finish", interval=0.3)
    described = wiggle(address, "schedule", "describe", "hourly", "--json", cwd=work)
    described = json.loads(_ok(described).stdout)
    fired = sorted(f["instance_id"] for f in described["recent"] if f["outcome"] == "STARTED")
    assert fired == sorted(
        "hourly-" + (now - datetime.timedelta(hours=h)).strftime("%Y%m%dT%H%M%SZ")
        for h in (1, 2, 3)
    )
    again = _ok(wiggle(address, *args, cwd=work)).stdout
    assert again.startswith("hourly: 0 nominal times to fire (3 in the range already"), again
