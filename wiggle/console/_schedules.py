"""The schedule pages (docs/schedules.md): every schedule with its next fire in its zone and its
counts; one schedule's timetable, its next fire times and its recent fires, with pause (and a
note) / unpause, trigger, and a backfill previewed before it starts; and, for the instance page,
the schedule and nominal time that started an instance.

Every schedule call is one of the admin API: a credential without the `operator` or `admin`
scope gets the server's refusal (403). Pause, unpause, trigger and starting a backfill are POSTs
with the CSRF token; the backfill's preview is a GET (it changes nothing), and its start
previews again and refuses when the range now names another number of times than the one
confirmed.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from wiggle import errors
from wiggle.client import BackfillPreview, Batch, ScheduleFire, ScheduleInfo
from wiggle.console._backend import Backend
from wiggle.console._bulk import requested_by, to_batch
from wiggle.console._pages import Pages, page_path
from wiggle.console._text import zone as tz
from wiggle.console._text import zoned
from wiggle.schedules import nominal_from_instance_id

__all__ = [
    "BackfillRequest",
    "ScheduleOrigin",
    "backfill_request",
    "parse_instant",
    "routes",
    "schedule_of",
    "schedule_origin",
    "shown_times",
    "timetable",
]

NOTICES = {
    "paused": "Schedule paused: nothing fires until it is unpaused.",
    "unpaused": (
        "Schedule unpaused: the timetable goes on from now (the times that passed while it was "
        "paused are recorded as skipped)."
    ),
}
#: What a schedule action refused for a reason the operator can act on: shown on its page.
_REFUSALS = (errors.InvalidRequest, errors.Conflict)
#: A schedule's name (spec/schema/schedule.schema.json) and the UTC stamp its instances carry.
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,45}")
_STAMP_LENGTH = len("-20261019T003000Z")
#: The last instant a page writes (the end of the year 9999, UTC), in milliseconds.
_LAST_MS = 253_402_300_799_999
_MS = re.compile(r"[0-9]{1,16}")  # milliseconds as a form or query string carries them
#: A backfill's overlap choices (the engine's BACKFILL_OVERLAP), and the most times it names.
OVERLAPS = ("allow_all", "skip")
MAX_RATE = 10_000.0
#: How many of a backfill's times the preview lists at each end of a longer range.
SHOWN = 10
#: The calendar and exclusion fields, in the order a timetable names them.
_FIELDS = ("months", "days_of_month", "days_of_week", "hours", "minutes", "seconds")


def _instant_ms(text: str) -> int:
    """An RFC 3339 local time with its offset (as `upcoming` gives them) in milliseconds."""
    try:
        return int(dt.datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        return 0


def parse_instant(text: str, zone_name: str) -> tuple[int, str]:
    """A backfill's `from` / `to` as typed: an RFC 3339 instant (`2026-10-01T00:00:00Z`, with
    Z or an offset), or a date and time without one, read in the schedule's zone; in
    milliseconds, and a problem or ''."""
    value = text.strip()
    if not value:
        return 0, "give the instant"
    try:
        at = dt.datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return 0, (
            f"{value[:40]!r} is not an instant: write RFC 3339, e.g. 2026-10-01T00:00:00Z, or a "
            f"date and time in the schedule's zone ({zone_name})"
        )
    if at.tzinfo is None:
        at = at.replace(tzinfo=tz(zone_name))
    ms = int(at.timestamp() * 1000)
    if not 0 <= ms <= _LAST_MS:
        return 0, f"{value[:40]!r} is out of range: give an instant from 1970 to 9999"
    return ms, ""


def _entry(entry: Mapping[str, Any]) -> str:
    """A calendar or exclusion entry in a few words: `days_of_week mon-fri; hours 9, 13-17`."""
    if "dates" in entry:
        return "dates " + ", ".join(str(d) for d in entry["dates"])
    parts = []
    for name in _FIELDS:
        if name in entry:
            values = entry[name] if isinstance(entry[name], list) else [entry[name]]
            parts.append(f"{name} {', '.join(str(v) for v in values)}")
    return "; ".join(parts) or "every time"


def timetable(document: Mapping[str, Any]) -> list[tuple[str, str]]:
    """A schedule's timetable and firing rules as its document writes them, one (what, value)
    row each, the defaults said."""
    rows: list[tuple[str, str]] = []
    crons = document.get("cron")
    for cron in [crons] if isinstance(crons, str) else crons or []:
        rows.append(("cron", str(cron)))
    intervals = document.get("interval")
    for every in [intervals] if isinstance(intervals, dict) else intervals or []:
        offset = f", offset {every['offset']}" if every.get("offset") else ""
        rows.append(("interval", f"every {every.get('every')}{offset}"))
    for entry in document.get("calendar") or []:
        rows.append(("calendar", _entry(entry)))
    for entry in document.get("except") or []:
        rows.append(("except", _entry(entry)))
    for key in ("start", "end", "jitter"):
        if document.get(key):
            rows.append((key, str(document[key])))
    dst = document.get("dst") or {}
    rows.append(
        (
            "clock changes",
            f"skipped: {dst.get('skipped', 'after')}, repeated: {dst.get('repeated', 'first')}",
        )
    )
    rows.append(("overlap", str(document.get("overlap", "skip"))))
    catch_up = document.get("catch_up") or {}
    missed = [f"missed: {catch_up.get('missed', 'latest')}"]
    if catch_up.get("window"):
        missed.append(f"window {catch_up['window']}")
    if catch_up.get("at_most"):
        missed.append(f"at most {catch_up['at_most']}")
    rows.append(("catch up", ", ".join(missed)))
    rows.append(("version", str(document.get("version", "latest"))))
    return rows


def shown_times(times: list[int], zone_name: str) -> list[str]:
    """A backfill's nominal times as the preview lists them, in the zone: every one of a short
    range, else the first and last SHOWN with '…' between."""
    if len(times) > 2 * SHOWN:
        first = [zoned(t, zone_name) for t in times[:SHOWN]]
        last = [zoned(t, zone_name) for t in times[-SHOWN:]]
        return [*first, f"… {len(times) - 2 * SHOWN} more …", *last]
    return [zoned(t, zone_name) for t in times]


@dataclass(frozen=True)
class BackfillRequest:
    """A backfill form as typed: the range (text, or the milliseconds a preview confirmed),
    the overlap choice and the rate."""

    start: str = ""
    end: str = ""
    overlap: str = "allow_all"
    rate: str = ""
    from_ms: int = 0
    to_ms: int = 0

    @property
    def rate_per_s(self) -> float:
        return float(self.rate) if self.rate else 0.0

    def query(self) -> str:
        """The preview's query string for this request (to go back to it)."""
        values = {"from": self.start, "to": self.end, "overlap": self.overlap, "rate": self.rate}
        return urlencode({k: v for k, v in values.items() if v})


