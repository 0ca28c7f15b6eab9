"""The input nesting bound of the Python client against a real gateway.

Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_depth -v
"""

from __future__ import annotations

import unittest
from typing import Any

import sessiongate as sg
from sessiongate._depth import MAX_INPUT_DEPTH

from gateway_process import GatewayProcess
from test_retry_once import runtime_jobs

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


def nested(d: int) -> Any:
    v: Any = 1
    for _ in range(d):
        v = [v]
    return v


class DepthTest(unittest.TestCase):
    def test_input_depth(self) -> None:
        """An input nested MAX_INPUT_DEPTH deep runs and comes back intact; a
        deeper one — one level, or thousands — is refused before it is sent
        with the gateway's INVALID_ARGUMENT VALUE_TOO_DEEP naming the path."""
        with sg.Gateway(_gw.addr) as gw, gw.open_session(client_name="py-depth", timeout=10) as s:
            self.assertEqual(s.run("echo", nested(MAX_INPUT_DEPTH), timeout=30).result, nested(MAX_INPUT_DEPTH))
            sub0, _ = runtime_jobs(_gw.admin)
            for d in (MAX_INPUT_DEPTH + 1, 5000):
                with self.assertRaises(sg.InvalidArgumentError) as cm:
                    s.run("echo", nested(d), timeout=30)
                self.assertEqual(cm.exception.reason, "VALUE_TOO_DEEP")
                self.assertEqual(cm.exception.metadata["field"], "input" + "[0]" * MAX_INPUT_DEPTH)
                with self.assertRaises(sg.InvalidArgumentError):
                    s.submit("echo", {"a": nested(d)}, timeout=30)
            self.assertEqual(runtime_jobs(_gw.admin)[0], sub0, "nothing reached the runtime")


if __name__ == "__main__":
    unittest.main()
