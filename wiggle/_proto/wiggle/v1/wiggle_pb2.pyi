from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERROR_CODE_UNSPECIFIED: _ClassVar[ErrorCode]
    FLOW_INVALID: _ClassVar[ErrorCode]
    DEFINITION_NOT_FOUND: _ClassVar[ErrorCode]
    INSTANCE_NOT_FOUND: _ClassVar[ErrorCode]
    INPUT_REJECTED: _ClassVar[ErrorCode]
    INVALID_REQUEST: _ClassVar[ErrorCode]
    WRONG_PATH: _ClassVar[ErrorCode]
    STALE_LEASE: _ClassVar[ErrorCode]
    INSTANCE_NOT_RUNNING: _ClassVar[ErrorCode]
    PAYLOAD_TOO_LARGE: _ClassVar[ErrorCode]
    UNAUTHENTICATED: _ClassVar[ErrorCode]
    PERMISSION_DENIED: _ClassVar[ErrorCode]
    SIGNAL_NOT_AWAITED: _ClassVar[ErrorCode]
    UNAVAILABLE: _ClassVar[ErrorCode]
    REPORT_OUT_OF_ORDER: _ClassVar[ErrorCode]
    REPAIR_REFUSED: _ClassVar[ErrorCode]
    BATCH_NOT_FOUND: _ClassVar[ErrorCode]
    INSTANCE_EXISTS: _ClassVar[ErrorCode]
    SCHEDULE_NOT_FOUND: _ClassVar[ErrorCode]

class ExecutionMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTION_MODE_UNSPECIFIED: _ClassVar[ExecutionMode]
    SERVER: _ClassVar[ExecutionMode]
    LOCAL_SYNC: _ClassVar[ExecutionMode]
    LOCAL_ASYNC: _ClassVar[ExecutionMode]
    DEFAULT: _ClassVar[ExecutionMode]

class InstanceStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INSTANCE_STATUS_UNSPECIFIED: _ClassVar[InstanceStatus]
    RUNNING: _ClassVar[InstanceStatus]
    COMPLETED: _ClassVar[InstanceStatus]
    FAILED: _ClassVar[InstanceStatus]
    CANCELLED: _ClassVar[InstanceStatus]

class TokenState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOKEN_STATE_UNSPECIFIED: _ClassVar[TokenState]
    READY: _ClassVar[TokenState]
    LEASED: _ClassVar[TokenState]
    WAITING: _ClassVar[TokenState]
    AWAITING: _ClassVar[TokenState]
    JOINED: _ClassVar[TokenState]
    DONE: _ClassVar[TokenState]
ERROR_CODE_UNSPECIFIED: ErrorCode
FLOW_INVALID: ErrorCode
DEFINITION_NOT_FOUND: ErrorCode
INSTANCE_NOT_FOUND: ErrorCode
INPUT_REJECTED: ErrorCode
INVALID_REQUEST: ErrorCode
WRONG_PATH: ErrorCode
STALE_LEASE: ErrorCode
INSTANCE_NOT_RUNNING: ErrorCode
PAYLOAD_TOO_LARGE: ErrorCode
UNAUTHENTICATED: ErrorCode
PERMISSION_DENIED: ErrorCode
SIGNAL_NOT_AWAITED: ErrorCode
UNAVAILABLE: ErrorCode
REPORT_OUT_OF_ORDER: ErrorCode
REPAIR_REFUSED: ErrorCode
BATCH_NOT_FOUND: ErrorCode
INSTANCE_EXISTS: ErrorCode
SCHEDULE_NOT_FOUND: ErrorCode
EXECUTION_MODE_UNSPECIFIED: ExecutionMode
SERVER: ExecutionMode
LOCAL_SYNC: ExecutionMode
LOCAL_ASYNC: ExecutionMode
DEFAULT: ExecutionMode
INSTANCE_STATUS_UNSPECIFIED: InstanceStatus
RUNNING: InstanceStatus
COMPLETED: InstanceStatus
FAILED: InstanceStatus
CANCELLED: InstanceStatus
TOKEN_STATE_UNSPECIFIED: TokenState
READY: TokenState
LEASED: TokenState
WAITING: TokenState
AWAITING: TokenState
JOINED: TokenState
DONE: TokenState

