package arcpruntime

import (
	"errors"
	"fmt"
)

// Dialect is data: each field makes the runtime behave as one of the
// official ARCP SDK runtimes was observed to behave, so that a client can be
// tested against every dialect. The zero value is DialectReference, the
// behaviour this package documents. Every field names the SDK whose runtime
// shows the behaviour ("Go" is agentruntimecontrolprotocol/go-sdk, package
// server; "TS" is agentruntimecontrolprotocol/typescript-sdk, package
// runtime).
type Dialect struct {
	// CancelledSeq stamps job.cancelled with the session's next event_seq:
	// it enters the replay buffer like job.event (and is replayed on
	// resume), carries the job's trace_id, and keeps its place in the order
	// of answers. Otherwise job.cancelled is an unsequenced control frame.
	// Go.
	CancelledSeq bool

	// ReplayRetryTrace makes a repeated submit with the same idempotency
	// key and parameters get the original job.accepted with the retry's
	// trace_id instead of the original one. Both SDKs (and the reference)
	// replay the original trace_id, so no preset sets it; it exists to
	// test a client against the other choice.
	ReplayRetryTrace bool

	// RejectAs is how a refused job.submit is answered. See RejectStyle.
	RejectAs RejectStyle

	// VersionErrorNoRequestID sends AGENT_VERSION_NOT_AVAILABLE as a
	// session.error without request_id (retryable false), as the draft's
	// §13.8 example shows; the session stays alive. It takes precedence
	// over RejectAs. TS.
	VersionErrorNoRequestID bool

	// HeartbeatLostNotice makes the runtime, on heartbeat loss, send
	// session.error{code HEARTBEAT_LOST, retryable HeartbeatLostRetryable},
	// without request_id, and then close the WebSocket with a normal close
	// frame, instead of dropping it without a word. The session stays
	// resumable (§6.4). If the notice cannot be written within one more
	// heartbeat interval the transport is dropped. Go (retryable true), TS
	// (retryable false).
	HeartbeatLostNotice    bool
	HeartbeatLostRetryable bool

	// ReorderWindow, when 2 or more, puts sequenced envelopes on the wire
	// slightly out of event_seq order: the writer takes the unsent
	// envelopes available to it in blocks of up to ReorderWindow
	// consecutive seqs and sends each block in descending order. An
	// envelope is never sent while one ReorderWindow or more seqs below it
	// are unsent, and nothing is lost or repeated. With every envelope
	// already buffered (e.g. a replay) the order is exactly determined:
	// window 3 over seqs 1..7 gives 3,2,1,6,5,4,7. Go (its event_seq is
	// allocated before the envelope is queued, without a lock across both;
	// its client documents the reordering).
	ReorderWindow int

	// RefuseCaughtUpResume answers a resume whose last_event_seq equals
	// the session's latest event_seq (above 0), so that there is nothing to
	// replay, with RESUME_WINDOW_EXPIRED and a close. The session and its
	// resume token are kept: a resume from an earlier seq still works. TS
	// (a bug against §6.3).
	RefuseCaughtUpResume bool

	// LoseRunningJobsOnResume: jobs that are live when the session's
	// transport ends (dropped, heartbeat loss, replaced by a resume) never
	// put anything on the session again — no event, no terminal — and stop
	// at their next event. What they had buffered before is still
	// replayed. TS (a job keeps sending through the transport it was
	// submitted on).
	LoseRunningJobsOnResume bool

	// SubscriptionsEndWithTransport: a session's subscriptions to other
	// sessions' jobs (job.subscribe) end with the transport they were made
	// on; after a resume the session gets nothing more of those jobs,
	// which run on, until it subscribes again (and job.subscribe then
	// replays with history as usual). TS (a subscription is held by the
	// transport's connection context).
	SubscriptionsEndWithTransport bool

	// AckKeepsLog: acknowledgements (session.ack, a resume's
	// last_event_seq) free nothing; the event log keeps every envelope
	// within its caps, so job.subscribe's history replays a job from
	// from_event_seq even after its session acknowledged it. TS (an ack
	// only records the client's position).
	AckKeepsLog bool

	// ByeOnly: the runtime knows session.bye but not session.close or
	// session.closed, which it answers with session.error{INVALID_REQUEST,
	// details {type}} without request_id; the session stays alive. TS.
	ByeOnly bool

	// CloseOnly: the runtime knows session.close but not session.bye or
	// session.closed, which it answers with session.error{INVALID_REQUEST,
	// request_id}; the session stays alive. session.closed echoes the
	// client's reason. Go.
	CloseOnly bool

	// Trace is how trace ids are stamped. See TraceMode.
	Trace TraceMode

	// LateAcceptAcrossResume: submits the runtime had read but not yet
	// answered when the transport ended (including one waiting out
	// SetAcceptDelay) are kept by the session and answered on the next
	// transport of a resume, after the resume's replay, in their original
	// order and before that transport's own requests; they do not wait out
	// the accept delay again. A resume that replaces a still-attached
	// transport waits for it to end first. Go (answers are sent to
	// whichever transport is current for the session id).
	LateAcceptAcrossResume bool

	// ReuseLiveJobID gives a submit without idempotency key the id of the
	// session's most recently accepted job that is still live, if any: a
	// buggy runtime, for testing that a client detects it. No preset sets
	// it; see also Runtime.ReuseJobIDOnce.
	ReuseLiveJobID bool

	// IdempotencyScope is where idempotency keys live. See
	// IdempotencyScope.
	IdempotencyScope IdempotencyScope

	// Stream is what the chunked agent does when result_chunk was not
	// negotiated. See StreamFallback.
	Stream StreamFallback

	// ListScope is which jobs session.list_jobs lists. See ListScope.
	ListScope ListScope

	// ChunkFinalEmpty ends a streamed result with an extra empty chunk
	// carrying more:false (every data chunk has more:true), and the
	// job.result carries no summary. Otherwise the last data chunk carries
	// more:false. Go.
	ChunkFinalEmpty bool
}

