package arcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// job is one accepted job. Its goroutine (runJob) supervises an agent
// goroutine and emits exactly one terminal envelope.
type job struct {
	// Immutable after submit.
	id         string
	spec       string // "name@version"
	sess       *session
	digest     [32]byte // of the canonical input, for idempotency (inputs are not retained)
	traceID    string
	idemKey    string
	acceptedAt string
	ord        uint64
	maxRuntime time.Duration
	grant      grant                      // the effective lease, constraints and initial budget
	extMap     map[string]json.RawMessage // the submit's x-vendor.* extensions, echoed on job.accepted
	ext        []byte                     // the same as one JSON object, stamped on the job's sequenced envelopes
	run        runFunc                    // read and cleared by runJob only
	ctx        context.Context            // the agent's context; cancelled on cancel, session end, Close
	cancel     context.CancelCauseFunc
	cancelCh   chan struct{} // closed when job.cancel is received
	done       chan struct{} // closed when runJob returns

	// Guarded by Runtime.mu.
	status          string // pending, running, then the final status
	terminal        bool
	cancelRequested bool
	cancelReason    string
	subs            map[*session]struct{} // other sessions subscribed to this job
	lastSeq         uint64                // event_seq of the job's latest envelope in its own session
	lost            bool                  // Dialect.LoseRunningJobsOnResume: emits nothing more
	retired         bool                  // a lost job that ended: no longer listed or subscribable (TS)
}

func (j *job) agentName() string {
	name, _, _ := strings.Cut(j.spec, "@")
	return name
}

func (j *job) acceptedPayload() arcp.Accepted {
	a := arcp.Accepted{JobID: j.id, Agent: j.spec, AcceptedAt: j.acceptedAt, TraceID: j.traceID, Lease: j.grant.lease}
	a.LeaseConstraints, a.Budget = j.boundsJSON()
	return a
}

// boundsJSON returns the job's lease constraints and initial budget as
// JSON (nil when absent).
func (j *job) boundsJSON() (constraints, budget json.RawMessage) {
	if j.grant.constraints != nil {
		constraints, _ = json.Marshal(j.grant.constraints)
	}
	if j.grant.budget != nil {
		budget, _ = json.Marshal(j.grant.budget)
	}
	return constraints, budget
}

// agentError is how an agent ends a job with job.error.
type agentError struct {
	code      string
	message   string
	retryable bool
	details   json.RawMessage
}

func (e *agentError) Error() string { return e.code + ": " + e.message }

type agentOutcome struct {
	result   json.RawMessage
	err      error
	streamed *streamedResult // the result was streamed as result_chunk events
}

// streamedResult is how an agent that streamed its result ends the job:
// job.result{final_status, result_id, result_size, summary}.
type streamedResult struct {
	FinalStatus string `json:"final_status"`
	ResultID    string `json:"result_id"`
	ResultSize  int64  `json:"result_size"`
	Summary     string `json:"summary,omitempty"`
}

var errStopped = errors.New("arcpruntime: job no longer emits")

// paceInterval is how often a paced agent rechecks the client's lag;
// paceGiveUp is how long it waits for a client that makes no progress.
const (
	paceInterval = time.Millisecond
	paceGiveUp   = 2 * time.Second
)

