from __future__ import annotations

import enum
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import grpc

from ._depth import check_input_depth
from ._idempotency import call_key
from ._limits import with_receive_limit
from ._resume import MAX_RESET_RESENDS, ResumePolicy, Resumer, resend_pause
from ._silence import HEALTH_CHECK_METHOD, SilenceBound, StreamSilence, is_silence, replica_silent_error
from ._values import from_raw_or_value, to_value
from .errors import CancelledError, ClientClosedError, GatewayError, from_rpc_error
from .pb.sessiongate.v1 import sessiongate_pb2 as pb
from .pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

TIMEOUT_METADATA_KEY = "x-timeout-ms"
"""Request metadata asking the gateway for a timeout, in milliseconds."""

SESSION_METADATA_KEY = "x-sessiongate-session"
"""Request metadata naming the session of a session-scoped call, for
session-affine routing; the gateway checks it against the request body."""

TRACEPARENT_METADATA_KEY = "traceparent"
"""Request metadata carrying the caller's W3C trace context; the gateway
makes its trace id the trace id of the jobs the call submits."""

Metadata = Tuple[Tuple[str, str], ...]

Lease = Dict[str, List[str]]
"""A set of capability grants (ARCP §9): namespace ("fs.read",
"cost.budget", …) to patterns ("/workspace/**", "USD:5.00", …)."""

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?")


def trace_metadata(traceparent: str, tracestate: str = "") -> Metadata:
    """Metadata carrying W3C trace context, for the ``metadata=`` of any call:
    the job a call submits gets the trace id of ``traceparent``
    (``"00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>"``). Raises
    ``ValueError`` for a malformed traceparent (the gateway would ignore it
    and give the job a fresh trace id). With OpenTelemetry, take the header
    from ``opentelemetry.propagate.inject({})``."""
    m = _TRACEPARENT.fullmatch(traceparent)
    if (
        m is None
        or m.group(1) == "ff"
        or (m.group(1) == "00" and m.group(5))
        or int(m.group(2), 16) == 0
        or int(m.group(3), 16) == 0
    ):
        raise ValueError(f"not a W3C traceparent: {traceparent!r}")
    md: Metadata = ((TRACEPARENT_METADATA_KEY, traceparent),)
    if tracestate:
        md += (("tracestate", tracestate),)
    return md


def retry_service_config() -> str:
    """The gRPC service config (JSON) of sessiongate's published retry policy:
    DEADLINE_EXCEEDED and UNAVAILABLE retried with exponential backoff under a
    retry budget. :class:`Gateway` applies it unless told not to."""
    return resources.files(__package__).joinpath("retry_service_config.json").read_text()



# Keepalive while calls are in flight: a PING every second, and a connection
# whose PING is unanswered for two seconds is closed, so that a call on a
# frozen replica (SIGSTOP, a VM pause: its socket stays open, nothing comes
# back) fails UNAVAILABLE in about two seconds and the retry policy sends it
# to another address of the target. The gateway tolerates pings every 500 ms
# (--keepalive-min-time).
KEEPALIVE_OPTIONS: Tuple[Tuple[str, Any], ...] = (
    ("grpc.keepalive_time_ms", 1000),
    ("grpc.keepalive_timeout_ms", 2000),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.http2.max_pings_without_data", 0),
    # Round robin over every address of the target (e.g.
    # "ipv4:10.0.0.1:50051,10.0.0.2:50051" or a DNS name with several), so
    # that a call retried after a frozen replica goes to another one.
    ("grpc.lb_policy_name", "round_robin"),
)


def channel_options(options: Sequence[Tuple[str, Any]], retry: bool) -> List[Tuple[str, Any]]:
    """The options of a channel the client makes: the caller's, the receive
    limit, keepalive and round robin (each unless the caller set it), and the
    published retry policy unless retry is off."""
    opts = with_receive_limit(options)
    given = {k for k, _ in opts}
    opts += [kv for kv in KEEPALIVE_OPTIONS if kv[0] not in given]
    if retry:
        opts += [("grpc.enable_retries", 1), ("grpc.service_config", retry_service_config())]
    return opts


