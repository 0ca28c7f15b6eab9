"""Python client for sessiongate, a gRPC gateway to ARCP agent runtimes.

::

    import sessiongate

    with sessiongate.Gateway("127.0.0.1:50051") as gw:
        with gw.open_session(client_name="example") as s:
            print(s.run("echo", {"hello": "world"}, timeout=5).result)

Job input and results are plain JSON-like data (dict, list, str, int, float,
bool, None); see :mod:`sessiongate._values` for how numbers cross the wire
(integers are exact up to 2**53). Failed calls raise
:class:`~sessiongate.errors.GatewayError` subclasses; a timeout with the
gateway's details raises :class:`TimeoutExceededError`.

The generated protobuf and gRPC modules are in ``sessiongate._gen`` (made by
clients/generate.sh; do not edit them).
"""

from ._client import (
    SESSION_METADATA_KEY,
    TIMEOUT_METADATA_KEY,
    TRACEPARENT_METADATA_KEY,
    Gateway,
    Job,
    JobError,
    JobEvent,
    JobInfo,
    JobResult,
    JobState,
    Lease,
    Phase,
    Progress,
    ResultChunk,
    RunResult,
    Session,
    SessionInfo,
    SessionStatus,
    Status,
    Subscription,
    Watch,
    WatchItem,
    retry_service_config,
    trace_metadata,
)
from ._values import MAX_EXACT_INT
from .errors import (
    AlreadyExistsError,
    CancelledError,
    DeadlineExceededError,
    FailedPreconditionError,
    GatewayError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TimeoutExceededError,
    UnauthenticatedError,
    UnavailableError,
)

__all__ = [
    "Gateway",
    "Session",
    "Watch",
    "WatchItem",
    "Job",
    "JobEvent",
    "JobResult",
    "JobError",
    "RunResult",
    "JobInfo",
    "JobState",
    "Lease",
    "Progress",
    "ResultChunk",
    "Subscription",
    "trace_metadata",
    "TRACEPARENT_METADATA_KEY",
    "SessionInfo",
    "SessionStatus",
    "Status",
    "Phase",
    "retry_service_config",
    "TIMEOUT_METADATA_KEY",
    "SESSION_METADATA_KEY",
    "MAX_EXACT_INT",
    "GatewayError",
    "InvalidArgumentError",
    "NotFoundError",
    "AlreadyExistsError",
    "PermissionDeniedError",
    "UnauthenticatedError",
    "ResourceExhaustedError",
    "FailedPreconditionError",
    "UnavailableError",
    "InternalError",
    "CancelledError",
    "DeadlineExceededError",
    "TimeoutExceededError",
]

__version__ = "0.1.0"
