"""What the console reads from and sends to a Wiggle server, as plain view data.

Everything goes through `wiggle.client.Client`, as the CLI's commands do. A server that predates
an RPC answers UNIMPLEMENTED: that becomes `Unsupported`, which the pages turn into a short note
instead of an error. Older servers also ignore the newer ListInstances filters, so the same
filters are applied again here to the page they return (a filter applied twice changes nothing).

The pages read the client's own records (`Instance`, `Token`, `Event`, `DefinitionSummary`,
`WorkerInfo`, `HumanTask`): the console keeps no copy of them, so a field the client learns
reaches the pages without a change here.

Each call is made as the person the request is for: the guard around every request calls
`acting_as(identity)`, and until the request ends every call presents that person's token (over
the one channel), so the server's scopes and refusals are theirs. A console without a login,
and the reads `own_describe` makes for a person's task, use the console's own credential.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from contextvars import Token as VarToken
from dataclasses import dataclass
from typing import Any, TypeVar

from wiggle import errors
from wiggle.client import (
    BackfillPreview,
    Batch,
    BulkPreview,
    Client,
    Definition,
    DefinitionSummary,
    HumanTask,
    IncidentPage,
    Instance,
    InstanceStatus,
    NodeCount,
    QueueInfo,
    Repaired,
    ScheduleFire,
    ScheduleInfo,
    Started,
    TaskAnswer,
    TlsConfig,
    WorkerInfo,
)
from wiggle.console._identity import Identity

__all__ = [
    "STATUSES",
    "Backend",
    "InstanceFilter",
    "InstancePage",
    "Unsupported",
    "acting_as",
    "done",
]

T = TypeVar("T")

STATUSES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED")

#: The token of the person the current request is for (None: the console's own credential).
_ACTING: ContextVar[str | None] = ContextVar("wiggle_console_token", default=None)


def acting_as(identity: Identity | None) -> VarToken[str | None]:
    """Make this request's calls with `identity`'s token (the console's own when it has none);
    `done(mark)` ends that. The calls made off the event loop inherit it."""
    return _ACTING.set(None if identity is None else identity.token)


def done(mark: VarToken[str | None]) -> None:
    _ACTING.reset(mark)


class Unsupported(errors.WiggleError):
    """The server does not implement this call (it predates it)."""


@dataclass(frozen=True)
class InstanceFilter:
    """The instance list's filters, as the page's query string carries them."""

    flow: str = ""
    status: str = ""  # one of STATUSES, or "" for all
    version: str = ""
    id_contains: str = ""
    where: tuple[str, ...] = ()  # conditions of the filter language (the server applies them)
    started_after_ms: int = 0  # 0: no bound
    started_before_ms: int = 0
    page_token: str = ""
    page_size: int = 50

    def matches(self, row: Instance) -> bool:
        return (
            (not self.flow or row.flow == self.flow)
            and (not self.status or row.status == self.status)
            and (not self.version or row.version == self.version)
            and (not self.id_contains or self.id_contains in row.instance_id)
            and (not self.started_after_ms or row.created_at_ms >= self.started_after_ms)
            and (not self.started_before_ms or row.created_at_ms < self.started_before_ms)
        )


@dataclass(frozen=True)
class InstancePage:
    rows: list[Instance]
    next_page_token: str
    counts: dict[str, int] | None  # None: the server does not count


class Backend:
    """One server's API as the console uses it. Thread-safe; blocking calls."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.address = address
        # Retry for a short while only: a person is waiting on the page.
        self._own = Client(address, token=token, tls=tls, timeout=timeout, retry_for=2.0)

    @property
    def client(self) -> Client:
        """The client of the person this request is for (`acting_as`), else the console's
        own: one channel, each call presenting that person's token."""
        token = _ACTING.get()
        return self._own if token is None else self._own.with_token(token)

    def close(self) -> None:
        self._own.close()

    def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except errors.WiggleError as exc:
            # The client reports a status it has no class for as "server error CODE: ...".
            if type(exc) is errors.WiggleError and "UNIMPLEMENTED" in str(exc):
                raise Unsupported(f"the server at {self.address} does not support this") from None
            raise

    # -- reads -------------------------------------------------------------------------------

    def list_instances(self, query: InstanceFilter) -> InstancePage:
        page = self._call(
            self.client.list_instances,
            flow=query.flow or None,
            status=query.status or None,
            version=query.version or None,
            started_after_ms=query.started_after_ms or None,
            started_before_ms=query.started_before_ms or None,
            id_contains=query.id_contains or None,
            where=list(query.where),
            limit=query.page_size,
            page_token=query.page_token or None,
            counts=True,
        )
        rows = [r for r in page if query.matches(r)]
        counts = {name: int(n) for name, n in page.counts.items()} or None
        return InstancePage(rows, page.next_page_token, counts)

    def describe(self, instance_id: str) -> Instance:
        return self._call(self.client.describe, instance_id, events=True)

    def list_definitions(self, name: str = "") -> list[DefinitionSummary]:
        return self._call(self.client.list_definitions, name or None, counts=True)

    def list_workers(self) -> list[WorkerInfo]:
        found, _now = self._call(self.client.list_workers)
        return found

    def get_definition(self, name: str, version: str = "") -> Definition:
        return self._call(self.client.get_definition, name, version or None)

    def list_queues(self) -> tuple[list[QueueInfo], int]:
        """Queues holding READY or leased tasks, and the server's clock."""
        return self._call(self.client.list_queues)

    def node_counts(self, name: str, version: str) -> list[NodeCount]:
        return self._call(self.client.node_counts, name, version or None)

    def list_incidents(self, flow: str = "", failed_after_ms: int = 0) -> IncidentPage:
        return self._call(
            self.client.list_incidents, flow=flow or None, failed_after_ms=failed_after_ms or None
        )

    # -- actions -----------------------------------------------------------------------------

    def start(self, flow: str, version: str, value: Any, instance_id: str = "") -> Started:
        return self._call(
            self.client.start, flow, value, version=version or None, instance_id=instance_id or None
        )

    def signal(self, instance_id: str, name: str, payload: Any) -> bool:
        return self._call(self.client.signal, instance_id, name, payload)

    def cancel(self, instance_id: str, reason: str) -> InstanceStatus:
        return self._call(self.client.cancel, instance_id, reason)

    # -- repair (an operator or admin credential) --------------------------------------------

    def retry(self, instance_id: str) -> Repaired:
        return self._call(self.client.retry, instance_id)

    def reset(self, instance_id: str, node_id: str) -> Repaired:
        return self._call(self.client.reset, instance_id, node_id)

    def preview_bulk(
        self, where: Sequence[str], action: str = "", params: dict[str, Any] | None = None
    ) -> BulkPreview:
        return self._call(self.client.preview_bulk, list(where), action, params)

    def start_bulk(
        self,
        action: str,
        where: Sequence[str],
        params: dict[str, Any],
        rate_per_s: float,
        requested_by: str,
    ) -> Batch:
        return self._call(
            self.client.start_bulk,
            action,
            list(where),
            params=params,
            rate_per_s=rate_per_s,
            requested_by=requested_by,
        )

    def get_batch(self, batch_id: str) -> Batch:
        return self._call(self.client.get_batch, batch_id)

    def list_batches(self, limit: int = 50, action: str = "") -> list[Batch]:
        return self._call(self.client.list_batches, limit=limit, action=action)

    def update_batch(self, batch_id: str, state: str) -> Batch:
        return self._call(self.client.update_batch, batch_id, state)

    # -- migration -----------------------------------------------------------------------------

    def plan_migration(
        self,
        flow: str,
        to: str,
        *,
        from_versions: Sequence[str],
        where: Sequence[str],
        mapping: dict[str, str],
        timers: str,
        children: bool,
    ) -> dict[str, Any]:
        return self._call(
            self.client.plan_migration,
            flow,
            to,
            from_versions=list(from_versions),
            where=list(where),
            mapping=mapping,
            timers=timers,
            children=children,
        )

    def apply_migration(
        self, plan: dict[str, Any], *, limit: int, rate_per_s: float, requested_by: str
    ) -> Batch:
        return self._call(
            self.client.apply_migration,
            plan,
            limit=limit,
            rate_per_s=rate_per_s,
            requested_by=requested_by,
        )

    def rollback_migration(self, batch_id: str, *, requested_by: str) -> Batch:
        return self._call(self.client.rollback_migration, batch_id, requested_by=requested_by)

    # -- schedules (the admin API: an operator or admin credential) ----------------------------

    def list_schedules(self) -> list[ScheduleInfo]:
        return self._call(self.client.list_schedules)

    def describe_schedule(self, name: str, upcoming: int = 10, recent: int = 20) -> ScheduleInfo:
        return self._call(self.client.describe_schedule, name, upcoming=upcoming, recent=recent)

    def pause_schedule(self, name: str, note: str) -> ScheduleInfo:
        return self._call(self.client.pause_schedule, name, note)

    def unpause_schedule(self, name: str) -> ScheduleInfo:
        return self._call(self.client.unpause_schedule, name)

    def trigger_schedule(self, name: str) -> ScheduleFire:
        return self._call(self.client.trigger_schedule, name)

    def preview_backfill(self, name: str, from_ms: int, to_ms: int) -> BackfillPreview:
        return self._call(self.client.preview_backfill, name, from_ms, to_ms)

    def start_backfill(
        self,
        name: str,
        from_ms: int,
        to_ms: int,
        *,
        overlap: str,
        rate_per_s: float,
        requested_by: str,
    ) -> Batch:
        return self._call(
            self.client.start_backfill,
            name,
            from_ms,
            to_ms,
            overlap=overlap,
            rate_per_s=rate_per_s,
            requested_by=requested_by,
        )

    # -- human tasks (docs/human-tasks.md), as the person `who` ---------------------------------

    @staticmethod
    def _actor(who: Identity, admin: bool) -> dict[str, Any]:
        return {"person": who.person, "groups": who.groups, "admin": admin}

    def list_tasks(
        self,
        who: Identity,
        *,
        admin: bool = False,
        states: Sequence[str] = (),
        all_states: bool = False,
        instance_id: str = "",
        limit: int = 0,
    ) -> list[HumanTask]:
        return self._call(
            self.client.list_tasks,
            states=list(states),
            all_states=all_states,
            instance_id=instance_id,
            limit=limit,
            **self._actor(who, admin),
        )

    def get_task(self, who: Identity, task_id: str) -> HumanTask:
        return self._call(self.client.get_task, task_id, **self._actor(who, who.task_admin))

    def claim_task(self, who: Identity, task_id: str, request_id: str) -> TaskAnswer:
        return self._call(
            self.client.claim_task,
            task_id,
            request_id=request_id,
            **self._actor(who, who.task_admin),
        )

    def unclaim_task(self, who: Identity, task_id: str, request_id: str) -> TaskAnswer:
        return self._call(
            self.client.unclaim_task,
            task_id,
            request_id=request_id,
            **self._actor(who, who.task_admin),
        )

    def complete_task(
        self, who: Identity, task_id: str, answer: Any, request_id: str
    ) -> TaskAnswer:
        return self._call(
            self.client.complete_task,
            task_id,
            answer,
            request_id=request_id,
            **self._actor(who, who.task_admin),
        )

    def reassign_task(self, who: Identity, task_id: str, to: str, request_id: str) -> TaskAnswer:
        return self._call(
            self.client.reassign_task,
            task_id,
            to,
            request_id=request_id,
            person=who.person,
            admin=True,
        )

    def own_describe(self, instance_id: str) -> Instance:
        """The instance as the console's own credential reads it (without its events): the
        context beside a task, for a person whose credential may not read instances. Only
        after the server has shown them a task on it."""
        return self._call(self._own.describe, instance_id)