class RegisterDefinitionRequest(_message.Message):
    __slots__ = ("source", "graph", "filename")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    source: bytes
    graph: bytes
    filename: str
    def __init__(self, source: _Optional[bytes] = ..., graph: _Optional[bytes] = ..., filename: _Optional[str] = ...) -> None: ...

class RegisterDefinitionResponse(_message.Message):
    __slots__ = ("name", "version", "created")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    created: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class ListDefinitionsRequest(_message.Message):
    __slots__ = ("name", "include_counts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    include_counts: bool
    def __init__(self, name: _Optional[str] = ..., include_counts: _Optional[bool] = ...) -> None: ...

class DefinitionSummary(_message.Message):
    __slots__ = ("name", "version", "registered_at_ms", "execution_mode", "instance_counts")
    class InstanceCountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_MODE_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    registered_at_ms: int
    execution_mode: ExecutionMode
    instance_counts: _containers.ScalarMap[str, int]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., registered_at_ms: _Optional[int] = ..., execution_mode: _Optional[_Union[ExecutionMode, str]] = ..., instance_counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class ListDefinitionsResponse(_message.Message):
    __slots__ = ("definitions",)
    DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    definitions: _containers.RepeatedCompositeFieldContainer[DefinitionSummary]
    def __init__(self, definitions: _Optional[_Iterable[_Union[DefinitionSummary, _Mapping]]] = ...) -> None: ...

class GetDefinitionRequest(_message.Message):
    __slots__ = ("name", "version", "include_node_counts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_NODE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    include_node_counts: bool
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., include_node_counts: _Optional[bool] = ...) -> None: ...

class Definition(_message.Message):
    __slots__ = ("name", "version", "graph", "registered_at_ms", "node_counts")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NODE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    graph: bytes
    registered_at_ms: int
    node_counts: _containers.RepeatedCompositeFieldContainer[NodeCount]
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., graph: _Optional[bytes] = ..., registered_at_ms: _Optional[int] = ..., node_counts: _Optional[_Iterable[_Union[NodeCount, _Mapping]]] = ...) -> None: ...

class NodeCount(_message.Message):
    __slots__ = ("node_id", "state", "instances")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    state: str
    instances: int
    def __init__(self, node_id: _Optional[str] = ..., state: _Optional[str] = ..., instances: _Optional[int] = ...) -> None: ...

class StartInstanceRequest(_message.Message):
    __slots__ = ("flow", "version", "input", "instance_id", "eager", "traceparent", "tracestate")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    EAGER_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    flow: str
    version: str
    input: bytes
    instance_id: str
    eager: EagerDispatch
    traceparent: str
    tracestate: str
    def __init__(self, flow: _Optional[str] = ..., version: _Optional[str] = ..., input: _Optional[bytes] = ..., instance_id: _Optional[str] = ..., eager: _Optional[_Union[EagerDispatch, _Mapping]] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class EagerDispatch(_message.Message):
    __slots__ = ("worker_id", "queues", "activities")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    activities: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., activities: _Optional[_Iterable[str]] = ...) -> None: ...

class StartInstanceResponse(_message.Message):
    __slots__ = ("instance_id", "version", "eager_task", "created")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    EAGER_TASK_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    version: str
    eager_task: Task
    created: bool
    def __init__(self, instance_id: _Optional[str] = ..., version: _Optional[str] = ..., eager_task: _Optional[_Union[Task, _Mapping]] = ..., created: _Optional[bool] = ...) -> None: ...