def call_metadata(
    auth: Metadata,
    timeout: Optional[float],
    session_id: Optional[str],
    server_timeout: Optional[float] = None,
    extra: Sequence[Tuple[str, str]] = (),
) -> Metadata:
    """A call's metadata: the bearer token, x-timeout-ms (the server
    budget asked for, else the call's own timeout) and the session header."""
    md = auth
    ms = _timeout_ms(server_timeout if server_timeout is not None else timeout)
    if ms is not None:
        md += ((TIMEOUT_METADATA_KEY, str(ms)),)
    if session_id is not None:
        md += ((SESSION_METADATA_KEY, session_id),)
    return md + tuple(extra)

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


class JobState(str, enum.Enum):
    """Where a job stands."""

    UNSPECIFIED = "unspecified"
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class RunResult:
    """A successful job's result, from :meth:`Session.run`. ``agent`` is the
    resolved agent ("name@version"), ``trace_id`` the job's W3C trace id;
    ``lease``, ``lease_expires_at`` (aware, UTC) and ``budget`` what the
    runtime granted. ``result_id`` and ``result_size`` are set when the
    result was streamed in chunks (``result`` is then the assembled result);
    ``extensions`` are the result envelope's ``x-vendor.*`` extensions."""

    job_id: str
    result: Any
    summary: str
    agent: str = ""
    trace_id: str = ""
    lease: Optional[Lease] = None
    lease_expires_at: Optional[datetime] = None
    budget: Dict[str, float] = field(default_factory=dict)
    result_id: str = ""
    result_size: int = 0
    extensions: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    """A job the runtime accepted, from :meth:`Session.submit`; the fields
    after ``accepted_at`` are as in :class:`RunResult`."""

    job_id: str
    accepted_at: Optional[datetime]
    agent: str = ""
    trace_id: str = ""
    lease: Optional[Lease] = None
    lease_expires_at: Optional[datetime] = None
    budget: Dict[str, float] = field(default_factory=dict)
    extensions: Dict[str, Any] = field(default_factory=dict)
    #: Every event of the job has an event_seq above this one (0 when the
    #: gateway cannot say). :meth:`Session.watch` of this Job starts from it:
    #: the same events as from 0, and a watch cut before its first event (a
    #: rolling restart) continues on the replica that took the session over.
    after_event_seq: int = 0


def _watch_from(job: Union[str, "Job"], from_event_seq: Optional[int]) -> int:
    """Where a watch starts: the caller's cursor, else a Job's
    after_event_seq, else 0."""
    if from_event_seq is not None:
        return from_event_seq
    return job.after_event_seq if isinstance(job, Job) else 0


@dataclass(frozen=True)
class JobInfo:
    """A job as the runtime describes it, from :meth:`Session.list_jobs` and
    :meth:`Session.subscribe`. Times are aware (UTC)."""

    job_id: str
    agent: str
    state: JobState
    raw_status: str
    lease: Optional[Lease]
    lease_expires_at: Optional[datetime]
    budget: Dict[str, float]
    parent_job_id: str
    created_at: Optional[datetime]
    trace_id: str
    last_event_seq: int


@dataclass(frozen=True)
class Subscription:
    """The answer of :meth:`Session.subscribe`: the job, the event_seq the
    subscription starts from, and whether history was replayed."""

    job: JobInfo
    subscribed_from: int
    replayed: bool


@dataclass(frozen=True)
class Progress:
    """A typed progress report; ``total`` is None when indeterminate."""

    current: float
    total: Optional[float]
    units: str
    message: str