// runJob runs j's agent and emits its terminal: the agent's result or error,
// or CANCELLED at most CancelGrace after job.cancel, or TIMEOUT after
// max_runtime_sec. It waits for the agent goroutine before returning.
func (r *Runtime) runJob(j *job) {
	defer close(j.done)
	ctx := j.ctx
	if j.maxRuntime > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, j.maxRuntime, errJobTimeout)
		defer stop()
	}
	if !j.grant.expiresAt.IsZero() {
		// §9.5: the runtime MAY terminate a job whose lease expired; this
		// one does, at once.
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, j.grant.expiresAt, errLeaseExpired)
		defer stop()
	}

	r.mu.Lock()
	if j.status == "pending" {
		j.status = "running"
	}
	r.mu.Unlock()

	emit := func(kind string, body any) error {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		p, err := json.Marshal(arcp.Event{Kind: kind, TS: now3339(), Body: raw})
		if err != nil {
			return err
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if j.terminal || j.lost || j.sess.gone && len(j.subs) == 0 {
			return errStopped
		}
		r.emitLocked(j, arcp.TypeEvent, p)
		return nil
	}

	// A streamed result, recorded by the agent goroutine before it returns.
	var streamed *streamedResult

	// The client's progress as pace last saw it; only the agent goroutine
	// calls pace.
	var (
		lastT    *transport
		lastSent uint64
		progress time.Time
	)
	pace := func(ctx context.Context) error {
		maxLag := uint64(max(1, r.opts.MaxBufferedEvents/2))
		maxLagBytes := uint64(max(1, r.opts.MaxBufferedBytes/2))
		var timer *time.Timer
		for {
			r.mu.Lock()
			s := j.sess
			t := s.cur
			var sent, lag, lagBytes uint64
			if t != nil && !s.gone && !r.stalled.Load() {
				sent, lag, lagBytes = t.sent, s.seq-t.sent, s.total-t.sentBytes
			}
			r.mu.Unlock()
			if lag < maxLag && lagBytes < maxLagBytes {
				return nil
			}
			// Only a client that makes progress is waited for: one that
			// stopped reading is left to the slow-consumer drop.
			if t != lastT || sent != lastSent {
				lastT, lastSent, progress = t, sent, time.Now()
			} else if time.Since(progress) > paceGiveUp {
				return nil
			}
			if timer == nil {
				timer = time.NewTimer(paceInterval)
				defer timer.Stop()
			} else {
				timer.Reset(paceInterval)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-timer.C:
			}
		}
	}

	outcome := make(chan agentOutcome, 1)
	var wg sync.WaitGroup
	defer func() {
		// Stop an agent that outlived the grace, then wait for it.
		j.cancel(errJobDone)
		wg.Wait()
	}()
	run := j.run
	j.run = nil // only this goroutine reads it; do not retain the input
	wg.Go(func() {
		res, err := run(ctx, jobIO{emit: emit, pace: pace, streamed: func(sr streamedResult) { streamed = &sr }})
		outcome <- agentOutcome{result: res, err: err, streamed: streamed}
	})

	var (
		out      agentOutcome
		returned bool
	)
	select {
	case out = <-outcome:
		returned = true
	case <-j.cancelCh:
		grace := time.NewTimer(r.opts.CancelGrace)
		select {
		case out = <-outcome:
			returned = true
		case <-grace.C:
		}
		grace.Stop()
	}
	r.finish(j, ctx, out, returned)
}