// RejectStyle is how a refused job.submit is answered.
type RejectStyle int

const (
	// RejectSessionError answers session.error{code, message, retryable,
	// request_id: the submit's id}. Reference, Go.
	RejectSessionError RejectStyle = iota
	// RejectJobError answers as the TS runtime does. An unknown agent or
	// an invalid input is job.error{final_status "error", code, retryable
	// false} under a fresh job id, with the session's next event_seq, no
	// job.accepted and no request_id. DUPLICATE_KEY is such a job.error on
	// the id of the job that holds the key, with details {existing_job_id}.
	// A payload the schema refuses (undecodable, no agent, negative
	// max_runtime_sec) is session.error{INVALID_REQUEST} without
	// request_id, and the MaxConcurrentJobs cap is session.error
	// {INTERNAL_ERROR, retryable true} without request_id. job.cancel for
	// an unknown or finished job is also job.error{JOB_NOT_FOUND} on that
	// job id, with an event_seq. Every such job.error keeps its place in
	// the order of answers.
	RejectJobError
)

// TraceMode is how trace ids are stamped on a job's envelopes.
type TraceMode int

const (
	// TraceEcho copies the submit's trace_id into job.accepted's payload
	// and onto the job's sequenced envelopes; a submit without trace_id
	// gives none. Reference.
	TraceEcho TraceMode = iota
	// TraceEchoOrMint copies the submit's trace_id, or mints a trace id
	// (32 hex digits) when the submit has none, into job.accepted's
	// payload and envelope and onto the job's sequenced envelopes. Go, TS.
	TraceEchoOrMint
	// TraceNone never sends a trace id.
	TraceNone
)

// IdempotencyScope is where idempotency keys live.
type IdempotencyScope int

const (
	// ScopeSession: keys are private to the session. Reference.
	ScopeSession IdempotencyScope = iota
	// ScopePrincipal: keys are shared by every session of the principal;
	// a second session submitting the same key and parameters gets the
	// first session's job.accepted (and none of its events, which stay
	// with the submitting session). A key lives as long as its job is
	// retained by the submitting session. Go, TS.
	ScopePrincipal
)

// ListScope is which jobs session.list_jobs lists.
type ListScope int

