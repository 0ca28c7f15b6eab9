"""Cancellation, error classes, closed clients, aware datetimes, resumed
watches and the public stubs, sync and asyncio, against a real gateway
binary (see gateway_process.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest
from datetime import timezone
from typing import Any, Callable, List

import grpc

import sessiongate as sg
from sessiongate import aio
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb

from gateway_process import REPO, CutProxy, GatewayProcess

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


def _until(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    """Poll cond (a call to the gateway) until it is truthy."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


async def _auntil(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = await cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def _sleep_jobs(s: sg.Session, state: sg.JobState) -> List[sg.JobInfo]:
    return [j for j in s.list_jobs(timeout=10) if j.agent.startswith("sleep") and j.state is state]


class SyncTest(unittest.TestCase):
    def setUp(self) -> None:
        self.gw = sg.Gateway(_gw.addr)
        self.addCleanup(self.gw.close)

    def open(self, gw: Any = None) -> sg.Session:
        s = (gw or self.gw).open_session(client_name="py-features", timeout=10)
        self.addCleanup(lambda: s.close(timeout=10) if not self.gw._closed else None)
        return s

    def test_run_future_cancel_cancels_the_job(self) -> None:
        s = self.open()
        call = s.run_future("sleep", {"ms": 30000}, timeout=60)
        running = _until(lambda: _sleep_jobs(s, sg.JobState.RUNNING), "the sleep job to run")
        self.assertTrue(call.cancel())
        with self.assertRaises(sg.CancelledError):
            call.result(timeout=10)
        self.assertTrue(call.cancelled())
        job_id = running[0].job_id
        # The runtime, asked through the gateway, sees the job cancelled.
        _until(
            lambda: any(j.job_id == job_id and j.state is sg.JobState.CANCELLED for j in s.list_jobs(timeout=10)),
            "the runtime to report the job cancelled",
        )

    def test_run_interrupted_cancels_the_job(self) -> None:
        # A KeyboardInterrupt (here: an exception raised in the waiting
        # thread by a timer) cancels the call and the job.
        s = self.open()
        waiter = threading.get_ident()

        def interrupt() -> None:
            _until(lambda: _sleep_jobs(s, sg.JobState.RUNNING), "the sleep job to run")
            import ctypes

            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(waiter), ctypes.py_object(KeyboardInterrupt))

        t = threading.Thread(target=interrupt)
        t.start()
        with self.assertRaises(KeyboardInterrupt):
            s.run("sleep", {"ms": 30000}, timeout=60)
        t.join(timeout=30)
        _until(lambda: _sleep_jobs(s, sg.JobState.CANCELLED), "the runtime to report the job cancelled")

    def test_error_class_per_code(self) -> None:
        for code in grpc.StatusCode:
            if code is grpc.StatusCode.OK:
                continue
            with self.subTest(code=code.name):
                cls = sg.ERROR_CLASSES[code]
                self.assertIsNot(cls, sg.GatewayError)
                self.assertEqual(cls.__name__.lower().replace("error", ""), code.name.lower().replace("_", ""))

    def test_error_classes_from_the_gateway(self) -> None:
        s = self.open()
        with self.assertRaises(sg.AbortedError) as cm:
            s.run("fail", {"code": "INTERNAL_ERROR", "message": "boom"}, timeout=10)
        self.assertEqual(cm.exception.reason, "INTERNAL_ERROR")
        self.assertEqual(cm.exception.domain, "arcp")
        gone = self.gw.open_session(client_name="py-gone", timeout=10)
        gone.close(timeout=10)
        with self.assertRaises(sg.NotFoundError):
            self.gw.session(gone.id).run("echo", {}, timeout=10)
        with self.assertRaises(sg.InvalidArgumentError):
            s.run("", {}, timeout=10)
        # UNIMPLEMENTED: a method the gateway does not serve.
        call = self.gw._channel.unary_unary("/sessiongate.v1.SessionGateway/NoSuchMethod")
        with self.assertRaises(grpc.RpcError) as raw:
            call(b"", timeout=10)
        err = sg.errors.from_rpc_error(raw.exception)
        self.assertIsInstance(err, sg.UnimplementedError)
        self.assertIsInstance(err, NotImplementedError)

    def test_closed_gateway(self) -> None:
        s = self.open()
        self.gw.close()
        for call in (lambda: s.run("echo", {}, timeout=5), lambda: self.gw.list_sessions(timeout=5),
                     lambda: s.run_future("echo", {}), lambda: list(s.watch("j1", timeout=5))):
            with self.assertRaises(sg.ClientClosedError) as cm:
                call()
            self.assertEqual(cm.exception.code, grpc.StatusCode.CANCELLED)
            self.assertEqual(cm.exception.reason, "CLIENT_CLOSED")

    def test_datetimes_are_aware(self) -> None:
        s = self.open()
        job = s.submit("sleep", {"ms": 10}, timeout=10)
        self.assertEqual(job.accepted_at.tzinfo, timezone.utc)
        events = list(s.watch(job, timeout=30))
        ts = [e.ts for e in events if isinstance(e, sg.JobEvent)]
        self.assertTrue(ts and all(t is not None and t.tzinfo == timezone.utc for t in ts), ts)
        opened = [i.opened_at for i in self.gw.list_sessions(timeout=10) if i.session_id == s.id]
        self.assertEqual(opened[0].tzinfo, timezone.utc)

    def _cut_watch(self, resume: Any) -> Any:
        with CutProxy(_gw.addr) as proxy:
            gw = sg.Gateway(proxy.addr)
            self.addCleanup(gw.close)
            with gw.open_session(client_name="py-resume", timeout=10) as s:
                job = s.submit("stream", {"count": 12, "interval_ms": 60}, timeout=10)
                w = s.watch(job, timeout=60, resume=resume)
                items: List[Any] = []
                err = None
                try:
                    for item in w:
                        items.append(item)
                        if len(items) in (3, 7):
                            proxy.cut()  # mid-stream, twice
                except sg.GatewayError as e:
                    err = e
            return items, err, w, proxy

    def test_watch_resumes_after_a_cut_exactly_once(self) -> None:
        items, err, w, proxy = self._cut_watch(True)
        self.assertIsNone(err)
        self.assertGreaterEqual(w.resumes, 1)
        self.assertGreaterEqual(proxy.connections, 2)
        events = [i for i in items if isinstance(i, sg.JobEvent)]
        self.assertEqual([e.body["i"] for e in events], list(range(12)), "every event once, in order")
        seqs = [i.event_seq for i in items]
        self.assertEqual(seqs, sorted(set(seqs)))
        self.assertIsInstance(items[-1], sg.JobResult)
        self.assertEqual(items[-1].result, {"count": 12})

    def test_watch_without_resume_ends_at_the_cut(self) -> None:
        items, err, w, _ = self._cut_watch(False)
        self.assertIsInstance(err, sg.UnavailableError)
        self.assertEqual(len(items), 3)
        self.assertEqual(w.resumes, 0)


class AsyncTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.gw = aio.Gateway(_gw.addr)

    async def asyncTearDown(self) -> None:
        await self.gw.close()

    async def test_flow(self) -> None:
        async with await self.gw.open_session(client_name="py-aio", timeout=10) as s:
            r = await s.run("echo", {"hello": "world", "n": 3}, timeout=10)
            self.assertEqual(r.result, {"hello": "world", "n": 3})
            job = await s.submit("stream", {"count": 4, "interval_ms": 10}, timeout=10)
            self.assertEqual(job.accepted_at.tzinfo, timezone.utc)
            async with s.watch(job, timeout=30) as w:
                items = [i async for i in w]
            self.assertEqual([i.body["i"] for i in items[:-1]], [0, 1, 2, 3])
            self.assertTrue(all(i.ts.tzinfo == timezone.utc for i in items[:-1]))
            self.assertEqual(items[-1].result, {"count": 4})
            st = await s.status(timeout=10)
            self.assertTrue(st.live)
            jobs = [j async for j in s.list_jobs(timeout=10)]
            self.assertEqual({j.job_id for j in jobs} >= {r.job_id, job.job_id}, True)
            self.assertIn(s.id, [i.session_id for i in await self.gw.list_sessions(timeout=10)])
            sid = s.id
        st = await self.gw.status(sid, timeout=10)
        self.assertEqual(st.status, sg.Status.NOT_FOUND, "async with closed the session")

    async def _running_sleep(self, s: aio.Session) -> str:
        async def running() -> Any:
            return [j async for j in s.list_jobs(timeout=10) if j.agent.startswith("sleep") and j.state is sg.JobState.RUNNING]

        return (await _auntil(running, "the sleep job to run"))[0].job_id

    async def _cancelled(self, s: aio.Session, job_id: str) -> None:
        async def cancelled() -> bool:
            jobs = [j async for j in s.list_jobs(timeout=10)]
            return any(j.job_id == job_id and j.state is sg.JobState.CANCELLED for j in jobs)

        await _auntil(cancelled, "the runtime to report the job cancelled")

    async def test_task_cancel_cancels_the_job(self) -> None:
        async with await self.gw.open_session(client_name="py-aio", timeout=10) as s:
            task = asyncio.create_task(s.run("sleep", {"ms": 30000}, timeout=60))
            job_id = await self._running_sleep(s)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            await self._cancelled(s, job_id)

    async def test_wait_for_timeout_cancels_the_job(self) -> None:
        async with await self.gw.open_session(client_name="py-aio", timeout=10) as s:
            task = asyncio.create_task(asyncio.wait_for(s.run("sleep", {"ms": 30000}), 60))
            job_id = await self._running_sleep(s)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            await self._cancelled(s, job_id)

    async def test_errors(self) -> None:
        async with await self.gw.open_session(client_name="py-aio", timeout=10) as s:
            with self.assertRaises(sg.AbortedError):
                await s.run("fail", {"code": "INTERNAL_ERROR"}, timeout=10)
            with self.assertRaises(sg.NotFoundError):
                await s.cancel("j-nosuch", timeout=10)
            with self.assertRaises(sg.TimeoutExceededError):
                await s.run("sleep", {"ms": 3000}, timeout=1.2)
        await self.gw.close()
        with self.assertRaises(sg.ClientClosedError):
            await self.gw.list_sessions(timeout=5)

    async def test_watch_resumes_after_a_cut_exactly_once(self) -> None:
        with CutProxy(_gw.addr) as proxy:
            gw = aio.Gateway(proxy.addr)
            try:
                async with await gw.open_session(client_name="py-aio-resume", timeout=10) as s:
                    job = await s.submit("stream", {"count": 12, "interval_ms": 60}, timeout=10)
                    items: List[Any] = []
                    async with s.watch(job, timeout=60) as w:
                        async for item in w:
                            items.append(item)
                            if len(items) in (3, 7):
                                proxy.cut()
                    self.assertGreaterEqual(w.resumes, 1)
                    self.assertEqual([i.body["i"] for i in items[:-1]], list(range(12)))
                    self.assertEqual(items[-1].result, {"count": 12})
                    job2 = await s.submit("stream", {"count": 12, "interval_ms": 60}, timeout=10)
                    w2 = s.watch(job2, timeout=30, resume=False)
                    first = await w2.__anext__()
                    proxy.cut()
                    with self.assertRaises(sg.UnavailableError):
                        async for _ in w2:
                            pass
                    self.assertEqual(first.body["i"], 0)
            finally:
                await gw.close()