def backfill_request(
    values: Mapping[str, Any], zone_name: str
) -> tuple[BackfillRequest, list[str]]:
    """The backfill a form or query string asks for, and one message per unusable value. The
    confirming POST carries the range in milliseconds (`from_ms`, `to_ms`), the preview's."""

    def text(key: str, limit: int) -> str:
        return str(values.get(key, "") or "").strip()[:limit]

    problems: list[str] = []
    start, end = text("from", 64), text("to", 64)
    from_ms, to_ms = text("from_ms", 20), text("to_ms", 20)
    if from_ms or to_ms:  # the confirmation of a preview: the very instants it previewed
        if not all(_MS.fullmatch(v) and int(v) <= _LAST_MS for v in (from_ms, to_ms)):
            problems.append("the confirmed range is not two instants in milliseconds")
            first = last = 0
        else:
            first, last = int(from_ms), int(to_ms)
            start, end = start or zoned(first, zone_name), end or zoned(last, zone_name)
    elif not start and not end:
        problems.append("give the range's first and last instant")
        first = last = 0
    else:
        first, problem = parse_instant(start, zone_name)
        problems.extend([f"from: {problem}"] if problem else [])
        last, problem = parse_instant(end, zone_name)
        problems.extend([f"to: {problem}"] if problem else [])
    overlap = text("overlap", 20) or "allow_all"
    if overlap not in OVERLAPS:
        problems.append(f"overlap {overlap!r} is not one of {', '.join(OVERLAPS)}")
    rate = text("rate", 20)
    try:
        per_s = float(rate) if rate else 0.0
    except ValueError:
        per_s = -1.0
    if not 0 <= per_s <= MAX_RATE:
        problems.append(f"per second {rate!r} is not a number from 0 to {MAX_RATE:g}")
    if not problems and last < first:
        problems.append(f"the range ends ({end}) before it starts ({start})")
    req = BackfillRequest(start, end, overlap, rate, first, last)
    return req, problems


