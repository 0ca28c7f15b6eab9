"""A frozen gateway among the addresses of a target: the client's keepalive
gives its connection up and the retry policy sends the call to another
address, within seconds and not at the call's deadline.

Run from the repository root:
    PYTHONPATH=clients/python /usr/bin/python3 -m unittest discover -s clients/python/tests -v
"""

from __future__ import annotations

import os
import signal
import time
import unittest

import sessiongate as sg

from gateway_process import GatewayProcess

# Keepalive gives a frozen connection up in about 1 s + 2 s; the margin is
# for a loaded machine. The calls' own timeout is far beyond it.
BOUND = 6.0
CALL_TIMEOUT = 20.0


class FrozenReplicaTest(unittest.TestCase):
    def test_calls_leave_a_frozen_replica(self) -> None:
        with GatewayProcess() as a, GatewayProcess() as b:
            target = f"ipv4:{a.addr},{b.addr}"
            with sg.Gateway(target) as gw:
                for _ in range(4):  # both connections up
                    gw.list_sessions(timeout=CALL_TIMEOUT)
                pid = a.pid
                os.kill(pid, signal.SIGSTOP)
                try:
                    slowest = 0.0
                    for _ in range(6):  # the round robin sends some to the frozen one
                        start = time.monotonic()
                        gw.list_sessions(timeout=CALL_TIMEOUT)
                        slowest = max(slowest, time.monotonic() - start)
                    self.assertLess(slowest, BOUND, f"a call took {slowest:.2f}s with one of two replicas frozen")
                finally:
                    os.kill(pid, signal.SIGCONT)

    def test_options_keep_the_callers(self) -> None:
        opts = dict(sg._client.channel_options([("grpc.keepalive_time_ms", 30000)], True))
        self.assertEqual(opts["grpc.keepalive_time_ms"], 30000)
        self.assertEqual(opts["grpc.keepalive_timeout_ms"], 2000)
        self.assertEqual(opts["grpc.lb_policy_name"], "round_robin")


if __name__ == "__main__":
    unittest.main()
