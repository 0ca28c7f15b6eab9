"""The sessiongate client on asyncio (``grpc.aio``), for FastAPI, aiohttp and
other asyncio services.

::

    import asyncio
    from sessiongate import aio

    async def main() -> None:
        async with aio.Gateway("127.0.0.1:50051") as gw:
            async with await gw.open_session(client_name="example") as s:
                print((await s.run("echo", {"hello": "world"}, timeout=5)).result)
                job = await s.submit("stream", {"count": 3}, timeout=5)
                async for item in s.watch(job, timeout=30):
                    print(item)

    asyncio.run(main())

The surface is the sync client's (:mod:`sessiongate`) with ``await`` on every
call: the same arguments, result types (:class:`~sessiongate.RunResult`,
:class:`~sessiongate.JobEvent`, …) and typed errors. Sessions and gateways are
async context managers; a watch is an async iterator that resumes itself
across cuts as the sync one does (``resume=False`` turns it off).

Cancellation: cancelling the task that awaits a call cancels the RPC; for
:meth:`Session.run` the gateway then cancels the job upstream, so the runtime
sees it cancelled (``asyncio.wait_for(s.run(...), 2)`` and ``asyncio.timeout``
do the same). Leaving a watch's ``async with`` or breaking out of its loop and
calling :meth:`Watch.cancel` ends the stream (the job goes on; cancel it with
:meth:`Session.cancel`).

A Gateway belongs to the event loop it was first used on (grpc.aio's rule).
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio

from ._depth import check_input_depth
from ._idempotency import call_key
from ._client import (
    Job,
    JobInfo,
    Metadata,
    RunResult,
    SessionInfo,
    SessionStatus,
    Subscription,
    WatchItem,
    _job,
    _job_extras,
    _job_id,
    _watch_from,
    _job_info,
    _run_result,
    _session_info,
    _session_status,
    _watch_item,
    call_metadata,
    channel_options,
    SESSION_METADATA_KEY,
    TIMEOUT_METADATA_KEY,
)
from ._resume import MAX_RESET_RESENDS, ResumePolicy, Resumer, resend_pause
from ._silence import HEALTH_CHECK_METHOD, SilenceBound, is_silence, replica_silent_error
from ._values import to_value
from .errors import ClientClosedError, GatewayError, from_rpc_error
from .pb.sessiongate.v1 import sessiongate_pb2 as pb
from .pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

__all__ = ["Gateway", "Session", "Watch"]


class Gateway:
    """A connection to a sessiongate gateway on asyncio; the arguments are
    those of :class:`sessiongate.Gateway` (``channel=`` takes a
    ``grpc.aio.Channel``). Use it as an async context manager, or await
    :meth:`close`."""

    def __init__(
        self,
        target: Optional[str] = None,
        *,
        credentials: Optional[grpc.ChannelCredentials] = None,
        token: Optional[str] = None,
        retry: bool = True,
        options: Sequence[Tuple[str, Any]] = (),
        channel: Optional[grpc.aio.Channel] = None,
        silence_bound: Optional[SilenceBound] = SilenceBound(),
    ) -> None:
        if (target is None) == (channel is None):
            raise ValueError("give exactly one of target and channel")
        self._own_channel = channel is None
        if channel is None:
            opts = channel_options(options, retry)
            if credentials is None:
                channel = grpc.aio.insecure_channel(target, options=opts)
            else:
                channel = grpc.aio.secure_channel(target, credentials, options=opts)
        self._channel = channel
        self._stub = pb_grpc.SessionGatewayStub(channel)
        self._health = channel.unary_unary(HEALTH_CHECK_METHOD)  # bytes in, bytes out
        self._silence = silence_bound
        self._auth: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._closed = False

    async def _health_silent(self, session_id: str) -> bool:
        """Health-check the replica of session_id (see sessiongate._silence):
        True when no answer came within the silence bound's timeout."""
        assert self._silence is not None
        try:
            await self._health(b"", timeout=self._silence.timeout, metadata=self._metadata(None, session_id))
        except grpc.RpcError as err:
            return is_silence(err)
        except grpc.aio.UsageError:  # the channel was closed
            return False
        return False

    def _metadata(
        self,
        timeout: Optional[float],
        session_id: Optional[str],
        server_timeout: Optional[float] = None,
        extra: Sequence[Tuple[str, str]] = (),
    ) -> Metadata:
        return call_metadata(self._auth, timeout, session_id, server_timeout, extra)

    def _start(self, start: Callable[[], Any]) -> Any:
        if self._closed:
            raise ClientClosedError()
        try:
            return start()
        except grpc.aio.UsageError as err:
            raise ClientClosedError(f"the Gateway's channel is closed ({err})") from None

    def _error(self, err: grpc.RpcError) -> GatewayError:
        if self._closed and err.code() == grpc.StatusCode.CANCELLED:
            return ClientClosedError("the Gateway was closed during the call")
        return from_rpc_error(err)

    async def _unary(
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
            call = self._start(lambda: getattr(self._stub, method)(request, timeout=left, metadata=md))
            try:
                # Cancelling the awaiting task cancels the call (grpc.aio).
                return await call
            except grpc.RpcError as err:
                gerr = self._error(err)
            except grpc.aio.UsageError as err:
                raise ClientClosedError(f"the Gateway's channel is closed ({err})") from None
            # A stream a balancer reset is sent again when that is safe
            # (see sessiongate._resume.resend_pause).
            pause = resend_pause(attempt, gerr, method, request, deadline)
            if pause is None:
                raise gerr
            await asyncio.sleep(pause)
        raise AssertionError("unreachable")

    async def open_session(
        self,
        *,
        client_name: str = "",
        runtime: str = "",
        features: Sequence[str] = (),
        upstream_token: str = "",
        timeout: Optional[float] = None,
    ) -> "Session":
        """Open a session (see :meth:`sessiongate.Gateway.open_session`);
        ``async with`` it to close it."""
        resp = await self._unary(
            "OpenSession",
            pb.OpenSessionRequest(
                runtime=runtime, client_name=client_name, features=list(features), upstream_token=upstream_token
            ),
            timeout,
        )
        return Session(self, resp.session_id, resp)

    def session(self, session_id: str) -> "Session":
        """A handle on an existing session; nothing is sent until it is used."""
        return Session(self, session_id, None)

    async def status(self, session_id: str, *, timeout: Optional[float] = None) -> SessionStatus:
        """Probe a session's liveness (side-effect free)."""
        r = await self._unary(
            "GetSessionStatus", pb.GetSessionStatusRequest(session_id=session_id), timeout, session_id
        )
        return _session_status(r)

    async def list_sessions(self, *, timeout: Optional[float] = None) -> List[SessionInfo]:
        """The caller's sessions, oldest first."""
        r = await self._unary("ListSessions", pb.ListSessionsRequest(), timeout)
        return [_session_info(s) for s in r.sessions]

    async def close(self, grace: Optional[float] = None) -> None:
        """Close the channel (if the Gateway opened it), letting calls in
        flight run for ``grace`` seconds. Idempotent; later calls raise
        :class:`~sessiongate.ClientClosedError`."""
        self._closed = True
        if self._own_channel:
            await self._channel.close(grace)

    async def __aenter__(self) -> "Gateway":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


class Session:
    """A session on a runtime (see :class:`sessiongate.Session` for
    ``timeout=`` and ``server_timeout=``). ``async with`` closes it."""

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
        return f"<sessiongate.aio.Session {self.id}>"

    async def _unary(
        self,
        method: str,
        request: Any,
        timeout: Optional[float],
        server_timeout: Optional[float] = None,
        metadata: Sequence[Tuple[str, str]] = (),
    ) -> Any:
        return await self._gw._unary(method, request, timeout, self.id, server_timeout, metadata)

    async def run(
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
        """Run a job and wait for its result (see
        :meth:`sessiongate.Session.run`). Cancelling the awaiting task (or
        ``timeout`` passing) cancels the call, and the gateway cancels the
        job upstream."""
        req = pb.RunJobRequest(
            session_id=self.id, agent=agent, idempotency_key=call_key(idempotency_key), max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            check_input_depth(input)
            to_value(input, req.input)
        _job_extras(req, agent_version, lease, lease_expires_at, extensions)
        return _run_result(await self._unary("RunJob", req, timeout, server_timeout, metadata))

    async def submit(
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
        """Submit a job; returns once the runtime accepted it."""
        req = pb.SubmitJobRequest(
            session_id=self.id, agent=agent, idempotency_key=call_key(idempotency_key), max_runtime_sec=max_runtime_sec
        )
        if input is not None:
            check_input_depth(input)
            to_value(input, req.input)
        _job_extras(req, agent_version, lease, lease_expires_at, extensions)
        return _job(await self._unary("SubmitJob", req, timeout, server_timeout, metadata))

    async def list_jobs(
        self, filter: str = "", *, page_size: int = 0, timeout: Optional[float] = None
    ) -> AsyncIterator[JobInfo]:
        """The session's jobs, a page at a time as you iterate (``async
        for``); see :meth:`sessiongate.Session.list_jobs`."""
        req = pb.ListJobsRequest(session_id=self.id, filter=filter, page_size=page_size)
        while True:
            r = await self._unary("ListJobs", req, timeout)
            for j in r.jobs:
                yield _job_info(j)
            if not r.next_page_token:
                return
            req.page_token = r.next_page_token

    async def subscribe(
        self,
        job: Union[str, Job],
        *,
        history: bool = False,
        from_event_seq: int = 0,
        timeout: Optional[float] = None,
    ) -> Subscription:
        """Attach this session to a job of another of your sessions."""
        job_id = _job_id(job)
        r = await self._unary(
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
        """Stream a job's items with ``async for``; where it starts and how it
        resumes across cuts are as :meth:`sessiongate.Session.watch` says."""
        job_id = _job_id(job)
        gw = self._gw

        def open_call(cursor: int, remaining: Optional[float]) -> Any:
            req = pb.WatchJobRequest(session_id=self.id, job_id=job_id, from_event_seq=cursor)
            md = gw._metadata(remaining, self.id, server_timeout)
            return gw._start(lambda: gw._stub.WatchJob(req, timeout=remaining, metadata=md))

        policy = ResumePolicy() if resume is True else (resume or None)
        return Watch(gw, open_call, _watch_from(job, from_event_seq), timeout, policy, self.id)

    async def cancel(self, job: Union[str, Job], reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Ask the runtime to cancel a job; it ends with a CANCELLED error."""
        job_id = _job_id(job)
        await self._unary("CancelJob", pb.CancelJobRequest(session_id=self.id, job_id=job_id, reason=reason), timeout)

    async def status(self, *, timeout: Optional[float] = None) -> SessionStatus:
        """Probe this session's liveness."""
        return await self._gw.status(self.id, timeout=timeout)

    async def close(self, reason: str = "", *, timeout: Optional[float] = None) -> None:
        """Close the session upstream. Idempotent."""
        if self._closed:
            return
        try:
            await self._unary("CloseSession", pb.CloseSessionRequest(session_id=self.id, reason=reason), timeout)
        except GatewayError as err:
            if err.reason != "SESSION_NOT_FOUND":
                raise
        self._closed = True

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()


async def _wait_cancelled(cancelled: asyncio.Event, delay: float) -> bool:
    """Wait delay seconds; True if cancelled was set meanwhile."""
    try:
        await asyncio.wait_for(cancelled.wait(), delay)
    except asyncio.TimeoutError:
        return False
    return True


class _Silent(Exception):
    """A watch's stream given up on a silent replica (Watch._read)."""


class Watch:
    """An async iterator over a watched job's items, resumed across cuts.
    ``cancel()`` (or leaving ``async with``) ends the stream early; errors
    raise the typed :class:`~sessiongate.GatewayError`. ``resumes`` counts
    the re-opens."""

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
        self._cancelled = asyncio.Event()
        self._call = open_call(from_event_seq, timeout)
        self._last = time.monotonic()  # the stream's last message or start

    async def _read(self) -> Any:
        """The stream's next message, under the Gateway's silence bound (see
        sessiongate._silence): raises _Silent, the stream cancelled, when it
        was quiet for ``after`` and its replica answered no health check."""
        bound = self._gw._silence
        if bound is None:
            return await self._call.read()
        read = asyncio.ensure_future(self._call.read())
        try:
            next_check = self._last + bound.after
            while True:
                wait = next_check - time.monotonic()
                if wait > 0:
                    done, _ = await asyncio.wait({read}, timeout=wait)
                    if done:
                        break
                    continue
                check = asyncio.ensure_future(self._gw._health_silent(self._session_id))
                done, _ = await asyncio.wait({read, check}, return_when=asyncio.FIRST_COMPLETED)
                if read in done:
                    check.cancel()
                    break
                if check.result():
                    self._call.cancel()
                    raise _Silent()
                next_check = time.monotonic() + bound.after
            m = read.result()
            self._last = time.monotonic()
            return m
        finally:
            if not read.done():
                read.cancel()

    @property
    def resumes(self) -> int:
        return self._resumer.resumes

    @property
    def cuts(self) -> List[GatewayError]:
        """The errors the watch re-opened after."""
        return list(self._resumer.cuts)

    def __aiter__(self) -> "Watch":
        return self

    async def __anext__(self) -> WatchItem:
        while True:
            if self._resumer.done:
                raise StopAsyncIteration
            try:
                m = await self._read()
            except asyncio.CancelledError:
                # The task awaiting the watch was cancelled: end the stream.
                self.cancel()
                raise
            except (grpc.RpcError, _Silent) as err:
                if isinstance(err, _Silent):
                    assert self._gw._silence is not None
                    gerr = replica_silent_error(self._gw._silence)
                else:
                    gerr = self._gw._error(err)
                delay = None if self._cancelled.is_set() else self._resumer.cut(gerr, time.monotonic())
                if delay is None:
                    raise gerr from None
                if await _wait_cancelled(self._cancelled, delay):
                    raise gerr from None  # cancelled during the backoff
                self._call = self._open(self._resumer.cursor, self._resumer.remaining(time.monotonic()))
                self._last = time.monotonic()
                continue
            if m is grpc.aio.EOF:
                raise StopAsyncIteration
            if self._resumer.deliver(m.event_seq, m.WhichOneof("item") != "event"):
                return _watch_item(m)

    def cancel(self) -> None:
        """End the stream early (the job goes on)."""
        self._cancelled.set()
        self._call.cancel()

    async def __aenter__(self) -> "Watch":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cancel()
