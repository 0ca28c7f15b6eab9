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

:mod:`sessiongate.aio` is the same client on asyncio (``grpc.aio``).

The generated protobuf and gRPC modules are public in :mod:`sessiongate.pb`
(made by clients/generate.sh from a renamed copy of the protos, so they load
beside your own stubs of the same protos).
"""

import pkgutil

# Stubs a user generates from the same protos are modules named
# sessiongate.v1.sessiongate_pb2 (protoc names modules after files): let them
# be found in any sessiongate/ directory on sys.path, beside this package.
__path__ = pkgutil.extend_path(__path__, __name__)

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
    RunCall,
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
from ._resume import RESUMABLE_REASONS, ResumePolicy, stream_reset
from ._silence import DEFAULT_SILENCE_AFTER, DEFAULT_SILENCE_TIMEOUT, REASON_REPLICA_SILENT, SilenceBound
from ._values import MAX_EXACT_INT
from .errors import (
    ERROR_CLASSES,
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    ClientClosedError,
    DataLossError,
    DeadlineExceededError,
    FailedPreconditionError,
    GatewayError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TimeoutExceededError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)

__all__ = [
    "Gateway",
    "Session",
    "Watch",
    "WatchItem",
    "ResumePolicy",
    "SilenceBound",
    "DEFAULT_SILENCE_AFTER",
    "DEFAULT_SILENCE_TIMEOUT",
    "REASON_REPLICA_SILENT",
    "stream_reset",
    "RESUMABLE_REASONS",
    "RunCall",
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
    "UnknownError",
    "AbortedError",
    "OutOfRangeError",
    "UnimplementedError",
    "DataLossError",
    "ClientClosedError",
    "ERROR_CLASSES",
]

__version__ = "0.1.0"
