// Package hostile is a scripted hostile ARCP 1.1 runtime for tests, like
// net/http/httptest is a server for tests: a WebSocket server on 127.0.0.1
// that performs the ARCP handshake and then follows a script per mode. It
// is not the reference runtime (gateway/arcpruntime), which behaves; this
// one exists to attack a gateway, and its tests run the built gateway
// binary against every mode with a real gRPC client.
//
// # How it fits together
//
// Listen starts the server; each mode is served at the path /<mode>
// (URL(mode)), so one gateway can be given every mode as a runtime of its
// own (--runtime <mode>=ws://127.0.0.1:PORT/<mode>) and a caller picks the
// attack with OpenSession's runtime field. Most modes use coder/websocket;
// the slowloris modes hijack the TCP connection and write the upgrade by
// hand, so it (or the first frame) can be dribbled a byte at a time.
//
// A session outlives its transports: on a resume hello the server finds the
// session, welcomes it with a new resume token and replays every sequenced
// frame after the resume's last_event_seq. A resent submit (same
// idempotency key) gets the same accept again (§7.2). job.cancel of a live
// job is answered with job.cancelled and job.error CANCELLED; of anything
// else (the gateway's reconciliation barrier, an orphan already finished)
// with session.error JOB_NOT_FOUND carrying the cancel's request_id;
// session.ping with session.pong; session.close with session.closed.
//
// The job input drives the script (Input): Token is echoed in the result
// ({"token", "job_id"}), so a caller handed another's job sees a token
// that is not its own, and JobToken tells which token the runtime ran a job
// id for. Batch and Rank make a batch: a submit waits until Batch submits
// wait, then all are answered in Rank order (all accepts first, then the
// results); a partial batch is answered after a quiet window (50 ms)
// without a new submit, so a gateway that sends one submit at a time is
// served, one at a time. Hold: never answered. Family, PadTo, Flood, Park
// and Release drive the frame and flood modes. Seen waits until a submit
// carrying a token has arrived; Stats counts per mode (connections,
// hellos, resumes, submits, the most unanswered submits of one session at
// once, batches and reordered batches, stray errors, garbage answers,
// oversize frames).
//
// # Goroutines and shutdown
//
// One goroutine serves the listener; each connection is served on its
// net/http handler goroutine, which reads and dispatches; frames are
// written under the session's mutex, by that goroutine, by the batch's
// quiet-window timer, or by a flood's goroutine (started by a handler and
// counted with the handlers). Close cancels the server's context (which
// closes every connection), closes the listener, and waits for every
// handler and flood; timers are stopped under the session's mutex, and a
// timer that fires late finds the session closed.
//
// # Modes, and what a gateway's caller gets
//
// "Wants" is what issue 28 demands of the gateway; "at 4193cb6" is what
// the gateway binary did before the fixes of that issue (the suite's
// tests assert the wants, so they failed there).
//
// Correlation (the tests check every caller's token, job id and result):
//
//	echo              in order, trace ids echoed; with Input.Hold a submit is never answered.
//	                  Wants: OK, own job. At 4193cb6: OK.
//	reorder           each batch answered in Rank order (random; every fourth round reversed),
//	                  each accept echoing its submit's trace id.
//	                  Wants: every caller its own job, 1,000 rounds (TestReorderedAcceptsEchoed).
//	                  At 4193cb6: MISDELIVERY in round 0 (A gets B's job and result).
//	reorder-noecho    the same, accepts without trace ids.
//	                  Wants: own jobs, and at most one submit of the session in flight (the
//	                  runtime never holds two unanswered). At 4193cb6: MISDELIVERY.
//	stray             before each batch's accepts, job.error for a job never accepted (no trace
//	                  id). Wants: every caller its own job, 1,000 rounds. At 4193cb6: A failed
//	                  by the stray error and B handed A's job (MISDELIVERY).
//	stray-traced      the same, the stray error carrying a trace id that names no submit.
//	                  Wants: as stray. At 4193cb6: A failed with INTERNAL "stray error".
//	unanswered-head   A's submit held (never answered); B's and C's, behind it, accepted at once
//	                  in a random order with their trace ids; the session warmed first by one
//	                  answered submit. Wants: B and C OK with their own jobs within 3 s; A
//	                  waits until its caller gives up (CANCELLED), 1,000 rounds.
//	                  At 4193cb6: B waits to its deadline (DEADLINE_EXCEEDED after 9.9 s).
//
// Garbage answers (every submit, resends included):
//
//	garbage-json          an accept cut off mid-object (invalid JSON)
//	garbage-jobid-number  an accept whose job_id is 12345
//	garbage-no-jobid      an accept without job_id
//	                  Wants: a definite UNAVAILABLE or INTERNAL with an ErrorInfo reason within
//	                  half the caller's deadline, at most 5 resends over at most 6 handshakes.
//	                  At 4193cb6: DEADLINE_EXCEEDED at 20 s after 20 handshakes (a resume a
//	                  second).
//
// Runtime errors:
//
//	retryable-reject      session.error{request_id, INTERNAL_ERROR, retryable, RetryableMessage}.
//	                  Wants: UNAVAILABLE or ABORTED, reason INTERNAL_ERROR, retryable=true, the
//	                  message. At 4193cb6: INTERNAL (logged at ERROR).
//	retryable-job-error   accept, then job.error{INTERNAL_ERROR, retryable}.
//	                  Wants: as above. At 4193cb6: ABORTED with all of it (passes).
//	fatal-session-error   accept, then session.error without request_id: PERMISSION_DENIED, not
//	                  retryable, FatalMessage. Wants: a prompt error naming PERMISSION_DENIED and
//	                  the message. At 4193cb6: DEADLINE_EXCEEDED (the waiting RunJob is not
//	                  told).
//
// Resume tricks (the transport is dropped after the first accept):
//
//	resume-refused        the resume answered with session.error UNAUTHENTICATED,
//	                  ResumeRefusedMessage. Wants: UNAUTHENTICATED and the message.
//	                  At 4193cb6: UNAUTHENTICATED, the message lost.
//	resume-other-session  the resume welcomed into another session id. Wants: UNAVAILABLE whose
//	                  reason is not RESUME_WINDOW_EXPIRED. At 4193cb6: RESUME_WINDOW_EXPIRED.
//
// Handshake attacks (OpenSession; the gateway runs with --init-timeout 3s):
//
//	handshake-wrong-frame   hello answered with job.accepted. Wants: UNAVAILABLE within 1.5 s
//	                  naming job.accepted. At 4193cb6: RUNTIME_UNREACHABLE after the full 3 s.
//	handshake-error         session.error UNAUTHENTICATED, HandshakeErrorMessage. Wants and
//	                  at 4193cb6: UNAUTHENTICATED at once with the message.
//	handshake-unknown-type  hello answered with session.frobnicate.
//	handshake-garbage       hello answered with invalid JSON.
//	handshake-silent        hello never answered.
//	slow-upgrade            the HTTP 101 head dribbled a byte per 100 ms, never ending.
//	slow-welcome            the welcome frame dribbled a byte per 100 ms (30 s in all).
//	                  Wants (these five): UNAVAILABLE within the init timeout + 2 s (the last
//	                  three RUNTIME_UNREACHABLE), and the gateway closes the socket.
//	                  At 4193cb6: so.
//
// Heartbeats (the heartbeat feature offered):
//
//	heartbeat-0.001   heartbeat_interval_sec 0.001
//	heartbeat-0       heartbeat_interval_sec 0
//	heartbeat-huge    heartbeat_interval_sec 1000000000000
//	                  Wants: clamped, the session opens and runs 20 jobs.
//	                  At 4193cb6: 0 and huge pass; 0.001 is refused (RUNTIME_UNREACHABLE
//	                  "welcome": the interval is read as an integer).
//
// Frames (the gateway runs with --max-frame-bytes 1048576):
//
//	malformed         after the accept, the frames of Input.Family, then the result. Every frame
//	                  that could pass for the job's result is invalid, and forged
//	                  ("forged-by-hostile"): taking one hands the caller a forged result.
//	                  Families: wrong-types (id, arcp, type, event_seq, payload, session_id,
//	                  job_id of the wrong JSON type; not an object; empty), missing-fields
//	                  (arcp, id, type, job_id, event_seq, session_id), unknown-types (unknown
//	                  and client-to-runtime types, a second welcome, case and space variants),
//	                  invalid-utf8 (bytes that are not UTF-8 in the frame, the session id, the
//	                  job id, an event body and key), duplicate-keys (last-wins and first-wins
//	                  readings differ), binary (a forged result as a binary message),
//	                  foreign-session (another, a padded, an empty session id),
//	                  result-invalid-utf8 (the result itself is not UTF-8).
//	                  Wants and at 4193cb6: OK, the caller's own result (raw_result for
//	                  result-invalid-utf8), the session goes on.
//	frame-cap         a result frame of exactly Input.PadTo bytes, replayed on every resume.
//	                  At the cap: OK, own result. One byte over: a definite error (UNAVAILABLE,
//	                  RESOURCE_EXHAUSTED, INTERNAL or DATA_LOSS with a reason) before the
//	                  deadline. At 4193cb6: both pass (over: RESOURCE_EXHAUSTED after three
//	                  drops, about 2 s).
//
// Floods:
//
//	flood             Park: accept, hold the result. Flood: that many job.event frames of
//	                  EventBytes, releasing parked results before, amid (ReleaseAt) or after
//	                  them, then the job's own result. Wants: the waiting RunJob gets its own
//	                  result in every variant; a watcher of the flooding job that reads
//	                  nothing is shed with RESOURCE_EXHAUSTED SLOW_CONSUMER or CAP_EXCEEDED
//	                  naming that job, or gets every event in order. At 4193cb6: with the
//	                  flooding job unwatched, the waiting RunJob fails with RESULT_EVICTED
//	                  within about 1 s; a watcher is shed without the job named.
//
// After every test the suite checks that the session opened on the
// well-behaved runtime (the reference runtime, in the test process) before
// any attack still runs jobs, that a new one opens, and that the gateway
// process is alive.
//
// # Running
//
//	go test -race ./gateway/arcptest/hostile              # the short suite (CI)
//	go test ./gateway/arcptest/hostile -hostile.long      # 10,000 rounds per schedule
//	go test ./gateway/arcptest/hostile -run TestReorderedAcceptsEchoed -hostile.seed N
//
// The random schedules print their seed; -hostile.seed replays one. The
// gateway binary is built once per run with go build (or taken from
// $SESSIONGATE_GATEWAY_BIN).
package hostile