class SignalInstanceRequest(_message.Message):
    __slots__ = ("instance_id", "name", "payload")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    name: str
    payload: bytes
    def __init__(self, instance_id: _Optional[str] = ..., name: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class SignalInstanceResponse(_message.Message):
    __slots__ = ("delivered",)
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    delivered: bool
    def __init__(self, delivered: _Optional[bool] = ...) -> None: ...

class WaitInstanceRequest(_message.Message):
    __slots__ = ("instance_id", "wait_ms", "include_events")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    wait_ms: int
    include_events: bool
    def __init__(self, instance_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., include_events: _Optional[bool] = ...) -> None: ...

class CancelInstanceRequest(_message.Message):
    __slots__ = ("instance_id", "reason")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    reason: str
    def __init__(self, instance_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelInstanceResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: InstanceStatus
    def __init__(self, status: _Optional[_Union[InstanceStatus, str]] = ...) -> None: ...

class DescribeInstanceRequest(_message.Message):
    __slots__ = ("instance_id", "include_events")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_EVENTS_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    include_events: bool
    def __init__(self, instance_id: _Optional[str] = ..., include_events: _Optional[bool] = ...) -> None: ...

class Instance(_message.Message):
    __slots__ = ("instance_id", "flow", "version", "status", "context", "reason", "execution_mode", "parent_instance_id", "created_at_ms", "updated_at_ms", "tokens", "events", "input", "child_instance_ids", "current_node", "search", "step_inputs", "started_by", "trace_id")
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_MODE_FIELD_NUMBER: _ClassVar[int]
    PARENT_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    CHILD_INSTANCE_IDS_FIELD_NUMBER: _ClassVar[int]
    CURRENT_NODE_FIELD_NUMBER: _ClassVar[int]
    SEARCH_FIELD_NUMBER: _ClassVar[int]
    STEP_INPUTS_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    instance_id: str
    flow: str
    version: str
    status: InstanceStatus
    context: bytes
    reason: str
    execution_mode: ExecutionMode
    parent_instance_id: str
    created_at_ms: int
    updated_at_ms: int
    tokens: _containers.RepeatedCompositeFieldContainer[Token]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    input: bytes
    child_instance_ids: _containers.RepeatedScalarFieldContainer[str]
    current_node: str
    search: bytes
    step_inputs: bytes
    started_by: str
    trace_id: str
    def __init__(self, instance_id: _Optional[str] = ..., flow: _Optional[str] = ..., version: _Optional[str] = ..., status: _Optional[_Union[InstanceStatus, str]] = ..., context: _Optional[bytes] = ..., reason: _Optional[str] = ..., execution_mode: _Optional[_Union[ExecutionMode, str]] = ..., parent_instance_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., tokens: _Optional[_Iterable[_Union[Token, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., input: _Optional[bytes] = ..., child_instance_ids: _Optional[_Iterable[str]] = ..., current_node: _Optional[str] = ..., search: _Optional[bytes] = ..., step_inputs: _Optional[bytes] = ..., started_by: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("token_id", "node_id", "state", "attempt", "lease_owner", "lease_expires_at_ms", "wake_at_ms", "branch", "context", "queue", "activity", "wait_kind", "child_instance_id", "ready_at_ms", "parent_token_id", "explanation")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    WAKE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    WAIT_KIND_FIELD_NUMBER: _ClassVar[int]
    CHILD_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    READY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    EXPLANATION_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    node_id: str
    state: TokenState
    attempt: int
    lease_owner: str
    lease_expires_at_ms: int
    wake_at_ms: int
    branch: str
    context: bytes
    queue: str
    activity: str
    wait_kind: str
    child_instance_id: str
    ready_at_ms: int
    parent_token_id: str
    explanation: str
    def __init__(self, token_id: _Optional[str] = ..., node_id: _Optional[str] = ..., state: _Optional[_Union[TokenState, str]] = ..., attempt: _Optional[int] = ..., lease_owner: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., wake_at_ms: _Optional[int] = ..., branch: _Optional[str] = ..., context: _Optional[bytes] = ..., queue: _Optional[str] = ..., activity: _Optional[str] = ..., wait_kind: _Optional[str] = ..., child_instance_id: _Optional[str] = ..., ready_at_ms: _Optional[int] = ..., parent_token_id: _Optional[str] = ..., explanation: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "at_ms", "kind", "node_id", "attempt", "detail")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    seq: int
    at_ms: int
    kind: str
    node_id: str
    attempt: int
    detail: bytes
    def __init__(self, seq: _Optional[int] = ..., at_ms: _Optional[int] = ..., kind: _Optional[str] = ..., node_id: _Optional[str] = ..., attempt: _Optional[int] = ..., detail: _Optional[bytes] = ...) -> None: ...

class ListInstancesRequest(_message.Message):
    __slots__ = ("flow", "status", "page_size", "page_token", "version", "started_after_ms", "started_before_ms", "id_contains", "include_counts", "where")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    STARTED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    STARTED_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    ID_CONTAINS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    WHERE_FIELD_NUMBER: _ClassVar[int]
    flow: str
    status: InstanceStatus
    page_size: int
    page_token: str
    version: str
    started_after_ms: int
    started_before_ms: int
    id_contains: str
    include_counts: bool
    where: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, flow: _Optional[str] = ..., status: _Optional[_Union[InstanceStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., version: _Optional[str] = ..., started_after_ms: _Optional[int] = ..., started_before_ms: _Optional[int] = ..., id_contains: _Optional[str] = ..., include_counts: _Optional[bool] = ..., where: _Optional[_Iterable[str]] = ...) -> None: ...

class ListInstancesResponse(_message.Message):
    __slots__ = ("instances", "next_page_token", "counts")
    class CountsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[Instance]
    next_page_token: str
    counts: _containers.ScalarMap[str, int]
    def __init__(self, instances: _Optional[_Iterable[_Union[Instance, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., counts: _Optional[_Mapping[str, int]] = ...) -> None: ...

class PollTasksRequest(_message.Message):
    __slots__ = ("worker_id", "queues", "max_tasks", "wait_ms", "activities", "slots", "sdk")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    max_tasks: int
    wait_ms: int
    activities: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    sdk: str
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., max_tasks: _Optional[int] = ..., wait_ms: _Optional[int] = ..., activities: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., sdk: _Optional[str] = ...) -> None: ...

class EndPollsRequest(_message.Message):
    __slots__ = ("worker_id",)
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class EndPollsResponse(_message.Message):
    __slots__ = ("ended",)
    ENDED_FIELD_NUMBER: _ClassVar[int]
    ended: int
    def __init__(self, ended: _Optional[int] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ("seen_within_ms", "include_queues")
    SEEN_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_QUEUES_FIELD_NUMBER: _ClassVar[int]
    seen_within_ms: int
    include_queues: bool
    def __init__(self, seen_within_ms: _Optional[int] = ..., include_queues: _Optional[bool] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("worker_id", "queues", "activities", "slots", "sdk", "first_seen_ms", "last_poll_ms")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    ACTIVITIES_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SDK_FIELD_NUMBER: _ClassVar[int]
    FIRST_SEEN_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_POLL_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    activities: _containers.RepeatedScalarFieldContainer[str]
    slots: int
    sdk: str
    first_seen_ms: int
    last_poll_ms: int
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., activities: _Optional[_Iterable[str]] = ..., slots: _Optional[int] = ..., sdk: _Optional[str] = ..., first_seen_ms: _Optional[int] = ..., last_poll_ms: _Optional[int] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers", "server_now_ms", "queues")
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    SERVER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    server_now_ms: int
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ..., server_now_ms: _Optional[int] = ..., queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("queue", "ready", "oldest_ready_at_ms", "leased")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    OLDEST_READY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASED_FIELD_NUMBER: _ClassVar[int]
    queue: str
    ready: int
    oldest_ready_at_ms: int
    leased: int
    def __init__(self, queue: _Optional[str] = ..., ready: _Optional[int] = ..., oldest_ready_at_ms: _Optional[int] = ..., leased: _Optional[int] = ...) -> None: ...

class ListIncidentsRequest(_message.Message):
    __slots__ = ("flow", "version", "failed_after_ms", "limit")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FAILED_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    flow: str
    version: str
    failed_after_ms: int
    limit: int
    def __init__(self, flow: _Optional[str] = ..., version: _Optional[str] = ..., failed_after_ms: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class Incident(_message.Message):
    __slots__ = ("flow", "node_id", "reason", "instances", "first_failed_at_ms", "last_failed_at_ms", "instance_ids")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    FIRST_FAILED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_FAILED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_IDS_FIELD_NUMBER: _ClassVar[int]
    flow: str
    node_id: str
    reason: str
    instances: int
    first_failed_at_ms: int
    last_failed_at_ms: int
    instance_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, flow: _Optional[str] = ..., node_id: _Optional[str] = ..., reason: _Optional[str] = ..., instances: _Optional[int] = ..., first_failed_at_ms: _Optional[int] = ..., last_failed_at_ms: _Optional[int] = ..., instance_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ListIncidentsResponse(_message.Message):
    __slots__ = ("incidents", "failed")
    INCIDENTS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    incidents: _containers.RepeatedCompositeFieldContainer[Incident]
    failed: int
    def __init__(self, incidents: _Optional[_Iterable[_Union[Incident, _Mapping]]] = ..., failed: _Optional[int] = ...) -> None: ...

class PollTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "lease", "lease_expires_at_ms", "instance_id", "flow", "version", "node_id", "activity", "queue", "attempt", "input", "execution_mode", "loop_counts", "timeout_ms", "server_now_ms", "max_payload_bytes", "max_request_bytes", "traceparent", "tracestate")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ACTIVITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_MODE_FIELD_NUMBER: _ClassVar[int]
    LOOP_COUNTS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SERVER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    lease_expires_at_ms: int
    instance_id: str
    flow: str
    version: str
    node_id: str
    activity: str
    queue: str
    attempt: int
    input: bytes
    execution_mode: ExecutionMode
    loop_counts: bytes
    timeout_ms: int
    server_now_ms: int
    max_payload_bytes: int
    max_request_bytes: int
    traceparent: str
    tracestate: str
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., instance_id: _Optional[str] = ..., flow: _Optional[str] = ..., version: _Optional[str] = ..., node_id: _Optional[str] = ..., activity: _Optional[str] = ..., queue: _Optional[str] = ..., attempt: _Optional[int] = ..., input: _Optional[bytes] = ..., execution_mode: _Optional[_Union[ExecutionMode, str]] = ..., loop_counts: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ..., server_now_ms: _Optional[int] = ..., max_payload_bytes: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ("task_id", "lease", "result", "next", "seq")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    result: bytes
    next: EagerDispatch
    seq: int
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., result: _Optional[bytes] = ..., next: _Optional[_Union[EagerDispatch, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ("task_id", "lease", "failure", "seq")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    failure: StepFailure
    seq: int
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., failure: _Optional[_Union[StepFailure, _Mapping]] = ..., seq: _Optional[int] = ...) -> None: ...

class ReleaseTaskRequest(_message.Message):
    __slots__ = ("task_id", "lease", "seq", "reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    seq: int
    reason: str
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., seq: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class StepFailure(_message.Message):
    __slots__ = ("message", "non_retryable", "error_type")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NON_RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    message: str
    non_retryable: bool
    error_type: str
    def __init__(self, message: _Optional[str] = ..., non_retryable: _Optional[bool] = ..., error_type: _Optional[str] = ...) -> None: ...

class TaskReportResponse(_message.Message):
    __slots__ = ("instance_status", "next_task")
    INSTANCE_STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_TASK_FIELD_NUMBER: _ClassVar[int]
    instance_status: InstanceStatus
    next_task: Task
    def __init__(self, instance_status: _Optional[_Union[InstanceStatus, str]] = ..., next_task: _Optional[_Union[Task, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("task_id", "lease", "node_id")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    node_id: str
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., node_id: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_expires_at_ms", "instance_status", "server_now_ms")
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_STATUS_FIELD_NUMBER: _ClassVar[int]
    SERVER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at_ms: int
    instance_status: InstanceStatus
    server_now_ms: int
    def __init__(self, lease_expires_at_ms: _Optional[int] = ..., instance_status: _Optional[_Union[InstanceStatus, str]] = ..., server_now_ms: _Optional[int] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("node_id", "context", "predicate", "failure")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    context: bytes
    predicate: bool
    failure: StepFailure
    def __init__(self, node_id: _Optional[str] = ..., context: _Optional[bytes] = ..., predicate: _Optional[bool] = ..., failure: _Optional[_Union[StepFailure, _Mapping]] = ...) -> None: ...

class AdvanceRunRequest(_message.Message):
    __slots__ = ("task_id", "lease", "steps", "final", "handback_reason", "seq")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    HANDBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    steps: _containers.RepeatedCompositeFieldContainer[StepResult]
    final: bool
    handback_reason: str
    seq: int
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ..., final: _Optional[bool] = ..., handback_reason: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class AdvanceRunResponse(_message.Message):
    __slots__ = ("instance_status", "lease_expires_at_ms", "keep_going", "server_now_ms")
    INSTANCE_STATUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    KEEP_GOING_FIELD_NUMBER: _ClassVar[int]
    SERVER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    instance_status: InstanceStatus
    lease_expires_at_ms: int
    keep_going: bool
    server_now_ms: int
    def __init__(self, instance_status: _Optional[_Union[InstanceStatus, str]] = ..., lease_expires_at_ms: _Optional[int] = ..., keep_going: _Optional[bool] = ..., server_now_ms: _Optional[int] = ...) -> None: ...

class TaskReport(_message.Message):
    __slots__ = ("complete", "fail", "advance", "release")
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    FAIL_FIELD_NUMBER: _ClassVar[int]
    ADVANCE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    complete: CompleteTaskRequest
    fail: FailTaskRequest
    advance: AdvanceRunRequest
    release: ReleaseTaskRequest
    def __init__(self, complete: _Optional[_Union[CompleteTaskRequest, _Mapping]] = ..., fail: _Optional[_Union[FailTaskRequest, _Mapping]] = ..., advance: _Optional[_Union[AdvanceRunRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseTaskRequest, _Mapping]] = ...) -> None: ...

class ReportBatchRequest(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedCompositeFieldContainer[TaskReport]
    def __init__(self, reports: _Optional[_Iterable[_Union[TaskReport, _Mapping]]] = ...) -> None: ...

class ReportError(_message.Message):
    __slots__ = ("status_code", "error_code", "message")
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    status_code: int
    error_code: str
    message: str
    def __init__(self, status_code: _Optional[int] = ..., error_code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class TaskReportAnswer(_message.Message):
    __slots__ = ("task", "advance", "error")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ADVANCE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    task: TaskReportResponse
    advance: AdvanceRunResponse
    error: ReportError
    def __init__(self, task: _Optional[_Union[TaskReportResponse, _Mapping]] = ..., advance: _Optional[_Union[AdvanceRunResponse, _Mapping]] = ..., error: _Optional[_Union[ReportError, _Mapping]] = ...) -> None: ...

class ReportBatchResponse(_message.Message):
    __slots__ = ("answers",)
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    answers: _containers.RepeatedCompositeFieldContainer[TaskReportAnswer]
    def __init__(self, answers: _Optional[_Iterable[_Union[TaskReportAnswer, _Mapping]]] = ...) -> None: ...
