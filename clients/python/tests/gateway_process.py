"""A real sessiongate gateway in a child process, for tests and tools.

The binary is $SESSIONGATE_GATEWAY_BIN when set (CI builds it once), else it
is built from the repository with ``go build``. The gateway listens on free
loopback ports and runs its embedded reference runtime (agents echo, sleep,
stream, fail).
"""

from __future__ import annotations

import json
import os
import socket
import struct
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


class CutProxy:
    """A TCP proxy on a free loopback port in front of ``target``
    ("host:port"), whose :meth:`cut` drops every connection it carries (as a
    replica's death or a network fault would) while it goes on accepting
    new ones. ``connections`` counts the connections accepted so far. Use it
    as a context manager; close() stops it and waits for its threads."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self._listener.getsockname()[1]
        self._mu = threading.Lock()
        self._socks: List[socket.socket] = []
        self._threads: List[threading.Thread] = []
        self.connections = 0
        self._closed = False
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self._target, timeout=10)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._mu:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self.connections += 1
                self._socks += [client, upstream]
                for a, b in ((client, upstream), (upstream, client)):
                    t = threading.Thread(target=self._pump, args=(a, b), daemon=True)
                    self._threads.append(t)
                    t.start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Drop every connection now (a reset, not a graceful close)."""
        with self._mu:
            socks, self._socks = self._socks, []
        for s in socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self) -> None:
        with self._mu:
            self._closed = True
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self._listener.close()
        self.cut()
        self._acceptor.join(timeout=10)
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> "CutProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
