// Package correlate is the sans-IO core that decides, for one ARCP session,
// who every answer from the runtime belongs to. It has no sockets, no
// goroutines and no clock of its own: the upstream connection feeds it events
// (a submit was written, a caller gave up, an accept or a rejection arrived,
// the transport dropped or was resumed, a list_jobs answer came, time
// passed) and carries out the actions it returns (deliver a job to a caller,
// fail a caller with a definite error, cancel a job upstream, write a submit
// again, write a barrier, drop the transport, end the session).
//
// Because every decision is here, the rules are tested exhaustively by a
// property test that drives the core with random, replayable schedules
// against a simulated runtime in every dialect (see core_prop_test.go).
//
// # Why ARCP needs a core like this
//
// ARCP's job.submit has no request id on its success path: job.accepted
// carries none, so a client matches accepts to submits by position. A runtime
// handles a transport's requests one at a time in arrival order (the
// reference runtime and the Go SDK dispatch synchronously), so position is
// sound within one transport. Across a transport drop it is not: answers in
// flight are lost, and a runtime may answer on the next transport a submit it
// read just before the drop. Trace ids help when the runtime copies them onto
// job.accepted (both official SDKs do), but a replayed idempotent accept
// carries the ORIGINAL submit's trace id, and some runtimes set their own.
//
// # Trace ids: the caller's trace and the core's
//
// A submit's ARCP trace_id (§11) is the caller's W3C trace id when the
// caller sent a traceparent, else one the gateway mints for it (or the RPC's
// own trace when tracing is on). The core uses that same value to match
// accepts, and never assumes it is unique: a trace id identifies a submit
// only while no other waiting submit carries it and no submit that ended
// without its own accept did (traceN and deadTrace). This keeps the caller's
// trace in the runtime's telemetry (the alternative, a gateway-only trace
// id with the caller's trace in an extension, would cut every job out of its
// caller's trace in the runtime and in its tool servers) at a cost paid only
// by callers who fan one trace out over concurrent submits of one session:
// theirs are written one at a time.
//
// Pipelining. A submit is written while others wait only when the runtime is
// known to echo trace ids (Config.Echo, learned from the first accept and
// shared by the connections to one runtime) and its trace id identifies it
// alone (MayWriteSubmit). Otherwise it waits until no submit is in flight:
// for a runtime that echoes nothing, a reordered answer cannot be told from
// an in-order one, so one in flight is the only safe schedule (the Go SDK's
// own client does the same). Until the first accept shows what the runtime
// does, submits are written one at a time.
//
// # The rules
//
// Submits. Every submit the core sees carries an idempotency key (the
// connection assigns a random one when the caller gave none, and namespaces
// callers' keys by caller identity) and a trace id (see above). Written puts
// it at the tail of the current transport's FIFO.
//
// Accept, normal mode (input × dialect → action):
//
//   - trace id names a waiting submit (runtimes that echo): that submit gets
//     the job, wherever it stands; if it is not the head the runtime broke
//     order (counted). All dialects.
//   - job id already known: delivered to the head only when the head's key
//     is the key the job was created under (an idempotent replay, §7.2,
//     which carries the original trace id: Go and TS SDKs, reference);
//     otherwise the runtime reused a live job id (a buggy runtime): the head
//     fails with ErrJobIDReused and the job stays with its owner.
//   - trace id is that of a submit that ended without its own accept
//     (abandoned and buried, or failed by a positional rejection that may
//     have been another's or a stray): the answer to that submit; the job is
//     cancelled as an orphan, never handed to another. If the head carries
//     the same caller key it is an idempotent replay for the head.
//   - no trace id from a runtime that had been echoing them: it stopped
//     (counted); with one submit waiting the head gets it, with more the
//     transport is dropped and the submits reconciled, and from then on
//     submits are written one at a time.
//   - trace id names nothing, the runtime is known to echo, and the head's
//     key was assigned by the gateway (so no replay is possible): a stale
//     answer to a forgotten submit: the job is cancelled as an orphan and no
//     slot moves. With a caller's own key it may be a replay of a job this
//     connection never saw: the head gets it.
//   - replay of a job another session owns (Go, TS: idempotency keys are
//     the principal's, and the gateway's callers' keys are per caller, so
//     a caller's retry from its second session replays the first session's
//     job): a job id this connection does not know, a trace id that is not
//     the head's, the head's key the caller's own, and the runtime not known
//     to ignore trace ids. The head gets the job with Deliver{Foreign}: its
//     events go to the other session, so the connection attaches it
//     (job.subscribe, history from 0) or ends it with a definite error
//     (JOB_LOST) at once; the gateway's edge takes the outcome from the
//     session that owns the job when it has it. Never a wait to the
//     deadline. Broken on purpose: "no-foreign".
//   - otherwise: the FIFO head gets it (runtimes that do not echo; only one
//     submit is in flight, so position is sound).
//
// A head whose caller gave up keeps its slot as a tombstone: its accept
// consumes the slot and the job is cancelled as an orphan (unless the job is
// a live caller's, an idempotent replay).
//
// Rejections: session.error{request_id} removes exactly the named submit (Go
// SDK, reference). job.error under a job id never accepted, job.error
// DUPLICATE_KEY on an existing job's id (TS SDK), and a session.error without
// request_id whose code is a submit rejection (AGENT_NOT_AVAILABLE,
// AGENT_VERSION_NOT_AVAILABLE, DUPLICATE_KEY, INVALID_REQUEST,
// PERMISSION_DENIED, LEASE_SUBSET_VIOLATION, RESOURCE_EXHAUSTED: TS SDK and
// the draft's §13.8) answer the first submit without a pending rejection:
// in-order handling makes them its answer, once a barrier confirms it
// (below).
//
// Unreadable answers. A job.accepted or session.error that does not decode
// while submits wait leaves the FIFO's alignment unknown: every live submit
// on the transport takes a strike and the transport is dropped (reconciled
// on the next). A submit with MaxUnreadable (3) strikes fails with
// ErrUnreadableAnswers, a definite answer instead of a resume loop to the
// caller's deadline; its slot stays as a tombstone.
//
// Positional rejections are not trusted at once. A rejection that names no
// request may be the head's answer, a stray (a job.error for a job that
// never existed), or, from a runtime that reorders, another submit's. So the
// first submit without a pending rejection is marked, and a barrier is
// written after it: if its own accept comes before the barrier is answered
// (by trace id, or by position when it is the only one in flight), the
// rejection was not its answer (StrayRejections) and it gets its job; once
// the barrier is answered it fails with the rejection, and its trace id is
// remembered so that an accept of it that comes even later is an orphan. A
// transport dropped meanwhile takes the barrier with it: the submit is
// written again after the resume's barrier, under its key, and answered
// again. The price is a round trip more for each rejection.
//
// Session-level session.error (no request_id): HEARTBEAT_LOST (Go: retryable
// true, TS: false) drops the transport and resumes (§6.4: the session lives
// on for the resume window). UNAUTHENTICATED, RESUME_WINDOW_EXPIRED and any
// other non-retryable code end the session. A retryable INTERNAL_ERROR while
// a submit waits is the TS SDK's refusal at its caps: the head's answer.
// Any other retryable code resumes; if the runtime really ended the
// session, the resume says so.
//
// Drop and resume. When a transport drops, its unanswered submits (live or
// abandoned) move to limbo, in wire order. Nothing in limbo is failed: a
// caller that still waits keeps waiting. After the next welcome, if limbo is
// not empty, the core asks for a barrier: a request the runtime answers in
// order with submits (session.list_jobs when negotiated, else a job.cancel
// for a job id that cannot exist, answered by session.error{request_id}).
// No new submit is written until the barrier is answered (quarantine), so
// every accept or rejection that arrives before it answers a write of an
// older transport:
//
//   - an accept whose trace id names a limbo submit binds to it;
//   - any other accept is held as unclaimed (its events are held too);
//   - a rejection naming a limbo submit's request id fails it; a positional
//     rejection is ignored (it answered some older write; the submit it
//     answered is written again below and answered again).
//
// The barrier's list_jobs answer binds limbo submits by the trace ids it
// reports (§6.6). Then every live limbo submit is written again, first and in
// order, with a new envelope id and the same key and trace id: the runtime
// either replays the original job.accepted (the job existed, its accept was
// lost) or creates the job now (it never read the submit). Abandoned limbo
// submits are not written again: their trace ids are tombstoned, so a late
// accept carrying one is cancelled as an orphan, and the list_jobs answer
// finds the others. When the last resent submit is answered, unclaimed jobs
// nobody claimed are orphans and are cancelled. A barrier left unanswered
// past its timeout drops the transport (answers to older writes may still
// come, so new submits cannot be written); a new barrier follows the next
// resume, and three unanswered in a row end the session.
//
// Orphans and cancels. A job the core decides nobody owns is cancelled; so is
// a job whose caller asked for a cancel that could not be confirmed. Both
// stay owned by the connection until job.cancelled or the job's end confirms
// them, and are written again after every resume.
//
// Stalls. A FIFO head whose caller gave up and whose tombstone has expired
// drops the transport only when no live submit waits behind it: one
// impatient caller no longer bounds the patient ones. (The runtime broke
// "every submit gets exactly one answer, in order"; the resume's barrier
// and resends recover the patient callers anyway.)
//
// Sequencer. Sequencer orders sequenced envelopes (job.event, job.result,
// job.error and, in the Go SDK, job.cancelled) by event_seq with a bounded
// reorder window (the Go SDK puts concurrent jobs' seqs slightly out of order
// on the wire): a frame ahead of the next expected seq is held while at most
// Window frames and WindowBytes bytes are held and the oldest has waited less
// than MaxHold; past any bound the hole is a gap and the transport is
// resumed. A frame at or below the delivered seq is a duplicate.
//
// Re-attach after a resume (Reattach, its own sans-IO core). A runtime may
// stop streaming a live job when the transport it was submitted on ends (the
// TS SDK's job keeps writing to the dead transport and dies at its next
// event); the Go SDK and the reference go on. A runtime may also end this
// session's subscription to another session's job with the transport (the
// TS SDK: the subscription is held by the transport's context), while the
// job runs on and stays listed. Input × state → action:
//
//   - resume: every live job of the connection is unconfirmed, with the
//     seq of its last delivered envelope; a job attached by job.subscribe
//     is marked observed. Frames the resume replays confirm nothing
//     (broken on purpose: "reattach-replay-confirms").
//   - ProbeAfter (1 s) after the resume, and then at a period doubling to
//     ProbeMax (30 s), while jobs are unconfirmed: a probe, session.list_jobs
//     {status [pending, running]} (all pages, up to 20). Probes are
//     numbered; an answer to a probe given up (10 s) and sent again, or of
//     a dropped transport, is ignored (it may predate a re-attachment).
//   - observed, listed live with nothing of it delivered since the resume,
//     or listed live at two probes in a row with nothing of it delivered
//     between: the job runs but this session's subscription did not
//     survive: Resubscribe (below), before the job ends (the TS SDK forgets
//     an ended job). Broken on purpose:
//     "reattach-observed-trusts-listing" (its watcher waits until the job
//     ends).
//   - listed live: watched; its next frame confirms that the runtime goes
//     on streaming it, and it is no longer tracked. Never subscribed while
//     the runtime lists it live: a runtime that goes on streaming would
//     then send every later event twice (Go). Broken on purpose:
//     "reattach-no-list".
//   - missing from a whole listing (ended or dropped without its end
//     reaching this connection): Resubscribe, job.subscribe{history,
//     from_event_seq: the last delivered seq}; what the runtime still has
//     is replayed, re-stamped with new seqs, in order, after what was
//     delivered. Without subscribe: JobLost. Broken on purpose:
//     "reattach-no-subscribe".
//   - the re-attachment refused (JOB_NOT_FOUND: TS), or the job still
//     missing and without terminal at the next probe: JobLost, a terminal
//     job.error{JOB_LOST} naming the job. Broken on purpose: "reattach-none"
//     (no probe at all: the caller waits forever).
//   - the re-attachment of an observed job answered (job.subscribed): it is
//     settled; the runtime attached it to this transport.
//   - Watch (no resume here): an observed job whose submitting session in
//     the gateway ended it as JOB_LOST is tracked as after a resume, with a
//     probe ProbeAfter later (a runtime that loses a job stops sending it
//     to its subscribers too: the TS SDK).
//   - no list_jobs negotiated (nothing to probe): a frame that arrives
//     ProbeAfter or more after the resume confirms the job (the rules
//     assume a resume's replay arrives within ProbeAfter of the welcome);
//     any other frame restarts its silence clock. A job silent for Silence
//     (default the larger of 30 s and two heartbeat intervals, the
//     runtime's own liveness bound) since the resume is re-attached
//     (subscribe negotiated; the rules assume such a runtime answers a
//     subscription to a job it still streams to the session without a
//     second copy, as the reference does) or lost, and a re-attached job
//     silent for Silence again is lost. Broken on purpose:
//     "reattach-no-silence" (the caller waits to its deadline). The price:
//     a job that a runtime without list_jobs goes on streaming, but that
//     stays silent for Silence after a resume, ends as JOB_LOST.
//
// The bounds: a job the runtime stops streaming ends for its callers within
// ProbeAfter plus the probe periods until the runtime stops listing it
// (the TS SDK: at the job's next event) plus one subscribe round trip;
// without list_jobs, within Silence (twice with subscribe) after the
// resume. An observed job whose subscription the runtime ended is
// re-attached within ProbeAfter plus two probe periods.
//
// Re-attaching an observed job (Rejoin). The runtime renumbers an observed
// job's envelopes in this session's event_seq, so its re-attachment can
// only start from the caller's cursor F (the submitting session's
// numbering): job.subscribe{history, from_event_seq: F}. The runtime
// replays what its log holds of the job after F (the TS SDK keeps its log;
// the Go SDK trims it on acknowledgement; the TS SDK replays before
// job.subscribed, the Go SDK and the reference after), under new envelope
// ids (TS, reference) or the original ones (Go, whose surviving first
// subscription also goes on sending every envelope, so a second one sends
// each twice). Per envelope of the job, in order:
//
//   - an envelope id already delivered is a duplicate (Go). Broken on
//     purpose: "rejoin-no-ids";
//   - after a re-attachment, the first envelope's digest (type and payload)
//     is looked up among the delivered ones (the latest 4096); each
//     position it matches is a candidate start of the replay, and each next
//     envelope keeps the candidates it continues. While a candidate lives
//     the envelope is a replay of a delivered one and is dropped; once none
//     does it is new (a candidate that reached the last delivered envelope
//     means the replay caught up; none that did means it diverged:
//     counted, delivery goes on). A first envelope that matches nothing is
//     new (the replay starts at the seam, or there is none). Broken on
//     purpose: "rejoin-no-align";
//   - job.subscribed{replayed: false} (the reference, whose subscription
//     survived): nothing that follows is a replay.
//
// What it cannot see: a replay that starts after the last delivered
// envelope because the runtime trimmed the job's log past it (a gap: the
// Go SDK trims on ack, but its subscriptions survive a resume so it is not
// re-attached unless silent), and a payload repeated so that a replay's
// candidate and a new envelope look alike. A subscription made without
// history has no cursor to go back to: it ends with JobLost instead.
//
// # Spec gaps and how they are decided
//
//   - The draft does not say whether a session.error without request_id ends
//     the session. It is treated as ending the session only for
//     UNAUTHENTICATED and RESUME_WINDOW_EXPIRED; other codes resume, and the
//     runtime answers the resume with the truth.
//   - The draft does not say how a rejected submit is answered. Both shapes
//     seen in the SDKs are accepted; the gateway sends nothing but spec
//     messages.
//   - The draft does not promise in-order handling of requests. The core
//     relies on it only within one transport, as every known runtime
//     provides, and never across a drop.
package correlate
