from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import grpc

from ._gen.sessiongate.v1 import sessiongate_pb2 as pb
from ._gen.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc
from ._values import from_raw_or_value, to_value
from .errors import GatewayError, from_rpc_error

TIMEOUT_METADATA_KEY = "x-timeout-ms"
"""Request metadata asking the gateway for a timeout, in milliseconds."""

SESSION_METADATA_KEY = "x-sessiongate-session"
"""Request metadata naming the session of a session-scoped call, for
session-affine routing; the gateway checks it against the request body."""

Metadata = Tuple[Tuple[str, str], ...]


def retry_service_config() -> str:
    """The gRPC service config (JSON) of sessiongate's published retry policy:
    DEADLINE_EXCEEDED and UNAVAILABLE retried with exponential backoff under a
    retry budget. :class:`Gateway` applies it unless told not to."""
    return resources.files(__package__).joinpath("_gen/retry_service_config.json").read_text()


class Status(str, enum.Enum):
    """A session's liveness, as the HTTP probe spells it."""

    UNSPECIFIED = "unspecified"
    LIVE = "live"
    NOT_FOUND = "not_found"


class Phase(str, enum.Enum):
    """Where a live session's upstream connection stands."""

    UNSPECIFIED = "unspecified"
    READY = "ready"
    RECONNECTING = "reconnecting"
    CLOSING = "closing"


def _enum(cls: Any, proto_enum: Any, prefix: str, number: int) -> Any:
    name = proto_enum.Name(number) if number in proto_enum.values() else prefix + "UNSPECIFIED"
    return cls(name[len(prefix):].lower())


@dataclass(frozen=True)
class SessionStatus:
    """The answer of the liveness probe. Fields other than ``status`` and
    ``instance_id`` are set only while the session is live."""

    status: Status
    phase: Phase
    runtime: str
    features: List[str]
    last_event_seq: int
    generation: int
    instance_id: str

    @property
    def live(self) -> bool:
        return self.status is Status.LIVE


@dataclass(frozen=True)
class SessionInfo:
    """One of the caller's sessions, from :meth:`Gateway.list_sessions`."""

    session_id: str
    phase: Phase
    runtime: str
    opened_at: Optional[datetime]
    active_jobs: int


@dataclass(frozen=True)
class RunResult:
    """A successful job's result, from :meth:`Session.run`."""

    job_id: str
    result: Any
    summary: str


@dataclass(frozen=True)
class Job:
    """A job the runtime accepted, from :meth:`Session.submit`."""

    job_id: str
    accepted_at: Optional[datetime]


@dataclass(frozen=True)
class JobEvent:
    """An intermediate event of a watched job."""

    event_seq: int
    kind: str
    ts: Optional[datetime]
    body: Any


@dataclass(frozen=True)
class JobResult:
    """A watched job's successful end: the last item of the watch."""

    event_seq: int
    result: Any
    summary: str


@dataclass(frozen=True)
class JobError:
    """A watched job's unsuccessful end: the last item of the watch."""

    event_seq: int
    final_status: str  # "error", "cancelled" or "timed_out"
    code: str  # the ARCP error code, e.g. "CANCELLED"
    message: str
    retryable: bool
    details: Any


WatchItem = Union[JobEvent, JobResult, JobError]


def _ts(msg: Any, name: str) -> Optional[datetime]:
    if not msg.HasField(name):
        return None
    return getattr(msg, name).ToDatetime()


def _timeout_ms(timeout: Optional[float]) -> Optional[int]:
    if timeout is None:
        return None
    if timeout <= 0:
        raise ValueError("timeout must be positive (seconds)")
    return max(1, math.ceil(timeout * 1000))


