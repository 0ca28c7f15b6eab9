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

from reset_rig import ResetRig


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


class _FailOnce(pb_grpc.SessionGatewayServicer):
    """WatchJob: events 1…3, then the first stream fails with code/reason
    (and message); the next streams send the rest up to the result at 6."""

    def __init__(self, code: grpc.StatusCode, reason: str, message: str) -> None:
        self.code, self.reason, self.message = code, reason, message
        self.opened: List[int] = []
        self._mu = threading.Lock()

    def WatchJob(self, request, context):  # type: ignore[no-untyped-def]
        with self._mu:
            first = not self.opened
            self.opened.append(request.from_event_seq)
        for seq in range(request.from_event_seq + 1, 7):
            if first and seq == 4:
                _abort_with_info(context, self.code, self.message, self.reason)
            if seq == 6:
                yield pb.WatchJobResponse(event_seq=seq, result=pb.JobResult(summary="done"))
            else:
                yield pb.WatchJobResponse(event_seq=seq, event=pb.JobEvent(kind="log"))


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


if __name__ == "__main__":
    unittest.main()
