"""Deadline probe for the Python client (run by cmd/deadline-probe).

Makes N RunJob calls to the sleep agent, each sleeping a second longer than
its own deadline, with deadlines spread evenly from 50 ms to 2 s (or N calls
at each of --deadlines-ms), C at a time, and prints one JSON line per retry
setting and deadline: how many calls received the gateway's TimeoutExceeded
details, how many a bare DEADLINE_EXCEEDED, how many CANCELLED. With
--agent echo the calls run the echo agent instead and "ok" counts the
answers that arrived in time.

    PYTHONPATH=clients/python /usr/bin/python3 clients/python/tools/deadline_probe.py --addr HOST:PORT
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from concurrent.futures import ThreadPoolExecutor

import sessiongate as sg


def deadlines(n: int, lo: float, hi: float) -> list:
    return [lo + (hi - lo) * i / max(n - 1, 1) for i in range(n)]


def probe(addr: str, n: int, conc: int, retry: bool, deadline_ms: int = 0, agent: str = "sleep") -> dict:
    counts: collections.Counter = collections.Counter()
    limits: collections.Counter = collections.Counter()
    with sg.Gateway(addr, retry=retry) as gw, gw.open_session(client_name="deadline-probe", timeout=10) as s:

        def one(timeout: float) -> None:
            try:
                if agent == "echo":
                    s.run("echo", {"deadline": timeout}, timeout=timeout)
                else:
                    s.run("sleep", {"ms": int(timeout * 1000) + 1000}, timeout=timeout)
                counts["ok"] += 1
            except sg.TimeoutExceededError as e:
                counts["details"] += 1
                limits[e.limit] += 1
            except sg.DeadlineExceededError:
                counts["bare"] += 1
            except sg.CancelledError:
                counts["cancelled"] += 1
            except sg.GatewayError as e:
                counts["other"] += 1
                counts["other:" + e.code.name] += 1

        start = time.monotonic()
        with ThreadPoolExecutor(conc) as pool:
            ds = [deadline_ms / 1000] * n if deadline_ms else deadlines(n, 0.05, 2.0)
            list(pool.map(one, ds))
        took = time.monotonic() - start
    return {
        "lang": "python",
        "retry": retry,
        "deadline_ms": deadline_ms,
        "agent": agent,
        "n": n,
        "details": counts["details"],
        "bare": counts["bare"],
        "cancelled": counts["cancelled"],
        "other": counts["other"],
        "ok": counts["ok"],
        "limits": dict(limits),
        "seconds": round(took, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--c", type=int, default=20)
    ap.add_argument("--retry", choices=["on", "off", "both"], default="both")
    ap.add_argument("--deadlines-ms", default="", help="comma-separated fixed deadlines; empty: spread 50 ms - 2 s")
    ap.add_argument("--agent", choices=["sleep", "echo"], default="sleep")
    a = ap.parse_args()
    fixed = [int(x) for x in a.deadlines_ms.split(",") if x] or [0]
    for retry in {"on": [True], "off": [False], "both": [True, False]}[a.retry]:
        for d in fixed:
            print(json.dumps(probe(a.addr, a.n, a.c, retry, d, a.agent)), flush=True)


if __name__ == "__main__":
    main()
