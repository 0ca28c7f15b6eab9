"""The Python client (its defaults, the cluster's three addresses) through a
rolling SIGTERM restart of a real cluster (redis-server, the reference
runtime, three replicas): RunJob loops on several sessions fail no call,
and every result is the call's own.

Run from the repository root:
    PYTHONPATH=clients/python /usr/bin/python3 -m unittest discover -s clients/python/tests -v
"""

from __future__ import annotations

import os
import threading
import time
import unittest
from typing import List

import sessiongate as sg

from gateway_process import ClusterProcess

SESSIONS = 6
CALL_TIMEOUT = 20.0


class RollingRestartTest(unittest.TestCase):
    def test_run_loops_through_a_rolling_restart(self) -> None:
        if not ClusterProcess.available():
            if os.environ.get("CI") == "true":
                self.fail("redis-server is not on PATH (CI=true: apt-get install -y redis-server)")
            self.skipTest("redis-server is not on PATH")
        with ClusterProcess() as cluster:
            target = "ipv4:" + ",".join(gw.addr for gw in cluster.replicas)
            with sg.Gateway(target) as gw:
                sessions = [gw.open_session(client_name="py-rolling", timeout=10) for _ in range(SESSIONS)]
                stop = threading.Event()
                mu = threading.Lock()
                failures: List[str] = []
                ok = [0] * SESSIONS
                last_ok = [0.0] * SESSIONS

                def loop(i: int) -> None:
                    n = 0
                    while not stop.is_set():
                        token = f"s{i}-{n}"
                        n += 1
                        try:
                            r = sessions[i].run("echo", {"token": token}, timeout=CALL_TIMEOUT)
                        except sg.GatewayError as err:
                            with mu:
                                failures.append(f"session {i}: {err!r}")
                            time.sleep(0.05)
                            continue
                        with mu:
                            if r.result.get("token") != token:
                                failures.append(f"session {i}: sent {token}, got {r.result!r}")
                            ok[i] += 1
                            last_ok[i] = time.monotonic()

                threads = [threading.Thread(target=loop, args=(i,)) for i in range(SESSIONS)]
                for t in threads:
                    t.start()
                try:
                    for r in range(len(cluster.replicas)):
                        cluster.restart(r)
                        restarted = time.monotonic()
                        deadline = restarted + 20
                        while time.monotonic() < deadline:  # every loop answered since
                            with mu:
                                if all(t > restarted for t in last_ok):
                                    break
                            time.sleep(0.02)
                finally:
                    stop.set()
                    for t in threads:
                        t.join(timeout=CALL_TIMEOUT + 5)
                with mu:
                    self.assertEqual(failures, [], f"{len(failures)} failed calls ({sum(ok)} succeeded)")
                    self.assertTrue(all(t > restarted for t in last_ok), "a loop made no progress after the last restart")
                    print(f"rolling restart: {sum(ok)} RunJob calls, 0 failed", flush=True)


if __name__ == "__main__":
    unittest.main()
