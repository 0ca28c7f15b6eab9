"""A real sessiongate gateway in a child process, for tests and tools.

The binary is $SESSIONGATE_GATEWAY_BIN when set (CI builds it once), else it
is built from the repository with ``go build``. The gateway listens on free
loopback ports and runs its embedded reference runtime (agents echo, sleep,
stream, fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[3]


def gateway_binary(tmpdir: str) -> str:
    binary = os.environ.get("SESSIONGATE_GATEWAY_BIN")
    if binary:
        return binary
    binary = os.path.join(tmpdir, "gateway")
    subprocess.run(["go", "build", "-o", binary, "./cmd/gateway"], cwd=REPO, check=True, timeout=300)
    return binary


class GatewayProcess:
    """Start with start(), stop with stop() (idempotent). ``addr`` is the
    gRPC address, ``admin`` the admin HTTP address."""

    def __init__(self, *extra_args: str) -> None:
        self._extra = list(extra_args)
        self._tmp = tempfile.TemporaryDirectory(prefix="sessiongate-py-")
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self.log: List[str] = []
        self.addr = ""
        self.admin = ""

    def start(self, timeout: float = 30.0) -> "GatewayProcess":
        binary = gateway_binary(self._tmp.name)
        self._proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json", *self._extra],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The reader drains the gateway's log until it exits (stop() joins it).
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError("gateway did not report its address:\n" + "".join(self.log))
        if not self.addr:
            self.stop()
            raise RuntimeError("gateway exited early:\n" + "".join(self.log))
        return self

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for line in self._proc.stderr:
            self.log.append(line)
            if not self._ready.is_set():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if rec.get("msg") == "sessiongate serving":
                    self.addr, self.admin = rec["grpc"], rec["admin"]
                    self._ready.set()
        self._ready.set()  # exited: unblock start()

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        if self._reader is not None:
            self._reader.join(timeout=10)
        self._tmp.cleanup()

    def __enter__(self) -> "GatewayProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
