"""A watch cut by a stream reset or by REPLICA_SILENT resumes from its cursor.

The reset is the real thing: nginx in front of an in-process fake gateway,
whose connection is reset mid-stream (reset_rig). Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_stream_reset -v
"""

from __future__ import annotations

import threading
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import List, Tuple

import grpc

import sessiongate as sg
from sessiongate.pb.google.rpc import error_details_pb2, status_pb2
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

from reset_rig import Relay, ResetRig, ScriptedWatch


def _abort_with_info(context: grpc.ServicerContext, code: grpc.StatusCode, message: str, reason: str) -> None:
    info = error_details_pb2.ErrorInfo(reason=reason, domain="sessiongate", metadata={"retryable": "true"})
    st = status_pb2.Status(code=code.value[0], message=message)
    d = st.details.add()  # Pack would name the client's bundled copy of the type
    d.type_url, d.value = "type.googleapis.com/google.rpc.ErrorInfo", info.SerializeToString()
    context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
    context.abort(code, message)


class StreamResetTest(unittest.TestCase):
    def test_watch_reset_by_nginx_resumes_from_cursor(self) -> None:
        """nginx resets the stream (INTERNAL, RST_STREAM code 2) when the
        gateway behind it dies mid-response: the watch re-opens from event 5
        and delivers 1…10 once, in order."""
        rig = ResetRig()
        self.addCleanup(rig.close)
        seqs: List[int] = []
        with sg.Gateway(rig.target) as gw:
            w = gw.session("s1.test").watch("j1", timeout=30)
            for item in w:
                seqs.append(item.event_seq)
                if item.event_seq == 5:
                    self.assertTrue(rig.servicer.cut_ready.wait(10))
                    rig.relay.cut()
        self.assertEqual(seqs, list(range(1, 11)))
        self.assertEqual(w.resumes, 1)
        self.assertEqual([e.code for e in w.cuts], [grpc.StatusCode.INTERNAL])
        self.assertIn("RST_STREAM", w.cuts[0].message)
        self.assertEqual(rig.servicer.opened, [0, 5])


class _FailOnce(ScriptedWatch):
    """WatchJob: events 1…3, then the first stream fails with code/reason
    (and message); the next streams send the rest up to the result at 6."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        super().__init__(6)
        self.code, self.reason, self.message = code, reason, message

    def interrupt(self, seq: int, context: grpc.ServicerContext) -> bool:
        if seq == 4:
            _abort_with_info(context, self.code, self.message, self.reason)
        return False


class _Server:
    def __init__(self, servicer: pb_grpc.SessionGatewayServicer) -> None:
        self.server = grpc.server(ThreadPoolExecutor(4))
        pb_grpc.add_SessionGatewayServicer_to_server(servicer, self.server)
        self.target = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def close(self) -> None:
        self.server.stop(None).wait(10)


class CutByServerTest(unittest.TestCase):
    def _watch(self, servicer: _FailOnce) -> Tuple[List[int], sg.Watch]:
        srv = _Server(servicer)
        self.addCleanup(srv.close)
        seqs: List[int] = []
        with sg.Gateway(srv.target, retry=False) as gw:
            w = gw.session("s1.test").watch("j1", timeout=30)
            for item in w:
                seqs.append(item.event_seq)
        return seqs, w

    def test_replica_silent_resumes(self) -> None:
        s = _FailOnce(grpc.StatusCode.UNAVAILABLE, "REPLICA_SILENT", "the replica is silent")
        seqs, w = self._watch(s)
        self.assertEqual(seqs, [1, 2, 3, 4, 5, 6])
        self.assertEqual(s.opened, [0, 3])
        self.assertEqual([e.reason for e in w.cuts], ["REPLICA_SILENT"])

    def test_gateway_internal_is_not_resumed(self) -> None:
        """A gateway INTERNAL carries ErrorInfo: never taken for a reset,
        whatever its text."""
        s = _FailOnce(grpc.StatusCode.INTERNAL, "INTERNAL", "Received RST_STREAM with error code 2")
        with self.assertRaises(sg.InternalError) as cm:
            self._watch(s)
        self.assertEqual(cm.exception.reason, "INTERNAL")
        self.assertEqual(s.opened, [0])


class _ResetRun(pb_grpc.SessionGatewayServicer):
    """RunJob: the first attempt sends its response header and waits (for
    the test to reset its connection); later ones answer. internal: every
    attempt fails with the gateway's own INTERNAL (ErrorInfo) in the reset's
    words."""

    def __init__(self, internal: bool = False) -> None:
        self.internal = internal
        self.header_sent = threading.Event()
        self.keys: List[str] = []
        self._mu = threading.Lock()

    def RunJob(self, request, context):  # type: ignore[no-untyped-def]
        with self._mu:
            self.keys.append(request.idempotency_key)
            first = len(self.keys) == 1
        if self.internal:
            _abort_with_info(context, grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2", "INTERNAL")
        if first:
            context.send_initial_metadata((("x-test", "early"),))
            self.header_sent.set()
            while context.is_active():
                threading.Event().wait(0.02)
            return pb.RunJobResponse()
        r = pb.RunJobResponse(job_id="j")
        r.result.string_value = "ok"
        return r


class UnaryResetTest(unittest.TestCase):
    def _rig(self, servicer: _ResetRun) -> "tuple[ResetRig, Relay, threading.Event]":
        """client → front Relay → nginx → … ; the cut comes once nginx has
        written to the client after the fake gateway sent its early header
        (that write is the header: grpcio shows a unary call's header only
        with its end, so the client cannot tell)."""
        rig = ResetRig(servicer)
        self.addCleanup(rig.close)
        front = Relay(("127.0.0.1", rig.nginx.port))
        self.addCleanup(front.close)
        done = threading.Event()

        def cut() -> None:
            if servicer.header_sent.wait(20):
                before = front.downstream_bytes()
                if front.wait_downstream(before, 20):
                    rig.relay.cut()
            done.set()

        t = threading.Thread(target=cut, daemon=True)
        t.start()
        self.addCleanup(t.join, 45)
        return rig, front, done

    def test_run_resent_after_reset(self) -> None:
        s = _ResetRun()
        _, front, done = self._rig(s)
        with sg.Gateway(f"127.0.0.1:{front.port}") as gw:
            res = gw.session("s1.test").run("echo", 1, timeout=20)
        self.assertTrue(done.is_set())
        self.assertEqual(res.result, "ok")
        self.assertEqual(len(s.keys), 2, s.keys)
        self.assertTrue(s.keys[0])
        self.assertEqual(s.keys[0], s.keys[1], "the re-send carries the call's idempotency key")

    def test_gateway_internal_not_resent(self) -> None:
        s = _ResetRun(internal=True)
        rig = ResetRig(s)
        self.addCleanup(rig.close)
        with sg.Gateway(rig.target) as gw:
            with self.assertRaises(sg.InternalError) as cm:
                gw.session("s1.test").run("echo", 1, timeout=20)
        self.assertEqual(cm.exception.reason, "INTERNAL")
        self.assertEqual(len(s.keys), 1)


if __name__ == "__main__":
    unittest.main()