// finish decides and emits j's terminal envelope.
func (r *Runtime) finish(j *job, ctx context.Context, out agentOutcome, returned bool) {
	var success []byte
	if returned && out.err == nil && out.streamed != nil {
		sr := *out.streamed
		sr.FinalStatus = arcp.StatusSuccess
		success, _ = json.Marshal(sr) // plain strings and numbers
	} else if returned && out.err == nil {
		res := out.result
		if len(res) == 0 {
			res = json.RawMessage("null")
		}
		var err error
		success, err = json.Marshal(arcp.Result{FinalStatus: arcp.StatusSuccess, Result: res})
		if err != nil {
			returned, out.err = true, &agentError{code: arcp.CodeInternalError, message: "agent result is not valid JSON"}
		}
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var (
		typ     = arcp.TypeJobError
		payload []byte
		jerr    arcp.JobError
	)
	switch {
	case j.cancelRequested:
		msg := "job cancelled"
		if j.cancelReason != "" {
			msg += ": " + j.cancelReason
		}
		jerr = arcp.JobError{FinalStatus: arcp.StatusCancelled, Code: arcp.CodeCancelled, Message: msg}
	case success != nil:
		typ, payload = arcp.TypeResult, success
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errLeaseExpired):
		jerr = arcp.JobError{FinalStatus: arcp.StatusError, Code: arcp.CodeLeaseExpired, Message: "lease expired at " + j.grant.constraints.ExpiresAt}
	case ctx.Err() != nil && errors.Is(context.Cause(ctx), errJobTimeout):
		jerr = arcp.JobError{FinalStatus: arcp.StatusTimedOut, Code: arcp.CodeTimeout, Message: "max_runtime_sec exceeded"}
	case ctx.Err() != nil:
		jerr = arcp.JobError{FinalStatus: arcp.StatusCancelled, Code: arcp.CodeCancelled, Message: "session ended"}
	default:
		var ae *agentError
		if !errors.As(out.err, &ae) {
			ae = &agentError{code: arcp.CodeInternalError, message: "agent failed"}
		}
		jerr = arcp.JobError{FinalStatus: arcp.StatusError, Code: arcp.NormalizeCode(ae.code), Message: ae.message, Retryable: ae.retryable, Details: ae.details}
	}
	if payload == nil {
		var err error
		payload, err = json.Marshal(jerr)
		if err != nil { // only if Details were invalid JSON
			jerr.Details = nil
			payload, _ = json.Marshal(jerr)
		}
		j.status = jerr.FinalStatus
	} else {
		j.status = arcp.StatusSuccess
	}
	j.terminal = true
	j.sess.live--
	// A lost job that ends leaves the runtime's job registry unseen, as
	// the TS SDK's does (its handler fails on the dead transport): no
	// longer listed, and job.subscribe answers JOB_NOT_FOUND.
	j.retired = j.lost
	r.emitLocked(j, typ, payload)
	for b := range j.subs {
		delete(b.subs, j)
	}
	j.subs = nil
}

// emitLocked buffers a sequenced envelope of j in its session and in every
// subscribed session, each with that session's own event_seq.
func (r *Runtime) emitLocked(j *job, typ string, payload []byte) {
	if j.lost {
		return
	}
	r.appendExtLocked(j.sess, typ, j.id, j.traceID, payload, j.ext)
	j.lastSeq = j.sess.seq
	for b := range j.subs {
		r.appendExtLocked(b, typ, j.id, j.traceID, payload, j.ext)
	}
}

// findJobLocked finds a job of s's principal: in s, else in another session
// of the same principal.
func (r *Runtime) findJobLocked(s *session, jobID string) *job {
	if j := s.jobs[jobID]; j != nil {
		return j
	}
	for _, o := range r.sessions {
		if o != s && o.principal == s.principal {
			if j := o.jobs[jobID]; j != nil {
				return j
			}
		}
	}
	return nil
}

// sessionWithLocked returns the transport's live session if feature was
// negotiated on it. Otherwise it returns nil, having rejected env with
// INVALID_REQUEST when the session is live but lacks the feature (a gone
// session answers nothing). r.mu must be held.
func (t *transport) sessionWithLocked(env *arcp.Envelope, feature string) *session {
	s := t.sess
	if s == nil || s.gone {
		return nil
	}
	if !s.features[feature] {
		t.rejectLocked(env, arcp.CodeInvalidRequest, feature+" was not negotiated", false)
		return nil
	}
	return s
}