class Gateway:
    """A connection to a sessiongate gateway.

    ``Gateway("127.0.0.1:50051")`` opens an insecure channel; pass
    ``credentials=grpc.ssl_channel_credentials()`` for TLS, ``token=`` for a
    caller token (sent as ``authorization: Bearer …``), or ``channel=`` to use
    a channel you own (then ``retry`` and ``options`` are yours to set).

    The published retry policy (:func:`retry_service_config`) is applied unless
    ``retry=False``. It retries DEADLINE_EXCEEDED, so an answer the gateway
    gave just before your own deadline may be retried and end as a bare
    :class:`~sessiongate.DeadlineExceededError`; turn it off to get the
    timeout details every time (see README, "Retries"). Use the gateway as a
    context manager, or call :meth:`close`. A Gateway may be shared by threads.
    """

    def __init__(
        self,
        target: Optional[str] = None,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        token: Optional[str] = None,
        retry: bool = True,
        options: Sequence[Tuple[str, Any]] = (),
        channel: Optional[grpc.Channel] = None,
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("give exactly one of target and channel")
        self._own_channel = channel is None
        if channel is None:
            opts = list(options)
            if retry:
                opts += [("grpc.enable_retries", 1), ("grpc.service_config", retry_service_config())]
            if credentials is None:
                channel = grpc.insecure_channel(target, options=opts)
            else:
                channel = grpc.secure_channel(target, credentials, options=opts)
        self._channel = channel
        self._stub = pb_grpc.SessionGatewayStub(channel)
        self._auth: Metadata = (("authorization", f"Bearer {token}"),) if token else ()

    # -- plumbing -------------------------------------------------------

    def _metadata(
        self, timeout: Optional[float], session_id: Optional[str], server_timeout: Optional[float] = None
    ) -> Metadata:
        md = self._auth
        ms = _timeout_ms(server_timeout if server_timeout is not None else timeout)
        if ms is not None:
            md += ((TIMEOUT_METADATA_KEY, str(ms)),)
        if session_id is not None:
            md += ((SESSION_METADATA_KEY, session_id),)
        return md

    def _unary(
        self,
        method: str,
        request: Any,
        timeout: Optional[float],
        session_id: Optional[str] = None,
        server_timeout: Optional[float] = None,
    ) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=timeout, metadata=self._metadata(timeout, session_id, server_timeout)
            )
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    # -- API ------------------------------------------------------------

    def open_session(
        self,
        *,
        client_name: str = "",
        runtime: str = "",
        features: Sequence[str] = (),
        upstream_token: str = "",
        timeout: Optional[float] = None,
    ) -> "Session":
        """Open a session on a runtime (the default one unless ``runtime``
        names another). Use the session as a context manager to close it."""
        resp = self._unary(
            "OpenSession",
            pb.OpenSessionRequest(
                runtime=runtime, client_name=client_name, features=list(features), upstream_token=upstream_token
            ),
            timeout,
        )
        return Session(self, resp.session_id, resp)

    def session(self, session_id: str) -> "Session":
        """A handle on an existing session, e.g. one opened by another process.
        Nothing is sent until it is used."""
        return Session(self, session_id, None)

    def status(self, session_id: str, *, timeout: Optional[float] = None) -> SessionStatus:
        """Probe a session's liveness (side-effect free)."""
        r = self._unary("GetSessionStatus", pb.GetSessionStatusRequest(session_id=session_id), timeout, session_id)
        return SessionStatus(
            status=_enum(Status, pb.SessionStatus, "SESSION_STATUS_", r.status),
            phase=_enum(Phase, pb.SessionPhase, "SESSION_PHASE_", r.phase),
            runtime=r.runtime,
            features=list(r.features),
            last_event_seq=r.last_event_seq,
            generation=r.generation,
            instance_id=r.instance_id,
        )

    def list_sessions(self, *, timeout: Optional[float] = None) -> List[SessionInfo]:
        """The caller's sessions, oldest first."""
        r = self._unary("ListSessions", pb.ListSessionsRequest(), timeout)
        return [
            SessionInfo(
                session_id=s.session_id,
                phase=_enum(Phase, pb.SessionPhase, "SESSION_PHASE_", s.phase),
                runtime=s.runtime,
                opened_at=_ts(s, "opened_at"),
                active_jobs=s.active_jobs,
            )
            for s in r.sessions
        ]

    def close(self) -> None:
        """Close the channel (if the Gateway opened it). Idempotent."""
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> "Gateway":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Session:
    """A session on a runtime. Every call names the session in the
    ``x-sessiongate-session`` metadata.

    ``timeout=`` (seconds) on any call sets the call's deadline and asks the
    gateway for the same budget with ``x-timeout-ms``; the gateway then ends
    the call a small margin (20 ms by default) before that deadline, with the
    timeout details, so you get a :class:`TimeoutExceededError` rather than a
    bare deadline. ``server_timeout=`` asks for a budget of its own (sent as
    ``x-timeout-ms`` instead), e.g. a short server budget under a long
    deadline. Without either, the method's timeout profile applies. The
    gateway clamps a request to the profile's bounds (RunJob runs under
    tool_call: 1 s to 1 h) but never extends the caller's deadline.

    Used as a context manager, the session is closed on exit.
    """

    def __init__(self, gateway: Gateway, session_id: str, opened: Optional[Any]) -> None:
        self._gw = gateway
        self.id: str = session_id
        self.features: List[str] = list(opened.features) if opened is not None else []
        self.agents: Dict[str, List[str]] = (
            {a.name: list(a.versions) for a in opened.agents} if opened is not None else {}
        )
        self.runtime: str = opened.runtime.name if opened is not None else ""
        self.instance_id: str = opened.instance_id if opened is not None else ""
        self._closed = False

    def __repr__(self) -> str:
        return f"<sessiongate.Session {self.id}>"

    def _unary(self, method: str, request: Any, timeout: Optional[float], server_timeout: Optional[float] = None) -> Any:
        return self._gw._unary(method, request, timeout, self.id, server_timeout)

    def run(
        self,
        agent: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        max_runtime_sec: int = 0,
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> RunResult:
        """Run a job and wait for its result. A failed job raises the
        :class:`~sessiongate.GatewayError` for its code."""
        req = pb.RunJobRequest(
            session_id=self.id, agent=agent, idempotency_key=idempotency_key, max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            to_value(input, req.input)
        r = self._unary("RunJob", req, timeout, server_timeout)
        return RunResult(job_id=r.job_id, result=from_raw_or_value(r.raw_result, r.result), summary=r.summary)

    def submit(
        self,
        agent: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        max_runtime_sec: int = 0,
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> Job:
        """Submit a job; returns once the runtime accepted it."""
        req = pb.SubmitJobRequest(
            session_id=self.id, agent=agent, idempotency_key=idempotency_key, max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            to_value(input, req.input)
        r = self._unary("SubmitJob", req, timeout, server_timeout)
        return Job(job_id=r.job_id, accepted_at=_ts(r, "accepted_at"))

    def watch(
        self,
        job: Union[str, Job],
        *,
        from_event_seq: int = 0,
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> "Watch":
        """Stream a job's events; the last item is a :class:`JobResult` or a
        :class:`JobError`. Iterate the returned :class:`Watch`."""
        job_id = job.job_id if isinstance(job, Job) else job
        req = pb.WatchJobRequest(session_id=self.id, job_id=job_id, from_event_seq=from_event_seq)
        call = self._gw._stub.WatchJob(
            req, timeout=timeout, metadata=self._gw._metadata(timeout, self.id, server_timeout)
        )
        return Watch(call)

    def cancel(self, job: Union[str, Job], reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Ask the runtime to cancel a job; the job ends with a CANCELLED error."""
        job_id = job.job_id if isinstance(job, Job) else job
        self._unary("CancelJob", pb.CancelJobRequest(session_id=self.id, job_id=job_id, reason=reason), timeout)

    def status(self, *, timeout: Optional[float] = None) -> SessionStatus:
        """Probe this session's liveness."""
        return self._gw.status(self.id, timeout=timeout)

    def close(self, reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Close the session upstream. Idempotent; a session the gateway no
        longer knows counts as closed."""
        if self._closed:
            return
        try:
            self._unary("CloseSession", pb.CloseSessionRequest(session_id=self.id, reason=reason), timeout)
        except GatewayError as err:
            if err.reason != "SESSION_NOT_FOUND":
                raise
        self._closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Watch:
    """An iterator over a watched job's items. ``cancel()`` (or leaving a
    ``with`` block) ends the stream early; errors raise the typed
    :class:`~sessiongate.GatewayError`."""

    def __init__(self, call: Any) -> None:
        self._call = call

    def __iter__(self) -> Iterator[WatchItem]:
        return self

    def __next__(self) -> WatchItem:
        try:
            m = next(self._call)
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        item = m.WhichOneof("item")
        if item == "event":
            e = m.event
            return JobEvent(event_seq=m.event_seq, kind=e.kind, ts=_ts(e, "ts"), body=from_raw_or_value(e.raw_body, e.body))
        if item == "result":
            return JobResult(event_seq=m.event_seq, result=from_raw_or_value(m.result.raw_result, m.result.result), summary=m.result.summary)
        e = m.error
        return JobError(
            event_seq=m.event_seq,
            final_status=e.final_status,
            code=e.code,
            message=e.message,
            retryable=e.retryable,
            details=from_raw_or_value(e.raw_details, e.details),
        )

    def cancel(self) -> None:
        """End the stream early (the job goes on; see :meth:`Session.cancel`)."""
        self._call.cancel()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()
