"""Typed errors of the sessiongate client.

Every failed call raises a :class:`GatewayError` subclass chosen by its gRPC
status code, with the ``google.rpc.ErrorInfo`` detail the gateway attaches
(``reason``, ``domain``, ``metadata``) decoded. A timeout whose budget ran out
on the server raises :class:`TimeoutExceededError`, which carries the
``timeoutprofile.v1.TimeoutExceeded`` detail: the profile, the configured
budget and the time elapsed. A DEADLINE_EXCEEDED without that detail (the
caller's own timer fired first) raises the plain :class:`DeadlineExceededError`.
Both are also :class:`TimeoutError`, so ``except TimeoutError`` catches them.

Every gRPC status code has its class (:data:`ERROR_CLASSES`); a call made on a
closed :class:`~sessiongate.Gateway` raises :class:`ClientClosedError` (a
:class:`CancelledError`), never grpcio's own ``ValueError``.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Type

import grpc

# Our own renamed copies: they load beside googleapis-common-protos' google.rpc
# (see sessiongate.pb).
from .pb.google.rpc import error_details_pb2, status_pb2
from .pb.timeoutprofile.v1 import timeoutprofile_pb2

__all__ = [
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

_STATUS_DETAILS_KEY = "grpc-status-details-bin"
_ERROR_INFO_URL = "type.googleapis.com/google.rpc.ErrorInfo"
_TIMEOUT_EXCEEDED_URL = "type.googleapis.com/timeoutprofile.v1.TimeoutExceeded"


class GatewayError(Exception):
    """A call to the gateway failed with a gRPC status.

    Attributes:
        code: the gRPC status code.
        message: the status message.
        reason, domain: the ErrorInfo's, e.g. ``"SESSION_NOT_FOUND"`` in
            ``"sessiongate"``, ``"TIMEOUT_PROFILE_EXCEEDED"`` in
            ``"timeoutprofile"``, or an ARCP code in ``"arcp"``; ``None``
            when the status carries no ErrorInfo.
        metadata: the ErrorInfo's metadata (empty without one).
    """

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        reason: Optional[str] = None,
        domain: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.domain = domain
        self.metadata: Dict[str, str] = dict(metadata or {})

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, grpc.StatusCode) else str(self.code)
        s = f"{name}: {self.message}"
        if self.reason:
            s += f" [{self.domain}/{self.reason}]"
        return s

    @property
    def retryable(self) -> Optional[bool]:
        """The runtime's ``retryable`` hint from the ErrorInfo, if given."""
        v = self.metadata.get("retryable")
        return None if v is None else v == "true"


class InvalidArgumentError(GatewayError, ValueError):
    """INVALID_ARGUMENT: a missing or malformed field, or a bad x-timeout-ms."""


class NotFoundError(GatewayError, LookupError):
    """NOT_FOUND: unknown session, job, runtime or agent (see ``reason``)."""


class AlreadyExistsError(GatewayError):
    """ALREADY_EXISTS: e.g. an idempotency key reused with another input."""


class PermissionDeniedError(GatewayError):
    """PERMISSION_DENIED."""


class UnauthenticatedError(GatewayError):
    """UNAUTHENTICATED: a missing or unknown bearer token."""


class ResourceExhaustedError(GatewayError):
    """RESOURCE_EXHAUSTED: a cap (``metadata["cap"]``) or a slow consumer."""


class FailedPreconditionError(GatewayError):
    """FAILED_PRECONDITION: e.g. a feature the runtime did not negotiate."""


class UnavailableError(GatewayError):
    """UNAVAILABLE: the gateway is draining, unreachable, or lost the session."""


class InternalError(GatewayError):
    """INTERNAL."""


class CancelledError(GatewayError):
    """CANCELLED: the call, or the job it waited for, was cancelled."""


class UnknownError(GatewayError):
    """UNKNOWN: an error without a status, e.g. from a proxy."""


