package upstream

import "sync/atomic"

// Counters count what upstream connections saw and did. One value is usually
// shared by every connection of a gateway (Config.Counters) and read at
// scrape time; each field is an independent atomic counter.
type Counters struct {
	// Answers.
	LateAnswers     atomic.Uint64 // answers and events matching no live caller or job (tombstoned or unknown)
	StaleGeneration atomic.Uint64 // frames dropped because they came from a transport already given up, or an accept proven to belong to an older generation
	OutcomeUnknown  atomic.Uint64 // submits failed with ErrOutcomeUnknown

	// Frames.
	MalformedFrames    atomic.Uint64 // undecodable envelopes, wrong session_id, undecodable payloads
	OversizeFrames     atomic.Uint64 // frames over the read limit (the transport is dropped and resumed)
	BinaryFrames       atomic.Uint64 // binary frames (ignored)
	UnknownTypes       atomic.Uint64 // envelopes of a type ARCP 1.1 does not define (ignored)
	ProtocolViolations atomic.Uint64 // known types the runtime must not send now (ignored), out-of-order accepts
	DuplicateEvents    atomic.Uint64 // sequenced envelopes with event_seq ≤ last_event_seq (dropped)
	SequenceGaps       atomic.Uint64 // event_seq jumps (the transport is dropped and resumed)
	ControlDrops       atomic.Uint64 // own control frames (pongs, orphan cancels) dropped at the queue cap

	// Transport.
	Reconnects     atomic.Uint64 // reconnect attempts
	Resumes        atomic.Uint64 // successful resumes
	ResumeFailures atomic.Uint64 // sessions lost because resume failed
	HeartbeatLost  atomic.Uint64 // transports dropped for missing heartbeats
	FIFOStalls     atomic.Uint64 // transports dropped because the runtime left a tombstoned submit unanswered past its TTL

	// Tombstones and orphans.
	TombstonesInserted atomic.Uint64
	TombstonesExpired  atomic.Uint64
	TombstoneOverflow  atomic.Uint64 // tombstones evicted at the per-connection cap
	OrphansCancelled   atomic.Uint64 // jobs nobody waits for, cancelled upstream

	// Consumers.
	SlowConsumers atomic.Uint64 // watchers failed with ErrSlowConsumer
	BackPressure  atomic.Uint64 // times acking was paused because the event buffer was filling up
}
