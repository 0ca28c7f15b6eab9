"""Runs clients/python/README.md's example blocks verbatim against a real
gateway binary (with its address in place of 127.0.0.1:50051), each in a
fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from gateway_process import REPO, GatewayProcess

_gw: GatewayProcess


def setUpModule() -> None:
    global _gw
    _gw = GatewayProcess().start()


def tearDownModule() -> None:
    _gw.stop()


def _run_block(test: unittest.TestCase, name: str) -> str:
    readme = (REPO / "clients" / "python" / "README.md").read_text()
    m = re.search(rf"<!-- {name}:begin -->\s*```python\n(.*?)```\s*<!-- {name}:end -->", readme, re.S)
    test.assertIsNotNone(m, f"clients/python/README.md has no {name} block")
    code = m.group(1).replace("127.0.0.1:50051", _gw.addr)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d, "example.py")
        path.write_text(code)
        env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python"))
        out = subprocess.run([sys.executable, str(path)], env=env, capture_output=True, text=True, timeout=90)
    test.assertEqual(out.returncode, 0, out.stderr)
    return out.stdout


class ReadmeTest(unittest.TestCase):
    def test_sync_example(self) -> None:
        out = _run_block(self, "python-example")
        self.assertIn("{'hello': 'world', 'n': 3}", out)
        self.assertIn("JobResult(", out)
        self.assertIn("timed out", out)

    def test_asyncio_example(self) -> None:
        out = _run_block(self, "python-aio-example")
        self.assertIn("{'hello': 'world', 'n': 3}", out)
        self.assertIn("result {'count': 3}", out)
        self.assertIn("cancelled: the runtime reports cancelled", out)
        self.assertIn("AbortedError INTERNAL_ERROR", out)


if __name__ == "__main__":
    unittest.main()