class StubsTest(unittest.TestCase):
    def test_user_stubs_of_the_same_proto_load_beside_ours(self) -> None:
        """A user's own protoc output of sessiongate.proto and google/rpc,
        imported before and after sessiongate, in a fresh interpreter; both
        stubs call the gateway."""
        with tempfile.TemporaryDirectory() as d:
            protos = ["sessiongate/v1/sessiongate.proto", "timeoutprofile/v1/timeoutprofile.proto"]
            subprocess.run(
                ["protoc", "-I", str(REPO / "proto"), "-I", "/usr/include", f"--python_out={d}",
                 f"--grpc_python_out={d}", "--plugin=protoc-gen-grpc_python=" + _which("grpc_python_plugin"), *protos],
                check=True, timeout=60,
            )
            os.makedirs(f"{d}/userrpc")
            subprocess.run(
                ["protoc", "-I", str(REPO / "clients" / "proto"), "-I", "/usr/include", f"--python_out={d}/userrpc",
                 "google/rpc/status.proto", "google/rpc/error_details.proto"],
                check=True, timeout=60,
            )
            prog = textwrap.dedent(
                f"""
                import sys
                sys.path[:0] = [{d!r}, {d + '/userrpc'!r}]
                ORDER
                import grpc
                from sessiongate.v1 import sessiongate_pb2 as mine, sessiongate_pb2_grpc as mine_grpc
                import sessiongate
                from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as ours
                assert mine.RunJobRequest.DESCRIPTOR.full_name == "sessiongate.v1.RunJobRequest"
                assert ours.RunJobRequest.DESCRIPTOR.full_name == "sessiongate.pb.sessiongate.v1.RunJobRequest"
                ch = grpc.insecure_channel({_gw.addr!r})
                r = mine_grpc.SessionGatewayStub(ch).OpenSession(mine.OpenSessionRequest(client_name="mine"), timeout=10)
                # Same wire: our message parses the user's bytes.
                o = ours.OpenSessionResponse.FromString(r.SerializeToString())
                with sessiongate.Gateway({_gw.addr!r}) as gw:
                    print("run", gw.session(o.session_id).run("echo", {{"a": 1}}, timeout=10).result)
                    gw.session(o.session_id).close(timeout=10)
                """
            )
            for order in ("import sessiongate", "from google.rpc import status_pb2"):
                with self.subTest(first=order):
                    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python"))
                    out = subprocess.run(
                        [sys.executable, "-c", prog.replace("ORDER", order)],
                        env=env, capture_output=True, text=True, timeout=60,
                    )
                    self.assertEqual(out.returncode, 0, out.stderr)
                    self.assertIn("run {'a': 1}", out.stdout)

    def test_public_stubs(self) -> None:
        self.assertEqual(pb.RunJobRequest.DESCRIPTOR.file.name, "sessiongate/pb/sessiongate/v1/sessiongate.proto")
        from sessiongate.pb.sessiongate.v1 import sessiongate_pb2_grpc

        self.assertTrue(hasattr(sessiongate_pb2_grpc, "SessionGatewayStub"))


