"""The watch-resume rules (sessiongate._resume), apart from any I/O: a table of
causes, and a property test over random schedules (the seed is printed on
failure; SESSIONGATE_SEED=<n> replays one)."""

from __future__ import annotations

import os
import random
import unittest

import grpc

import sessiongate as sg
from sessiongate._resume import ResumePolicy, Resumer, retryable


def _err(code: grpc.StatusCode, reason: str = "", message: str = "x") -> sg.GatewayError:
    cls = sg.ERROR_CLASSES[code]
    return cls(code, message, reason=reason or None, domain="sessiongate" if reason else None)


class RetryableTest(unittest.TestCase):
    def test_causes(self) -> None:
        U = grpc.StatusCode.UNAVAILABLE
        cases = [
            (_err(U), True),  # a dropped connection: no ErrorInfo
            (_err(U, "SESSION_HANDED_OFF"), True),
            (_err(U, "OWNER_UNREACHABLE"), True),
            (_err(U, "NOT_OWNER"), True),
            (_err(U, "DIRECTORY_UNAVAILABLE"), True),
            (_err(U, "DRAINING"), True),
            (_err(U, "SESSION_LOST"), False),
            (_err(U, "SESSION_CLOSED"), False),
            (_err(U, "RUNTIME_UNREACHABLE"), False),
            (_err(grpc.StatusCode.NOT_FOUND, "JOB_NOT_FOUND"), False),
            (_err(grpc.StatusCode.CANCELLED), False),
            (_err(grpc.StatusCode.DEADLINE_EXCEEDED), False),
            (_err(U, "REPLICA_SILENT"), True),
            (_err(grpc.StatusCode.INTERNAL), False),
            # A stream reset by the transport (nginx after its upstream died),
            # in grpcio's, grpc-js's and grpc-go's words: no ErrorInfo.
            (_err(grpc.StatusCode.INTERNAL, message="Received RST_STREAM with error code 2"), True),
            (_err(grpc.StatusCode.INTERNAL, message="Received RST_STREAM with code 2 (Internal server error)"), True),
            (_err(grpc.StatusCode.INTERNAL, message="stream terminated by RST_STREAM with error code: INTERNAL_ERROR"), True),
            # Other reset codes, and the gateway's own INTERNAL (ErrorInfo), are not.
            (_err(grpc.StatusCode.INTERNAL, message="Received RST_STREAM with error code 8"), False),
            (_err(grpc.StatusCode.INTERNAL, message="Received RST_STREAM with code 20"), False),
            (_err(grpc.StatusCode.INTERNAL, "INTERNAL", "Received RST_STREAM with error code 2"), False),
            (_err(grpc.StatusCode.UNKNOWN, message="Received RST_STREAM with error code 2"), False),
        ]
        for err, want in cases:
            with self.subTest(code=err.code.name, reason=err.reason):
                self.assertIs(retryable(err), want)

    def test_off(self) -> None:
        r = Resumer(0, None, None)
        self.assertIsNone(r.cut(_err(grpc.StatusCode.UNAVAILABLE), 0.0))

    def test_deadline_bounds_the_backoff(self) -> None:
        r = Resumer(0, ResumePolicy(initial_backoff=1.0, max_backoff=1.0), deadline=10.0, rand=lambda: 1.0)
        self.assertEqual(r.cut(_err(grpc.StatusCode.UNAVAILABLE), 0.0), 1.0)
        self.assertIsNone(r.cut(_err(grpc.StatusCode.UNAVAILABLE), 9.5), "a backoff past the deadline")

    def test_backoff_doubles_and_resets(self) -> None:
        r = Resumer(0, ResumePolicy(max_attempts=4, initial_backoff=0.1, max_backoff=0.3), None, rand=lambda: 1.0)
        cut = _err(grpc.StatusCode.UNAVAILABLE)
        self.assertEqual([r.cut(cut, 0.0) for _ in range(5)], [0.1, 0.2, 0.3, 0.3, None])
        self.assertTrue(r.deliver(1, False))
        self.assertEqual(r.cut(cut, 0.0), 0.1, "an item resets the backoff and the attempt count")