@dataclass(frozen=True)
class ScheduleOrigin:
    """The schedule that started an instance, and the nominal time it started it for."""

    name: str
    nominal_ms: int
    time_zone: str

    @property
    def local(self) -> str:
        return zoned(self.nominal_ms, self.time_zone)


def schedule_of(instance_id: str) -> tuple[str, int] | None:
    """The schedule and nominal time (ms) an instance id names by its shape,
    `<schedule>-<YYYYMMDDTHHMMSSZ>`, or None."""
    name = instance_id[:-_STAMP_LENGTH]
    if not _NAME.fullmatch(name):
        return None
    nominal = nominal_from_instance_id(name, instance_id)
    return None if nominal is None else (name, nominal)


def schedule_origin(backend: Backend, instance_id: str, flow: str) -> ScheduleOrigin | None:
    """The schedule that started the instance: its id names a schedule by its shape, and that
    schedule exists and starts the instance's flow. None otherwise, and when the server cannot
    say (a credential without the admin API's scope, a server without schedules)."""
    named = schedule_of(instance_id)
    if named is None:
        return None
    name, nominal = named
    try:
        found = backend.describe_schedule(name, upcoming=1, recent=1)
    except errors.WiggleError:
        return None
    if found.flow != flow:
        return None
    return ScheduleOrigin(name, nominal, found.time_zone)


def _to_schedule(name: str, **query: str | int) -> Response:
    """To the schedule's page, with what was done in the query."""
    suffix = f"?{urlencode(query)}" if query else ""
    return RedirectResponse(f"{page_path('schedules', name)}{suffix}", status_code=303)