func (t *transport) subscribe(env *arcp.Envelope) {
	r := t.r
	p, err := arcp.DecodePayload[arcp.Subscribe](env)
	if err != nil || p.JobID == "" {
		t.reject(env, arcp.CodeInvalidRequest, "invalid job.subscribe payload", false)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sessionWithLocked(env, arcp.FeatureSubscribe)
	if s == nil {
		return
	}
	j := r.findJobLocked(s, p.JobID)
	if j == nil || j.retired {
		if r.opts.Dialect.RejectAs == RejectJobError {
			// TS: job.error{JOB_NOT_FOUND} on the job's id, sequenced.
			t.jobErrorAnswerLocked(p.JobID, arcp.CodeJobNotFound, "no such job", nil)
			return
		}
		t.sendErrorLocked(&arcp.Error{Code: arcp.CodeJobNotFound, Message: "no such job", RequestID: env.ID, JobID: p.JobID}, false)
		return
	}
	// The authority descriptor (§7.6): the job's lease and constraints,
	// its budget (the initial counters: no demo agent reports cost), and
	// never credentials (provisioned_credentials is not offered).
	desc := arcp.Subscribed{JobID: j.id, CurrentStatus: j.status, Agent: j.spec, Lease: j.grant.lease,
		TraceID: j.traceID, SubscribedFrom: s.seq, FromEventSeq: p.FromEventSeq}
	desc.LeaseConstraints, desc.Budget = j.boundsJSON()
	replay := j.sess != s && p.History && !j.sess.gone
	if _, ok := j.subs[s]; ok {
		replay = false
	}
	desc.Replayed = replay
	t.sendLocked(arcp.TypeSubscribed, j.id, desc)
	if j.sess == s {
		if replayOwn := j.lost && p.History; replayOwn {
			// TS: a resumed session subscribing to its own job that
			// no longer streams gets the job's envelopes still
			// buffered with seq > from_event_seq, re-stamped; the job
			// stays lost.
			for i := s.head; i < len(s.buf); i++ {
				if e := s.buf[i]; e.jobID == j.id && e.seq > p.FromEventSeq && e.seq <= j.lastSeq {
					r.appendExtLocked(s, e.typ, j.id, j.traceID, e.payload, j.ext)
				}
			}
		}
		return // its events reach this session anyway
	}
	if _, ok := j.subs[s]; ok {
		return
	}
	if replay {
		// §7.6: buffered events with seq > from_event_seq, in the source
		// session's numbering, re-stamped with this session's.
		src := j.sess
		for i := src.head; i < len(src.buf); i++ {
			e := src.buf[i]
			if e.jobID == j.id && e.seq > p.FromEventSeq {
				r.appendExtLocked(s, e.typ, j.id, j.traceID, e.payload, j.ext)
			}
		}
	}
	if !j.terminal {
		j.subs[s] = struct{}{}
		s.subs[j] = struct{}{}
	}
}

func (t *transport) unsubscribe(env *arcp.Envelope) {
	r := t.r
	p, err := arcp.DecodePayload[arcp.Unsubscribe](env)
	if err != nil || p.JobID == "" {
		t.reject(env, arcp.CodeInvalidRequest, "invalid job.unsubscribe payload", false)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sess
	if s == nil || s.gone {
		return
	}
	for j := range s.subs {
		if j.id == p.JobID {
			delete(s.subs, j)
			delete(j.subs, s)
		}
	}
}

// closeSession ends the session gracefully: session.close is answered with
// session.closed; session.bye and session.closed just close. Dialect.ByeOnly
// and Dialect.CloseOnly refuse the types they do not know.
func (t *transport) closeSession(env *arcp.Envelope) {
	r := t.r
	d := &r.opts.Dialect
	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sess
	if s == nil || s.gone {
		return
	}
	switch {
	case d.ByeOnly && env.Type != arcp.TypeBye:
		r.stats.unknownTypes.Add(1)
		details, _ := json.Marshal(map[string]string{"type": env.Type})
		t.sendErrorLocked(&arcp.Error{Code: arcp.CodeInvalidRequest, Message: "unknown core message type " + strconv.Quote(env.Type), Details: details}, false)
		return
	case d.CloseOnly && env.Type != arcp.TypeClose:
		r.stats.unknownTypes.Add(1)
		t.rejectLocked(env, arcp.CodeInvalidRequest, "unknown envelope type "+env.Type, false)
		return
	}
	var data []byte
	if env.Type == arcp.TypeClose {
		reason := "closed by client"
		if d.CloseOnly {
			p, _ := arcp.DecodePayload[arcp.Close](env)
			reason = truncate(p.Reason, 1024)
		}
		data = r.encodeControl(arcp.TypeClosed, s.id, "", arcp.Close{Reason: reason}, nil)
	}
	r.discardLocked(s, errSessionGone, false)
	t.closeLocked(data, "session closed")
	r.log.Debug("session closed by client", "session_id", s.id, "type", env.Type)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
