"""A watch on a silent replica is bounded (sessiongate._silence): a fake
gateway whose WatchJob stops sending and whose health check does not answer
(a frozen replica) makes the watch end REPLICA_SILENT and resume from its
cursor; one whose health check answers is waited for.

Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_silence -v
"""

from __future__ import annotations

import asyncio
import threading
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional

import grpc

import sessiongate as sg
from sessiongate import aio
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

from reset_rig import ScriptedWatch


class _Replica(ScriptedWatch):
    """WatchJob sends from_event_seq+1 … 6 (the result); the first stream
    stops after event 3. frozen: until that stream is cancelled, health
    checks go unanswered, as on a SIGSTOPped replica. Not frozen: the first
    stream pauses ``pause`` seconds and then goes on, health checks answer."""

    def __init__(self, frozen: bool, pause: float = 0.0) -> None:
        super().__init__(6)
        self.frozen, self.pause = frozen, pause
        self.checks: List[Optional[str]] = []  # the session header of each health check
        self._thawed = threading.Event()

    def interrupt(self, seq: int, context: grpc.ServicerContext) -> bool:
        if seq != 4:
            return False
        if self.frozen:
            while context.is_active() and not self._thawed.wait(0.02):
                pass
            self._thawed.set()  # the client left: the replica may answer again
            return True
        time.sleep(self.pause)  # a quiet job on a live replica
        return False

    def Check(self, request: bytes, context: grpc.ServicerContext) -> bytes:
        with self._mu:
            self.checks.append(dict(context.invocation_metadata()).get("x-sessiongate-session"))
        if self.frozen:
            while context.is_active() and not self._thawed.wait(0.02):
                pass
        return b"\x08\x01"  # SERVING

    def close(self) -> None:
        self._thawed.set()


def _serve(replica: _Replica) -> "tuple[grpc.Server, str]":
    # Like the gateway (--keepalive-min-time 500ms), accept the client's
    # keepalive pings: a frozen replica is not one that sends GOAWAY.
    server = grpc.server(
        ThreadPoolExecutor(8),
        options=(("grpc.http2.min_ping_interval_without_data_ms", 500), ("grpc.http2.max_ping_strikes", 0)),
    )
    pb_grpc.add_SessionGatewayServicer_to_server(replica, server)
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "grpc.health.v1.Health", {"Check": grpc.unary_unary_rpc_method_handler(replica.Check)}
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


class SilenceTest(unittest.TestCase):
    def _replica(self, frozen: bool, pause: float = 0.0) -> "tuple[_Replica, str]":
        r = _Replica(frozen, pause)
        server, target = _serve(r)
        self.addCleanup(lambda: server.stop(None).wait(10))
        self.addCleanup(r.close)
        return r, target

    def test_silent_replica_ends_watch_replica_silent_and_resumes(self) -> None:
        r, target = self._replica(frozen=True)
        with sg.Gateway(target, retry=False) as gw:
            w = gw.session("s1.test").watch("j1", timeout=20)
            seqs = [it.event_seq for it in w]
        self.assertEqual(seqs, [1, 2, 3, 4, 5, 6])
        self.assertEqual([e.reason for e in w.cuts], ["REPLICA_SILENT"])
        self.assertEqual(r.opened, [0, 3])
        self.assertEqual(r.checks[0], "s1.test", "the check carries the session header")

    def test_live_replica_quiet_job_is_not_cut(self) -> None:
        """Quiet for 2 s (longer than after + timeout), health checks
        answered: the stream is kept."""
        r, target = self._replica(frozen=False, pause=2.0)
        with sg.Gateway(target, retry=False) as gw:
            w = gw.session("s1.test").watch("j1", timeout=20)
            seqs = [it.event_seq for it in w]
        self.assertEqual(seqs, [1, 2, 3, 4, 5, 6])
        self.assertEqual(w.resumes, 0)
        self.assertEqual(r.opened, [0])
        self.assertGreaterEqual(len(r.checks), 2, "checked while quiet")

    def test_off(self) -> None:
        r, target = self._replica(frozen=True)
        with sg.Gateway(target, retry=False, silence_bound=None) as gw:
            with self.assertRaises(sg.DeadlineExceededError):
                for _ in gw.session("s1.test").watch("j1", timeout=3):
                    pass
        self.assertEqual(r.opened, [0])
        self.assertEqual(r.checks, [])

    def test_asyncio(self) -> None:
        r, target = self._replica(frozen=True)

        async def run() -> "tuple[List[int], List[Optional[str]]]":
            async with aio.Gateway(target, retry=False) as gw:
                w = gw.session("s1.test").watch("j1", timeout=20)
                seqs = [it.event_seq async for it in w]
                return seqs, [e.reason for e in w.cuts]

        seqs, reasons = asyncio.run(asyncio.wait_for(run(), 30))
        self.assertEqual(seqs, [1, 2, 3, 4, 5, 6])
        self.assertEqual(reasons, ["REPLICA_SILENT"])
        self.assertEqual(r.opened, [0, 3])


if __name__ == "__main__":
    unittest.main()
