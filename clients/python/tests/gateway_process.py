"""A real sessiongate gateway in a child process, for tests and tools.

The binary is $SESSIONGATE_GATEWAY_BIN when set (CI builds it once), else it
is built from the repository with ``go build``. The gateway listens on free
loopback ports and runs its embedded reference runtime (agents echo, sleep,
stream, fail).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
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

    def __init__(self, *extra_args: str, binary: Optional[str] = None) -> None:
        self._extra = list(extra_args)
        self._binary = binary
        self._tmp = tempfile.TemporaryDirectory(prefix="sessiongate-py-")
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None
        self._ready = threading.Event()
        self.log: List[str] = []
        self.addr = ""
        self.admin = ""

    def start(self, timeout: float = 30.0) -> "GatewayProcess":
        binary = self._binary or gateway_binary(self._tmp.name)
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

    @property
    def pid(self) -> int:
        """The gateway's process id (to signal it: SIGSTOP, SIGCONT)."""
        assert self._proc is not None
        return self._proc.pid

    def kill(self) -> None:
        """SIGKILL the gateway and wait for it (a replica's sudden death)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)

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
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
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


CLUSTER_SECRET = "python-cluster-secret-0123456789"


class ClusterProcess:
    """A cluster of real processes: redis-server (on a unix socket, no
    persistence), the reference runtime (``gateway runtime``) and
    ``replicas`` gateways sharing them, with a short lease so that a
    killed owner's sessions are taken over quickly. Needs redis-server on
    PATH (:attr:`available`). Start with start(), stop with stop()."""

    def __init__(self, replicas: int = 3, lease_ttl: str = "1s") -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="sgpy-cl-")
        self._n = replicas
        self._ttl = lease_ttl
        self._redis: Optional[subprocess.Popen] = None
        self._runtime: Optional[subprocess.Popen] = None
        self._drain: Optional[threading.Thread] = None
        self.replicas: List[GatewayProcess] = []
        self._args: List[List[str]] = []
        self._binary = ""

    @staticmethod
    def available() -> bool:
        return shutil.which("redis-server") is not None

    def start(self, timeout: float = 60.0) -> "ClusterProcess":
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        sock = os.path.join(self._tmp.name, "r.sock")
        self._redis = subprocess.Popen(
            ["redis-server", "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
             "--save", "", "--appendonly", "no", "--dir", self._tmp.name],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        while True:  # until redis answers PING
            try:
                with socket.socket(socket.AF_UNIX) as c:
                    c.settimeout(1)
                    c.connect(sock)
                    c.sendall(b"*1\r\n$4\r\nPING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or self._redis.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.005)
        binary = gateway_binary(self._tmp.name)
        self._runtime = subprocess.Popen(
            [binary, "runtime", "--listen", "127.0.0.1:0", "--log-format", "json"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        assert self._runtime.stderr is not None
        url = ""
        for line in self._runtime.stderr:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("msg") == "reference runtime serving":
                url = rec["url"]
                break
        if not url:
            raise RuntimeError("the runtime did not start")
        # Drain the runtime's log until it exits (stop() joins the drain).
        self._drain = threading.Thread(target=self._runtime.stderr.read, daemon=True)
        self._drain.start()
        key = "k1:" + base64.b64encode(os.urandom(32)).decode()
        self._binary = binary
        for i in range(self._n):
            self._args.append([
                "--instance-id", f"gw-{i + 1}", "--runtime", f"default={url}", "--redis", f"unix://{sock}",
                "--directory-key", key, "--cluster-secret", CLUSTER_SECRET, "--lease-ttl", self._ttl,
            ])
            gw = GatewayProcess(*self._args[i], binary=binary)
            self.replicas.append(gw)
            gw.start(timeout=max(1.0, deadline - time.monotonic()))

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """SIGTERMs replica i, waits for it to exit (its lame-duck drain), and
        starts it again on the same gRPC address (a rolling restart's step)."""
        old = self.replicas[i]
        old.stop()
        gw = GatewayProcess(*self._args[i], "--listen", old.addr, binary=self._binary)
        self.replicas[i] = gw
        gw.start(timeout=timeout)

    def stop(self) -> None:
        for gw in self.replicas:
            gw.kill()
            gw.stop()
        for p in (self._runtime, self._redis):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        if self._drain is not None:
            self._drain.join(timeout=10)
        if self._runtime is not None and self._runtime.stderr is not None:
            self._runtime.stderr.close()
        self._tmp.cleanup()

    def __enter__(self) -> "ClusterProcess":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
