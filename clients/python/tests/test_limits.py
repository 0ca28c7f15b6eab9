"""Message size limits of the Python client against a real gateway.

Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_limits -v
"""

from __future__ import annotations

import unittest

import sessiongate as sg

from gateway_process import GatewayProcess

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


class LimitsTest(unittest.TestCase):
    def test_7mb_result_and_10mb_input(self) -> None:
        """A 7 MB result reaches the client (grpcio's default 4 MiB receive
        limit lost it after the job ran); a 10 MB input gets
        RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes."""
        with sg.Gateway(_gw.addr) as gw, gw.open_session(client_name="py-limits", timeout=10) as s:
            n = 7_000_000
            r = s.run("echo", "r" * n, timeout=60)
            self.assertEqual(len(r.result), n)
            with self.assertRaises(sg.GatewayError) as cm:
                s.run("echo", "i" * 10_000_000, timeout=60)
            e = cm.exception
            self.assertEqual(e.code.name, "RESOURCE_EXHAUSTED", e)
            self.assertEqual(e.reason, "CAP_EXCEEDED", e)
            self.assertEqual(e.metadata.get("cap"), "max_input_bytes", e)


if __name__ == "__main__":
    unittest.main()