const (
	// ListSession lists the session's own jobs. Reference.
	ListSession ListScope = iota
	// ListPrincipal lists the jobs of every session of the session's
	// principal, in acceptance order across sessions (§6.6 allows it): a
	// gateway whose callers share one upstream principal must filter the
	// list per caller. Go, TS.
	ListPrincipal
)

// StreamFallback is what the chunked agent does when result_chunk was not
// negotiated.
type StreamFallback int

const (
	// StreamInline returns the whole result inline in job.result.
	// Reference.
	StreamInline StreamFallback = iota
	// StreamRefuse fails the job: job.error{final_status "error", code
	// INVALID_REQUEST, retryable false}. TS (emitting a result_chunk event
	// without the feature throws in the agent).
	StreamRefuse
	// StreamAnyway streams result_chunk events although the feature was
	// not negotiated. Go (its result writer does not check the feature).
	StreamAnyway
)

// The presets.
var (
	// DialectReference is the behaviour this package documents.
	DialectReference = Dialect{}

	// DialectGoSDK behaves as the Go SDK's runtime (package server).
	DialectGoSDK = Dialect{
		CancelledSeq:           true,
		HeartbeatLostNotice:    true,
		HeartbeatLostRetryable: true,
		ReorderWindow:          2,
		CloseOnly:              true,
		Trace:                  TraceEchoOrMint,
		LateAcceptAcrossResume: true,
		IdempotencyScope:       ScopePrincipal,
		Stream:                 StreamAnyway,
		ChunkFinalEmpty:        true,
		ListScope:              ListPrincipal,
	}

	// DialectTSSDK behaves as the TypeScript SDK's runtime (package
	// @agentruntimecontrolprotocol/runtime).
	DialectTSSDK = Dialect{
		RejectAs:                      RejectJobError,
		VersionErrorNoRequestID:       true,
		HeartbeatLostNotice:           true,
		RefuseCaughtUpResume:          true,
		LoseRunningJobsOnResume:       true,
		SubscriptionsEndWithTransport: true,
		AckKeepsLog:                   true,
		ByeOnly:                       true,
		Trace:                         TraceEchoOrMint,
		IdempotencyScope:              ScopePrincipal,
		Stream:                        StreamRefuse,
		ListScope:                     ListPrincipal,
	}
)

// NamedDialect is an entry of Dialects.
type NamedDialect struct {
	Name    string
	Dialect Dialect
}

// Dialects lists the presets, for tests that run against every dialect.
var Dialects = []NamedDialect{
	{"reference", DialectReference},
	{"go-sdk", DialectGoSDK},
	{"ts-sdk", DialectTSSDK},
}

// maxReorderWindow bounds ReorderWindow.
const maxReorderWindow = 1024

// Validate reports whether d is a consistent dialect.
func (d Dialect) Validate() error {
	var errs []error
	if d.ReorderWindow < 0 || d.ReorderWindow > maxReorderWindow {
		errs = append(errs, fmt.Errorf("ReorderWindow %d is outside [0, %d]", d.ReorderWindow, maxReorderWindow))
	}
	if d.ByeOnly && d.CloseOnly {
		errs = append(errs, errors.New("ByeOnly and CloseOnly exclude each other"))
	}
	if d.RejectAs < RejectSessionError || d.RejectAs > RejectJobError {
		errs = append(errs, fmt.Errorf("unknown RejectAs %d", d.RejectAs))
	}
	if d.Trace < TraceEcho || d.Trace > TraceNone {
		errs = append(errs, fmt.Errorf("unknown Trace %d", d.Trace))
	}
	if d.IdempotencyScope < ScopeSession || d.IdempotencyScope > ScopePrincipal {
		errs = append(errs, fmt.Errorf("unknown IdempotencyScope %d", d.IdempotencyScope))
	}
	if d.ListScope < ListSession || d.ListScope > ListPrincipal {
		errs = append(errs, fmt.Errorf("unknown ListScope %d", d.ListScope))
	}
	if d.Stream < StreamInline || d.Stream > StreamAnyway {
		errs = append(errs, fmt.Errorf("unknown Stream %d", d.Stream))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("arcpruntime: invalid dialect: %w", err)
	}
	return nil
}
