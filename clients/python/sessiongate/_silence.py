"""The silence bound of a watch: leave a replica that went silent.

A frozen replica (SIGSTOP, a VM pause, a stop-the-world stall) keeps its
connections open and answers nothing; behind a balancer the client's
keepalive pings are answered by the balancer, so a watch on it would wait for
the thaw. The rule is the Go client's (client/silence.go):

* a WatchJob stream that has received nothing for ``after`` seconds
  (:data:`DEFAULT_SILENCE_AFTER`, 0.5 s) health-checks its replica
  (``grpc.health.v1.Health/Check``), at most once per ``after``;
* no answer within ``timeout`` (:data:`DEFAULT_SILENCE_TIMEOUT`, 1 s) makes
  the replica silent: the stream is cancelled and ends UNAVAILABLE with reason
  ``REPLICA_SILENT``, which the watch resumes after, from its cursor;
* any answer, an error status included, means alive: a long quiet job is
  never cut.

The health check goes over the Gateway's channel with the session's
``x-sessiongate-session`` header, so a balancer that hashes on it (the nginx
recipe) sends it to the watch's replica. ``Gateway(silence_bound=None)``
turns the bound off; :class:`SilenceBound` tunes it.
"""

from __future__ import annotations

import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Optional

import grpc

from .errors import UnavailableError

DEFAULT_SILENCE_AFTER = 0.5
"""Seconds a watch waits for a message before it health-checks its replica."""

DEFAULT_SILENCE_TIMEOUT = 1.0
"""Seconds that health check may go unanswered before the replica is silent."""

REASON_REPLICA_SILENT = "REPLICA_SILENT"
"""The ErrorInfo reason of a watch given up on a silent replica."""

HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"


@dataclass(frozen=True)
class SilenceBound:
    """The silence bound of watches (``silence_bound=`` of Gateway)."""

    after: float = DEFAULT_SILENCE_AFTER
    timeout: float = DEFAULT_SILENCE_TIMEOUT

    def __post_init__(self) -> None:
        if self.after <= 0 or self.timeout <= 0:
            raise ValueError("SilenceBound needs after > 0 and timeout > 0 (seconds)")


def replica_silent_error(bound: SilenceBound) -> UnavailableError:
    """The UNAVAILABLE REPLICA_SILENT a watch's stream ends with."""
    return UnavailableError(
        grpc.StatusCode.UNAVAILABLE,
        f"sessiongate: the replica of the watch sent nothing for {bound.after} s and answered no health check "
        f"within {bound.timeout} s: watch again from your last event_seq",
        reason=REASON_REPLICA_SILENT,
        domain="sessiongate",
        metadata={"retryable": "true"},
    )


def is_silence(err: grpc.RpcError) -> bool:
    """Whether a health check's failure is silence (no answer in time);
    any other answer means the replica is alive."""
    return err.code() == grpc.StatusCode.DEADLINE_EXCEEDED


class StreamSilence:
    """The bound of one sync stream: a thread that health-checks (``check``
    returns True for silence, blocking up to the bound's timeout) once the
    stream has been quiet for ``after`` and calls ``cancel`` when the
    replica is silent. ``received()`` notes a message; ``stop()`` ends the
    thread (it returns within the bound's timeout); ``owner`` being garbage
    collected (a watch left without cancel) stops it too."""

    def __init__(
        self, bound: SilenceBound, check: Callable[[], bool], cancel: Callable[[], Any], owner: Optional[object] = None
    ) -> None:
        self._bound = bound
        self._check = check
        self._cancel = cancel
        self._stop = threading.Event()
        self._last = time.monotonic()
        self.silent = False
        if owner is not None:
            weakref.finalize(owner, self._stop.set)
        threading.Thread(target=self._run, name="sessiongate-silence", daemon=True).start()

    def received(self) -> None:
        self._last = time.monotonic()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        after = self._bound.after
        wait = after
        while not self._stop.wait(wait):
            quiet = time.monotonic() - self._last
            if quiet < after:
                wait = after - quiet
                continue
            silent = self._check()
            if self._stop.is_set():
                return
            if silent and time.monotonic() - self._last >= after:
                self.silent = True
                self._cancel()
                return
            wait = after
