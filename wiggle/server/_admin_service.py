"""The WiggleAdmin gRPC service (spec/proto/wiggle/v1/admin.proto): retry, reset, bulk actions,
schedules, and human tasks (server/_task_service.py). Decode, call the engine, encode; errors
map to statuses as in the Wiggle service."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import grpc

from wiggle._proto.wiggle.v1 import admin_pb2 as apb
from wiggle._proto.wiggle.v1 import admin_pb2_grpc as apb_grpc
from wiggle.engine import Engine
from wiggle.engine.ops.bulk import DEFAULT_RATE, BatchView
from wiggle.engine.ops.repair import RepairResult
from wiggle.engine.reads.schedules import ScheduleView
from wiggle.errors import InvalidRequest, PayloadTooLarge
from wiggle.server._auth import CALLER
from wiggle.server._calls import CallTracker, rpc_handler
from wiggle.server._convert import decode_json, encode_json
from wiggle.server._task_service import TaskMethods

__all__ = ["AdminService"]

#: ListBatches answers at most this many batches.
MAX_BATCHES = 500
#: DescribeSchedule answers at most this many next fire times, and this many last fires.
MAX_UPCOMING = 100
MAX_RECENT = 500
#: A bulk action goes no faster than this many instances per second.
MAX_RATE = 10_000.0


def _repaired(r: RepairResult) -> apb.RepairResponse:
    return apb.RepairResponse(
        instance_id=r.instance_id, status=str(r.status), instances=r.instances, nodes=r.nodes
    )


def batch_to_pb(b: BatchView) -> apb.Batch:
    return apb.Batch(
        batch_id=b.batch_id,
        action=b.action,
        params=encode_json(b.params),
        where=b.filter,
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
        items=[
            apb.BatchItem(
                instance_id=i.instance_id, state=i.state, message=i.message, at_ms=i.at_ms
            )
            for i in b.items
        ],
    )


def fire_to_pb(f: dict[str, Any]) -> apb.ScheduleFire:
    """A fire as the engine records it (`Fire.to_json()`, or `trigger`'s row)."""
    return apb.ScheduleFire(
        nominal_ms=f["nominal_ms"],
        until_ms=f["until_ms"],
        count=f["count"],
        due_ms=f["due_ms"],
        outcome=f["outcome"],
        reason=f["reason"],
        instance_id=f["instance_id"] or "",
        triggered=bool(f["triggered"]),
        decided_at_ms=f["decided_at_ms"],
    )


def schedule_to_pb(v: ScheduleView) -> apb.Schedule:
    return apb.Schedule(
        name=v.name,
        flow=v.flow,
        document=encode_json(v.document),
        digest=v.digest,
        paused=v.paused,
        note=v.note,
        time_zone=v.time_zone,
        next_due_ms=v.next_due_ms or 0,
        running_instance_id=v.running_id or "",
        buffered=v.buffered,
        fired=v.fired,
        skipped=v.skipped,
        created_at_ms=v.created_at_ms,
        updated_at_ms=v.updated_at_ms,
        upcoming=list(v.upcoming),
        recent=[fire_to_pb(f.to_json()) for f in v.recent],
    )


def _local(ms: int | None, zone: ZoneInfo) -> str:
    """An instant as RFC 3339 in `zone`, with its offset, to the second ("" for None)."""
    if ms is None:
        return ""
    return datetime.fromtimestamp(ms / 1000, zone).isoformat(timespec="seconds")


def _who(requested_by: str) -> str:
    """The credential that called, else what the caller says, else "anonymous"."""
    caller = CALLER.get()
    if caller:
        return f"credential {caller}"
    return requested_by or "anonymous"


class AdminService(TaskMethods, apb_grpc.WiggleAdminServicer):
    def __init__(self, engine: Engine, *, max_payload_bytes: int, calls: CallTracker) -> None:
        self._engine = engine
        self._limit = max_payload_bytes
        self.calls = calls  # shared with the Wiggle service: shutdown waits for both

    @rpc_handler
    def RetryInstance(
        self, request: apb.RetryInstanceRequest, context: grpc.ServicerContext
    ) -> apb.RepairResponse:
        if not request.instance_id:
            raise InvalidRequest("RetryInstance needs an instance id")
        return _repaired(self._engine.retry(request.instance_id, by=_who("")))

    @rpc_handler
    def ResetInstance(
        self, request: apb.ResetInstanceRequest, context: grpc.ServicerContext
    ) -> apb.RepairResponse:
        if not request.instance_id or not request.node_id:
            raise InvalidRequest("ResetInstance needs an instance id and the node to reset to")
        return _repaired(self._engine.reset(request.instance_id, request.node_id, by=_who("")))

    def _bulk_params(self, raw: bytes) -> dict[str, Any]:
        """A bulk action's parameters: a JSON object (empty: none)."""
        params = decode_json(raw, "the bulk action's parameters", self._limit)
        if params is None:
            return {}
        if not isinstance(params, dict):
            raise InvalidRequest("a bulk action's parameters are a JSON object")
        return params

    @rpc_handler
    def PreviewBulk(
        self, request: apb.PreviewBulkRequest, context: grpc.ServicerContext
    ) -> apb.PreviewBulkResponse:
        params = self._bulk_params(request.params) if request.action else None
        p = self._engine.preview_bulk(list(request.where), request.action, params)
        return apb.PreviewBulkResponse(
            matched=p.matched, by_status=p.by_status, first_ids=p.first_ids
        )

    @rpc_handler
    def StartBulk(self, request: apb.StartBulkRequest, context: grpc.ServicerContext) -> apb.Batch:
        params = self._bulk_params(request.params)
        rate = _rate(request.rate_per_s)
        view = self._engine.start_bulk(
            request.action,
            list(request.where),
            params=params,
            requested_by=_who(request.requested_by),
            rate_per_s=rate,
        )
        return batch_to_pb(view)

    @rpc_handler
    def GetBatch(self, request: apb.GetBatchRequest, context: grpc.ServicerContext) -> apb.Batch:
        return batch_to_pb(self._engine.get_batch(request.batch_id))

    @rpc_handler
    def ListBatches(
        self, request: apb.ListBatchesRequest, context: grpc.ServicerContext
    ) -> apb.ListBatchesResponse:
        limit = min(request.limit, MAX_BATCHES) if request.limit > 0 else 50
        found = self._engine.list_batches(limit=limit, action=request.action[:40])
        return apb.ListBatchesResponse(batches=[batch_to_pb(b) for b in found])

    @rpc_handler
    def UpdateBatch(
        self, request: apb.UpdateBatchRequest, context: grpc.ServicerContext
    ) -> apb.Batch:
        return batch_to_pb(self._engine.set_batch_state(request.batch_id, request.state.upper()))

    @rpc_handler
    def PlanMigration(
        self, request: apb.PlanMigrationRequest, context: grpc.ServicerContext
    ) -> apb.PlanMigrationResponse:
        if not request.flow or not request.to:
            raise InvalidRequest("PlanMigration needs a flow name and the version to move to")
        plan = self._engine.plan_migration(
            request.flow,
            request.to,
            from_versions=list(getattr(request, "from")),
            where=list(request.where),
            mapping=dict(request.map),
            timers=request.timers or "keep",
            children=request.children,
        )
        return apb.PlanMigrationResponse(plan=encode_json(plan))

    @rpc_handler
    def ApplyMigration(
        self, request: apb.ApplyMigrationRequest, context: grpc.ServicerContext
    ) -> apb.Batch:
        plan = decode_json(request.plan, "the plan", len(request.plan) + 1)
        view = self._engine.apply_migration(
            plan,
            limit=max(request.limit, 0),
            rate_per_s=_rate(request.rate_per_s),
            requested_by=_who(request.requested_by),
            skip_changed=request.skip_changed,
        )
        return batch_to_pb(view)

    @rpc_handler
    def RollbackMigration(
        self, request: apb.RollbackMigrationRequest, context: grpc.ServicerContext
    ) -> apb.Batch:
        view = self._engine.rollback_migration(
            request.batch_id,
            plan_hash=request.plan_hash,
            rate_per_s=_rate(request.rate_per_s),
            requested_by=_who(request.requested_by),
        )
        return batch_to_pb(view)

    # -- schedules ---------------------------------------------------------------------------

    @rpc_handler
    def ApplySchedule(
        self, request: apb.ApplyScheduleRequest, context: grpc.ServicerContext
    ) -> apb.ApplyScheduleResponse:
        from wiggle.schedules import load_schedule

        if not request.source:
            raise InvalidRequest("ApplySchedule needs the schedule document")
        if len(request.source) > self._limit:
            raise PayloadTooLarge(f"the schedule document is over {self._limit} bytes")
        schedule = load_schedule(request.source, request.filename or "<schedule>")  # FlowError
        applied = self._engine.apply_schedule(schedule)
        return apb.ApplyScheduleResponse(
            name=applied.name,
            created=applied.created,
            changed=list(applied.changed),
            next_due_ms=applied.next_due_ms or 0,
            next_due=_local(applied.next_due_ms, schedule.spec.zone),
        )

    @rpc_handler
    def ListSchedules(
        self, request: apb.ListSchedulesRequest, context: grpc.ServicerContext
    ) -> apb.ListSchedulesResponse:
        found = self._engine.list_schedules(request.flow or None)
        return apb.ListSchedulesResponse(schedules=[schedule_to_pb(v) for v in found])

    def _described(self, name: str, upcoming: int = 0, recent: int = 0) -> apb.Schedule:
        if not name:
            raise InvalidRequest("a schedule's name is needed")
        view = self._engine.describe_schedule(
            name,
            upcoming=min(upcoming, MAX_UPCOMING) if upcoming > 0 else 10,
            recent=min(recent, MAX_RECENT) if recent > 0 else 20,
        )
        return schedule_to_pb(view)

    @rpc_handler
    def DescribeSchedule(
        self, request: apb.DescribeScheduleRequest, context: grpc.ServicerContext
    ) -> apb.Schedule:
        return self._described(request.name, request.upcoming, request.recent)

    @rpc_handler
    def PauseSchedule(
        self, request: apb.PauseScheduleRequest, context: grpc.ServicerContext
    ) -> apb.Schedule:
        if not request.name:
            raise InvalidRequest("PauseSchedule needs a schedule's name")
        self._engine.pause_schedule(request.name, request.note)
        return self._described(request.name)

    @rpc_handler
    def UnpauseSchedule(
        self, request: apb.UnpauseScheduleRequest, context: grpc.ServicerContext
    ) -> apb.Schedule:
        if not request.name:
            raise InvalidRequest("UnpauseSchedule needs a schedule's name")
        self._engine.unpause_schedule(request.name)
        return self._described(request.name)

    @rpc_handler
    def TriggerSchedule(
        self, request: apb.TriggerScheduleRequest, context: grpc.ServicerContext
    ) -> apb.ScheduleFire:
        if not request.name:
            raise InvalidRequest("TriggerSchedule needs a schedule's name")
        return fire_to_pb(self._engine.trigger_schedule(request.name))

    @rpc_handler
    def DeleteSchedule(
        self, request: apb.DeleteScheduleRequest, context: grpc.ServicerContext
    ) -> apb.DeleteScheduleResponse:
        if not request.name:
            raise InvalidRequest("DeleteSchedule needs a schedule's name")
        self._engine.delete_schedule(request.name)
        return apb.DeleteScheduleResponse(name=request.name)

    @rpc_handler
    def PreviewBackfill(
        self, request: apb.BackfillRequest, context: grpc.ServicerContext
    ) -> apb.PreviewBackfillResponse:
        name, first, last = _backfill_args(request)
        preview = self._engine.preview_backfill(name, first, last)
        zone = self._engine.describe_schedule(name, upcoming=0, recent=0).time_zone
        return apb.PreviewBackfillResponse(
            name=name, nominal_ms=list(preview.nominal_ms), already=preview.already, time_zone=zone
        )

    @rpc_handler
    def StartBackfill(
        self, request: apb.BackfillRequest, context: grpc.ServicerContext
    ) -> apb.Batch:
        name, first, last = _backfill_args(request)
        view = self._engine.start_backfill(
            name,
            first,
            last,
            overlap=request.overlap or "allow_all",
            requested_by=_who(request.requested_by),
            rate_per_s=_rate(request.rate_per_s),
        )
        return batch_to_pb(view)


def _backfill_args(request: apb.BackfillRequest) -> tuple[str, int, int]:
    if not request.name:
        raise InvalidRequest("a backfill needs a schedule's name")
    return request.name, request.from_ms, request.to_ms


def _rate(asked: float) -> float:
    rate = asked or DEFAULT_RATE
    if not (0 < rate <= MAX_RATE):
        raise InvalidRequest(f"a rate is above 0 and at most {MAX_RATE:g} instances per second")
    return rate
