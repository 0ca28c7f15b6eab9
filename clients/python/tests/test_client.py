"""The Python client against a real gateway binary (see gateway_process.py).

Run from the repository root:
    PYTHONPATH=clients/python /usr/bin/python3 -m unittest discover -s clients/python/tests -v
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, List, Tuple

import grpc

import sessiongate as sg
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb

from gateway_process import REPO, GatewayProcess

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


class _Recorder(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Records the method and metadata of every call."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, dict]] = []
        self._mu = threading.Lock()

    def _record(self, details: Any) -> None:
        with self._mu:
            self.calls.append((details.method, dict(details.metadata or ())))

    def intercept_unary_unary(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self._record(details)
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):  # type: ignore[no-untyped-def]
        self._record(details)
        return continuation(details, request)


class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.gw = sg.Gateway(_gw.addr)
        self.addCleanup(self.gw.close)

    def open(self) -> sg.Session:
        s = self.gw.open_session(client_name="py-test", timeout=10)
        self.addCleanup(s.close, timeout=10)
        return s

    def test_open(self) -> None:
        s = self.open()
        self.assertTrue(s.id.startswith("s1."), s.id)
        self.assertIn("echo", s.agents)
        self.assertEqual(s.runtime, "default")
        self.assertTrue(s.instance_id)
        self.assertIn(s.id, [i.session_id for i in self.gw.list_sessions(timeout=10)])

    def test_run_echo_nested_exact_numbers(self) -> None:
        s = self.open()
        value = {
            "hello": "world",
            "ints": [0, 3, -7, 2**53, -(2**53)],
            "floats": [1.5, -0.25, 1e300],
            "nested": {"list": [None, True, False, {"deep": [1, [2, [3]]]}], "empty": {}, "none": []},
            "unicode": "héllo ✓",
        }
        r = s.run("echo", value, timeout=10)
        self.assertEqual(r.result, value)
        self.assertTrue(r.job_id)
        ints = r.result["ints"]
        self.assertTrue(all(type(n) is int for n in ints), ints)
        self.assertEqual(ints[3], 9007199254740992)
        self.assertIs(type(r.result["floats"][0]), float)
        # A scalar input, and no input at all.
        self.assertEqual(s.run("echo", 42, timeout=10).result, 42)
        self.assertIsNone(s.run("echo", timeout=10).result)

    def test_integer_beyond_2_53_is_refused(self) -> None:
        s = self.open()
        with self.assertRaisesRegex(ValueError, "2\\*\\*53"):
            s.run("echo", {"n": 2**53 + 1}, timeout=10)
        with self.assertRaises(ValueError):
            s.run("echo", float("nan"), timeout=10)
        with self.assertRaises(TypeError):
            s.run("echo", {1: "non-string key"}, timeout=10)

    def test_watch_stream(self) -> None:
        s = self.open()
        s.run("echo", "before", timeout=10)  # events before the job
        job = s.submit("stream", {"count": 5, "interval_ms": 20}, timeout=10)
        self.assertTrue(job.job_id)
        self.assertIsNotNone(job.accepted_at)
        with s.watch(job, timeout=30) as w:
            items = list(w)
        events, last = items[:-1], items[-1]
        # watch(job) starts after job.after_event_seq: above the earlier
        # job's events, below this one's first; from 0 the same items.
        self.assertGreater(job.after_event_seq, 0)
        self.assertLess(job.after_event_seq, items[0].event_seq)
        self.assertEqual([i.event_seq for i in s.watch(job.job_id, timeout=30)], [i.event_seq for i in items])
        self.assertEqual(len(events), 5, items)
        self.assertTrue(all(isinstance(e, sg.JobEvent) and e.kind == "log" for e in events), events)
        self.assertEqual([e.body["i"] for e in events], [0, 1, 2, 3, 4])
        seqs = [i.event_seq for i in items]
        self.assertEqual(seqs, sorted(set(seqs)), "event_seq strictly increasing")
        self.assertIsInstance(last, sg.JobResult)
        self.assertEqual(last.result, {"count": 5})
        # Watching again from a sequence number replays only what follows.
        replay = list(s.watch(job.job_id, from_event_seq=events[2].event_seq, timeout=30))
        self.assertEqual([i.event_seq for i in replay], seqs[3:])

    def test_cancel(self) -> None:
        s = self.open()
        job = s.submit("sleep", {"ms": 30000}, timeout=10)
        s.cancel(job, "test", timeout=10)
        items = list(s.watch(job, timeout=30))
        last = items[-1]
        self.assertIsInstance(last, sg.JobError, items)
        self.assertEqual(last.final_status, "cancelled")
        self.assertEqual(last.code, "CANCELLED")

    def test_status_live_then_not_found(self) -> None:
        s = self.gw.open_session(client_name="py-status", timeout=10)
        st = s.status(timeout=5)
        self.assertIs(st.status, sg.Status.LIVE)
        self.assertTrue(st.live)
        self.assertEqual(st.status, "live")
        self.assertIs(st.phase, sg.Phase.READY)
        self.assertGreaterEqual(st.generation, 1)
        s.close(timeout=10)
        s.close(timeout=10)  # idempotent
        st = self.gw.status(s.id, timeout=5)
        self.assertIs(st.status, sg.Status.NOT_FOUND)
        self.assertFalse(st.live)
        with self.assertRaises(sg.NotFoundError) as cm:
            s.run("echo", 1, timeout=5)
        self.assertEqual(cm.exception.reason, "SESSION_NOT_FOUND")

    def test_timeout_details_via_x_timeout_ms(self) -> None:
        # A 1 s server budget (tool_call's minimum) under a 10 s deadline:
        # the gateway's budget runs out first, with details.
        s = self.open()
        start = time.monotonic()
        with self.assertRaises(sg.TimeoutExceededError) as cm:
            s.run("sleep", {"ms": 5000}, timeout=10, server_timeout=1)
        e = cm.exception
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(e.code, grpc.StatusCode.DEADLINE_EXCEEDED)
        self.assertEqual(e.profile, "tool_call")
        self.assertEqual(e.configured_ms, 1000)
        self.assertGreaterEqual(e.elapsed_ms, 1000)
        self.assertEqual(e.limit, "unary")
        self.assertEqual((e.service, e.method), ("sessiongate.v1.SessionGateway", "RunJob"))
        self.assertEqual((e.domain, e.reason), ("timeoutprofile", "TIMEOUT_PROFILE_EXCEEDED"))
        self.assertEqual(e.metadata["profile_name"], "tool_call")
        self.assertIsInstance(e, TimeoutError)

    def test_timeout_details_via_own_deadline(self) -> None:
        # Only the caller's own deadline (300 ms, below tool_call's 1 s
        # minimum, which never extends it): the gateway ends the call a margin
        # (20 ms) before it, with details. Retries are off so that the
        # published policy (which retries DEADLINE_EXCEEDED) does not turn the
        # answer into a bare deadline on its second attempt. Five calls, of
        # which one may lose the race on a loaded machine.
        outcomes = []
        with sg.Gateway(_gw.addr, retry=False) as gw:
            with gw.open_session(client_name="py-deadline", timeout=10) as s:
                for _ in range(5):
                    with self.assertRaises(sg.DeadlineExceededError) as cm:
                        s.run("sleep", {"ms": 5000}, timeout=0.3)
                    outcomes.append(cm.exception)
        details = [e for e in outcomes if isinstance(e, sg.TimeoutExceededError)]
        self.assertGreaterEqual(len(details), 4, [str(e) for e in outcomes])
        for e in details:
            self.assertEqual(e.profile, "tool_call")
            self.assertEqual(e.limit, "caller_deadline")
            self.assertLessEqual(e.elapsed_ms, 300)

    def test_bad_input_is_typed(self) -> None:
        with self.assertRaises(sg.InvalidArgumentError) as cm:
            self.gw.session("").run("echo", {"x": 1}, timeout=5)
        e = cm.exception
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual((e.domain, e.reason), ("sessiongate", "INVALID_ARGUMENT"))
        self.assertIsInstance(e, ValueError)
        s = self.open()
        with self.assertRaises(sg.NotFoundError):
            s.run("no-such-agent", 1, timeout=5)
        with self.assertRaises(sg.InvalidArgumentError) as cm:
            s.run("fail", {"code": "INVALID_REQUEST", "message": "nope"}, timeout=5)
        self.assertEqual((cm.exception.domain, cm.exception.reason), ("arcp", "INVALID_REQUEST"))
        self.assertIs(cm.exception.retryable, False)

    def test_metadata_on_every_call(self) -> None:
        rec = _Recorder()
        channel = grpc.intercept_channel(grpc.insecure_channel(_gw.addr), rec)
        self.addCleanup(channel.close)
        gw = sg.Gateway(channel=channel)
        with gw.open_session(client_name="py-md", timeout=10) as s:
            s.run("echo", 1, timeout=2.5)
            job = s.submit("stream", {"count": 1, "interval_ms": 1})
            list(s.watch(job))
            s.status()
        by_method = {m.rsplit("/", 1)[1]: md for m, md in rec.calls}
        self.assertEqual(set(by_method), {"OpenSession", "RunJob", "SubmitJob", "WatchJob", "GetSessionStatus", "CloseSession"})
        for m, md in by_method.items():
            if m == "OpenSession":
                self.assertNotIn(sg.SESSION_METADATA_KEY, md)
            else:
                self.assertEqual(md.get(sg.SESSION_METADATA_KEY), s.id, m)
        self.assertEqual(by_method["RunJob"][sg.TIMEOUT_METADATA_KEY], "2500")
        self.assertNotIn(sg.TIMEOUT_METADATA_KEY, by_method["SubmitJob"])

    def test_retry_policy_is_published(self) -> None:
        import json

        cfg = json.loads(sg.retry_service_config())
        policy = cfg["methodConfig"][0]["retryPolicy"]
        self.assertEqual(sorted(policy["retryableStatusCodes"]), ["DEADLINE_EXCEEDED", "UNAVAILABLE"])
        self.assertIn("retryThrottling", cfg)


class ValuesTest(unittest.TestCase):
    def test_raw_json_is_parsed_exactly(self) -> None:
        from google.protobuf import struct_pb2

        from sessiongate._values import from_raw_or_value, to_value

        big = b'{"n": 123456789012345678901234567890, "f": 1e400, "s": "x"}'
        got = from_raw_or_value(big, struct_pb2.Value())
        self.assertEqual(got["n"], 123456789012345678901234567890)
        self.assertEqual(got["f"], float("inf"))
        self.assertEqual(from_raw_or_value(b'"\xff"', struct_pb2.Value()), "\ufffd")
        self.assertEqual(from_raw_or_value(b"", to_value({"a": 1})), {"a": 1})


if __name__ == "__main__":
    unittest.main()


TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class JobSurfaceTest(unittest.TestCase):
    """Agent versions, leases, extensions, trace context, typed events,
    list_jobs and subscribe, against the gateway binary."""

    def setUp(self) -> None:
        self.rec = _Recorder()
        self.gw = sg.Gateway(channel=grpc.intercept_channel(grpc.insecure_channel(_gw.addr), self.rec))
        self.addCleanup(self.gw.close)

    def open(self) -> sg.Session:
        s = self.gw.open_session(client_name="py-jobs", timeout=10)
        self.addCleanup(s.close, timeout=10)
        return s

    def sent(self, method: str) -> List[dict]:
        return [md for m, md in self.rec.calls if m.endswith("/" + method)]

    def test_submit_extras_and_typed_answer(self) -> None:
        s = self.open()
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).replace(microsecond=0)
        job = s.submit(
            "sleep",
            {"ms": 50},
            agent_version="1.0.0",
            lease={"fs.read": ["/workspace/**"], "cost.budget": ["USD:5.00"]},
            lease_expires_at=expires,
            extensions={"x-vendor.acme.tag": "blue", "x-vendor.acme.n": 3},
            metadata=sg.trace_metadata(TRACEPARENT),
            timeout=10,
        )
        self.assertEqual(job.agent, "sleep@1.0.0")
        self.assertEqual(job.trace_id, TRACE_ID)
        self.assertEqual(job.lease, {"fs.read": ["/workspace/**"], "cost.budget": ["USD:5.00"]})
        self.assertEqual(job.lease_expires_at, expires)
        self.assertIsNotNone(job.lease_expires_at.tzinfo)
        self.assertEqual(job.budget, {"USD": 5.0})
        self.assertEqual(job.extensions.get("x-vendor.acme.tag"), "blue")
        self.assertEqual(self.sent("SubmitJob")[-1].get("traceparent"), TRACEPARENT)
        items = list(s.watch(job, timeout=30))
        progress = [i.progress for i in items if isinstance(i, sg.JobEvent) and i.progress is not None]
        self.assertTrue(progress, items)
        self.assertIsInstance(progress[0], sg.Progress)
        self.assertGreaterEqual(progress[-1].current, 0)
        self.assertIsInstance(items[-1], sg.JobResult)
        self.assertEqual(items[-1].extensions.get("x-vendor.acme.tag"), "blue")

    def test_run_streamed_result_and_trace(self) -> None:
        s = self.open()
        r = s.run("chunked", {"size": 100, "chunk_bytes": 40}, metadata=sg.trace_metadata(TRACEPARENT), timeout=10)
        self.assertEqual(r.trace_id, TRACE_ID)
        self.assertTrue(r.agent.startswith("chunked@"), r.agent)
        self.assertTrue(r.result_id)
        self.assertEqual(r.result_size, 100)
        job = s.submit("chunked", {"size": 100, "chunk_bytes": 40}, timeout=10)
        chunks = [i.result_chunk for i in s.watch(job, timeout=30) if isinstance(i, sg.JobEvent) and i.result_chunk]
        self.assertEqual([c.chunk_seq for c in chunks], list(range(len(chunks))))
        self.assertGreaterEqual(len(chunks), 3)
        self.assertFalse(chunks[-1].more)
        # Without trace context the job gets a fresh trace id.
        fresh = s.run("echo", "x", timeout=10)
        self.assertRegex(fresh.trace_id, r"^[0-9a-f]{32}$")
        self.assertNotEqual(fresh.trace_id, TRACE_ID)
        self.assertNotIn("traceparent", self.sent("RunJob")[-1])

    def test_trace_metadata_refuses_malformed(self) -> None:
        for bad in (
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            TRACEPARENT + "-x",
        ):
            with self.assertRaises(ValueError, msg=bad):
                sg.trace_metadata(bad)
        self.assertEqual(
            sg.trace_metadata("01-" + TRACEPARENT[3:] + "-future", "k=v"),
            (("traceparent", "01-" + TRACEPARENT[3:] + "-future"), ("tracestate", "k=v")),
        )

    def test_bad_extras_are_typed(self) -> None:
        s = self.open()
        with self.assertRaises(sg.PermissionDeniedError):
            s.run("echo", lease={"cost.budget": ["USD:1000"]}, timeout=10)
        with self.assertRaises(sg.InvalidArgumentError):
            s.submit("echo", lease_expires_at=datetime.now(timezone.utc) - timedelta(minutes=1), timeout=10)
        with self.assertRaises(sg.InvalidArgumentError):
            s.submit("echo", extensions={"acme": True}, timeout=10)
        with self.assertRaises(sg.NotFoundError):
            s.submit("echo", agent_version="9.9.9", timeout=10)
        with self.assertRaises(ValueError):
            s.submit("echo", lease_expires_at=datetime.now() + timedelta(hours=1), timeout=10)

    def test_list_jobs_follows_pages(self) -> None:
        s = self.open()
        want = {s.run("echo", i, timeout=10).job_id for i in range(3)}
        s.run("sleep", {"ms": 1}, timeout=10)
        jobs = list(s.list_jobs('state = SUCCEEDED AND agent = "echo"', page_size=1, timeout=10))
        self.assertEqual({j.job_id for j in jobs}, want)
        for j in jobs:
            self.assertIs(j.state, sg.JobState.SUCCEEDED)
            self.assertTrue(j.agent.startswith("echo"))
            self.assertIsNotNone(j.created_at)
            self.assertIsNotNone(j.created_at.tzinfo)
            self.assertRegex(j.trace_id, r"^[0-9a-f]{32}$")
        pages = self.sent("ListJobs")
        self.assertGreaterEqual(len(pages), 3)
        self.assertTrue(all(md.get(sg.SESSION_METADATA_KEY) == s.id for md in pages))
        # A generator: nothing is sent until iterated, one page per next().
        n = len(self.sent("ListJobs"))
        it = s.list_jobs(page_size=1, timeout=10)
        self.assertEqual(len(self.sent("ListJobs")), n)
        next(it)
        self.assertEqual(len(self.sent("ListJobs")), n + 1)
        with self.assertRaises(sg.InvalidArgumentError) as cm:
            next(s.list_jobs('owner = "me"', timeout=10))
        self.assertIn("unknown field", str(cm.exception))

    def test_subscribe(self) -> None:
        a, b = self.open(), self.open()
        job = a.submit(
            "stream",
            {"count": 4, "interval_ms": 50},
            lease={"cost.budget": ["USD:2.50"]},
            metadata=sg.trace_metadata(TRACEPARENT),
            timeout=10,
        )
        sub = b.subscribe(job, history=True, timeout=10)
        self.assertEqual(sub.job.job_id, job.job_id)
        self.assertEqual(sub.job.agent, job.agent)
        self.assertEqual(sub.job.trace_id, TRACE_ID)
        self.assertEqual(sub.job.budget, {"USD": 2.5})
        self.assertEqual(sub.job.lease, {"cost.budget": ["USD:2.50"]})
        with self.assertRaises(sg.PermissionDeniedError):
            b.cancel(job, "not mine", timeout=10)
        items = list(b.watch(job, timeout=30))
        self.assertIsInstance(items[-1], sg.JobResult)
        with self.assertRaises(sg.NotFoundError):
            b.subscribe("job_nope", timeout=10)
