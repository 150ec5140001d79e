"""The admin calls of `Client` (docs/admin-api.md): retry, reset and bulk actions, with what
they return. They need a credential with the `admin` or `operator` scope."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from wiggle import errors
from wiggle._proto.wiggle.v1 import admin_pb2 as apb

__all__ = ["AdminCalls", "Batch", "BatchItem", "BulkPreview", "Repaired", "describe_bulk_action"]

T = TypeVar("T")


@dataclass(frozen=True)
class Repaired:
    """What a retry or reset did: the instances back to RUNNING and the steps that run again."""

    instance_id: str
    status: str
    instances: list[str]
    nodes: list[str]


@dataclass(frozen=True)
class BulkPreview:
    """What a bulk action with a filter would touch now."""

    matched: int
    by_status: dict[str, int]
    first_ids: list[str]


def describe_bulk_action(action: str, params: dict[str, Any]) -> str:
    """A bulk action in a few words, as previews and batch lists name it: `reset to notify`,
    `send signal approve`, `retry`."""
    if action == "reset":
        return f"reset to {params.get('node', '')}"
    if action == "signal":
        return f"send signal {params.get('name', '')}"
    return action


@dataclass(frozen=True)
class BatchItem:
    instance_id: str
    state: str  # PENDING | DONE | SKIPPED | FAILED
    message: str
    at_ms: int


@dataclass(frozen=True)
class Batch:
    """A bulk action and how far it got."""

    batch_id: str
    action: str
    params: dict[str, Any]
    where: list[str]
    requested_by: str
    state: str  # RUNNING | PAUSED | DONE | CANCELLED
    rate_per_s: float
    matched: int
    done: int
    skipped: int
    failed: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int
    items: list[BatchItem] = field(default_factory=list)  # skipped and failed (get_batch)

    @property
    def pending(self) -> int:
        return self.matched - self.done - self.skipped - self.failed


def batch_from_pb(b: apb.Batch) -> Batch:
    return Batch(
        batch_id=b.batch_id,
        action=b.action,
        params=orjson.loads(b.params) if b.params else {},
        where=list(b.where),
        requested_by=b.requested_by,
        state=b.state,
        rate_per_s=b.rate_per_s,
        matched=b.matched,
        done=b.done,
        skipped=b.skipped,
        failed=b.failed,
        created_at_ms=b.created_at_ms,
        updated_at_ms=b.updated_at_ms,
        finished_at_ms=b.finished_at_ms,
        items=[BatchItem(i.instance_id, i.state, i.message, i.at_ms) for i in b.items],
    )


class AdminCalls:
    """Mixed into `Client`: it provides `_admin` (the WiggleAdmin stub) and `_call`."""

    _admin: Any
    _call: Callable[..., Any]

    def retry(self, instance_id: str) -> Repaired:
        """Resume a FAILED instance where it failed (RepairRefused in any other state)."""
        r = self._call(
            self._admin.RetryInstance,
            apb.RetryInstanceRequest(instance_id=instance_id),
            idempotent=False,
        )
        return Repaired(r.instance_id, r.status, list(r.instances), list(r.nodes))

    def reset(self, instance_id: str, node_id: str) -> Repaired:
        """Rewind an instance to a top-level node it passed, with that node's last input."""
        r = self._call(
            self._admin.ResetInstance,
            apb.ResetInstanceRequest(instance_id=instance_id, node_id=node_id),
            idempotent=False,
        )
        return Repaired(r.instance_id, r.status, list(r.instances), list(r.nodes))

    def preview_bulk(
        self, where: Sequence[str], action: str = "", params: dict[str, Any] | None = None
    ) -> BulkPreview:
        """What `where` matches now. With `action` (and `params`, as `start_bulk`'s), refused
        as `start_bulk` would refuse them: the preview of a run that cannot start says so."""
        request = apb.PreviewBulkRequest(where=list(where), action=action)
        if action:
            request.params = _bulk_params(params)
        r = self._call(self._admin.PreviewBulk, request, idempotent=True)
        return BulkPreview(r.matched, dict(r.by_status), list(r.first_ids))

    def start_bulk(
        self,
        action: str,
        where: Sequence[str],
        *,
        params: dict[str, Any] | None = None,
        rate_per_s: float = 0.0,
        requested_by: str = "",
    ) -> Batch:
        """Start a durable bulk action (cancel, retry, reset {node}, signal {name, payload})
        over what `where` matches now; see `preview_bulk` first."""
        request = apb.StartBulkRequest(
            action=action,
            where=list(where),
            params=_bulk_params(params),
            rate_per_s=rate_per_s,
            requested_by=requested_by,
        )
        # Not retried: a batch that was recorded would be recorded twice.
        return batch_from_pb(self._call(self._admin.StartBulk, request, idempotent=False))

    def get_batch(self, batch_id: str) -> Batch:
        request = apb.GetBatchRequest(batch_id=batch_id)
        return batch_from_pb(self._call(self._admin.GetBatch, request, idempotent=True))

    def list_batches(self, *, limit: int = 50, action: str = "") -> list[Batch]:
        request = apb.ListBatchesRequest(limit=limit, action=action)
        response = self._call(self._admin.ListBatches, request, idempotent=True)
        return [batch_from_pb(b) for b in response.batches]

    def update_batch(self, batch_id: str, state: str) -> Batch:
        """PAUSED, RUNNING (resume) or CANCELLED."""
        request = apb.UpdateBatchRequest(batch_id=batch_id, state=state)
        return batch_from_pb(self._call(self._admin.UpdateBatch, request, idempotent=True))

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
    ) -> dict[str, Any]:
        """The plan (a JSON document, docs/migration.md) that moves the live instances of
        `flow` to version `to`; nothing changes until it is applied."""
        request = apb.PlanMigrationRequest(
            flow=flow,
            to=to,
            where=list(where),
            map=dict(mapping or {}),
            timers=timers,
            children=children,
        )
        getattr(request, "from").extend(from_versions)
        response = self._call(self._admin.PlanMigration, request, idempotent=True)
        plan: dict[str, Any] = orjson.loads(response.plan)
        return plan

    def apply_migration(
        self,
        plan: dict[str, Any],
        *,
        limit: int = 0,
        rate_per_s: float = 0.0,
        skip_changed: bool = False,
        requested_by: str = "",
    ) -> Batch:
        """Start the batch that applies `plan` (the first `limit` instances: a canary)."""
        request = apb.ApplyMigrationRequest(
            plan=orjson.dumps(plan),
            limit=limit,
            rate_per_s=rate_per_s,
            skip_changed=skip_changed,
            requested_by=requested_by,
        )
        return batch_from_pb(self._call(self._admin.ApplyMigration, request, idempotent=False))

    def rollback_migration(
        self,
        batch_id: str = "",
        *,
        plan_hash: str = "",
        rate_per_s: float = 0.0,
        requested_by: str = "",
    ) -> Batch:
        """Start the batch that rolls back what migration `batch_id` applied (or every batch
        that applied the plan whose hash is `plan_hash`)."""
        request = apb.RollbackMigrationRequest(
            batch_id=batch_id, plan_hash=plan_hash, rate_per_s=rate_per_s, requested_by=requested_by
        )
        return batch_from_pb(self._call(self._admin.RollbackMigration, request, idempotent=False))


def _bulk_params(params: dict[str, Any] | None) -> bytes:
    """A bulk action's parameters on the wire (JSON), or a clear refusal."""
    try:
        return orjson.dumps(params or {})
    except TypeError as exc:
        raise errors.InvalidRequest(f"bulk parameters are not JSON: {exc}") from None
