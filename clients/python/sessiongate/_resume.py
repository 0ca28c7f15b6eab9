"""When a cut watch re-opens itself: the rules, apart from any I/O.

A WatchJob stream can end without the job's end: the session was handed off
to another replica (UNAVAILABLE, reason ``SESSION_HANDED_OFF``), its owner
could not be reached (``OWNER_UNREACHABLE``, ``NOT_OWNER``,
``DIRECTORY_UNAVAILABLE``), the gateway drains (``DRAINING``), the client's
silence bound gave up on a frozen replica (``REPLICA_SILENT``), the
connection dropped (UNAVAILABLE without ErrorInfo), or a balancer reset the
stream because the replica behind it died (INTERNAL without ErrorInfo whose
message is the transport's RST_STREAM text: nginx resets with INTERNAL_ERROR
when its upstream dies mid-response; see :func:`stream_reset`). The gateway delivers a
job's items exactly once from ``from_event_seq``, so the client re-opens the
watch from the last event_seq it delivered:

* only on those causes (:func:`retryable`); any other error ends the watch;
* never after the terminal item (result or error);
* after a backoff that doubles from ``initial_backoff`` to ``max_backoff``
  (jittered) and starts again once an item arrived;
* at most ``max_attempts`` times in a row without an item in between;
* only while the caller's deadline leaves time for the backoff: otherwise
  the cut's own error is raised;
* an item at or below the cursor (a duplicate) is dropped, so the caller sees
  every event_seq once, in increasing order.

:class:`Resumer` holds these rules; the sync and asyncio watches feed it what
happened (items, errors, the time) and do what it answers.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import grpc

from .errors import GatewayError

RESUMABLE_REASONS = frozenset(
    {"SESSION_HANDED_OFF", "OWNER_UNREACHABLE", "NOT_OWNER", "DIRECTORY_UNAVAILABLE", "DRAINING", "REPLICA_SILENT"}
)
"""The ErrorInfo reasons of an UNAVAILABLE that a watch resumes after."""

# The texts gRPC libraries give a stream that the peer reset with HTTP/2
# RST_STREAM INTERNAL_ERROR (code 2): grpcio "Received RST_STREAM with error
# code 2", @grpc/grpc-js "Received RST_STREAM with code 2", grpc-go "stream
# terminated by RST_STREAM with error code: INTERNAL_ERROR".
_RST_INTERNAL = re.compile(r"RST_STREAM with (?:error )?code:? (?:2|INTERNAL_ERROR)\b")


def stream_reset(err: GatewayError) -> bool:
    """Whether err is a stream reset by the transport (a balancer whose
    upstream died mid-response): INTERNAL, no ErrorInfo (the gateway's own
    INTERNAL errors always carry one), and the RST_STREAM INTERNAL_ERROR text."""
    return err.code == grpc.StatusCode.INTERNAL and err.reason is None and bool(_RST_INTERNAL.search(err.message))


MAX_RESET_RESENDS = 2
"""How many times a unary call is sent again after stream resets."""

_READS = frozenset({"GetSessionStatus", "ListSessions", "ListJobs"})


def resend_safe(method: str, request: object) -> bool:
    """Whether a unary call may be sent again after a stream reset (it may
    have run): reads, and RunJob/SubmitJob with an idempotency key (the
    client gives every call one), whose re-send gets the job the first
    attempt created."""
    if method in _READS:
        return True
    return method in ("RunJob", "SubmitJob") and bool(getattr(request, "idempotency_key", ""))


def reset_backoff(attempt: int) -> float:
    """The pause before re-send ``attempt`` (0-based) after a stream reset."""
    return 0.05 * (2**attempt)


def resend_pause(
    attempt: int, err: GatewayError, method: str, request: object, deadline: Optional[float]
) -> Optional[float]:
    """The pause before sending a unary call again after attempt ``attempt``
    (0-based) failed with err, or None when it is not sent again: err is not
    a stream reset, the call is not safe to send twice (resend_safe), the
    re-sends are spent, or the pause would pass the call's deadline
    (time.monotonic())."""
    pause = reset_backoff(attempt)
    if (
        attempt >= MAX_RESET_RESENDS
        or not stream_reset(err)
        or not resend_safe(method, request)
        or (deadline is not None and time.monotonic() + pause >= deadline)
    ):
        return None
    return pause


def retryable(err: GatewayError) -> bool:
    """Whether a watch cut by err may be re-opened from its cursor."""
    if stream_reset(err):
        return True
    if err.code != grpc.StatusCode.UNAVAILABLE:
        return False
    return err.reason is None or err.reason in RESUMABLE_REASONS


@dataclass(frozen=True)
class ResumePolicy:
    """How a watch resumes itself (``resume=`` of ``Session.watch``; pass
    ``resume=False`` to turn it off)."""

    max_attempts: int = 10
    initial_backoff: float = 0.05
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1 or self.initial_backoff <= 0 or self.max_backoff < self.initial_backoff:
            raise ValueError("ResumePolicy needs max_attempts >= 1 and 0 < initial_backoff <= max_backoff")


class Resumer:
    """The resume rules of one watch. ``deadline`` is on the clock the
    caller passes as ``now`` (e.g. time.monotonic), None for no deadline."""

    def __init__(
        self,
        from_event_seq: int,
        policy: Optional[ResumePolicy],
        deadline: Optional[float],
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.cursor = from_event_seq
        self.resumes = 0  # re-opens so far, for tests and logs
        self.cuts: List[GatewayError] = []  # the errors re-opened after
        self._policy = policy
        self._deadline = deadline
        self._rand = rand
        self._failures = 0
        self._done = False

    def deliver(self, event_seq: int, terminal: bool) -> bool:
        """An item arrived: True if the caller should see it, False for a
        duplicate (at or below the cursor)."""
        if self._done or event_seq <= self.cursor:
            return False
        self.cursor = event_seq
        self._failures = 0
        self._done = terminal
        return True

    @property
    def done(self) -> bool:
        return self._done

    def cut(self, err: GatewayError, now: float) -> Optional[float]:
        """The stream failed with err at ``now``: the delay before re-opening
        from :attr:`cursor`, or None when err must be raised."""
        if self._policy is None or self._done or not retryable(err):
            return None
        if self._failures >= self._policy.max_attempts:
            return None
        cap = min(self._policy.max_backoff, self._policy.initial_backoff * (2**self._failures))
        delay = cap * (0.5 + 0.5 * self._rand())
        if self._deadline is not None and now + delay >= self._deadline:
            return None
        self._failures += 1
        self.resumes += 1
        self.cuts.append(err)
        return delay

    def remaining(self, now: float) -> Optional[float]:
        """The time left before the deadline (None without one)."""
        return None if self._deadline is None else max(0.001, self._deadline - now)
