"""The input nesting bound of the Python client against a real gateway.

Run from the repository root:
    PYTHONPATH=clients/python:clients/python/tests /usr/bin/python3 -m unittest test_depth -v
"""

from __future__ import annotations

import json
import random
import unittest
from typing import Any

import sessiongate as sg
from sessiongate._depth import MAX_INPUT_DEPTH
from sessiongate._values import _loads_deep

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


def nesting(v: Any) -> Any:
    """(depth, "array" or "object") of the nest agent's result: 1 inside
    single-element lists or {"a": …} objects, walked without recursion (==
    on such values recurses); None for anything else."""
    depth, kind = 0, None
    while isinstance(v, (list, dict)):
        k = "array" if isinstance(v, list) else "object"
        if kind not in (None, k) or len(v) != 1 or (k == "object" and "a" not in v):
            return None
        kind, v, depth = k, (v[0] if k == "array" else v["a"]), depth + 1
    return (depth, kind) if v == 1 and type(v) is int else None


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

    def test_deep_runtime_result(self) -> None:
        """A result nested deeper than the gateway's bound (the reference
        runtime's nest agent) arrives as raw JSON and comes back whole —
        objects one past the bound, which grpcio cannot decode as a Value,
        and 3000 arrays, past the recursion limit of Python's json — from
        run and from watch."""
        with sg.Gateway(_gw.addr) as gw, gw.open_session(client_name="py-deep", timeout=10) as s:
            for depth, kind in ((32, "object"), (33, "object"), (3000, "array")):
                inp = {"depth": depth, "as": kind}
                self.assertEqual(nesting(s.run("nest", inp, timeout=30).result), (depth, kind), f"run nest {depth} {kind}")
                job = s.submit("nest", inp, timeout=30)
                items = list(s.watch(job, timeout=30))
                self.assertIsInstance(items[-1], sg.JobResult)
                self.assertEqual(nesting(items[-1].result), (depth, kind), f"watch nest {depth} {kind}")


class LoadsDeepTest(unittest.TestCase):
    def test_agrees_with_json(self) -> None:
        """_loads_deep decodes what json.loads does, to the same values, and
        refuses what it refuses (random documents; the seed is printed on
        failure)."""
        seed = random.randrange(1 << 30)
        rnd = random.Random(seed)

        def gen(d: int) -> Any:
            r = rnd.random()
            if d > 6 or r < 0.3:
                return rnd.choice([0, 1, -2.5, 1e300, 10**30, "x", "é\\\"", None, True, False])
            if r < 0.65:
                return [gen(d + 1) for _ in range(rnd.randint(0, 4))]
            return {f"k{i}": gen(d + 1) for i in range(rnd.randint(0, 4))}

        for _ in range(500):
            text = json.dumps(gen(0), indent=rnd.choice([None, 1]))
            self.assertEqual(_loads_deep(text), json.loads(text), f"seed {seed}: {text}")
        for bad in ("[1,]", "[1 2]", '{"a" 1}', '{"a":1,}', "[", "{", "1 2", "", "]", "{1:2}", "[1]]"):
            with self.assertRaises(json.JSONDecodeError, msg=bad):
                json.loads(bad)
            with self.assertRaises(json.JSONDecodeError, msg=f"seed {seed}: {bad}"):
                _loads_deep(bad)


if __name__ == "__main__":
    unittest.main()
