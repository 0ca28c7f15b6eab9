// Package upstream is the gateway's ARCP 1.1 client: one Conn is one ARCP
// session over one WebSocket at a time, resumed across transport drops, with
// the correlation, tombstone and buffering rules that keep one caller's job
// from ever reaching another caller.
//
// # Lifecycle and states
//
// Dial validates the Config, dials, sends session.hello{client, bearer
// auth, capabilities{encodings:["json"], features}} and waits for
// session.welcome within InitTimeout. The negotiated features are the
// intersection of the requested and the offered ones; nothing outside it is
// ever sent. A session.error during the handshake is returned as
// *arcp.Error. The connection then moves through an explicit state machine
// (State, canTransition): connecting → handshaking → ready ⇄ reconnecting
// (→ handshaking → ready) and, at the end, closing → closed. Status reads
// the state and the rest of the snapshot with atomic loads only.
//
// # Goroutines and shutdown
//
// Dial starts one supervisor goroutine per Conn. For each transport the
// supervisor starts a reader; a writer runs only while the transport has
// frames to send (there is never more than one), so an idle session costs
// two goroutines, not three. The supervisor waits for both before it starts
// the next transport or returns. Nothing else starts goroutines: heartbeats,
// acks, expiry and backoff are timers in the supervisor's select loop;
// callers wait on channels. Housekeeping (expiry, the correlation core's
// clock) runs at a short period while there is anything for it to look
// after and every idleHousekeeping otherwise; taking on such state
// (busyLocked) wakes the supervisor back to the short period, so an idle
// session costs its supervisor a wake-up a minute for housekeeping, not one a
// second.
//
// The WebSocket is gateway/wsclient's: its reader borrows a buffer only
// while bytes are arriving, so a parked reader (an idle session) pins no
// buffer, and a batch of frames goes out in one write.
//
//   - The reader reads until the transport ends (the end of the transport's
//     context closes the socket), decodes, and dispatches each envelope
//     under the connection mutex; answers complete their callers from it
//     (a channel close per caller), with no other goroutine in between.
//   - The writer takes frames under the mutex, and decides to exit under it
//     too, so a frame queued after that starts a new writer and none is
//     lost: first the connection's own (pongs, pings, orphan cancels,
//     session.close; bounded, overflow dropped and counted), then a due
//     ack, then caller frames from the outbox (bounded; callers wait for
//     space, bounded by their context). Who runs it: a submit whose caller
//     finds no writer running claims the writer role under the mutex
//     (claimWriterLocked) and writes one batch from its own goroutine
//     (writeInline), so a lone call starts and wakes no goroutine; anything
//     else, and whatever is queued behind that batch, starts a writer
//     goroutine (wakeWriter).
//
// Why the inline writer keeps every property of the correlation core: the
// core never sees who writes. What it sees is takeBatch, which runs under
// the mutex whoever calls it, pops the outbox in order, and records each
// submit as written (Written) in the same critical section that puts its
// frame in the batch; batches are written whole and in the order they were
// taken because only the holder of the writer role (t.writing, claimed and
// released under the mutex) takes or writes one, and the role is handed to
// the writer goroutine only together with the batch already taken. So the
// wire order is exactly the order the core recorded, as before. The role
// is released under the mutex when takeBatch finds nothing to take, so a
// frame queued afterwards claims a new writer and none is lost. A teardown
// closes the socket before it waits for the writer (t.wg counts an inline
// writer too), so a blocked inline write cannot hold a transport open; and
// an inline write is bounded by its caller's deadline, never less than a
// second, because a write blocks only when the runtime has left the
// socket's whole send buffer unread, and a failure there drops the
// transport, after which the core reconciles the submit as it does every
// submit in flight at a drop.
//   - The supervisor ends a transport by cancelling its context and closing
//     the socket, waits for reader and writer, settles the generation's
//     requests (below) and resumes, or ends the session.
//
// Close(ctx) asks the supervisor for a graceful close: session.close is
// sent, session.closed or session.bye awaited (at most InitTimeout, and at
// most until ctx ends, when the socket is closed at once), the socket
// closed, every waiter failed with ErrClosed, and the supervisor awaited.
// Close is idempotent and safe to call concurrently. When the session ends
// by itself (lost, or ended by the runtime) the supervisor exits on its own;
// Done is closed and Err says why. No goroutine outlives the session.
//
// # Correlation
//
// Every decision about who an answer belongs to is made by the sans-IO core
// in internal/correlate (its package documentation has the rules, the
// dialect each one serves, and the spec gaps and how they were decided); the
// connection feeds it events and carries out its actions under the mutex.
// In short: ARCP's job.accepted carries no request id, so accepts are
// matched by the trace id the runtime echoes (the submit's envelope trace_id:
// the caller's W3C trace id, or a fresh one), wherever the submit stands, as
// long as that trace id names one submit; otherwise by position in the FIFO
// of written submits, and then only one submit is in flight: a runtime not
// known to echo (Config.Traits shares what the connections to one runtime
// learned), or a trace id several concurrent submits share. The idempotency
// key decides when the job id is already known (an idempotent replay, §7.2,
// carries the original trace id; a runtime that reuses another submit's live
// job id fails that submit with ErrOutcomeUnknown). Rejections come as
// session.error{request_id} (Go SDK, reference) or positionally: job.error
// under a job id never accepted, job.error DUPLICATE_KEY on the existing
// job, session.error without request_id (TS SDK, draft §13.8); a positional
// one fails its submit only once a barrier shows no accept of its own came
// first.
//
// Every submit carries an idempotency key: the caller's, namespaced by
// Config.KeyNamespace (the caller identity: every session of a gateway may
// share one upstream principal), or one of the connection's own. That makes
// a submit safe to write again, which is how submits in flight across a
// transport drop are recovered (below).
//
// A submit whose caller gives up after it was written keeps its FIFO slot as
// a tombstone: its late accept is never handed to anybody else, and the job
// is cancelled upstream as an orphan. An abandoned head past its TTL drops
// the transport only when no live caller waits behind it.
//
// The connection never guesses. A job.accepted or session.error that cannot
// be read while submits wait could have been the head's answer: the
// transport is dropped, and the submits are reconciled after the resume. A
// submit in flight through three such answers fails with a
// RuntimeFaultError (the runtime answers it with garbage) instead of
// resuming until its caller's deadline.
//
// # Generations and reconciliation
//
// The generation is bumped by every successful (re)initialisation; frames of
// a transport the connection has given up are dropped and counted
// (StaleGeneration). When a transport ends, its unanswered submits are not
// failed: they move to the core's limbo. After the resume the connection
// writes a barrier (session.list_jobs when negotiated, else a job.cancel for
// a job id that cannot exist) before any new submit; every answer before the
// barrier's belongs to an older write. The list answer binds lost submits by
// their trace ids (§6.6); the live rest are written again with the same key
// and trace id, so the runtime either replays the original accept or creates
// the job now. Events of jobs not yet claimed are held until reconciliation
// ends; what nobody claims is cancelled. Sent list_jobs, subscribe and
// cancel requests are harmless to repeat and are re-sent with fresh ids.
// Cancels a caller could not wait for are the connection's until job.cancelled
// or the job's end confirms them, and are re-sent after every resume.
//
// # Jobs a runtime stops streaming, and other sessions' jobs
//
// After every resume the connection checks that the runtime goes on
// streaming each live job (correlate.Reattach; reattach.go): it asks
// session.list_jobs for the live jobs a second after the resume and then at
// a doubling period; a job listed live is confirmed by its next frame; a job
// the runtime no longer lists is re-attached with job.subscribe{history,
// from_event_seq: its last delivered seq}, and one that cannot be
// re-attached ends with a terminal job.error{CodeJobLost} naming it. A job
// this session observes (SubscribeJob) is re-attached too when the runtime
// ended the subscription with the transport (the TS SDK does) — listed live
// twice with nothing of it arriving — from the caller's history cursor,
// and what that replays again is dropped (correlate.Rejoin), so a watcher
// sees every event once and in order; a live-only subscription cannot go
// back and ends with CodeJobLost. Without session.list_jobs, a live job
// silent for Config.ReattachSilence after a resume is re-attached or, without
// job.subscribe, ends with CodeJobLost: a bound instead of the caller's
// deadline. A job a session observes is checked the same way when the
// session that submitted it ends it as JOB_LOST (Config.OnJobLost, Recheck).
// An idempotent replay of a job another session created (the runtime shares
// keys per principal) is attached the same way, from seq 0, as soon as it
// is handed over (OwnedElsewhere). Probes and re-attachments are the
// connection's own control frames: they are not re-sent after a drop
// (Reattach asks again), except an unanswered attachment of another
// session's job. Knows remembers the callers' jobs (the newest 10,000) so
// that the gateway can filter a principal-wide list per caller.
//
// # Tombstones
//
// Tombstones live in a gateway/tombstone Store per connection, keyed by
// request id (abandoned requests) or job id (orphans), for
// max(RequestTimeout, the call's budget) + InitTimeout + BackoffMax + 5 s:
// 75 s by default, longer for calls that were allowed to wait longer.
// Expiry runs in the supervisor's housekeeping tick and costs O(expired). At
// MaxTombstones the soonest-expiring tombstone is evicted and counted
// (TombstoneOverflow). That is safe: FIFO alignment is held by the FIFO
// slots themselves, not by the store, and deliveries only ever go to live
// requests and known jobs. An evicted job tombstone means at worst that a
// later event of that orphan is treated as an unknown job again (another
// job.cancel, idempotent); an evicted request tombstone means a late
// list_jobs answer is counted as an unmatched late answer.
//
// # Reconnect and resume
//
// Any transport drop (read or write error, oversize frame, an event_seq hole
// that does not close within the reorder window, heartbeat loss or a
// HEARTBEAT_LOST notice, a FIFO stall, an unreadable answer, an unanswered
// barrier) leads to a resume: session.hello with resume{session_id, the
// latest resume_token, last_event_seq}, after a backoff from BackoffInitial
// doubling to BackoffMax with ±20% jitter. Every welcome rotates the resume
// token (Config.OnWelcome sees each). The newest event is never acked, so a
// runtime that refuses a resume with nothing to replay (the TS SDK, against
// §6.3) is asked again from one event earlier. The resume is given up — the
// session is lost, every waiter gets a *LostError promptly and Done closes —
// when the runtime answers with RESUME_WINDOW_EXPIRED, UNAUTHENTICATED or
// any non-retryable error, when it resumes a different session, or when dial
// attempts keep failing until the resume window has passed since the drop.
// A frame the runtime keeps replaying that cannot be taken would loop
// forever: three such drops in a row without a new event end the session.
//
// Config.Resume makes Dial take over an existing session (another gateway
// replica's); Detach lets a session go without session.close, for the
// replica that takes it next. Close during a reconnect makes one bounded
// resume to send session.close (falling back to session.bye, with the
// caller's reason, for runtimes that know only bye).
//
// Sequenced envelopes (job.event, job.result, job.error and, from the Go
// SDK, job.cancelled) pass a reorder window (64 frames, 4 MiB, 1 s) before
// delivery: the Go SDK puts concurrent jobs' seqs slightly out of order.
//
// # Heartbeat and ack
//
// Every session.ping is answered with session.pong. With heartbeat
// negotiated (interval from the welcome's millisecond extension, else
// heartbeat_interval_sec), a session.ping is sent after one interval without
// sending, and two intervals without receiving anything drop the transport
// (HEARTBEAT_LOST, counted). With ack negotiated, session.ack carries the
// last event_seq handled (appended to a job log, or dropped), at once after
// 32 events, otherwise within 250 ms, so the last one goes out when traffic
// stops.
//
// # Jobs, events and the slow-consumer policy
//
// Each job has one append-only log shared by all its watchers; a Watcher is a
// cursor into it, woken through a channel that is closed and replaced on
// every append (no goroutine per watcher). Events are taken strictly in
// event_seq order: an old or repeated seq is dropped (DuplicateEvents), a
// jump drops the transport so that the resume replays the hole. Wait and
// every watcher get the terminal exactly once.
//
// The logs of a session share MaxBufferedEvents and MaxBufferedBytes. When an
// append would exceed them, in this order:
//
//  1. finished jobs' logs go, oldest finished first, oldest items first,
//     except the terminal of a job whose caller waits for it
//     (SubmitOptions.AwaitResult: RunJob): a result a caller is waiting
//     for is never evicted by another job's events;
//  2. live jobs' items that every watcher has read go (already from 3/4 of a
//     cap on, so that retained history does not count as pressure);
//  3. still over: the oldest retained item of a live job goes. Watchers that
//     had not read it are the slowest consumers of the session and fail with
//     ErrSlowConsumer (counted); a job nobody watches loses its oldest
//     history an item at a time. A later Watch from before the dropped items
//     gets ErrSlowConsumer. Nothing is lost silently.
//
// Before that, back-pressure: while watchers of live jobs leave more than
// 3/4 of a cap unread, acks stop (BackPressure counted), so the runtime keeps
// the events in its replay buffer; they resume below half. If back-pressure
// lasts 5 s the slowest watcher fails with ErrSlowConsumer. Jobs nobody
// watches never cause back-pressure. Finished jobs are forgotten
// JobRetention after their terminal (then Wait and Watch say ErrUnknownJob).
//
// # Caps
//
// Definite errors, never silent loss: live jobs plus unanswered submits per
// session (*CapError "live_jobs", before anything is sent), the read limit
// (MaxFrameBytes: an oversize frame closes the socket (close 1009), so it
// is counted and resumed; a frame to send above it is a *CapError
// "frame_bytes"), the event buffer (above), tombstones (above).
//
// # Concurrency contract
//
// Exported methods of Conn and Watcher are safe for concurrent use (a
// Watcher's Next by one goroutine at a time). Conn fields are grouped as
// immutable after Dial, atomics (Status), and guarded by Conn.mu; helpers
// that need the mutex are named …Locked. The mutex is never held across a
// socket read or write or a wait on a caller's context. Malformed, binary,
// oversize and unknown-type frames are counted, never trusted and never
// panic.
package upstream
