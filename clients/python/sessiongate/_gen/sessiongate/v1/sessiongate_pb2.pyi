from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from sessiongate._gen.timeoutprofile.v1 import timeoutprofile_pb2 as _timeoutprofile_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SESSION_PHASE_CLOSING: SessionPhase
SESSION_PHASE_READY: SessionPhase
SESSION_PHASE_RECONNECTING: SessionPhase
SESSION_PHASE_UNSPECIFIED: SessionPhase
SESSION_STATUS_LIVE: SessionStatus
SESSION_STATUS_NOT_FOUND: SessionStatus
SESSION_STATUS_UNSPECIFIED: SessionStatus

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
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

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
    __slots__ = ["body", "kind", "raw_body", "ts"]
    BODY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    RAW_BODY_FIELD_NUMBER: _ClassVar[int]
    TS_FIELD_NUMBER: _ClassVar[int]
    body: _struct_pb2.Value
    kind: str
    raw_body: bytes
    ts: _timestamp_pb2.Timestamp
    def __init__(self, kind: _Optional[str] = ..., ts: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., body: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., raw_body: _Optional[bytes] = ...) -> None: ...

class JobResult(_message.Message):
    __slots__ = ["raw_result", "result", "summary"]
    RAW_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    raw_result: bytes
    result: _struct_pb2.Value
    summary: str
    def __init__(self, result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., summary: _Optional[str] = ..., raw_result: _Optional[bytes] = ...) -> None: ...

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

class RunJobRequest(_message.Message):
    __slots__ = ["agent", "idempotency_key", "input", "max_runtime_sec", "session_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_SEC_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    idempotency_key: str
    input: _struct_pb2.Value
    max_runtime_sec: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., max_runtime_sec: _Optional[int] = ...) -> None: ...

class RunJobResponse(_message.Message):
    __slots__ = ["job_id", "raw_result", "result", "summary"]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RAW_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    raw_result: bytes
    result: _struct_pb2.Value
    summary: str
    def __init__(self, job_id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., summary: _Optional[str] = ..., raw_result: _Optional[bytes] = ...) -> None: ...

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
    __slots__ = ["agent", "idempotency_key", "input", "max_runtime_sec", "session_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNTIME_SEC_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent: str
    idempotency_key: str
    input: _struct_pb2.Value
    max_runtime_sec: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., max_runtime_sec: _Optional[int] = ...) -> None: ...

class SubmitJobResponse(_message.Message):
    __slots__ = ["accepted_at", "job_id"]
    ACCEPTED_AT_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    accepted_at: _timestamp_pb2.Timestamp
    job_id: str
    def __init__(self, job_id: _Optional[str] = ..., accepted_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

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
    __slots__ = ["error", "event", "event_seq", "result"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    error: JobError
    event: JobEvent
    event_seq: int
    result: JobResult
    def __init__(self, event_seq: _Optional[int] = ..., event: _Optional[_Union[JobEvent, _Mapping]] = ..., result: _Optional[_Union[JobResult, _Mapping]] = ..., error: _Optional[_Union[JobError, _Mapping]] = ...) -> None: ...

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
