"""The engine's repairs: retry, reset, bulk actions and migrations (docs/operations.md,
docs/migration.md). Mixed into `Engine`; each is one write transaction, or the record of a
durable batch the leader works through (engine/ops/bulk.py)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection

from wiggle.errors import InvalidRequest
from wiggle.filters import parse_filter
from wiggle.graph import Graph

from .model.types import Json
from .ops import bulk as _bulk
from .ops import migrate as _migrate
from .ops import repair as _repair
from .ops.actions import check_params
from .ops.context import OpsContext
from .ops.repair import RepairResult
from .store.db import Database
from .store.wakeups import Waiters

__all__ = ["Repairs"]


class Repairs:
    """What `Engine` repairs. It provides `db`, `graph_of`, `waiters` and `ops`, the context
    the operations take."""

    db: Database
    ops: OpsContext
    waiters: Waiters
    graph_of: Callable[[Connection, str], Graph]

    def retry(self, instance_id: str, *, by: str = "") -> RepairResult:
        """Resume a FAILED instance where it failed: the tokens live when it failed are live
        again, the failed step READY with a fresh attempt count (a failed subflow child and
        its waiting parent come back together). RepairRefused in any other state."""
        return self.db.write(lambda c: _repair.retry(self.ops, c, instance_id, by=by))

    def reset(self, instance_id: str, node_id: str, *, by: str = "") -> RepairResult:
        """Rewind a RUNNING, FAILED or COMPLETED instance to `node_id`, a top-level node it
        passed, with the input that node received the last time it ran. Live tokens end and
        their leases are fenced."""
        return self.db.write(lambda c: _repair.reset(self.ops, c, instance_id, node_id, by=by))

    # -- bulk actions -------------------------------------------------------------------------

    def preview_bulk(
        self, where: Sequence[str], action: str = "", params: dict[str, Json] | None = None
    ) -> _bulk.BulkPreview:
        """How many instances a filter matches now, per status, and the first ids. With
        `action`: refused, as start_bulk would refuse it, when it or `params` cannot run."""
        conditions = parse_filter(where)
        if action:
            check_params(action, params or {})
        return self.db.read(
            lambda c: _bulk.preview(c, conditions, self.graph_of, self.db.now_sql, action, params)
        )

    def start_bulk(
        self,
        action: str,
        where: Sequence[str],
        *,
        params: dict[str, Json] | None = None,
        requested_by: str = "",
        rate_per_s: float = _bulk.DEFAULT_RATE,
    ) -> _bulk.BatchView:
        """Record a bulk action over the instances `where` matches now; the leading server
        applies it (see wiggle.engine.ops.bulk). InvalidRequest when the filter matches nothing."""
        args = dict(params or {})
        check_params(action, args)
        batch_id = self.db.write(
            lambda c: _bulk.create_batch(
                self.ops, c, action, args, list(where), requested_by or "anonymous", rate_per_s
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(batch_id)

    def get_batch(self, batch_id: str, *, items: int = 100) -> _bulk.BatchView:
        return self.db.read(lambda c: _bulk.get_batch(c, batch_id, items=items))

    def list_batches(self, *, limit: int = 50, action: str = "") -> list[_bulk.BatchView]:
        return self.db.read(lambda c: _bulk.list_batches(c, limit, action))

    def set_batch_state(self, batch_id: str, state: str) -> _bulk.BatchView:
        """PAUSED, RUNNING (resume) or CANCELLED."""
        if state not in (_bulk.PAUSED, _bulk.RUNNING, _bulk.CANCELLED):
            raise InvalidRequest(f"a batch can be paused, resumed or cancelled, not {state!r}")
        view = self.db.write(lambda c: _bulk.set_state(c, self.db.now_sql, batch_id, state))
        self.waiters.ticker_needed()
        return view

    # -- migrations ---------------------------------------------------------------------------

    def plan_migration(
        self,
        flow: str,
        to: str,
        *,
        from_versions: Sequence[str] = (),
        where: Sequence[str] = (),
        mapping: dict[str, str] | None = None,
        timers: str = "keep",
        children: bool = False,
    ) -> dict[str, Json]:
        """The plan (a content-hashed JSON document, docs/migration.md) that moves the live
        instances of `flow` to version `to` (full, or the start of its digest)."""
        return self.db.read(
            lambda c: _migrate.plan_migration(
                self.ops,
                c,
                flow,
                to,
                from_versions=from_versions,
                where=where,
                mapping=mapping,
                timers=timers,
                children=children,
            )
        )

    def apply_migration(
        self,
        plan: Json,
        *,
        limit: int = 0,
        rate_per_s: float = _bulk.DEFAULT_RATE,
        requested_by: str = "",
        skip_changed: bool = False,
    ) -> _bulk.BatchView:
        """Check a plan and start the durable batch that applies it (the first `limit`
        instances only, for a canary). RepairRefused when instances moved since it was made."""
        batch_id = self.db.write(
            lambda c: _migrate.apply_migration(
                self.ops,
                c,
                plan,
                limit=limit,
                rate_per_s=rate_per_s,
                requested_by=requested_by or "anonymous",
                skip_changed=skip_changed,
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(batch_id)

    def rollback_migration(
        self,
        batch_id: str = "",
        *,
        plan_hash: str = "",
        rate_per_s: float = _bulk.DEFAULT_RATE,
        requested_by: str = "",
    ) -> _bulk.BatchView:
        """Start the batch that restores every instance migration `batch_id` (or every batch
        that applied the plan `plan_hash`) moved and that has not advanced since; the others
        are listed as skipped."""
        if not batch_id and not plan_hash:
            raise InvalidRequest("a rollback needs a migration batch id or a plan's hash")
        new_id = self.db.write(
            lambda c: _migrate.rollback_migration(
                self.ops,
                c,
                batch_id,
                rate_per_s=rate_per_s,
                requested_by=requested_by or "anonymous",
                plan_hash=plan_hash,
            )
        )
        self.waiters.ticker_needed()
        return self.get_batch(new_id)
