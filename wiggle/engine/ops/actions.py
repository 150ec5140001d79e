"""The bulk actions: one table of what a batch's item may do to its instance.

An operator starts `cancel`, `retry`, `reset` and `signal` over the instances a filter matches
(`Engine.start_bulk`); `migrate` and `rollback` are started by `migrate apply` and `migrate
rollback`, each item bringing its own plan entry; `backfill` by `wiggle schedule backfill`, each
item a past nominal time of a schedule. The leader runs an item's action in the
transaction that marks the item done (see bulk_runner); an action answers its message, or
(message, undo) when it keeps what it replaced, or raises `Skip` / `Defer` (see bulk).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection

from wiggle.errors import InvalidRequest
from wiggle.graph import HUMAN_SIGNAL_PREFIX

from ..model.types import InstanceStatus, Json
from . import instances as _instances
from . import repair as _repair
from .backfill import backfill_one
from .bulk import Defer, Skip
from .context import OpsContext
from .migrate_apply import migrate_one, roll_back_one

__all__ = ["ACTIONS", "FILTER_ACTIONS", "Action", "ActionSpec", "Defer", "Skip", "check_params"]

#: An action on one instance: (context, connection, instance id, the batch's params, the item's
#: detail, who asked) -> its message, or (message, undo) when it keeps what it replaced.
Action = Callable[
    [OpsContext, Connection, str, dict[str, Json], Json, str], "str | tuple[str, Json]"
]


def _cancel(
    ctx: OpsContext, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str
) -> str:
    if _instances.status_of(conn, iid) is InstanceStatus.CANCELLED:
        raise Skip("already CANCELLED")
    _instances.cancel(ctx, conn, iid, str(p.get("reason") or f"bulk action by {by}"))
    return "cancelled"


def _retry(
    ctx: OpsContext, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str
) -> str:
    result = _repair.retry(ctx, conn, iid, by=by)
    return "retried at " + ", ".join(result.nodes)


def _reset(
    ctx: OpsContext, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str
) -> str:
    _repair.reset(ctx, conn, iid, str(p["node"]), by=by)
    return f"reset to {p['node']}"


def _signal(
    ctx: OpsContext, conn: Connection, iid: str, p: dict[str, Json], d: Json, by: str
) -> str:
    delivered = _instances.signal(ctx, conn, iid, str(p["name"]), p.get("payload"))
    return "delivered" if delivered else "buffered"


@dataclass(frozen=True)
class ActionSpec:
    run: Action
    #: Started by an operator over what a filter matches (False: over a migration plan's items).
    by_filter: bool


#: Every bulk action, by the name a batch records.
ACTIONS: dict[str, ActionSpec] = {
    "cancel": ActionSpec(_cancel, by_filter=True),
    "retry": ActionSpec(_retry, by_filter=True),
    "reset": ActionSpec(_reset, by_filter=True),
    "signal": ActionSpec(_signal, by_filter=True),
    "migrate": ActionSpec(migrate_one, by_filter=False),
    "rollback": ActionSpec(roll_back_one, by_filter=False),
    "backfill": ActionSpec(backfill_one, by_filter=False),
}

#: What an operator may start over a filter.
FILTER_ACTIONS = tuple(name for name, spec in ACTIONS.items() if spec.by_filter)


def check_params(action: str, params: dict[str, Json]) -> None:
    """Refuse a filter-started bulk action that cannot run: an unknown name, missing params."""
    if action not in FILTER_ACTIONS:
        raise InvalidRequest(
            f"unknown bulk action {action[:40]!r}; one of {', '.join(FILTER_ACTIONS)}"
        )
    if action == "reset" and not isinstance(params.get("node"), str):
        raise InvalidRequest("a bulk reset needs the node to reset to (--to NODE)")
    if action == "signal" and not isinstance(params.get("name"), str):
        raise InvalidRequest("a bulk signal needs the signal's name")
    if action == "signal" and str(params["name"]).startswith(HUMAN_SIGNAL_PREFIX):
        raise InvalidRequest(
            f"a bulk signal cannot send {str(params['name'])[:80]!r}: a human task is answered "
            "by completing it, as a person who may (docs/human-tasks.md)"
        )
