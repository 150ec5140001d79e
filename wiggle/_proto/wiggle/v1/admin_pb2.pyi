from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RetryInstanceRequest(_message.Message):
    __slots__ = ("instance_id",)
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    def __init__(self, instance_id: _Optional[str] = ...) -> None: ...

class ResetInstanceRequest(_message.Message):
    __slots__ = ("instance_id", "node_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    node_id: str
    def __init__(self, instance_id: _Optional[str] = ..., node_id: _Optional[str] = ...) -> None: ...

class RepairResponse(_message.Message):
    __slots__ = ("instance_id", "status", "instances", "nodes")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    status: str
    instances: _containers.RepeatedScalarFieldContainer[str]
    nodes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, instance_id: _Optional[str] = ..., status: _Optional[str] = ..., instances: _Optional[_Iterable[str]] = ..., nodes: _Optional[_Iterable[str]] = ...) -> None: ...

class PreviewBulkRequest(_message.Message):
    __slots__ = ("where", "action", "params")
    WHERE_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    where: _containers.RepeatedScalarFieldContainer[str]
    action: str
    params: bytes
    def __init__(self, where: _Optional[_Iterable[str]] = ..., action: _Optional[str] = ..., params: _Optional[bytes] = ...) -> None: ...

class PreviewBulkResponse(_message.Message):
    __slots__ = ("matched", "by_status", "first_ids")
    class ByStatusEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    BY_STATUS_FIELD_NUMBER: _ClassVar[int]
    FIRST_IDS_FIELD_NUMBER: _ClassVar[int]
    matched: int
    by_status: _containers.ScalarMap[str, int]
    first_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, matched: _Optional[int] = ..., by_status: _Optional[_Mapping[str, int]] = ..., first_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class StartBulkRequest(_message.Message):
    __slots__ = ("action", "where", "params", "rate_per_s", "requested_by")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    action: str
    where: _containers.RepeatedScalarFieldContainer[str]
    params: bytes
    rate_per_s: float
    requested_by: str
    def __init__(self, action: _Optional[str] = ..., where: _Optional[_Iterable[str]] = ..., params: _Optional[bytes] = ..., rate_per_s: _Optional[float] = ..., requested_by: _Optional[str] = ...) -> None: ...