def _triggered(found: ScheduleInfo, value: str) -> tuple[int, ScheduleFire | None]:
    """The trigger `?triggered=NOMINAL_MS` names, as recorded among the recent fires."""
    if not _MS.fullmatch(value):
        return 0, None
    nominal = int(value)
    for fire in found.recent:
        if fire.triggered and fire.nominal_ms == nominal:
            return nominal, fire
    return nominal, None


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend

    async def schedules(request: Request) -> Response:
        found: list[ScheduleInfo] = await pages.call(backend.list_schedules)
        context = {"schedules": found, "live_url": request.url.path}
        if pages.fragment(request):
            return pages.page(request, "_schedules_live.html", context)
        return pages.page(request, "schedules.html", context)

    async def _schedule_page(
        request: Request, name: str, status_code: int = 200, action_error: str = ""
    ) -> Response:
        found: ScheduleInfo = await pages.call(backend.describe_schedule, name)
        triggered, fire = _triggered(found, request.query_params.get("triggered", ""))
        now_ms = int(time.time() * 1000)
        here = tz(found.time_zone)
        context = {
            "schedule": found,
            "timetable": timetable(found.document),
            "upcoming": [(at, _instant_ms(at)) for at in found.upcoming],
            "notice": NOTICES.get(request.query_params.get("notice", ""), ""),
            "triggered": triggered,
            "trigger_fire": fire,
            "action_error": action_error,
            "backfill": BackfillRequest(
                start=dt.datetime.fromtimestamp(now_ms / 1000 - 86400, here).isoformat(
                    timespec="seconds"
                ),
                end=dt.datetime.fromtimestamp(now_ms / 1000, here).isoformat(timespec="seconds"),
            ),
            "overlaps": OVERLAPS,
            "live_url": page_path("schedules", name),
        }
        if pages.fragment(request):
            return pages.page(request, "_schedule_live.html", context, status_code)
        return pages.page(request, "schedule.html", context, status_code)

    async def schedule(request: Request) -> Response:
        return await _schedule_page(request, request.path_params["name"])

    async def pause(request: Request) -> Response:
        name = request.path_params["name"]
        form = await pages.checked_form(request)
        note = str(form.get("note", "")).strip()[:2000]
        try:
            await pages.call(backend.pause_schedule, name, note)
        except _REFUSALS as exc:
            return await _schedule_page(request, name, 409, f"Pause refused: {exc}")
        return _to_schedule(name, notice="paused")

    async def unpause(request: Request) -> Response:
        name = request.path_params["name"]
        await pages.checked_form(request)
        try:
            await pages.call(backend.unpause_schedule, name)
        except _REFUSALS as exc:
            return await _schedule_page(request, name, 409, f"Unpause refused: {exc}")
        return _to_schedule(name, notice="unpaused")

    async def trigger(request: Request) -> Response:
        name = request.path_params["name"]
        await pages.checked_form(request)
        try:
            fire: ScheduleFire = await pages.call(backend.trigger_schedule, name)
        except _REFUSALS as exc:
            return await _schedule_page(request, name, 409, f"Trigger refused: {exc}")
        return _to_schedule(name, triggered=fire.nominal_ms)

    async def _backfill_page(
        request: Request,
        found: ScheduleInfo,
        req: BackfillRequest,
        problems: list[str],
        status_code: int = 200,
        refused: str = "",
    ) -> Response:
        """The preview of the backfill `req` asks for, or why there is none (`problems`);
        `refused`: why starting it was refused (the preview still shows)."""
        preview: BackfillPreview | None = None
        if not problems:
            try:
                preview = await pages.call(
                    backend.preview_backfill, found.name, req.from_ms, req.to_ms
                )
            except _REFUSALS as exc:
                problems, status_code = [str(exc)], 400
        times = list(preview.nominal_ms) if preview is not None else []
        context = {
            "schedule": found,
            "backfill": req,
            "problems": [*problems, refused] if refused else problems,
            "preview": preview,
            "times": shown_times(times, found.time_zone),
            "first": zoned(times[0], found.time_zone) if times else "",
            "last": zoned(times[-1], found.time_zone) if times else "",
            "from_local": zoned(req.from_ms, found.time_zone) if not problems else "",
            "to_local": zoned(req.to_ms, found.time_zone) if not problems else "",
            "overlaps": OVERLAPS,
        }
        return pages.page(request, "backfill.html", context, status_code)

    async def backfill_preview(request: Request) -> Response:
        found: ScheduleInfo = await pages.call(
            backend.describe_schedule, request.path_params["name"], 1, 1
        )
        req, problems = backfill_request(request.query_params, found.time_zone)
        return await _backfill_page(request, found, req, problems, 400 if problems else 200)

    async def backfill_start(request: Request) -> Response:
        name = request.path_params["name"]
        form = await pages.checked_form(request)
        found: ScheduleInfo = await pages.call(backend.describe_schedule, name, 1, 1)
        req, problems = backfill_request(form, found.time_zone)
        if problems:
            return await _backfill_page(request, found, req, problems, 400)
        confirmed = str(form.get("count", ""))
        try:
            now: BackfillPreview = await pages.call(
                backend.preview_backfill, name, req.from_ms, req.to_ms
            )
            if str(len(now.nominal_ms)) != confirmed:
                problem = (
                    f"the range now names {len(now.nominal_ms)} nominal times to fire, not the "
                    f"{confirmed} you confirmed: look again, and confirm the new number"
                )
                return await _backfill_page(request, found, req, [], 409, problem)
            batch: Batch = await pages.call(
                backend.start_backfill,
                name,
                req.from_ms,
                req.to_ms,
                overlap=req.overlap,
                rate_per_s=req.rate_per_s,
                requested_by=requested_by(request),
            )
        except _REFUSALS as exc:
            return await _backfill_page(request, found, req, [], 409, str(exc))
        return to_batch(batch.batch_id)

    return [
        Route("/schedules", pages.guarded(schedules)),
        Route("/schedules/{name}", pages.guarded(schedule)),
        Route("/schedules/{name}/pause", pages.guarded(pause), methods=["POST"]),
        Route("/schedules/{name}/unpause", pages.guarded(unpause), methods=["POST"]),
        Route("/schedules/{name}/trigger", pages.guarded(trigger), methods=["POST"]),
        Route("/schedules/{name}/backfill", pages.guarded(backfill_preview)),
        Route("/schedules/{name}/backfill", pages.guarded(backfill_start), methods=["POST"]),
    ]
