"""Idempotency keys for RunJob and SubmitJob."""

from __future__ import annotations

import secrets


def call_key(given: str) -> str:
    """The idempotency key of one logical RunJob or SubmitJob call: the
    caller's, or a fresh random one. The request is built once per call, so
    every attempt the retry policy makes carries the same key and a retried
    attempt gets the job the first one created (ARCP §7.2) instead of running
    it again."""
    return given or "sg-" + secrets.token_hex(16)