@dataclass(frozen=True)
class ResultChunk:
    """The metadata of one chunk of a streamed result (the data is the
    event's ``body``)."""

    result_id: str
    chunk_seq: int
    encoding: str  # "utf8" or "base64"
    more: bool


@dataclass(frozen=True)
class JobEvent:
    """An intermediate event of a watched job; ``progress`` or
    ``result_chunk`` is set for those kinds. ``ts`` is aware (UTC)."""

    event_seq: int
    kind: str
    ts: Optional[datetime]
    body: Any
    progress: Optional[Progress] = None
    result_chunk: Optional[ResultChunk] = None
    extensions: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobResult:
    """A watched job's successful end: the last item of the watch."""

    event_seq: int
    result: Any
    summary: str
    result_id: str = ""
    result_size: int = 0
    extensions: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobError:
    """A watched job's unsuccessful end: the last item of the watch."""

    event_seq: int
    final_status: str  # "error", "cancelled" or "timed_out"
    code: str  # the ARCP error code, e.g. "CANCELLED"
    message: str
    retryable: bool
    details: Any
    extensions: Dict[str, Any] = field(default_factory=dict)


WatchItem = Union[JobEvent, JobResult, JobError]


def _ts(msg: Any, name: str) -> Optional[datetime]:
    """A Timestamp field as an aware datetime (UTC), None when unset."""
    if not msg.HasField(name):
        return None
    return getattr(msg, name).ToDatetime().replace(tzinfo=timezone.utc)


_aware = _ts


def _lease_out(msg: Any) -> Optional[Lease]:
    if not msg.HasField("lease") or not msg.lease.capabilities:
        return None
    return {ns: list(p.patterns) for ns, p in msg.lease.capabilities.items()}


def _expires_out(msg: Any) -> Optional[datetime]:
    if not msg.HasField("lease_constraints"):
        return None
    return _aware(msg.lease_constraints, "expires_at")


def _ext_out(ext: Any) -> Dict[str, Any]:
    return {k: from_raw_or_value(b"", v) for k, v in ext.items()}


def _job_id(job: Union[str, "Job"]) -> str:
    """A job given as its id or as a :class:`Job`."""
    return job.job_id if isinstance(job, Job) else job


def _job_info(j: Any) -> JobInfo:
    return JobInfo(
        job_id=j.job_id,
        agent=j.agent,
        state=_enum(JobState, pb.JobState, "JOB_STATE_", j.state),
        raw_status=j.raw_status,
        lease=_lease_out(j),
        lease_expires_at=_expires_out(j),
        budget=dict(j.budget),
        parent_job_id=j.parent_job_id,
        created_at=_aware(j, "create_time"),
        trace_id=j.trace_id,
        last_event_seq=j.last_event_seq,
    )


def _session_status(r: Any) -> SessionStatus:
    return SessionStatus(
        status=_enum(Status, pb.SessionStatus, "SESSION_STATUS_", r.status),
        phase=_enum(Phase, pb.SessionPhase, "SESSION_PHASE_", r.phase),
        runtime=r.runtime,
        features=list(r.features),
        last_event_seq=r.last_event_seq,
        generation=r.generation,
        instance_id=r.instance_id,
    )


def _session_info(s: Any) -> SessionInfo:
    return SessionInfo(
        session_id=s.session_id,
        phase=_enum(Phase, pb.SessionPhase, "SESSION_PHASE_", s.phase),
        runtime=s.runtime,
        opened_at=_ts(s, "opened_at"),
        active_jobs=s.active_jobs,
    )


def _run_result(r: Any) -> RunResult:
    return RunResult(
        job_id=r.job_id,
        result=from_raw_or_value(r.raw_result, r.result),
        summary=r.summary,
        agent=r.agent,
        trace_id=r.trace_id,
        lease=_lease_out(r),
        lease_expires_at=_expires_out(r),
        budget=dict(r.budget),
        result_id=r.result_id,
        result_size=r.result_size,
        extensions=_ext_out(r.extensions),
    )


