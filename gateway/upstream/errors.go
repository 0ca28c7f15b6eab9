package upstream

import (
	"errors"
	"fmt"
)

var (
	// ErrClosed: the session was closed (by Close, or by the runtime's
	// session.bye / session.closed), or a Watcher was closed.
	ErrClosed = errors.New("upstream: session closed")
	// ErrFeatureNotNegotiated: the call needs a feature the handshake did
	// not negotiate.
	ErrFeatureNotNegotiated = errors.New("upstream: feature not negotiated")
	// ErrUnknownJob: this connection does not know the job, or no longer
	// retains it.
	ErrUnknownJob = errors.New("upstream: unknown job")
	// ErrSlowConsumer: the session's event buffer was full and this watcher
	// (or the history a Watch asked for) was the slowest; the events it had
	// not read are gone. Watch again from a later event_seq.
	ErrSlowConsumer = errors.New("upstream: slow consumer: events no longer retained")
	// ErrResultEvicted: the job ended but its result was not collected
	// before the session's buffer caps or the caller's retained-bytes
	// budget needed the room.
	ErrResultEvicted = errors.New("upstream: result evicted: not collected before the retained-bytes budget or the buffer caps needed the room")
	// ErrDetached: the connection let go of the session without closing it
	// (Detach): another gateway instance owns it now.
	ErrDetached = errors.New("upstream: session detached: another instance owns it")
	// ErrOutcomeUnknown: the transport dropped after a job.submit was sent
	// and before the runtime answered. Resume replays only events, so the
	// answer is lost: the job may or may not exist. Retry with the same
	// idempotency key.
	ErrOutcomeUnknown = errors.New("upstream: outcome unknown: the transport dropped before the runtime answered")
	// ErrResumeMismatch: the runtime answered a resume (or a takeover)
	// with a welcome for another session. The session is lost (in a
	// LostError).
	ErrResumeMismatch = errors.New("upstream: the runtime answered the resume with another session")
)

// LostError says the session is gone for good: resume failed, or the runtime
// sent a session-fatal error. Every waiter of the connection gets it.
type LostError struct {
	Code string // ARCP code, e.g. RESUME_WINDOW_EXPIRED, UNAUTHENTICATED
	Err  error  // the cause
}

func (e *LostError) Error() string {
	if e.Err == nil {
		return "upstream: session lost: " + e.Code
	}
	return fmt.Sprintf("upstream: session lost: %s: %v", e.Code, e.Err)
}

func (e *LostError) Unwrap() error { return e.Err }

// UnreachableError: the runtime could not be dialed, or did not complete
// the handshake within InitTimeout (Stage says where it stopped).
type UnreachableError struct {
	Stage string
	Err   error
}

func (e *UnreachableError) Error() string {
	return "upstream: runtime unreachable (handshake " + e.Stage + "): " + e.Err.Error()
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ProtocolError: the runtime broke ARCP where the client cannot go on
// (Stage "handshake": it answered the hello with something other than
// session.welcome or session.error). Detail says what came.
type ProtocolError struct {
	Stage  string
	Detail string
}

func (e *ProtocolError) Error() string {
	return "upstream: runtime protocol error (" + e.Stage + "): " + e.Detail
}

// RuntimeFaultError: the runtime broke the protocol in a way that leaves this
// call without an answer (Fault names how: "unreadable_answers" when it
// answered the submit with unreadable frames Config's bound of times). The
// job may exist upstream; its late accept is cancelled as an orphan.
type RuntimeFaultError struct {
	Fault string
	Err   error
}

func (e *RuntimeFaultError) Error() string {
	return "upstream: runtime fault (" + e.Fault + "): " + e.Err.Error()
}

func (e *RuntimeFaultError) Unwrap() error { return e.Err }

// CapError says a cap was reached. Cap is one of "live_jobs",
// "buffered_events", "buffered_bytes", "frame_bytes", "tombstones".
type CapError struct {
	Cap   string
	Limit int64
}

func (e *CapError) Error() string {
	return fmt.Sprintf("upstream: cap %s=%d reached", e.Cap, e.Limit)
}

// Internal causes of transport drops (never returned to callers).
var (
	errHandshakeTimeout = errors.New("upstream: handshake timed out")
	errCloseRequested   = errors.New("upstream: close requested")
	errHeartbeatLost    = errors.New("upstream: heartbeat lost: nothing received for two intervals")
	errSeqGap           = errors.New("upstream: event_seq gap")
	errOversize         = errors.New("upstream: frame over the read limit")
	errSessionEnded     = errors.New("upstream: session ended by the runtime")
	errDetach           = errors.New("upstream: detach requested")
	errReconcile        = errors.New("upstream: reconciliation needs a new transport")
)

// JobEndedError: Cancel of a job whose terminal had already arrived; nothing
// was sent.
type JobEndedError struct {
	JobID       string
	FinalStatus string // success, error, cancelled, timed_out
	Seq         uint64 // the terminal's event_seq
}

func (e *JobEndedError) Error() string {
	return fmt.Sprintf("upstream: job %s already ended (%s)", e.JobID, e.FinalStatus)
}

// NotRetainedError: Watch from an event_seq older than what this
// connection holds of the job (items after it were dropped by the buffer
// caps, or, of a job adopted after a takeover, acked before it). It is
// ErrSlowConsumer (errors.Is).
type NotRetainedError struct {
	JobID string
	From  uint64 // the watch's from_event_seq
	Held  uint64 // the job's items after this seq are held here
}

func (e *NotRetainedError) Error() string {
	return fmt.Sprintf("upstream: job %s: events after event_seq %d are no longer retained (held from after %d)", e.JobID, e.From, e.Held)
}

func (e *NotRetainedError) Is(target error) bool { return target == ErrSlowConsumer }

// BeyondEndError: Watch from an event_seq past the terminal of a job that
// has ended: no item has a seq above it.
type BeyondEndError struct {
	JobID   string
	LastSeq uint64 // the terminal's event_seq
}

func (e *BeyondEndError) Error() string {
	return fmt.Sprintf("upstream: job %s ended at event_seq %d", e.JobID, e.LastSeq)
}
