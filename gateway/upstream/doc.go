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
// frames to send (wakeWriter starts it, it exits when the queues are empty,
// and there is never more than one), so an idle session costs two goroutines,
// not three. The supervisor waits for both before it starts the next
// transport or returns. Nothing else starts goroutines: heartbeats, acks,
// expiry and backoff are timers in the supervisor's select loop; callers wait
// on channels.
//
//   - The reader reads with the transport's lifetime context (a per-message
//     context would close the socket on expiry, a coder/websocket trap),
//     decodes, and dispatches each envelope under the connection mutex.
//   - The writer takes frames under the mutex, and decides to exit under it
//     too, so a frame queued after that starts a new writer and none is lost: first the connection's own (pongs, pings, orphan cancels,
//     session.close; bounded, overflow dropped and counted), then a due
//     ack, then caller frames from the outbox (bounded; callers wait for
//     space, bounded by their context).
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
// ARCP's job.submit has no request id: the runtime answers a session's
// submits in order, with job.accepted or a session.error naming the submit's
// envelope id. The writer appends a submit to the session's FIFO at the
// moment it takes the frame for the wire, under the mutex, so FIFO order is
// wire order. job.accepted goes to the FIFO's head; a session.error with
// request_id removes exactly that request (submit, list_jobs, subscribe,
// cancel) and moves nobody else; one without request_id ends the session
// (*LostError with its code).
//
// A submit whose caller gives up (its ctx ends) after it was sent keeps its
// FIFO slot as a tombstone. Its late job.accepted is matched to the
// tombstone, never to the next caller; the job is an orphan: job.cancel is
// sent, OrphansCancelled counted, and the job id tombstoned, so that its
// events and terminal are dropped as late answers. A submit abandoned before
// it was sent is simply removed from the outbox.
//
// Every submit carries a fresh random trace_id. When the runtime is seen to
// copy it onto job.accepted (the reference runtime does), accepts are also
// checked against it: an accept whose trace id belongs to no waiting submit
// (for example one answering an earlier transport's submit) is counted as
// StaleGeneration and its job cancelled as an orphan, instead of being
// matched by position. Runtimes that do not echo trace ids get the pure FIFO.
//
// The connection never guesses. A job.accepted or session.error that cannot
// be read (or any undecodable frame whose type might be one of them) while
// submits wait could have been the head's answer: the transport is dropped
// rather than risk shifting the FIFO.
//
// A tombstoned slot must not expire while its generation lives: removing it
// would shift every later accept onto the wrong caller. If a tombstoned
// submit is still at the head of the FIFO past its TTL, the runtime has
// broken the protocol (every submit gets exactly one answer, in order), so
// the transport is dropped (FIFOStalls); the resume starts a new generation
// with an empty FIFO.
//
// # Generations
//
// The generation is bumped by every successful (re)initialisation. The
// reader of a transport the connection has given up (a drop was decided) or
// of an older generation has its frames dropped and counted
// (StaleGeneration). When a transport ends, its generation's requests are
// settled: sent submits cannot be answered on another transport (resume
// replays only events), so they fail with ErrOutcomeUnknown (retry with an
// idempotency key); tombstoned slots are discarded; sent list_jobs,
// subscribe and cancel requests are harmless to repeat and are re-sent,
// with fresh ids, on the next transport; requests never sent stay queued.
// Jobs accepted for lost submits show up as events for an unknown job id
// after the resume: they are orphans and are cancelled. (A caller that
// retries such a submit with the same idempotency key is handed the original
// job by the runtime, which may by then have been cancelled as an orphan.)
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
// Any transport drop (read or write error, oversize frame, event_seq gap,
// HEARTBEAT_LOST, FIFO stall, unreadable answer) leads to a resume:
// session.hello with resume{session_id, the latest resume_token,
// last_event_seq}, after a backoff from BackoffInitial doubling to
// BackoffMax with ±20% jitter (reset after each success). Every welcome
// rotates the resume token. The resume is given up — the session is lost,
// every waiter gets a *LostError promptly and Done closes — when the runtime
// answers with a session.error (RESUME_WINDOW_EXPIRED, UNAUTHENTICATED, or
// any non-retryable code), when it resumes a different session, or when dial
// attempts keep failing until the resume window (from the latest welcome)
// has passed since the drop. (A resume handshake that times out after the
// runtime has already used the single-use token makes the next attempt fail
// with UNAUTHENTICATED; the protocol offers no way back, so the session is
// then lost.) A frame the runtime keeps replaying that we
// cannot take (oversize, or a gap that does not close) would loop forever:
// three such drops in a row without a new event end the session.
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
//  1. finished jobs' logs go, oldest finished first, oldest items first;
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
// (MaxFrameBytes: an oversize frame closes the socket in coder/websocket,
// so it is counted and resumed; a frame to send above it is a *CapError
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
