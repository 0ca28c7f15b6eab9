"""A watch stream that nginx resets, for the clients' reset tests.

``ResetRig`` runs, all on loopback:

    client ──h2──▶ nginx (grpc_pass) ──▶ Relay (TCP) ──▶ an in-process fake gateway

The fake gateway's WatchJob sends events ``from_event_seq+1 … total-1`` and
the result at ``total``; on the first stream it stops after ``cut_after``
events and waits. ``Relay.cut()`` then closes every relayed connection with a
TCP reset, as a SIGKILLed gateway's kernel does: nginx, whose upstream died
mid-response, resets the client's HTTP/2 stream with INTERNAL_ERROR (grpcio:
``INTERNAL`` "Received RST_STREAM with error code 2"). The relay keeps
accepting, so a resumed watch reaches the fake gateway again.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import List, Optional, Tuple

import grpc

from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb
from sessiongate.pb.sessiongate.v1 import sessiongate_pb2_grpc as pb_grpc

from gateway_process import REPO


class Relay:
    """A TCP relay from a loopback port to ``upstream``; cut() resets every
    connection it relays. close() stops it and joins its threads."""

    def __init__(self, upstream: Tuple[str, int]) -> None:
        self._up = upstream
        self._ln = socket.socket()
        self._ln.bind(("127.0.0.1", 0))
        self._ln.listen(16)
        self.port = self._ln.getsockname()[1]
        self._mu = threading.Lock()
        self._socks: List[socket.socket] = []
        self._threads: List[threading.Thread] = []
        self._closed = False
        self._down = 0  # bytes relayed from upstream so far, guarded by _grew
        self._grew = threading.Condition()
        self._go(self._accept)

    def _go(self, fn, *args) -> None:  # type: ignore[no-untyped-def]
        t = threading.Thread(target=fn, args=args, daemon=True)
        with self._mu:
            self._threads.append(t)
        t.start()

    def _accept(self) -> None:
        # A listener closed while another thread accepts on it does not
        # wake that thread, so the accept polls.
        self._ln.settimeout(0.05)
        while True:
            with self._mu:
                if self._closed:
                    return
            try:
                down, _ = self._ln.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            down.settimeout(None)
            try:
                up = socket.create_connection(self._up, timeout=5)
                up.settimeout(None)
            except OSError:
                down.close()
                continue
            with self._mu:
                if self._closed:
                    down.close()
                    up.close()
                    return
                self._socks += [down, up]
            self._go(self._pump, down, up, False)
            self._go(self._pump, up, down, True)

    def downstream_bytes(self) -> int:
        """Bytes relayed from upstream to the clients so far."""
        with self._grew:
            return self._down

    def wait_downstream(self, above: int, timeout: float) -> bool:
        """Wait until more than ``above`` bytes came from upstream."""
        with self._grew:
            return self._grew.wait_for(lambda: self._down > above, timeout)

    def _pump(self, src: socket.socket, dst: socket.socket, from_upstream: bool) -> None:
        # A socket closed while another thread reads it sends nothing until
        # that read returns, so the pumps poll and do the reset themselves.
        src.settimeout(0.05)
        try:
            while True:
                with self._mu:
                    live = src in self._socks
                if not live:
                    for s in (src, dst):
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        s.close()
                    return
                try:
                    b = src.recv(65536)
                except socket.timeout:
                    continue
                if not b:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(b)
                if from_upstream:
                    with self._grew:
                        self._down += len(b)
                        self._grew.notify_all()
        except OSError:
            return

    def cut(self) -> None:
        """Reset every relayed connection (SO_LINGER 0: an RST, not a FIN)."""
        with self._mu:
            self._socks = []

    def close(self) -> None:
        with self._mu:
            self._closed = True
        self.cut()
        with self._mu:
            threads = list(self._threads)
        for t in threads:
            t.join(10)
        self._ln.close()


# The nginx configuration of the reset tests, shared with the Go and
# TypeScript clients' (LISTEN_ADDR, UPSTREAM_ADDR).
NGINX_CONF = REPO / "clients" / "testdata" / "reset-nginx.conf"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    """A real nginx (Debian's) in front of one upstream port, in a temp dir."""

    def __init__(self, upstream_port: int) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
        if binary is None:
            raise RuntimeError("nginx is not installed (apt-get install -y nginx)")
        self._dir = tempfile.TemporaryDirectory(prefix="sessiongate-nginx-")
        os.mkdir(os.path.join(self._dir.name, "tmp"))
        self.port = _free_port()
        with open(os.path.join(self._dir.name, "sessiongate.conf"), "w") as f:
            f.write(
                NGINX_CONF.read_text()
                .replace("LISTEN_ADDR", f"127.0.0.1:{self.port}")
                .replace("UPSTREAM_ADDR", f"127.0.0.1:{upstream_port}")
            )
        self._proc = subprocess.Popen(
            [binary, "-p", self._dir.name, "-c", "sessiongate.conf", "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("nginx did not listen")
                time.sleep(0.02)

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        self._dir.cleanup()


class ScriptedWatch(pb_grpc.SessionGatewayServicer):
    """A fake gateway's WatchJob: events from from_event_seq+1 on, the
    result at ``total``. ``opened`` records the from_event_seq of every
    stream; on the first stream, ``interrupt(seq, context)`` runs before
    each item and ends the stream when it returns True (or aborts it)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.opened: List[int] = []
        self._mu = threading.Lock()

    def interrupt(self, seq: int, context: grpc.ServicerContext) -> bool:
        return False

    def WatchJob(self, request, context):  # type: ignore[no-untyped-def]
        with self._mu:
            first = not self.opened
            self.opened.append(request.from_event_seq)
        for seq in range(request.from_event_seq + 1, self.total + 1):
            if first and self.interrupt(seq, context):
                return
            if seq == self.total:
                yield pb.WatchJobResponse(event_seq=seq, result=pb.JobResult(summary="done"))
            else:
                yield pb.WatchJobResponse(event_seq=seq, event=pb.JobEvent(kind="log"))


class WatchServer(ScriptedWatch):
    """The fake gateway's WatchJob (see the module doc). ``cut_ready`` is
    set once the first stream has sent its ``cut_after`` events; it then
    waits, sending nothing, until the client leaves or ``stop``."""

    def __init__(self, total: int = 10, cut_after: int = 5) -> None:
        super().__init__(total)
        self.cut_after = cut_after
        self.cut_ready = threading.Event()
        self._stop = threading.Event()

    def interrupt(self, seq: int, context: grpc.ServicerContext) -> bool:
        if seq <= self.cut_after:
            return False
        self.cut_ready.set()
        while context.is_active() and not self._stop.wait(0.05):
            pass
        return True

    def stop(self) -> None:
        self._stop.set()


class ResetRig:
    """client → nginx → Relay → WatchServer; ``target`` is nginx's address."""

    def __init__(self, servicer: Optional[pb_grpc.SessionGatewayServicer] = None) -> None:
        self.servicer = servicer or WatchServer()
        self._server = grpc.server(ThreadPoolExecutor(8))
        pb_grpc.add_SessionGatewayServicer_to_server(self.servicer, self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()
        self.relay = Relay(("127.0.0.1", port))
        try:
            self.nginx = Nginx(self.relay.port)
        except Exception:
            self.relay.close()
            self._server.stop(None)
            raise
        self.target = f"127.0.0.1:{self.nginx.port}"

    def close(self) -> None:
        if isinstance(self.servicer, WatchServer):
            self.servicer.stop()
        self.nginx.close()
        self.relay.close()
        self._server.stop(None).wait(10)