def _job(r: Any) -> Job:
    return Job(
        job_id=r.job_id,
        accepted_at=_ts(r, "accepted_at"),
        agent=r.agent,
        trace_id=r.trace_id,
        lease=_lease_out(r),
        lease_expires_at=_expires_out(r),
        budget=dict(r.budget),
        extensions=_ext_out(r.extensions),
        after_event_seq=r.after_event_seq,
    )


def _watch_item(m: Any) -> WatchItem:
    item = m.WhichOneof("item")
    ext = _ext_out(m.extensions)
    if item == "event":
        e = m.event
        progress = chunk = None
        if e.HasField("progress"):
            p = e.progress
            total = p.total if p.HasField("total") else None
            progress = Progress(current=p.current, total=total, units=p.units, message=p.message)
        if e.HasField("result_chunk"):
            c = e.result_chunk
            chunk = ResultChunk(result_id=c.result_id, chunk_seq=c.chunk_seq, encoding=c.encoding, more=c.more)
        return JobEvent(
            event_seq=m.event_seq,
            kind=e.kind,
            ts=_ts(e, "ts"),
            body=from_raw_or_value(e.raw_body, e.body),
            progress=progress,
            result_chunk=chunk,
            extensions=ext,
        )
    if item == "result":
        r = m.result
        return JobResult(
            event_seq=m.event_seq,
            result=from_raw_or_value(r.raw_result, r.result),
            summary=r.summary,
            result_id=r.result_id,
            result_size=r.result_size,
            extensions=ext,
        )
    e = m.error
    return JobError(
        event_seq=m.event_seq,
        final_status=e.final_status,
        code=e.code,
        message=e.message,
        retryable=e.retryable,
        details=from_raw_or_value(e.raw_details, e.details),
        extensions=ext,
    )


