"""No job runs twice because of a retry (the Python client).

Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_retry_once -v
"""

from __future__ import annotations

import threading
import unittest
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import List, Tuple

import grpc

import sessiongate as sg
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

from gateway_process import GatewayProcess

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


def runtime_jobs(admin: str) -> Tuple[int, int]:
    """The embedded reference runtime's own counts from the gateway's
    /metrics: (job.submit envelopes received, distinct jobs created)."""
    with urllib.request.urlopen(f"http://{admin}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("sessiongate_embedded_runtime_jobs_submitted_total", "sessiongate_embedded_runtime_jobs_accepted_total"):
            found[name] = int(float(value))
    return (
        found["sessiongate_embedded_runtime_jobs_submitted_total"],
        found["sessiongate_embedded_runtime_jobs_accepted_total"],
    )


class RetryOnceTest(unittest.TestCase):
    def test_server_budget_shorter_than_job_runs_one_job(self) -> None:
        """server_timeout (1 s) shorter than the job (2.5 s), the published
        retry policy on: the timeout details, and the runtime's own count shows
        one submit and one job."""
        with sg.Gateway(_gw.addr) as gw, gw.open_session(client_name="py-retry", timeout=10) as s:
            sub0, acc0 = runtime_jobs(_gw.admin)
            with self.assertRaises(sg.TimeoutExceededError) as cm:
                s.run("sleep", {"ms": 2500}, server_timeout=1.0, timeout=30)
            self.assertEqual(cm.exception.limit, "unary")
            sub1, acc1 = runtime_jobs(_gw.admin)
            self.assertEqual((sub1 - sub0, acc1 - acc0), (1, 1), "submits received and jobs created for one call")


class _KeyServer(pb_grpc.SessionGatewayServicer):
    """Fails the first attempt of every call with UNAVAILABLE and records
    the idempotency key of each attempt."""

    def __init__(self) -> None:
        self.keys: List[str] = []
        self._mu = threading.Lock()

    def _attempt(self, key: str, context: grpc.ServicerContext) -> None:
        with self._mu:
            self.keys.append(key)
            first = len(self.keys) % 2 == 1
        if first:
            context.abort(grpc.StatusCode.UNAVAILABLE, "first attempt fails")

    def RunJob(self, request, context):  # type: ignore[no-untyped-def]
        self._attempt(request.idempotency_key, context)
        return pb.RunJobResponse(job_id="j")

    def SubmitJob(self, request, context):  # type: ignore[no-untyped-def]
        self._attempt(request.idempotency_key, context)
        return pb.SubmitJobResponse(job_id="j")


class IdempotencyKeyTest(unittest.TestCase):
    def test_every_attempt_of_a_call_carries_one_key(self) -> None:
        ks = _KeyServer()
        server = grpc.server(ThreadPoolExecutor(4))
        pb_grpc.add_SessionGatewayServicer_to_server(ks, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self.addCleanup(server.stop, None)
        with sg.Gateway(f"127.0.0.1:{port}") as gw:
            s = gw.session("s1.test")
            s.run("echo", 1, timeout=10)
            s.run("echo", 1, timeout=10)
            s.submit("echo", 1, timeout=10)
            s.run("echo", 1, idempotency_key="mine", timeout=10)
        self.assertEqual(len(ks.keys), 8, ks.keys)
        pairs = [(ks.keys[i], ks.keys[i + 1]) for i in range(0, 8, 2)]
        for a, b in pairs:
            self.assertTrue(a)
            self.assertEqual(a, b, "the attempts of one call carry one key")
        self.assertEqual(len({a for a, _ in pairs}), 4, "each call has its own key")
        self.assertEqual(pairs[3][0], "mine")


if __name__ == "__main__":
    unittest.main()
