from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessiongate.pb.timeoutprofile.v1 import timeoutprofile_pb2 as _timeoutprofile_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
JOB_STATE_CANCELLED: JobState
JOB_STATE_FAILED: JobState
JOB_STATE_PENDING: JobState
JOB_STATE_RUNNING: JobState
JOB_STATE_SUCCEEDED: JobState
JOB_STATE_TIMED_OUT: JobState
JOB_STATE_UNSPECIFIED: JobState
SESSION_PHASE_CLOSING: SessionPhase
SESSION_PHASE_READY: SessionPhase
SESSION_PHASE_RECONNECTING: SessionPhase
SESSION_PHASE_UNSPECIFIED: SessionPhase
SESSION_STATUS_LIVE: SessionStatus
SESSION_STATUS_NOT_FOUND: SessionStatus
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_VIEW_BASIC: SessionStatusView
SESSION_STATUS_VIEW_FULL: SessionStatusView
SESSION_STATUS_VIEW_UNSPECIFIED: SessionStatusView

class Agent(_message.Message):
    __slots__ = ["default_version", "name", "versions"]
    DEFAULT_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    default_version: str
    name: str
    versions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., versions: _Optional[_Iterable[str]] = ..., default_version: _Optional[str] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ["job_id", "reason", "session_id"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    reason: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["reason", "session_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetSessionStatusRequest(_message.Message):
    __slots__ = ["session_id", "view"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    view: SessionStatusView
    def __init__(self, session_id: _Optional[str] = ..., view: _Optional[_Union[SessionStatusView, str]] = ...) -> None: ...

class GetSessionStatusResponse(_message.Message):
    __slots__ = ["features", "generation", "instance_id", "last_event_seq", "phase", "runtime", "status"]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    features: _containers.RepeatedScalarFieldContainer[str]
    generation: int
    instance_id: str
    last_event_seq: int
    phase: SessionPhase
    runtime: str
    status: SessionStatus
    def __init__(self, status: _Optional[_Union[SessionStatus, str]] = ..., phase: _Optional[_Union[SessionPhase, str]] = ..., runtime: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., last_event_seq: _Optional[int] = ..., generation: _Optional[int] = ..., instance_id: _Optional[str] = ...) -> None: ...

class Job(_message.Message):
    __slots__ = ["agent", "budget", "create_time", "job_id", "last_event_seq", "lease", "lease_constraints", "parent_job_id", "raw_status", "state", "trace_id"]
    class BudgetEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    LEASE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RAW_STATUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    budget: _containers.ScalarMap[str, float]
    create_time: _timestamp_pb2.Timestamp
    job_id: str
    last_event_seq: int
    lease: Lease
    lease_constraints: LeaseConstraints
    parent_job_id: str
    raw_status: str
    state: JobState
    trace_id: str
    def __init__(self, job_id: _Optional[str] = ..., agent: _Optional[str] = ..., state: _Optional[_Union[JobState, str]] = ..., raw_status: _Optional[str] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., lease_constraints: _Optional[_Union[LeaseConstraints, _Mapping]] = ..., budget: _Optional[_Mapping[str, float]] = ..., parent_job_id: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., trace_id: _Optional[str] = ..., last_event_seq: _Optional[int] = ...) -> None: ...

class JobError(_message.Message):
    __slots__ = ["code", "details", "final_status", "message", "raw_details", "retryable"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RAW_DETAILS_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    code: str
    details: _struct_pb2.Value
    final_status: str
    message: str
    raw_details: bytes
    retryable: bool
    def __init__(self, final_status: _Optional[str] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ..., details: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., raw_details: _Optional[bytes] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ["body", "kind", "progress", "raw_body", "result_chunk", "ts"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RAW_BODY_FIELD_NUMBER: _ClassVar[int]
    RESULT_CHUNK_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    body: _struct_pb2.Value
    kind: str
    progress: Progress
    raw_body: bytes
    result_chunk: ResultChunk
    ts: _timestamp_pb2.Timestamp
    def __init__(self, kind: _Optional[str] = ..., ts: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., raw_body: _Optional[bytes] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., result_chunk: _Optional[_Union[ResultChunk, _Mapping]] = ...) -> None: ...

class JobResult(_message.Message):
    __slots__ = ["raw_result", "result", "result_id", "result_size", "summary"]
    RAW_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_SIZE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    raw_result: bytes
    result: _struct_pb2.Value
    result_id: str
    result_size: int
    summary: str
    def __init__(self, result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., summary: _Optional[str] = ..., raw_result: _Optional[bytes] = ..., result_id: _Optional[str] = ..., result_size: _Optional[int] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ["capabilities"]
    class CapabilitiesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: LeasePatterns
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[LeasePatterns, _Mapping]] = ...) -> None: ...
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: _containers.MessageMap[str, LeasePatterns]
    def __init__(self, capabilities: _Optional[_Mapping[str, LeasePatterns]] = ...) -> None: ...

class LeaseConstraints(_message.Message):
    __slots__ = ["expires_at"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeasePatterns(_message.Message):
    __slots__ = ["patterns"]
    PATTERNS_FIELD_NUMBER: _ClassVar[int]
    patterns: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, patterns: _Optional[_Iterable[str]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ["filter", "page_size", "page_token", "session_id"]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    filter: str
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., filter: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ["jobs", "next_page_token"]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["sessions"]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ["client_name", "features", "runtime", "upstream_token"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_TOKEN_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    features: _containers.RepeatedScalarFieldContainer[str]
    runtime: str
    upstream_token: str
    def __init__(self, runtime: _Optional[str] = ..., client_name: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., upstream_token: _Optional[str] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ["agents", "features", "instance_id", "runtime", "session_id"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[Agent]
    features: _containers.RepeatedScalarFieldContainer[str]
    instance_id: str
    runtime: RuntimeInfo
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., features: _Optional[_Iterable[str]] = ..., agents: _Optional[_Iterable[_Union[Agent, _Mapping]]] = ..., runtime: _Optional[_Union[RuntimeInfo, _Mapping]] = ..., instance_id: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ["current", "message", "total", "units"]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    UNITS_FIELD_NUMBER: _ClassVar[int]
    current: float
    message: str
    total: float
    units: str
    def __init__(self, current: _Optional[float] = ..., total: _Optional[float] = ..., units: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ResultChunk(_message.Message):
    __slots__ = ["chunk_seq", "encoding", "more", "result_id"]
    CHUNK_SEQ_FIELD_NUMBER: _ClassVar[int]
    ENCODING_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    RESULT_ID_FIELD_NUMBER: _ClassVar[int]
    chunk_seq: int
    encoding: str
    more: bool
    result_id: str
    def __init__(self, result_id: _Optional[str] = ..., chunk_seq: _Optional[int] = ..., encoding: _Optional[str] = ..., more: bool = ...) -> None: ...

class RunJobRequest(_message.Message):
    __slots__ = ["agent", "agent_version", "extensions", "idempotency_key", "input", "lease_constraints", "lease_request", "max_runtime_sec", "session_id"]
    class ExtensionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    LEASE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_SEC_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    agent_version: str
    extensions: _containers.MessageMap[str, _struct_pb2.Value]
    idempotency_key: str
    input: _struct_pb2.Value
    lease_constraints: LeaseConstraints
    lease_request: Lease
    max_runtime_sec: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., max_runtime_sec: _Optional[int] = ..., agent_version: _Optional[str] = ..., lease_request: _Optional[_Union[Lease, _Mapping]] = ..., lease_constraints: _Optional[_Union[LeaseConstraints, _Mapping]] = ..., extensions: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class RunJobResponse(_message.Message):
    __slots__ = ["agent", "budget", "extensions", "job_id", "lease", "lease_constraints", "raw_result", "result", "result_id", "result_size", "summary", "trace_id"]
    class BudgetEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ExtensionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    RAW_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_SIZE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    budget: _containers.ScalarMap[str, float]
    extensions: _containers.MessageMap[str, _struct_pb2.Value]
    job_id: str
    lease: Lease
    lease_constraints: LeaseConstraints
    raw_result: bytes
    result: _struct_pb2.Value
    result_id: str
    result_size: int
    summary: str
    trace_id: str
    def __init__(self, job_id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., summary: _Optional[str] = ..., raw_result: _Optional[bytes] = ..., agent: _Optional[str] = ..., trace_id: _Optional[str] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., lease_constraints: _Optional[_Union[LeaseConstraints, _Mapping]] = ..., budget: _Optional[_Mapping[str, float]] = ..., result_id: _Optional[str] = ..., result_size: _Optional[int] = ..., extensions: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class RuntimeInfo(_message.Message):
    __slots__ = ["implementation", "name", "version"]
    IMPLEMENTATION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    implementation: str
    name: str
    version: str
    def __init__(self, name: _Optional[str] = ..., implementation: _Optional[str] = ..., version: _Optional[str] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ["active_jobs", "opened_at", "phase", "runtime", "session_id"]
    ACTIVE_JOBS_FIELD_NUMBER: _ClassVar[int]
    OPENED_AT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    active_jobs: int
    opened_at: _timestamp_pb2.Timestamp
    phase: SessionPhase
    runtime: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., phase: _Optional[_Union[SessionPhase, str]] = ..., runtime: _Optional[str] = ..., opened_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., active_jobs: _Optional[int] = ...) -> None: ...

class SubmitJobRequest(_message.Message):
    __slots__ = ["agent", "agent_version", "extensions", "idempotency_key", "input", "lease_constraints", "lease_request", "max_runtime_sec", "session_id"]
    class ExtensionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    LEASE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_SEC_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    agent_version: str
    extensions: _containers.MessageMap[str, _struct_pb2.Value]
    idempotency_key: str
    input: _struct_pb2.Value
    lease_constraints: LeaseConstraints
    lease_request: Lease
    max_runtime_sec: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., max_runtime_sec: _Optional[int] = ..., agent_version: _Optional[str] = ..., lease_request: _Optional[_Union[Lease, _Mapping]] = ..., lease_constraints: _Optional[_Union[LeaseConstraints, _Mapping]] = ..., extensions: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ["accepted_at", "after_event_seq", "agent", "budget", "extensions", "job_id", "lease", "lease_constraints", "trace_id"]
    class BudgetEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ExtensionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    AFTER_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    accepted_at: _timestamp_pb2.Timestamp
    after_event_seq: int
    agent: str
    budget: _containers.ScalarMap[str, float]
    extensions: _containers.MessageMap[str, _struct_pb2.Value]
    job_id: str
    lease: Lease
    lease_constraints: LeaseConstraints
    trace_id: str
    def __init__(self, job_id: _Optional[str] = ..., accepted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., agent: _Optional[str] = ..., trace_id: _Optional[str] = ..., lease: _Optional[_Union[Lease, _Mapping]] = ..., lease_constraints: _Optional[_Union[LeaseConstraints, _Mapping]] = ..., budget: _Optional[_Mapping[str, float]] = ..., extensions: _Optional[_Mapping[str, _struct_pb2.Value]] = ..., after_event_seq: _Optional[int] = ...) -> None: ...

class SubscribeJobRequest(_message.Message):
    __slots__ = ["from_event_seq", "history", "job_id", "session_id"]
    FROM_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    from_event_seq: int
    history: bool
    job_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., history: bool = ..., from_event_seq: _Optional[int] = ...) -> None: ...

class SubscribeJobResponse(_message.Message):
    __slots__ = ["job", "replayed", "subscribed_from"]
    JOB_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_FROM_FIELD_NUMBER: _ClassVar[int]
    job: Job
    replayed: bool
    subscribed_from: int
    def __init__(self, job: _Optional[_Union[Job, _Mapping]] = ..., subscribed_from: _Optional[int] = ..., replayed: bool = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ["from_event_seq", "job_id", "session_id"]
    FROM_EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    from_event_seq: int
    job_id: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., job_id: _Optional[str] = ..., from_event_seq: _Optional[int] = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ["error", "event", "event_seq", "extensions", "result"]
    class ExtensionsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    error: JobError
    event: JobEvent
    event_seq: int
    extensions: _containers.MessageMap[str, _struct_pb2.Value]
    result: JobResult
    def __init__(self, event_seq: _Optional[int] = ..., event: _Optional[_Union[JobEvent, _Mapping]] = ..., result: _Optional[_Union[JobResult, _Mapping]] = ..., error: _Optional[_Union[JobError, _Mapping]] = ..., extensions: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class JobState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionStatusView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