class ResumerPropertyTest(unittest.TestCase):
    """Random schedules of items (fresh, duplicate, terminal) and cuts
    (retryable or not); after every step: what the caller saw is strictly
    increasing, nothing follows the terminal item, a non-retryable cut is
    never resumed, consecutive resumes stay within max_attempts, and a
    resume never sleeps past the deadline."""

    def test_random_schedules(self) -> None:
        seeds = [int(os.environ["SESSIONGATE_SEED"])] if "SESSIONGATE_SEED" in os.environ else range(300)
        for seed in seeds:
            try:
                self._run(seed)
            except AssertionError as e:
                raise AssertionError(f"seed {seed} (replay: SESSIONGATE_SEED={seed}): {e}") from None

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        policy = ResumePolicy(max_attempts=rng.randint(1, 5), initial_backoff=0.01, max_backoff=0.5)
        deadline = rng.choice([None, rng.uniform(0.5, 5.0)])
        start = rng.randint(0, 5)
        r = Resumer(start, policy, deadline, rand=rng.random)
        seen = []
        server_seq = start  # the stream re-opened from the cursor delivers seq > cursor
        now = 0.0
        consecutive = 0
        for _ in range(rng.randint(1, 60)):
            step = rng.random()
            if step < 0.55:
                terminal = rng.random() < 0.05
                seq = server_seq + rng.randint(1, 3)
                if r.deliver(seq, terminal):
                    seen.append(seq)
                    consecutive = 0
                server_seq = seq
            elif step < 0.7:
                dup = rng.randint(0, r.cursor)
                assert not r.deliver(dup, False), "a duplicate was delivered"
            else:
                ok = rng.random() < 0.7
                err = _err(grpc.StatusCode.UNAVAILABLE, rng.choice(["", "SESSION_HANDED_OFF"])) if ok else _err(
                    grpc.StatusCode.UNAVAILABLE, "SESSION_LOST"
                )
                was_done = r.done
                delay = r.cut(err, now)
                if delay is not None:
                    assert ok, "a non-retryable cut was resumed"
                    assert not was_done, "resumed after the terminal item"
                    consecutive += 1
                    assert consecutive <= policy.max_attempts, "more resumes in a row than max_attempts"
                    assert delay <= policy.max_backoff
                    if deadline is not None:
                        assert now + delay < deadline, "a backoff past the deadline"
                    now += delay
                    server_seq = r.cursor  # the new stream starts after the cursor
                else:
                    break
            assert seen == sorted(set(seen)), f"not strictly increasing: {seen}"
            assert all(s > start for s in seen)
            if r.done:
                assert not r.deliver(server_seq + 1, False), "an item after the terminal one"



class ResendSafeTest(unittest.TestCase):
    def test_methods(self) -> None:
        from sessiongate._resume import resend_safe
        from sessiongate.pb.sessiongate.v1 import sessiongate_pb2 as pb

        self.assertTrue(resend_safe("GetSessionStatus", pb.GetSessionStatusRequest()))
        self.assertTrue(resend_safe("ListJobs", pb.ListJobsRequest()))
        self.assertTrue(resend_safe("RunJob", pb.RunJobRequest(idempotency_key="k")))
        self.assertFalse(resend_safe("RunJob", pb.RunJobRequest()), "no key: a re-send could run the job twice")
        self.assertFalse(resend_safe("SubmitJob", pb.SubmitJobRequest()))
        self.assertFalse(resend_safe("CancelJob", pb.CancelJobRequest()))
        self.assertFalse(resend_safe("CloseSession", pb.CloseSessionRequest()))
        self.assertFalse(resend_safe("OpenSession", pb.OpenSessionRequest()))


if __name__ == "__main__":
    unittest.main()
