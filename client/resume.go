package client

import (
	"errors"
	"regexp"
	"time"

	"google.golang.org/grpc/codes"
)

// This file holds when a cut watch re-opens itself, apart from any I/O.
//
// A WatchJob stream can end without the job's end: the session was handed
// off to another replica (UNAVAILABLE, reason SESSION_HANDED_OFF), its owner
// could not be reached (OWNER_UNREACHABLE, NOT_OWNER, DIRECTORY_UNAVAILABLE),
// the gateway drains (DRAINING), the client's silence bound gave up on a
// frozen replica (REPLICA_SILENT), the connection dropped (UNAVAILABLE
// without ErrorInfo), or a balancer reset the stream because the replica
// behind it died (INTERNAL without ErrorInfo whose message is the
// transport's RST_STREAM INTERNAL_ERROR text: nginx resets so when its
// upstream dies mid-response; see StreamReset). The gateway delivers a job's items exactly once from
// from_event_seq, so Watch re-opens the stream from the last event_seq it
// delivered:
//
//   - only on those causes (Resumable); any other error ends the watch;
//   - never after the terminal item (result or error);
//   - after a backoff that doubles from InitialBackoff to MaxBackoff
//     (jittered) and starts again once an item arrived;
//   - at most MaxAttempts times in a row without an item in between;
//   - only while the context's deadline leaves time for the backoff, else
//     the cut's own error is returned;
//   - an item at or below the cursor (a duplicate) is dropped, so the caller
//     sees every event_seq once, in increasing order.
//
// The same rules are in the Python (sessiongate/_resume.py) and TypeScript
// (src/resume.ts) clients.

// ResumableReasons are the ErrorInfo reasons of an UNAVAILABLE that a watch
// resumes after.
var ResumableReasons = map[string]bool{
	"SESSION_HANDED_OFF":    true,
	"OWNER_UNREACHABLE":     true,
	"NOT_OWNER":             true,
	"DIRECTORY_UNAVAILABLE": true,
	"DRAINING":              true,
	"REPLICA_SILENT":        true, // the client's own silence bound (silence.go)
}

// rstInternal matches the texts gRPC libraries give a stream the peer reset
// with HTTP/2 RST_STREAM INTERNAL_ERROR (code 2): grpc-go "stream terminated
// by RST_STREAM with error code: INTERNAL_ERROR", grpcio "Received
// RST_STREAM with error code 2", @grpc/grpc-js "Received RST_STREAM with
// code 2".
var rstInternal = regexp.MustCompile(`RST_STREAM with (?:error )?code:? (?:2|INTERNAL_ERROR)\b`)

// StreamReset reports whether err is a stream reset by the transport (a
// balancer whose upstream died mid-response): INTERNAL, no ErrorInfo (the
// gateway's own INTERNAL errors always carry one), and the RST_STREAM
// INTERNAL_ERROR text.
func StreamReset(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == codes.Internal && e.Reason == "" && rstInternal.MatchString(e.Message)
}

// Resumable reports whether a watch cut by err may be re-opened from its
// cursor: UNAVAILABLE without ErrorInfo (a dropped connection) or with one of
// ResumableReasons, or a stream reset by the transport (StreamReset).
func Resumable(err error) bool {
	if StreamReset(err) {
		return true
	}
	var e *Error
	if !errors.As(err, &e) || e.Code != codes.Unavailable {
		return false
	}
	return e.Reason == "" || ResumableReasons[e.Reason]
}

// ResumePolicy says how a watch resumes itself (WithResumePolicy). Zero
// fields take the defaults: 10 attempts, 50 ms doubling to 2 s.
type ResumePolicy struct {
	MaxAttempts    int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

func (p ResumePolicy) withDefaults() ResumePolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 10
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = 50 * time.Millisecond
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = max(2*time.Second, p.InitialBackoff)
	}
	return p
}

// resumer holds the resume rules of one watch. It is not safe for
// concurrent use (one watch loop owns it).
type resumer struct {
	cursor   uint64
	resumes  int
	policy   *ResumePolicy // nil: resuming is off
	deadline time.Time     // zero: none
	rand     func() float64

	failures int
	done     bool
}

func newResumer(from uint64, policy *ResumePolicy, deadline time.Time, rand func() float64) *resumer {
	if policy != nil {
		p := policy.withDefaults()
		policy = &p
	}
	return &resumer{cursor: from, policy: policy, deadline: deadline, rand: rand}
}

// deliver records an item: true if the caller should see it, false for a
// duplicate (at or below the cursor) or anything after the terminal item.
func (r *resumer) deliver(seq uint64, terminal bool) bool {
	if r.done || seq <= r.cursor {
		return false
	}
	r.cursor, r.failures, r.done = seq, 0, terminal
	return true
}

// cut records a failed stream at now: the delay before re-opening from the
// cursor, and false when err must be returned instead.
func (r *resumer) cut(err error, now time.Time) (time.Duration, bool) {
	if r.policy == nil || r.done || !Resumable(err) || r.failures >= r.policy.MaxAttempts {
		return 0, false
	}
	limit := min(r.policy.MaxBackoff, r.policy.InitialBackoff<<min(r.failures, 30))
	delay := time.Duration(float64(limit) * (0.5 + 0.5*r.rand()))
	if !r.deadline.IsZero() && !now.Add(delay).Before(r.deadline) {
		return 0, false
	}
	r.failures++
	r.resumes++
	return delay, true
}