def _job_extras(
    req: Any,
    agent_version: str,
    lease: Optional[Mapping[str, Sequence[str]]],
    lease_expires_at: Optional[datetime],
    extensions: Optional[Mapping[str, Any]],
) -> None:
    req.agent_version = agent_version
    if lease is not None:
        for ns, patterns in lease.items():
            if isinstance(patterns, str):
                raise TypeError(f"lease[{ns!r}] must be a sequence of patterns, not a str")
            req.lease_request.capabilities[ns].patterns.extend(patterns)
    if lease_expires_at is not None:
        if lease_expires_at.tzinfo is None:
            raise ValueError("lease_expires_at must be an aware datetime (e.g. datetime.now(timezone.utc) + …)")
        req.lease_constraints.expires_at.FromDatetime(lease_expires_at.astimezone(timezone.utc).replace(tzinfo=None))
    for k, v in (extensions or {}).items():
        to_value(v, req.extensions[k])


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
    ``retry=False``. The gateway's timeout answers are never retried (every
    one carries ``grpc-retry-pushback-ms: -1``), and every attempt of one
    ``run`` or ``submit`` carries the same idempotency key (a fresh one per
    call unless ``idempotency_key=`` gives one), so a retried attempt gets the
    job the first one created instead of running it again (see README,
    "Retries"). The channel accepts messages up to 32 MiB, above the largest
    result the gateway returns. Use the gateway as a context manager, or call
    :meth:`close`. A Gateway may be shared by threads.

    ``silence_bound`` bounds a watch on a silent (frozen) replica: a stream
    quiet for ``after`` (0.5 s) health-checks its replica, and one that gets
    no answer within ``timeout`` (1 s) ends UNAVAILABLE ``REPLICA_SILENT`` and
    the watch resumes from its cursor (see ``sessiongate._silence``); None
    turns it off.
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
        silence_bound: Optional[SilenceBound] = SilenceBound(),
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("give exactly one of target and channel")
        self._own_channel = channel is None
        if channel is None:
            opts = channel_options(options, retry)
            if credentials is None:
                channel = grpc.insecure_channel(target, options=opts)
            else:
                channel = grpc.secure_channel(target, credentials, options=opts)
        self._channel = channel
        self._stub = pb_grpc.SessionGatewayStub(channel)
        self._health = channel.unary_unary(HEALTH_CHECK_METHOD)  # bytes in, bytes out
        self._silence = silence_bound
        self._auth: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._closed = False

    # -- plumbing -------------------------------------------------------

    def _metadata(
        self,
        timeout: Optional[float],
        session_id: Optional[str],
        server_timeout: Optional[float] = None,
        extra: Sequence[Tuple[str, str]] = (),
    ) -> Metadata:
        return call_metadata(self._auth, timeout, session_id, server_timeout, extra)

    def _unary(
        self,
        method: str,
        request: Any,
        timeout: Optional[float],
        session_id: Optional[str] = None,
        server_timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
    ) -> Any:
        deadline = None if timeout is None else time.monotonic() + timeout
        for attempt in range(MAX_RESET_RESENDS + 1):
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            md = self._metadata(left, session_id, server_timeout, metadata)
            try:
                return self._invoke(lambda: getattr(self._stub, method)(request, timeout=left, metadata=md))
            except grpc.RpcError as err:
                gerr = self._error(err)
            # A stream a balancer reset (its replica died mid-response) is
            # sent again when that is safe (see _resume.resend_pause).
            pause = resend_pause(attempt, gerr, method, request, deadline)
            if pause is None:
                raise gerr
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _invoke(self, start: Callable[[], Any]) -> Any:
        """Start a call; on a closed Gateway (or a channel its owner
        closed), raise ClientClosedError rather than grpcio's ValueError."""
        if self._closed:
            raise ClientClosedError()
        try:
            return start()
        except ValueError as err:
            if "closed channel" in str(err):
                raise ClientClosedError() from None
            raise

    def _error(self, err: grpc.RpcError) -> GatewayError:
        if self._closed and err.code() == grpc.StatusCode.CANCELLED:
            return ClientClosedError("the Gateway was closed during the call")
        return from_rpc_error(err)

    def _health_silent(self, session_id: str) -> bool:
        """Health-check the replica of session_id (the session header routes
        the check where a balancer routes the session): True when no answer
        came within the silence bound's timeout."""
        assert self._silence is not None
        try:
            self._health(b"", timeout=self._silence.timeout, metadata=self._metadata(None, session_id))
        except grpc.RpcError as err:
            return is_silence(err)
        except ValueError:  # the channel was closed
            return False
        return False

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
        return _session_status(r)

    def list_sessions(self, *, timeout: Optional[float] = None) -> List[SessionInfo]:
        """The caller's sessions, oldest first."""
        r = self._unary("ListSessions", pb.ListSessionsRequest(), timeout)
        return [_session_info(s) for s in r.sessions]

    def close(self) -> None:
        """Close the channel (if the Gateway opened it). Idempotent. Calls
        in flight end, and later calls fail, with
        :class:`~sessiongate.ClientClosedError`."""
        self._closed = True
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
    the call a margin before that deadline — a third of the time left, at most
    100 ms — with the timeout details, so you get a
    :class:`TimeoutExceededError` rather than a bare deadline. A call with any
    time left runs; only one already past its deadline is refused. ``server_timeout=`` asks for a budget of its own (sent as
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

    def _unary(
        self,
        method: str,
        request: Any,
        timeout: Optional[float],
        server_timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
    ) -> Any:
        return self._gw._unary(method, request, timeout, self.id, server_timeout, metadata)

    def run(
        self,
        agent: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        max_runtime_sec: int = 0,
        agent_version: str = "",
        lease: Optional[Mapping[str, Sequence[str]]] = None,
        lease_expires_at: Optional[datetime] = None,
        extensions: Optional[Mapping[str, Any]] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> RunResult:
        """Run a job and wait for its result. A failed job raises the
        :class:`~sessiongate.GatewayError` for its code.

        ``agent_version`` pins a version (``agent`` then names none);
        ``lease`` requests capabilities (namespace to patterns; beyond the
        runtime's limits: :class:`~sessiongate.PermissionDeniedError`);
        ``lease_expires_at`` (an aware datetime in the future) bounds the
        lease; ``extensions`` (``x-vendor.*`` keys) go on the submit envelope;
        ``metadata`` is sent with the call, e.g.
        ``metadata=sessiongate.trace_metadata(traceparent)``.

        The job is cancelled when the call ends early: when ``timeout``
        passes, or when the waiting thread is interrupted (KeyboardInterrupt
        or any other exception): the call is cancelled and the gateway
        cancels the job upstream. To cancel from another thread, use
        :meth:`run_future`."""
        req = pb.RunJobRequest(
            session_id=self.id, agent=agent, idempotency_key=call_key(idempotency_key), max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            check_input_depth(input)
            to_value(input, req.input)
        _job_extras(req, agent_version, lease, lease_expires_at, extensions)
        deadline = None if timeout is None else time.monotonic() + timeout
        for attempt in range(MAX_RESET_RESENDS + 1):
            left = None if deadline is None else max(0.001, deadline - time.monotonic())
            call = self._run_call(req, left, server_timeout, metadata)
            try:
                return call.result()
            except GatewayError as err:
                # A stream a balancer reset is sent again with the same
                # idempotency key (see _resume.resend_pause).
                pause = resend_pause(attempt, err, "RunJob", req, deadline)
                if pause is None:
                    raise
                time.sleep(pause)
            except BaseException:
                call.cancel()
                raise
        raise AssertionError("unreachable")

    def run_future(
        self,
        agent: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        max_runtime_sec: int = 0,
        agent_version: str = "",
        lease: Optional[Mapping[str, Sequence[str]]] = None,
        lease_expires_at: Optional[datetime] = None,
        extensions: Optional[Mapping[str, Any]] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> "RunCall":
        """Start a job as :meth:`run` does, without waiting: the returned
        :class:`RunCall`'s ``result()`` waits, its ``cancel()`` (from any
        thread) cancels the call and with it the job."""
        req = pb.RunJobRequest(
            session_id=self.id, agent=agent, idempotency_key=idempotency_key, max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            to_value(input, req.input)
        _job_extras(req, agent_version, lease, lease_expires_at, extensions)
        return self._run_call(req, timeout, server_timeout, metadata)

    def _run_call(
        self, req: Any, timeout: Optional[float], server_timeout: Optional[float], metadata: Sequence[Tuple[str, str]]
    ) -> "RunCall":
        gw = self._gw
        md = gw._metadata(timeout, self.id, server_timeout, metadata)
        return RunCall(gw, gw._invoke(lambda: gw._stub.RunJob.future(req, timeout=timeout, metadata=md)))

    def submit(
        self,
        agent: str,
        input: Any = None,
        *,
        idempotency_key: str = "",
        max_runtime_sec: int = 0,
        agent_version: str = "",
        lease: Optional[Mapping[str, Sequence[str]]] = None,
        lease_expires_at: Optional[datetime] = None,
        extensions: Optional[Mapping[str, Any]] = None,
        metadata: Sequence[Tuple[str, str]] = (),
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
    ) -> Job:
        """Submit a job; returns once the runtime accepted it. The keyword
        arguments are those of :meth:`run`."""
        req = pb.SubmitJobRequest(
            session_id=self.id, agent=agent, idempotency_key=call_key(idempotency_key), max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            check_input_depth(input)
            to_value(input, req.input)
        _job_extras(req, agent_version, lease, lease_expires_at, extensions)
        r = self._unary("SubmitJob", req, timeout, server_timeout, metadata)
        return _job(r)

    def list_jobs(
        self,
        filter: str = "",
        *,
        page_size: int = 0,
        timeout: Optional[float] = None,
    ) -> Iterator[JobInfo]:
        """The jobs the runtime reports for this session, in acceptance order,
        fetched a page at a time as you iterate (``timeout`` applies to each
        page). ``filter`` is an AIP-160 filter, e.g.
        ``'(state = PENDING OR state = RUNNING) AND agent = "echo"'`` or
        ``'create_time > "2026-05-13T00:00:00Z"'``; ``page_size`` is per page
        (default 50). A bad filter raises
        :class:`~sessiongate.InvalidArgumentError` on the first ``next()``."""
        req = pb.ListJobsRequest(session_id=self.id, filter=filter, page_size=page_size)
        while True:
            r = self._unary("ListJobs", req, timeout)
            for j in r.jobs:
                yield _job_info(j)
            if not r.next_page_token:
                return
            req.page_token = r.next_page_token

    def subscribe(
        self,
        job: Union[str, Job],
        *,
        history: bool = False,
        from_event_seq: int = 0,
        timeout: Optional[float] = None,
    ) -> Subscription:
        """Attach this session to a job submitted through another of your
        sessions; :meth:`watch` then works for it here (with ``history``, from
        its buffered events after ``from_event_seq``). A subscriber cannot
        cancel the job (:class:`~sessiongate.PermissionDeniedError`)."""
        job_id = _job_id(job)
        r = self._unary(
            "SubscribeJob",
            pb.SubscribeJobRequest(session_id=self.id, job_id=job_id, history=history, from_event_seq=from_event_seq),
            timeout,
        )
        return Subscription(job=_job_info(r.job), subscribed_from=r.subscribed_from, replayed=r.replayed)

    def watch(
        self,
        job: Union[str, Job],
        *,
        from_event_seq: Optional[int] = None,
        timeout: Optional[float] = None,
        server_timeout: Optional[float] = None,
        resume: Union[bool, ResumePolicy] = True,
    ) -> "Watch":
        """Stream a job's events; the last item is a :class:`JobResult` or a
        :class:`JobError`. Iterate the returned :class:`Watch`. It starts
        after ``from_event_seq``; by default after a :class:`Job`'s
        ``after_event_seq`` (the same events as from 0), else from the start.

        A watch resumes itself: when the stream is cut by a hand-off, an
        unreachable owner, a draining gateway or a dropped connection
        (UNAVAILABLE), it is re-opened from the last event_seq delivered,
        with backoff, within ``timeout`` (which bounds the whole watch), so
        every event arrives once, in order. ``resume=False`` turns that off;
        a :class:`~sessiongate.ResumePolicy` tunes it."""
        job_id = _job_id(job)
        gw = self._gw

        def open_call(cursor: int, remaining: Optional[float]) -> Any:
            req = pb.WatchJobRequest(session_id=self.id, job_id=job_id, from_event_seq=cursor)
            md = gw._metadata(remaining, self.id, server_timeout)
            return gw._invoke(lambda: gw._stub.WatchJob(req, timeout=remaining, metadata=md))

        policy = ResumePolicy() if resume is True else (resume or None)
        return Watch(gw, open_call, _watch_from(job, from_event_seq), timeout, policy, self.id)

    def cancel(self, job: Union[str, Job], reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Ask the runtime to cancel a job; the job ends with a CANCELLED error."""
        job_id = _job_id(job)
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


class RunCall:
    """A RunJob call in flight, from :meth:`Session.run_future`. Its methods
    may be called from any thread."""

    def __init__(self, gateway: Gateway, future: Any) -> None:
        self._gw = gateway
        self._future = future

    def result(self, timeout: Optional[float] = None) -> RunResult:
        """Wait for the job's result (at most ``timeout`` seconds: then the
        builtin TimeoutError, and the call goes on). Raises the typed
        :class:`~sessiongate.GatewayError` of a failed call, and
        :class:`~sessiongate.CancelledError` once :meth:`cancel` won."""
        try:
            r = self._future.result(timeout=timeout)
        except grpc.FutureCancelledError:
            raise CancelledError(grpc.StatusCode.CANCELLED, "the call was cancelled by the caller") from None
        except grpc.FutureTimeoutError:
            raise TimeoutError(f"no result within {timeout} s (the call goes on)") from None
        except grpc.RpcError as err:
            raise self._gw._error(err) from None
        return _run_result(r)

    def cancel(self) -> bool:
        """Cancel the call; the gateway then cancels the job upstream (the
        runtime sees it cancelled). False when the call had already ended."""
        return bool(self._future.cancel())

    def cancelled(self) -> bool:
        return bool(self._future.cancelled())

    def done(self) -> bool:
        return bool(self._future.done())


class Watch:
    """An iterator over a watched job's items, resumed across cuts (see
    :meth:`Session.watch`). ``cancel()`` (or leaving a ``with`` block) ends
    the stream early; errors raise the typed
    :class:`~sessiongate.GatewayError`. ``resumes`` counts the re-opens,
    ``cuts`` holds the errors they followed."""

    def __init__(
        self,
        gateway: Gateway,
        open_call: Callable[[int, Optional[float]], Any],
        from_event_seq: int,
        timeout: Optional[float],
        policy: Optional[ResumePolicy],
        session_id: str = "",
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive (seconds)")
        self._gw = gateway
        self._open = open_call
        self._session_id = session_id
        deadline = time.monotonic() + timeout if timeout is not None else None
        self._resumer = Resumer(from_event_seq, policy, deadline)
        self._cancelled = threading.Event()
        self._silence: Optional[StreamSilence] = None
        self._call = self._bounded(open_call(from_event_seq, timeout))

    def _bounded(self, call: Any) -> Any:
        """Put a newly opened stream under the Gateway's silence bound."""
        bound = self._gw._silence
        if bound is not None:
            gw, sid = self._gw, self._session_id  # the thread must not hold the Watch
            self._silence = StreamSilence(bound, lambda: gw._health_silent(sid), call.cancel, owner=self)
        return call

    def _stop_silence(self) -> bool:
        """Stop the current stream's bound; True when it found the replica silent."""
        s, self._silence = self._silence, None
        if s is None:
            return False
        s.stop()
        return s.silent

    @property
    def resumes(self) -> int:
        return self._resumer.resumes

    @property
    def cuts(self) -> List[GatewayError]:
        return list(self._resumer.cuts)

    def __iter__(self) -> Iterator[WatchItem]:
        return self

    def __next__(self) -> WatchItem:
        while True:
            if self._resumer.done:
                self._stop_silence()
                raise StopIteration
            try:
                m = next(self._call)
            except StopIteration:
                self._stop_silence()
                raise
            except grpc.RpcError as err:
                silent = self._stop_silence() and not self._cancelled.is_set()
                assert self._gw._silence is not None or not silent
                gerr = replica_silent_error(self._gw._silence) if silent else self._gw._error(err)  # type: ignore[arg-type]
                delay = None if self._cancelled.is_set() else self._resumer.cut(gerr, time.monotonic())
                if delay is None or self._cancelled.wait(delay):
                    raise gerr from None
                self._call = self._bounded(self._open(self._resumer.cursor, self._resumer.remaining(time.monotonic())))
                continue
            if self._silence is not None:
                self._silence.received()
            if self._resumer.deliver(m.event_seq, m.WhichOneof("item") != "event"):
                if self._resumer.done:
                    self._stop_silence()
                return _watch_item(m)

    def cancel(self) -> None:
        """End the stream early (the job goes on; see :meth:`Session.cancel`)."""
        self._cancelled.set()
        self._stop_silence()
        self._call.cancel()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()
