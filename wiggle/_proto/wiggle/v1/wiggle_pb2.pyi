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

class GetDefinitionRequest(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class Definition(_message.Message):
    __slots__ = ("name", "version", "graph", "registered_at_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    graph: bytes
    registered_at_ms: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., graph: _Optional[bytes] = ..., registered_at_ms: _Optional[int] = ...) -> None: ...

class StartInstanceRequest(_message.Message):
    __slots__ = ("flow", "version", "input", "instance_id", "eager")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    EAGER_FIELD_NUMBER: _ClassVar[int]
    flow: str
    version: str
    input: bytes
    instance_id: str
    eager: EagerDispatch
    def __init__(self, flow: _Optional[str] = ..., version: _Optional[str] = ..., input: _Optional[bytes] = ..., instance_id: _Optional[str] = ..., eager: _Optional[_Union[EagerDispatch, _Mapping]] = ...) -> None: ...

class EagerDispatch(_message.Message):
    __slots__ = ("worker_id", "queues")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ...) -> None: ...

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
    __slots__ = ("instance_id", "flow", "version", "status", "context", "reason", "execution_mode", "parent_instance_id", "created_at_ms", "updated_at_ms", "tokens", "events")
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
    def __init__(self, instance_id: _Optional[str] = ..., flow: _Optional[str] = ..., version: _Optional[str] = ..., status: _Optional[_Union[InstanceStatus, str]] = ..., context: _Optional[bytes] = ..., reason: _Optional[str] = ..., execution_mode: _Optional[_Union[ExecutionMode, str]] = ..., parent_instance_id: _Optional[str] = ..., created_at_ms: _Optional[int] = ..., updated_at_ms: _Optional[int] = ..., tokens: _Optional[_Iterable[_Union[Token, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("token_id", "node_id", "state", "attempt", "lease_owner", "lease_expires_at_ms", "wake_at_ms", "branch")
    TOKEN_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    LEASE_OWNER_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    WAKE_AT_MS_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    token_id: str
    node_id: str
    state: TokenState
    attempt: int
    lease_owner: str
    lease_expires_at_ms: int
    wake_at_ms: int
    branch: str
    def __init__(self, token_id: _Optional[str] = ..., node_id: _Optional[str] = ..., state: _Optional[_Union[TokenState, str]] = ..., attempt: _Optional[int] = ..., lease_owner: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., wake_at_ms: _Optional[int] = ..., branch: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("flow", "status", "page_size", "page_token")
    FLOW_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    flow: str
    status: InstanceStatus
    page_size: int
    page_token: str
    def __init__(self, flow: _Optional[str] = ..., status: _Optional[_Union[InstanceStatus, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListInstancesResponse(_message.Message):
    __slots__ = ("instances", "next_page_token")
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    instances: _containers.RepeatedCompositeFieldContainer[Instance]
    next_page_token: str
    def __init__(self, instances: _Optional[_Iterable[_Union[Instance, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PollTasksRequest(_message.Message):
    __slots__ = ("worker_id", "queues", "max_tasks", "wait_ms")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    queues: _containers.RepeatedScalarFieldContainer[str]
    max_tasks: int
    wait_ms: int
    def __init__(self, worker_id: _Optional[str] = ..., queues: _Optional[_Iterable[str]] = ..., max_tasks: _Optional[int] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class PollTasksResponse(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[Task, _Mapping]]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("task_id", "lease", "lease_expires_at_ms", "instance_id", "flow", "version", "node_id", "activity", "queue", "attempt", "input", "execution_mode", "loop_counts", "timeout_ms")
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
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., lease_expires_at_ms: _Optional[int] = ..., instance_id: _Optional[str] = ..., flow: _Optional[str] = ..., version: _Optional[str] = ..., node_id: _Optional[str] = ..., activity: _Optional[str] = ..., queue: _Optional[str] = ..., attempt: _Optional[int] = ..., input: _Optional[bytes] = ..., execution_mode: _Optional[_Union[ExecutionMode, str]] = ..., loop_counts: _Optional[bytes] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ("task_id", "lease", "result", "next")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    result: bytes
    next: EagerDispatch
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., result: _Optional[bytes] = ..., next: _Optional[_Union[EagerDispatch, _Mapping]] = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ("task_id", "lease", "failure")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    failure: StepFailure
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., failure: _Optional[_Union[StepFailure, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("task_id", "lease")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_expires_at_ms", "instance_status")
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_STATUS_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at_ms: int
    instance_status: InstanceStatus
    def __init__(self, lease_expires_at_ms: _Optional[int] = ..., instance_status: _Optional[_Union[InstanceStatus, str]] = ...) -> None: ...

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
    __slots__ = ("task_id", "lease", "steps", "final", "handback_reason")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    HANDBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    lease: str
    steps: _containers.RepeatedCompositeFieldContainer[StepResult]
    final: bool
    handback_reason: str
    def __init__(self, task_id: _Optional[str] = ..., lease: _Optional[str] = ..., steps: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ..., final: _Optional[bool] = ..., handback_reason: _Optional[str] = ...) -> None: ...

class AdvanceRunResponse(_message.Message):
    __slots__ = ("instance_status", "lease_expires_at_ms", "keep_going")
    INSTANCE_STATUS_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_MS_FIELD_NUMBER: _ClassVar[int]
    KEEP_GOING_FIELD_NUMBER: _ClassVar[int]
    instance_status: InstanceStatus
    lease_expires_at_ms: int
    keep_going: bool
    def __init__(self, instance_status: _Optional[_Union[InstanceStatus, str]] = ..., lease_expires_at_ms: _Optional[int] = ..., keep_going: _Optional[bool] = ...) -> None: ...