class AbortedError(GatewayError):
    """ABORTED: the job ended with an error of its own (the ARCP code is
    ``reason``, e.g. ``"INTERNAL_ERROR"``), or a conflict to retry higher up."""


class OutOfRangeError(GatewayError):
    """OUT_OF_RANGE."""


class UnimplementedError(GatewayError, NotImplementedError):
    """UNIMPLEMENTED: a method this gateway does not serve."""


class DataLossError(GatewayError):
    """DATA_LOSS."""


class ClientClosedError(CancelledError):
    """A call made on a closed :class:`~sessiongate.Gateway` (code CANCELLED,
    reason ``CLIENT_CLOSED``, domain ``sessiongate.client``)."""

    def __init__(self, message: str = "the Gateway is closed") -> None:
        super().__init__(grpc.StatusCode.CANCELLED, message, reason="CLIENT_CLOSED", domain="sessiongate.client")


class DeadlineExceededError(GatewayError, TimeoutError):
    """DEADLINE_EXCEEDED without timeout details: typically the caller's own
    timer fired before the gateway's answer arrived."""


class TimeoutExceededError(DeadlineExceededError):
    """DEADLINE_EXCEEDED with the gateway's timeout details.

    Attributes:
        profile: the timeout profile the call ran under, e.g. ``"tool_call"``.
        configured_ms: the budget that ran out, in milliseconds.
        elapsed_ms: the time elapsed when it fired, in milliseconds.
        limit: which limit fired: ``"unary"``, ``"caller_deadline"``,
            ``"initial"``, ``"gap"`` or ``"total"``.
        service, method: the call, e.g. ``"sessiongate.v1.SessionGateway"``
            and ``"RunJob"``.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        detail: "timeoutprofile_pb2.TimeoutExceeded",
        reason: Optional[str] = None,
        domain: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
    ) -> None:
        super().__init__(code, message, reason=reason, domain=domain, metadata=metadata)
        self.profile: str = detail.profile_name
        self.configured_ms: int = detail.configured_timeout_ms
        self.elapsed_ms: int = detail.elapsed_ms
        self.limit: str = detail.limit
        self.service: str = detail.service
        self.method: str = detail.method


_BY_CODE: Dict[grpc.StatusCode, Type[GatewayError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.CANCELLED: CancelledError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNKNOWN: UnknownError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
    grpc.StatusCode.UNIMPLEMENTED: UnimplementedError,
    grpc.StatusCode.DATA_LOSS: DataLossError,
}

ERROR_CLASSES: Mapping[grpc.StatusCode, Type[GatewayError]] = dict(_BY_CODE)
"""The class raised for each gRPC status code other than OK."""


def from_rpc_error(err: grpc.RpcError) -> GatewayError:
    """Return the typed error for a failed call (a grpc.RpcError that is
    also a grpc.Call, as grpcio raises them)."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = (err.details() if hasattr(err, "details") else None) or ""
    trailers = (err.trailing_metadata() if hasattr(err, "trailing_metadata") else None) or ()
    info: Optional[error_details_pb2.ErrorInfo] = None
    timeout: Optional[timeoutprofile_pb2.TimeoutExceeded] = None
    for key, value in trailers:
        if key != _STATUS_DETAILS_KEY:
            continue
        st = status_pb2.Status.FromString(value)
        for any_ in st.details:
            if any_.type_url == _ERROR_INFO_URL and info is None:
                info = error_details_pb2.ErrorInfo.FromString(any_.value)
            elif any_.type_url == _TIMEOUT_EXCEEDED_URL and timeout is None:
                timeout = timeoutprofile_pb2.TimeoutExceeded.FromString(any_.value)
    kw = {}
    if info is not None:
        kw = dict(reason=info.reason, domain=info.domain, metadata=dict(info.metadata))
    if code == grpc.StatusCode.DEADLINE_EXCEEDED and timeout is not None:
        return TimeoutExceededError(code, message, detail=timeout, **kw)
    return _BY_CODE.get(code, GatewayError)(code, message, **kw)