class BatchItem(_message.Message):
    __slots__ = ("instance_id", "state", "message", "at_ms")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    state: str
    message: str
    at_ms: int
    def __init__(self, instance_id: _Optional[str] = ..., state: _Optional[str] = ..., message: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("batch_id", "action", "params", "where", "requested_by", "state", "rate_per_s", "matched", "done", "skipped", "failed", "created_at_ms", "updated_at_ms", "finished_at_ms", "items")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    action: str
    params: bytes
    where: _containers.RepeatedScalarFieldContainer[str]
    requested_by: str
    state: str
    rate_per_s: float
    matched: int
    done: int
    skipped: int
    failed: int
    created_at_ms: int
    updated_at_ms: int
    finished_at_ms: int
    items: _containers.RepeatedCompositeFieldContainer[BatchItem]
    def __init__(self, batch_id: _Optional[str] = ..., action: _Optional[str] = ..., params: _Optional[bytes] = ..., where: _Optional[_Iterable[str]] = ..., requested_by: _Optional[str] = ..., state: _Optional[str] = ..., rate_per_s: _Optional[float] = ..., matched: _Optional[int] = ..., done: _Optional[int] = ..., skipped: _Optional[int] = ..., failed: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., finished_at_ms: _Optional[int] = ..., items: _Optional[_Iterable[_Union[BatchItem, _Mapping]]] = ...) -> None: ...

class GetBatchRequest(_message.Message):
    __slots__ = ("batch_id",)
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    def __init__(self, batch_id: _Optional[str] = ...) -> None: ...

class ListBatchesRequest(_message.Message):
    __slots__ = ("limit", "action")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    limit: int
    action: str
    def __init__(self, limit: _Optional[int] = ..., action: _Optional[str] = ...) -> None: ...

class ListBatchesResponse(_message.Message):
    __slots__ = ("batches",)
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    batches: _containers.RepeatedCompositeFieldContainer[Batch]
    def __init__(self, batches: _Optional[_Iterable[_Union[Batch, _Mapping]]] = ...) -> None: ...

class UpdateBatchRequest(_message.Message):
    __slots__ = ("batch_id", "state")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    state: str
    def __init__(self, batch_id: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class PlanMigrationRequest(_message.Message):
    __slots__ = ("flow", "to", "where", "map", "timers", "children")
    class MapEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FLOW_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    MAP_FIELD_NUMBER: _ClassVar[int]
    TIMERS_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_FIELD_NUMBER: _ClassVar[int]
    flow: str
    to: str
    where: _containers.RepeatedScalarFieldContainer[str]
    map: _containers.ScalarMap[str, str]
    timers: str
    children: bool
    def __init__(self, flow: _Optional[str] = ..., to: _Optional[str] = ..., where: _Optional[_Iterable[str]] = ..., map: _Optional[_Mapping[str, str]] = ..., timers: _Optional[str] = ..., children: _Optional[bool] = ..., **kwargs) -> None: ...

class PlanMigrationResponse(_message.Message):
    __slots__ = ("plan",)
    PLAN_FIELD_NUMBER: _ClassVar[int]
    plan: bytes
    def __init__(self, plan: _Optional[bytes] = ...) -> None: ...

class ApplyMigrationRequest(_message.Message):
    __slots__ = ("plan", "limit", "rate_per_s", "skip_changed", "requested_by")
    PLAN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    SKIP_CHANGED_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    plan: bytes
    limit: int
    rate_per_s: float
    skip_changed: bool
    requested_by: str
    def __init__(self, plan: _Optional[bytes] = ..., limit: _Optional[int] = ..., rate_per_s: _Optional[float] = ..., skip_changed: _Optional[bool] = ..., requested_by: _Optional[str] = ...) -> None: ...

class RollbackMigrationRequest(_message.Message):
    __slots__ = ("batch_id", "plan_hash", "rate_per_s", "requested_by")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    PLAN_HASH_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    batch_id: str
    plan_hash: str
    rate_per_s: float
    requested_by: str
    def __init__(self, batch_id: _Optional[str] = ..., plan_hash: _Optional[str] = ..., rate_per_s: _Optional[float] = ..., requested_by: _Optional[str] = ...) -> None: ...

class ApplyScheduleRequest(_message.Message):
    __slots__ = ("source", "filename")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    source: bytes
    filename: str
    def __init__(self, source: _Optional[bytes] = ..., filename: _Optional[str] = ...) -> None: ...

class ApplyScheduleResponse(_message.Message):
    __slots__ = ("name", "created", "changed", "next_due_ms", "next_due")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    created: bool
    changed: _containers.RepeatedScalarFieldContainer[str]
    next_due_ms: int
    next_due: str
    def __init__(self, name: _Optional[str] = ..., created: _Optional[bool] = ..., changed: _Optional[_Iterable[str]] = ..., next_due_ms: _Optional[int] = ..., next_due: _Optional[str] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("flow",)
    FLOW_FIELD_NUMBER: _ClassVar[int]
    flow: str
    def __init__(self, flow: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules",)
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ...) -> None: ...

class DescribeScheduleRequest(_message.Message):
    __slots__ = ("name", "upcoming", "recent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    upcoming: int
    recent: int
    def __init__(self, name: _Optional[str] = ..., upcoming: _Optional[int] = ..., recent: _Optional[int] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("name", "note")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    name: str
    note: str
    def __init__(self, name: _Optional[str] = ..., note: _Optional[str] = ...) -> None: ...

class UnpauseScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("name", "flow", "document", "digest", "paused", "note", "time_zone", "next_due_ms", "running_instance_id", "buffered", "fired", "skipped", "created_at_ms", "updated_at_ms", "upcoming", "recent")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    NEXT_DUE_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPCOMING_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    flow: str
    document: bytes
    digest: str
    paused: bool
    note: str
    time_zone: str
    next_due_ms: int
    running_instance_id: str
    buffered: int
    fired: int
    skipped: int
    created_at_ms: int
    updated_at_ms: int
    upcoming: _containers.RepeatedScalarFieldContainer[str]
    recent: _containers.RepeatedCompositeFieldContainer[ScheduleFire]
    def __init__(self, name: _Optional[str] = ..., flow: _Optional[str] = ..., document: _Optional[bytes] = ..., digest: _Optional[str] = ..., paused: _Optional[bool] = ..., note: _Optional[str] = ..., time_zone: _Optional[str] = ..., next_due_ms: _Optional[int] = ..., running_instance_id: _Optional[str] = ..., buffered: _Optional[int] = ..., fired: _Optional[int] = ..., skipped: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., upcoming: _Optional[_Iterable[str]] = ..., recent: _Optional[_Iterable[_Union[ScheduleFire, _Mapping]]] = ...) -> None: ...

class ScheduleFire(_message.Message):
    __slots__ = ("nominal_ms", "until_ms", "count", "due_ms", "outcome", "reason", "instance_id", "triggered", "decided_at_ms")
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    DUE_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGERED_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    nominal_ms: int
    until_ms: int
    count: int
    due_ms: int
    outcome: str
    reason: str
    instance_id: str
    triggered: bool
    decided_at_ms: int
    def __init__(self, nominal_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., count: _Optional[int] = ..., due_ms: _Optional[int] = ..., outcome: _Optional[str] = ..., reason: _Optional[str] = ..., instance_id: _Optional[str] = ..., triggered: _Optional[bool] = ..., decided_at_ms: _Optional[int] = ...) -> None: ...

class BackfillRequest(_message.Message):
    __slots__ = ("name", "from_ms", "to_ms", "overlap", "rate_per_s", "requested_by")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    RATE_PER_S_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    name: str
    from_ms: int
    to_ms: int
    overlap: str
    rate_per_s: float
    requested_by: str
    def __init__(self, name: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., overlap: _Optional[str] = ..., rate_per_s: _Optional[float] = ..., requested_by: _Optional[str] = ...) -> None: ...

class PreviewBackfillResponse(_message.Message):
    __slots__ = ("name", "nominal_ms", "already", "time_zone")
    NAME_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    ALREADY_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    name: str
    nominal_ms: _containers.RepeatedScalarFieldContainer[int]
    already: int
    time_zone: str
    def __init__(self, name: _Optional[str] = ..., nominal_ms: _Optional[_Iterable[int]] = ..., already: _Optional[int] = ..., time_zone: _Optional[str] = ...) -> None: ...

class TaskActor(_message.Message):
    __slots__ = ("person", "groups", "admin")
    PERSON_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    ADMIN_FIELD_NUMBER: _ClassVar[int]
    person: str
    groups: _containers.RepeatedScalarFieldContainer[str]
    admin: bool
    def __init__(self, person: _Optional[str] = ..., groups: _Optional[_Iterable[str]] = ..., admin: _Optional[bool] = ...) -> None: ...

class ListHumanTasksRequest(_message.Message):
    __slots__ = ("actor", "states", "instance_id", "limit", "all_states")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ALL_STATES_FIELD_NUMBER: _ClassVar[int]
    actor: TaskActor
    states: _containers.RepeatedScalarFieldContainer[str]
    instance_id: str
    limit: int
    all_states: bool
    def __init__(self, actor: _Optional[_Union[TaskActor, _Mapping]] = ..., states: _Optional[_Iterable[str]] = ..., instance_id: _Optional[str] = ..., limit: _Optional[int] = ..., all_states: _Optional[bool] = ...) -> None: ...

class ListHumanTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[HumanTask]
    def __init__(self, tasks: _Optional[_Iterable[_Union[HumanTask, _Mapping]]] = ...) -> None: ...

class HumanTaskRequest(_message.Message):
    __slots__ = ("actor", "task_id", "request_id")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    actor: TaskActor
    task_id: str
    request_id: str
    def __init__(self, actor: _Optional[_Union[TaskActor, _Mapping]] = ..., task_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ReassignHumanTaskRequest(_message.Message):
    __slots__ = ("actor", "task_id", "to", "request_id")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    actor: TaskActor
    task_id: str
    to: str
    request_id: str
    def __init__(self, actor: _Optional[_Union[TaskActor, _Mapping]] = ..., task_id: _Optional[str] = ..., to: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CompleteHumanTaskRequest(_message.Message):
    __slots__ = ("actor", "task_id", "answer", "request_id")
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    actor: TaskActor
    task_id: str
    answer: bytes
    request_id: str
    def __init__(self, actor: _Optional[_Union[TaskActor, _Mapping]] = ..., task_id: _Optional[str] = ..., answer: _Optional[bytes] = ..., request_id: _Optional[str] = ...) -> None: ...

class HumanTaskAction(_message.Message):
    __slots__ = ("seq", "at_ms", "actor", "action", "detail", "request_id")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    seq: int
    at_ms: int
    actor: str
    action: str
    detail: bytes
    request_id: str
    def __init__(self, seq: _Optional[int] = ..., at_ms: _Optional[int] = ..., actor: _Optional[str] = ..., action: _Optional[str] = ..., detail: _Optional[bytes] = ..., request_id: _Optional[str] = ...) -> None: ...

class HumanTask(_message.Message):
    __slots__ = ("task_id", "instance_id", "node_id", "flow", "version", "title", "instructions", "form", "assignee", "candidate_people", "candidate_groups", "excluded", "approvals", "created_at_ms", "due_at_ms", "deadline_at_ms", "state", "claimed_by", "completed_by", "completed_at_ms", "answer", "approved", "actions", "reminded_count", "last_reminded_at_ms", "next_remind_at_ms")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    FORM_FIELD_NUMBER: _ClassVar[int]
    ASSIGNEE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_PEOPLE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_GROUPS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DUE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_BY_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_BY_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    REMINDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    LAST_REMINDED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_REMIND_AT_MS_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    instance_id: str
    node_id: str
    flow: str
    version: str
    title: str
    instructions: str
    form: bytes
    assignee: str
    candidate_people: _containers.RepeatedScalarFieldContainer[str]
    candidate_groups: _containers.RepeatedScalarFieldContainer[str]
    excluded: _containers.RepeatedScalarFieldContainer[str]
    approvals: int
    created_at_ms: int
    due_at_ms: int
    deadline_at_ms: int
    state: str
    claimed_by: str
    completed_by: str
    completed_at_ms: int
    answer: bytes
    approved: bytes
    actions: _containers.RepeatedCompositeFieldContainer[HumanTaskAction]
    reminded_count: int
    last_reminded_at_ms: int
    next_remind_at_ms: int
    def __init__(self, task_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., node_id: _Optional[str] = ..., flow: _Optional[str] = ..., version: _Optional[str] = ..., title: _Optional[str] = ..., instructions: _Optional[str] = ..., form: _Optional[bytes] = ..., assignee: _Optional[str] = ..., candidate_people: _Optional[_Iterable[str]] = ..., candidate_groups: _Optional[_Iterable[str]] = ..., excluded: _Optional[_Iterable[str]] = ..., approvals: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., due_at_ms: _Optional[int] = ..., deadline_at_ms: _Optional[int] = ..., state: _Optional[str] = ..., claimed_by: _Optional[str] = ..., completed_by: _Optional[str] = ..., completed_at_ms: _Optional[int] = ..., answer: _Optional[bytes] = ..., approved: _Optional[bytes] = ..., actions: _Optional[_Iterable[_Union[HumanTaskAction, _Mapping]]] = ..., reminded_count: _Optional[int] = ..., last_reminded_at_ms: _Optional[int] = ..., next_remind_at_ms: _Optional[int] = ...) -> None: ...

class HumanTaskAnswer(_message.Message):
    __slots__ = ("task", "completed", "replayed")
    TASK_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    task: HumanTask
    completed: bool
    replayed: bool
    def __init__(self, task: _Optional[_Union[HumanTask, _Mapping]] = ..., completed: _Optional[bool] = ..., replayed: _Optional[bool] = ...) -> None: ...