def _which(name: str) -> str:
    import shutil

    p = shutil.which(name)
    if p is None:
        raise AssertionError(f"{name} is not on PATH (Debian protobuf-compiler-grpc)")
    return p


if __name__ == "__main__":
    unittest.main()


class ClusterTest(unittest.TestCase):
    """Watches across a replica's end (real processes: redis-server, the
    runtime, three replicas). A watch through a replica that relays to the
    session's owner, across the owner's SIGKILL: the relayed stream is cut
    with UNAVAILABLE OWNER_UNREACHABLE (then the session is taken over). A
    watch on the owner, across its drain: the stream is cut with
    SESSION_HANDED_OFF. Either way the watch re-opens itself and every event
    arrives once, in order. Needs redis-server (CI installs it)."""

    def setUp(self) -> None:
        from gateway_process import ClusterProcess

        if not ClusterProcess.available():
            if os.environ.get("CI") == "true":
                self.fail("redis-server is not on PATH (CI=true: apt-get install -y redis-server)")
            self.skipTest("redis-server is not on PATH")
        self.cluster = ClusterProcess().start()
        self.addCleanup(self.cluster.stop)

    def test_sync_watch_resumes_across_a_takeover(self) -> None:
        owner, relay = self.cluster.replicas[0], self.cluster.replicas[1]
        with sg.Gateway(owner.addr) as gw1, sg.Gateway(relay.addr) as gw2:
            s = gw1.open_session(client_name="py-takeover", timeout=10)
            job = s.submit("stream", {"count": 40, "interval_ms": 50}, timeout=10)
            w = gw2.session(s.id).watch(job, timeout=60, resume=sg.ResumePolicy(max_attempts=40, max_backoff=0.5))
            seen = []
            last = None
            for item in w:
                last = item
                if isinstance(item, sg.JobEvent):
                    seen.append(item.body["i"])
                    if len(seen) == 10:
                        owner.kill()
            self.assertEqual(seen, list(range(40)), "every event once, in order, across the takeover")
            self.assertIsInstance(last, sg.JobResult)
            self.assertGreaterEqual(w.resumes, 1)
            reasons = {(e.code, e.reason) for e in w.cuts}
            self.assertTrue(all(c == grpc.StatusCode.UNAVAILABLE for c, _ in reasons), reasons)
            self.assertTrue(reasons & {(grpc.StatusCode.UNAVAILABLE, r) for r in ("OWNER_UNREACHABLE", "SESSION_HANDED_OFF")}, reasons)

    def test_watch_resumes_across_a_handoff_from_its_cursor(self) -> None:
        """A watch open on the session's owner when the owner drains
        (SIGTERM): the owner hands the session off and cuts the stream with
        UNAVAILABLE SESSION_HANDED_OFF; the watch re-opens from the last
        event_seq it delivered, on another replica, and every event arrives
        once, in order."""
        opens: List[tuple] = []  # (from_event_seq, seq of the last item delivered then)
        delivered = 0

        class Recorder(grpc.UnaryStreamClientInterceptor):
            def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
                if details.method.endswith("/WatchJob"):
                    opens.append((request.from_event_seq, delivered))
                return continuation(details, request)

        # pick_first over every replica: one connection carries every call,
        # so the session is opened on that replica (its owner) and the watch
        # is open on it; after the drain the channel moves on to another.
        target = "ipv4:" + ",".join(r.addr for r in self.cluster.replicas)
        channel = grpc.intercept_channel(grpc.insecure_channel(target), Recorder())
        drain = None
        try:
            with sg.Gateway(channel=channel) as gw:
                s = gw.open_session(client_name="py-handoff", timeout=10)
                owner = next((r for i, r in enumerate(self.cluster.replicas) if s.id.startswith(f"s1.gw-{i + 1}.")), None)
                self.assertIsNotNone(owner, s.id)
                job = s.submit("stream", {"count": 60, "interval_ms": 50}, timeout=10)
                w = s.watch(job, timeout=60, resume=sg.ResumePolicy(max_attempts=40, max_backoff=0.5))
                seen = []
                last = None
                for item in w:
                    delivered = item.event_seq
                    last = item
                    if isinstance(item, sg.JobEvent):
                        seen.append(item.body["i"])
                        if len(seen) == 10:
                            drain = threading.Thread(target=owner.stop)  # SIGTERM: a hand-off
                            drain.start()
                self.assertIsNotNone(drain, "the owner was never drained")
                drain.join(timeout=60)
                self.assertEqual(seen, list(range(60)), "every event once, in order, across the hand-off")
                self.assertIsInstance(last, sg.JobResult)
                cuts = [(e.code, e.reason) for e in w.cuts]
                self.assertIn((grpc.StatusCode.UNAVAILABLE, "SESSION_HANDED_OFF"), cuts)
                self.assertTrue(all(c == grpc.StatusCode.UNAVAILABLE for c, _ in cuts), cuts)
                self.assertEqual(w.resumes, len(opens) - 1)
                self.assertGreaterEqual(len(opens), 2, opens)
                self.assertEqual(opens[0][0], 0)
                for i, (frm, last_delivered) in enumerate(opens[1:], 2):
                    self.assertEqual(frm, last_delivered, f"stream {i} was not opened from the last delivered seq: {opens}")
        finally:
            channel.close()
            if drain is not None:
                drain.join(timeout=60)

    def test_async_watch_resumes_across_a_takeover(self) -> None:
        owner, relay = self.cluster.replicas[0], self.cluster.replicas[1]

        async def run() -> None:
            async with aio.Gateway(owner.addr) as gw1, aio.Gateway(relay.addr) as gw2:
                s = await gw1.open_session(client_name="py-aio-takeover", timeout=10)
                job = await s.submit("stream", {"count": 40, "interval_ms": 50}, timeout=10)
                w = gw2.session(s.id).watch(job, timeout=60, resume=sg.ResumePolicy(max_attempts=40, max_backoff=0.5))
                seen = []
                async for item in w:
                    if isinstance(item, sg.JobEvent):
                        seen.append(item.body["i"])
                        if len(seen) == 10:
                            owner.kill()
                self.assertEqual(seen, list(range(40)))
                self.assertGreaterEqual(w.resumes, 1)
                self.assertTrue(any(e.reason in ("OWNER_UNREACHABLE", "SESSION_HANDED_OFF") for e in w.cuts), w.cuts)

        asyncio.run(run())
