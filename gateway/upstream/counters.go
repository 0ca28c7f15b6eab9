package upstream

import "sync/atomic"

// Counters count what upstream connections saw and did. One value is usually
// shared by every connection of a gateway (Config.Counters) and read at
// scrape time; each field is an independent atomic counter.
type Counters struct {
	// Answers.
	LateAnswers        atomic.Uint64 // answers and events matching no live caller or job (tombstoned or unknown)
	StaleGeneration    atomic.Uint64 // frames dropped because they came from a transport already given up, or an accept proven to belong to an older generation
	OutcomeUnknown     atomic.Uint64 // submits failed with ErrOutcomeUnknown
	Resends            atomic.Uint64 // submits written again under their idempotency key after a resume
	JobIDReused        atomic.Uint64 // accepts naming another submit's job id (the submit fails with ErrOutcomeUnknown)
	DuplicateAnswers   atomic.Uint64 // second answers to one submit (an earlier write and its resend)
	BarrierTimeouts    atomic.Uint64 // reconciliation barriers the runtime left unanswered (the transport is dropped)
	ReconciledByList   atomic.Uint64 // submits lost with a transport and found by trace id in a list_jobs answer
	SerializedSubmits  atomic.Uint64 // times a submit was held back because it could not be pipelined (runtime not known to echo trace ids, or a shared trace id)
	UnreadableAnswers  atomic.Uint64 // unreadable answers while submits waited (each drops and reconciles the transport)
	UnreadableFailures atomic.Uint64 // submits failed because the runtime answered them with unreadable frames MaxUnreadable times
	EchoLost           atomic.Uint64 // accepts without a trace id from a runtime that had been echoing them
	Reattached         atomic.Uint64 // live jobs the runtime stopped streaming after a resume, re-attached with job.subscribe
	RejoinDropped      atomic.Uint64 // observed jobs' envelopes dropped as a re-attachment's replay of delivered ones (correlate.Rejoin)
	JobsLost           atomic.Uint64 // jobs ended with CodeJobLost: not streamed after a resume (or another session's) and not re-attachable
	ForeignReplays     atomic.Uint64 // idempotent replays of jobs another session created, attached here with job.subscribe
	AdoptListings      atomic.Uint64 // list_jobs listings made to adopt a taken-over session's jobs (one per generation at most)

	// Frames.
	MalformedFrames    atomic.Uint64 // undecodable envelopes, wrong session_id, undecodable payloads
	OversizeFrames     atomic.Uint64 // frames over the read limit (the transport is dropped and resumed)
	BinaryFrames       atomic.Uint64 // binary frames (ignored)
	UnknownTypes       atomic.Uint64 // envelopes of a type ARCP 1.1 does not define (ignored)
	ProtocolViolations atomic.Uint64 // known types the runtime must not send now (ignored), out-of-order accepts
	DuplicateEvents    atomic.Uint64 // sequenced envelopes with event_seq ≤ last_event_seq (dropped)
	SequenceGaps       atomic.Uint64 // event_seq holes that did not close within the reorder window (the transport is dropped and resumed)
	ReorderedEvents    atomic.Uint64 // sequenced envelopes that arrived ahead of a hole and were held until it closed
	ControlDrops       atomic.Uint64 // own control frames (pongs, orphan cancels) dropped at the queue cap

	// Transport.
	Reconnects      atomic.Uint64 // reconnect attempts
	Resumes         atomic.Uint64 // successful resumes
	ResumeFailures  atomic.Uint64 // sessions lost because resume failed
	HeartbeatLost   atomic.Uint64 // transports dropped for missing heartbeats
	CaughtUpRetries atomic.Uint64 // resumes refused with nothing to replay and retried from one event earlier
	FIFOStalls      atomic.Uint64 // transports dropped because the runtime left a tombstoned submit unanswered past its TTL

	// Tombstones and orphans.
	TombstonesInserted atomic.Uint64
	TombstonesExpired  atomic.Uint64
	TombstoneOverflow  atomic.Uint64 // tombstones evicted at the per-connection cap
	OrphansCancelled   atomic.Uint64 // jobs nobody waits for, cancelled upstream

	// Consumers.
	SlowConsumers atomic.Uint64 // watchers failed with ErrSlowConsumer
	AdoptRefined  atomic.Uint64 // adopted jobs whose history start the job listing moved below the resume point
	BudgetTrims   atomic.Uint64 // times the retained-bytes budget refused more and the logs were trimmed
	BackPressure  atomic.Uint64 // times acking was paused because the event buffer was filling up
}
