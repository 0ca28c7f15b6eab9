// Package arcpruntime is the ARCP 1.1 reference runtime: a small but faithful
// runtime over WebSocket. It is what the gateway's upstream client is tested
// against — with hooks that inject faults — and the gateway's embedded
// default runtime when it runs without flags.
//
// # Using it
//
// A Runtime is an http.Handler that upgrades every request, at any path, to
// one ARCP transport. Listen (loopback only) and NewTestServer wrap it in an
// HTTP server whose URL is "ws://127.0.0.1:PORT/arcp". The wire types come
// from package arcp.
//
// # Protocol
//
//   - Handshake. The first envelope must be session.hello within
//     Options.HandshakeTimeout (10 s), else the connection is closed. A bad
//     envelope, a first message that is not hello, or a failed bearer check
//     (Options.Tokens) is answered with a fatal session.error
//     (INVALID_REQUEST, UNAUTHENTICATED; retryable false) and a close. The
//     welcome carries a new session id ("rs_" + 128 random bits in hex) on the
//     envelope, a fresh single-use resume_token, resume_window_sec, the
//     features (hello's requested ∩ offered, in hello's order) and the agents
//     as {name, versions, default} objects.
//   - Heartbeat interval on the wire. heartbeat_interval_sec is an integer,
//     so the welcome sends ceil(seconds), at least 1, and also the exact
//     interval in milliseconds as the extension
//     "x-vendor.sessiongate.heartbeat_interval_ms"
//     (HeartbeatIntervalMSExtension), an integer. Clients should prefer the
//     extension; tests use sub-second intervals.
//     Both are only sent when heartbeat is negotiated. Then the runtime sends
//     session.ping{nonce, sent_at} after one interval without sending
//     anything, and drops the transport (the session stays resumable) when
//     nothing was heard from the client for two intervals. session.ping is
//     always answered with session.pong{ping_nonce, received_at}.
//   - Sequencing. One event_seq counter per session across all jobs, from 1,
//     gap-free, stamped on job.event, job.result and job.error. Every
//     sequenced envelope goes into the session's replay buffer first; the
//     transport's writer sends from the buffer after its cursor. The buffer
//     keeps at most MaxBufferedEvents / MaxBufferedBytes (the newest entry is
//     always kept) and frees what session.ack{last_processed_seq} confirms
//     (clamped to what was sent). Beyond a cap the oldest entries are
//     dropped; jobs never block. If a live transport has not yet been sent a
//     dropped entry, it is dropped at once as a slow consumer, and a later
//     resume fails with RESUME_WINDOW_EXPIRED. A transport whose control
//     queue (Options.WriteQueue) overflows is dropped the same way. When
//     ack is negotiated and the un-acked lag passes BackPressureThreshold,
//     one job.event{kind:"status", body{phase:"back_pressure", unacked,
//     threshold}} of the job that crossed it is emitted (before that job's
//     envelope), once per crossing.
//   - Resume. hello.resume{session_id, resume_token, last_event_seq}: an
//     unknown or expired session, or a buffer that no longer reaches back to
//     last_event_seq+1, is RESUME_WINDOW_EXPIRED (and the session is
//     discarded); a wrong or already used token, or another principal, is
//     UNAUTHENTICATED; last_event_seq beyond the session is INVALID_REQUEST.
//     Success: a still attached transport is dropped, last_event_seq counts
//     as an ack, and the welcome (same session_id, new token) is followed by
//     every buffered envelope after last_event_seq, then live traffic. A
//     session without a transport for ResumeWindow is discarded and its jobs
//     stopped. session.close (answered with session.closed), session.bye and
//     session.closed end the session for good: jobs stopped, no resume.
//   - Jobs. Requests of a transport are handled one at a time in arrival
//     order, so every job.submit gets exactly one answer, in order:
//     job.accepted{job_id, agent "name@1.0.0", accepted_at} with the
//     envelope job_id set, or session.error{code, message, retryable,
//     request_id: the submit's id}: AGENT_NOT_AVAILABLE,
//     AGENT_VERSION_NOT_AVAILABLE, INVALID_REQUEST (bad payload or input),
//     RESOURCE_EXHAUSTED (MaxConcurrentJobs live jobs; retryable true),
//     DUPLICATE_KEY (idempotency_key reused with another agent or input; the
//     same agent and input get the original job.accepted again, original
//     trace_id included; inputs are
//     compared by a digest of their canonical JSON, so key order and spacing
//     do not matter). Idempotency keys are scoped to the session; a session
//     remembers its last 10000 finished jobs (for keys and list_jobs) but
//     not their inputs. job.accepted is queued before the job starts, and
//     the writer sends queued control frames before sequenced ones (but see
//     Dialects), so it precedes every event of the job. A trace_id on the
//     submit is copied into job.accepted's payload and onto the job's
//     sequenced envelopes. Every job ends with
//     exactly one job.result or job.error; max_runtime_sec gives
//     job.error{TIMEOUT, timed_out}.
//   - Cancel. job.cancel for a live job of the session is answered with
//     job.cancelled{job_id, reason}; the agent's context is cancelled and the
//     job ends with job.error{CANCELLED, final_status cancelled} as soon as
//     the agent stops, at most CancelGrace later. A job that already ended,
//     or is unknown to the session, gets session.error{JOB_NOT_FOUND,
//     request_id, job_id}.
//   - Leases (§7.1, §9). lease_request is granted whole or refused:
//     namespaces outside Options.LeaseLimits.Namespaces, a cost.budget
//     currency not in LeaseLimits.MaxBudget or above its cap, and an
//     expires_at more than LeaseLimits.MaxLeaseDuration ahead are
//     PERMISSION_DENIED; a malformed lease, a past or non-UTC expires_at,
//     or cost.budget / model.use / lease_constraints without their feature
//     negotiated (cost.budget, model.use, lease_expires_at) are
//     INVALID_REQUEST. job.accepted carries lease (the request, or {}),
//     lease_constraints when given, and budget (initial counters per
//     currency) when the lease has cost.budget. A job still running at
//     expires_at ends with job.error{LEASE_EXPIRED, final_status error,
//     retryable false}. No demo agent reports cost or calls a model, so
//     budgets never decrease and model.use is never exercised.
//   - Extensions. The x-vendor.* envelope extensions of a job.submit are
//     echoed on its job.accepted and on every sequenced envelope of the
//     job (in subscribers' sessions too); other extensions are dropped.
//   - session.list_jobs (list_jobs negotiated, else INVALID_REQUEST) answers
//     session.jobs{request_id, jobs[{job_id, agent, status, accepted_at,
//     created_at, trace_id, lease, lease_constraints?, budget?,
//     last_event_seq}], next_cursor} for the session's jobs (with
//     Dialect.ListScope ListPrincipal: every session's of its principal) in
//     acceptance order, leaving out lost jobs that ended (last_event_seq in the session's own numbering; no job has a
//     parent: there is no delegation); limit (default 100, max 1000), an
//     opaque numeric cursor, and filter {status: string|[]string, agent,
//     created_after (RFC 3339)}. Status is pending, running, success, error,
//     cancelled or timed_out.
//   - job.subscribe{job_id, from_event_seq, history} (subscribe negotiated)
//     attaches this session to a job of another session of the same
//     principal: job.subscribed{job_id, current_status, agent, lease,
//     lease_constraints?, budget?, trace_id, subscribed_from (this
//     session's last event_seq), replayed} (never credentials), then
//     (history) the job's envelopes still in the source session's buffer
//     with source event_seq > from_event_seq (§7.6), then its live
//     envelopes, all re-stamped with this session's event_seq.
//     job.unsubscribe stops it (no answer). Subscribing to one's own job
//     answers job.subscribed and changes nothing (but see
//     LoseRunningJobsOnResume). An unknown job gets session.error
//     {JOB_NOT_FOUND, request_id}, or with RejectJobError job.error
//     {JOB_NOT_FOUND} on that job id.
//   - Bad input never panics: undecodable envelopes, a wrong session_id and
//     unknown or runtime-only message types get session.error
//     {INVALID_REQUEST, request_id} and are counted. An invalid envelope
//     whose id cannot be read gets a session.error without request_id,
//     which the protocol makes session-fatal: the session ends and the
//     transport is closed. Binary frames are counted and ignored.
//
// # Demo agents (all version 1.0.0)
//
//   - echo: the result is the input (any JSON value; none means null).
//   - sleep {"ms": 0..3600000}: kind "progress" events (kind "status" with
//     phase "sleeping" when progress is not negotiated) with body
//     {current, total, units "ms" (§8.2.1), and the same as elapsed_ms,
//     total_ms} at the start, about every 100 ms and at the end;
//     result {"slept_ms": N}.
//   - stream {"count": 0..100000, "interval_ms": 0..60000}: count "log"
//     events {i, message}, interval_ms apart; result {"count": N}. A fast
//     stream paces itself to an attached, reading client (it waits while
//     more than half of MaxBufferedEvents or MaxBufferedBytes are unsent to
//     it), so it does not outrun a healthy client into a slow-consumer drop;
//     with no transport attached, while stalled, or when the client made no
//     progress for 2 s, it does not wait. Subscribers are not paced for.
//   - fail {"code", "message", "retryable"?, "details"?}: job.error with
//     arcp.NormalizeCode(code), final_status "error".
//   - chunked {"size": 0..32 MiB, "chunk_bytes": 1..1 MiB (default 64 KiB),
//     "encoding": "utf8"|"base64" (default utf8)}: a result of size bytes,
//     byte i being ChunkedByte(i) ('a'+i%26). With result_chunk negotiated
//     (§8.4; offered by default) it streams job.event{kind "result_chunk",
//     body{result_id "res_…", chunk_seq from 0, data (each chunk encoded on
//     its own), encoding, more}} of at most chunk_bytes bytes each, the last
//     with more false (size 0: one empty chunk), paced like stream, then
//     job.result{final_status "success", result_id, result_size, summary
//     "N bytes in M chunks"}. Without it the result is inline: one JSON
//     string, the bytes in that encoding. Dialect.Stream and
//     Dialect.ChunkFinalEmpty change both.
//   - nest {"depth": 0..5000, "as": "array"|"object" (default array)}: the
//     result is 1 inside depth arrays ([[1]]) or objects ({"a":{"a":1}}) —
//     a result nested deeper than a gateway's or client's bound, from a
//     shallow input.
//
// # Dialects
//
// Options.Dialect makes the runtime behave as the runtimes built on the
// official ARCP SDKs (agentruntimecontrolprotocol/go-sdk, package server,
// and agentruntimecontrolprotocol/typescript-sdk, package runtime) were
// observed to behave, so that every client test can run against every
// dialect: range over Dialects. The zero Dialect (DialectReference) is what
// the rest of this documentation describes. Each row is one field of
// Dialect; DialectGoSDK and DialectTSSDK set the fields of their column.
//
//	behaviour                                          field                    Go      TS
//	job.cancelled carries the next event_seq           CancelledSeq             yes     -
//	idempotent replay carries the retry's trace_id     ReplayRetryTrace         -       -
//	submit refused by job.error under a fresh id,      RejectAs                 -       RejectJobError
//	  DUPLICATE_KEY by job.error on the existing job
//	AGENT_VERSION_NOT_AVAILABLE without request_id     VersionErrorNoRequestID  -       yes
//	session.error HEARTBEAT_LOST, then a normal close  HeartbeatLostNotice      yes     yes
//	  ... with retryable true                          HeartbeatLostRetryable   yes     -
//	event_seq reordered within a window                ReorderWindow            2       -
//	caught-up resume refused RESUME_WINDOW_EXPIRED     RefuseCaughtUpResume     -       yes
//	jobs live at a drop never emit again; one that     LoseRunningJobsOnResume  -       yes
//	  ends is no longer listed or subscribable
//	  (JOB_NOT_FOUND); a history subscribe to one's
//	  own lost job replays its buffered envelopes
//	a subscription to another session's job ends with  SubscriptionsEndWith-    -       yes
//	  the subscriber's transport (the job runs on)       Transport
//	acks free nothing: a history subscribe replays     AckKeepsLog              -       yes
//	  from from_event_seq after the owner acked
//	session.close unknown (INVALID_REQUEST)            ByeOnly                  -       yes
//	session.bye unknown (INVALID_REQUEST)              CloseOnly                yes     -
//	trace ids echoed, minted or never sent             Trace                    mint    mint
//	unanswered submits answered after a resume         LateAcceptAcrossResume   yes     -
//	keyless submit gets a live job's id                ReuseLiveJobID           -       -
//	idempotency keys shared by a principal's sessions  IdempotencyScope         yes     yes
//	chunked result without result_chunk negotiated     Stream                   stream  refuse
//	streamed result ends with an empty chunk           ChunkFinalEmpty          yes     -
//	list_jobs lists every session of the principal     ListScope                yes     yes
//
// The reference keeps one rule the dialects bend: requests are answered in
// arrival order. A sequenced answer (RejectJobError, CancelledSeq) is
// buffered like an event, and a marker in the control queue makes the
// writer send it after the answers queued before it and before those queued
// after it. ReorderWindow only permutes the sequenced envelopes the writer
// takes, in descending blocks; the transport's cursor (what acks are
// clamped to, what pacing and eviction measure) stays the highest seq up to
// which everything was taken.
//
// # Goroutines and shutdown
//
// Per WebSocket, the ServeHTTP goroutine (owned by the HTTP server) runs the
// read loop; it starts the connection's only writer goroutine and, after
// the handshake, a dispatcher goroutine, and returns only after both have
// returned. The writer is fed by a bounded queue of control frames
// (Options.WriteQueue; overflow drops the transport) and by the session's
// replay buffer; it also sends pings. A heartbeat watchdog (a self
// re-arming time.AfterFunc, awaited by ServeHTTP) drops a client silent for
// two intervals even while the writer is blocked on it. The read loop
// answers pings and applies acks itself and hands everything else to the
// dispatcher through a bounded channel (a full channel stops reading).
// Reads and writes use the connection's lifetime context, never a
// per-message timeout: cancelling it is how a transport is dropped
// (coder/websocket then closes the socket without a close frame). The read
// limit is set to MaxFrameBytes. Graceful closes (fatal errors,
// session.closed) are written by the writer, which then closes with a close
// frame.
//
// Per job, one goroutine supervises one agent goroutine and waits for it.
// Session expiry uses time.AfterFunc; timeouts are timers and contexts.
// ServeHTTP calls, job goroutines and armed expiry timers are counted in the
// Runtime's WaitGroup, which only grows while the runtime is open; they in
// turn wait for what they started (writer, dispatcher, watchdog, agent).
// The Server's Serve goroutine is awaited by Server.Close.
//
// Close (idempotent) marks the runtime closed (ServeHTTP then answers 503),
// cancels the runtime context (the parent of every transport and job
// context), discards every session, drops every transport and waits for all
// of the above. Server.Close closes the listener and the HTTP server, then
// the Runtime, then waits for its Serve goroutine.
//
// # Concurrency
//
// One mutex (Runtime.mu) guards all session, job, buffer and queue state;
// fields are documented as immutable or guarded, helpers that need the lock
// are named …Locked. The writer holds a per-transport mutex across "check
// the stall, take a frame, write it", which lets Stall(true) wait for a write
// in progress (so Stall(true) can block while a write to a client that
// stopped reading is stuck, until that transport is dropped); the lock order
// is that mutex, then Runtime.mu. Every exported method is safe for
// concurrent use.
//
// # Test hooks
//
// DropTransports, Stall, SetAcceptDelay, SetHandshakeSilence, InjectFrame,
// ReuseJobIDOnce, Reset, Stats, Cancelled and JobInput inject faults and
// observe the runtime; see each method. Reset keeps the knobs (stall, accept delay,
// handshake silence) and the Stats counters. Requests a transport had read
// but not yet handled when it was dropped are abandoned unanswered (as a
// crash would), including submits waiting out an accept delay — unless
// Dialect.LateAcceptAcrossResume keeps the submits for the next transport.
package arcpruntime
