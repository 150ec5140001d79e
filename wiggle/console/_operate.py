"""The fleet pages: incidents (failures grouped alike), queues (work waiting, and who serves
it) and workers."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from wiggle.client import Incident, QueueInfo, WorkerInfo
from wiggle.console._backend import Unsupported
from wiggle.console._pages import Pages

__all__ = ["QueueRow", "queue_rows", "retry_query", "routes"]

#: The longest reason a condition carries whole (a condition is at most 1,000 characters).
_MAX_REASON = 980


@dataclass(frozen=True)
class QueueRow:
    """One queue as the queues page shows it: its work and the workers polling it."""

    queue: str
    ready: int
    oldest_ready_at_ms: int
    leased: int
    workers: list[str]

    @property
    def unserved(self) -> bool:
        """Tasks wait and no worker polls the queue: they wait for nothing."""
        return self.ready > 0 and not self.workers


def queue_rows(queues: list[QueueInfo], workers: list[WorkerInfo]) -> list[QueueRow]:
    """Every queue with work on it or a worker polling it, the unserved ones first."""
    serving: dict[str, list[str]] = {}
    for w in workers:
        for q in w.queues:
            serving.setdefault(q, []).append(w.worker_id)
    work = {q.queue: q for q in queues}
    rows = [
        QueueRow(
            name,
            work[name].ready if name in work else 0,
            work[name].oldest_ready_at_ms if name in work else 0,
            work[name].leased if name in work else 0,
            sorted(serving.get(name, [])),
        )
        for name in sorted(set(work) | set(serving))
    ]
    return sorted(rows, key=lambda r: (not r.unserved, -r.ready, r.queue))


def retry_query(incident: Incident) -> str:
    """The bulk preview's query string that retries the incident's instances: its flow, FAILED,
    and its reason (the whole text; a reason too long for one condition by its start)."""
    where = [f"flow={incident.flow}", "status=FAILED"]
    reason = incident.reason.strip()
    if reason and reason == incident.reason and len(reason) <= _MAX_REASON:
        where.append(f"reason={reason}")
    elif reason:
        where.append(f"reason~{reason[:_MAX_REASON].strip()}")
    return urlencode({"action": "retry", "where": where}, doseq=True)


def _since(text: str) -> int:
    try:
        moment = dt.datetime.strptime(text[:16], "%Y-%m-%dT%H:%M").replace(tzinfo=dt.UTC)
    except ValueError:
        return -1
    return int(moment.timestamp() * 1000)


def routes(pages: Pages) -> list[Route]:
    backend = pages.backend

    async def incidents(request: Request) -> Response:
        flow = request.query_params.get("flow", "").strip()[:200]
        since_text = request.query_params.get("since", "").strip()
        since = _since(since_text) if since_text else 0
        context: dict[str, Any] = {
            "flow": flow,
            "since": since_text[:16],
            "problem": "",
            "live_url": "",
        }
        if since < 0:
            context["problem"] = (
                f"failed since {since_text[:40]!r} is not a date and time like 2025-01-31T12:00"
            )
            return pages.page(request, "incidents.html", context, 400)
        try:
            page = await pages.call(backend.list_incidents, flow, since)
        except Unsupported:
            return pages.page(request, "incidents.html", {**context, "supported": False})
        context.update(
            supported=True,
            incidents=page.incidents,
            failed=page.failed,
            retry_query=retry_query,
            live_url=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
        )
        if pages.fragment(request):
            return pages.page(request, "_incidents_live.html", context)
        return pages.page(request, "incidents.html", context)

    async def _workers() -> tuple[list[WorkerInfo], bool]:
        try:
            return await pages.call(backend.list_workers), True
        except Unsupported:
            return [], False

    async def queues(request: Request) -> Response:
        workers, supported = await _workers()
        found, _now = await pages.call(backend.list_queues)
        context = {
            "rows": queue_rows(found, workers),
            "workers_supported": supported,
            "live_url": request.url.path,
        }
        if pages.fragment(request):
            return pages.page(request, "_queues_live.html", context)
        return pages.page(request, "queues.html", context)

    async def workers(request: Request) -> Response:
        rows, supported = await _workers()
        return pages.page(request, "workers.html", {"workers": rows, "supported": supported})

    return [
        Route("/incidents", pages.guarded(incidents)),
        Route("/queues", pages.guarded(queues)),
        Route("/workers", pages.guarded(workers)),
    ]
