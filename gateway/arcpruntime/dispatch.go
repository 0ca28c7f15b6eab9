package arcpruntime

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// handleFrame handles one text frame after the handshake, in the read loop.
// Pings and acks are handled at once; everything that gets an answer goes to
// the dispatcher, in arrival order. It reports false when the read loop must
// stop.
func (t *transport) handleFrame(data []byte) bool {
	r := t.r
	r.mu.Lock()
	closing, s := t.closing, t.sess
	r.mu.Unlock()
	if closing {
		return true
	}
	env, err := arcp.Decode(data, arcp.DecodeOptions{RequireSession: true})
	if err != nil {
		r.stats.invalidFrames.Add(1)
		e := &arcp.Error{Code: arcp.CodeInvalidRequest, Message: "invalid envelope: " + reasonOf(err)}
		id := sniffID(data)
		if id == "" {
			// Nothing to name: the error is session-fatal.
			return t.push(request{err: e, fatal: true})
		}
		e.RequestID = id
		return t.push(request{err: e})
	}
	if env.SessionID != s.id {
		r.stats.invalidFrames.Add(1)
		return t.push(request{err: &arcp.Error{Code: arcp.CodeInvalidRequest, Message: "session_id does not name this session", RequestID: env.ID}})
	}
	switch env.Type {
	case arcp.TypePing:
		p, err := arcp.DecodePayload[arcp.Ping](env)
		if err != nil {
			return t.push(request{err: &arcp.Error{Code: arcp.CodeInvalidRequest, Message: "invalid session.ping payload", RequestID: env.ID}})
		}
		r.mu.Lock()
		t.sendLocked(arcp.TypePong, "", arcp.Pong{PingNonce: p.Nonce, ReceivedAt: now3339()})
		r.mu.Unlock()
		return true
	case arcp.TypePong:
		return true
	case arcp.TypeAck:
		p, err := arcp.DecodePayload[arcp.Ack](env)
		if err != nil {
			return t.push(request{err: &arcp.Error{Code: arcp.CodeInvalidRequest, Message: "invalid session.ack payload", RequestID: env.ID}})
		}
		r.mu.Lock()
		if s.cur == t {
			// Never free what this transport has not been sent.
			r.ackLocked(s, min(p.LastProcessedSeq, t.sent))
		}
		r.mu.Unlock()
		return true
	case arcp.TypeSubmit:
		r.stats.jobsSubmitted.Add(1)
		return t.push(request{env: env})
	case arcp.TypeCancel, arcp.TypeListJobs, arcp.TypeSubscribe, arcp.TypeUnsubscribe,
		arcp.TypeClose, arcp.TypeClosed, arcp.TypeBye:
		return t.push(request{env: env})
	default:
		r.stats.unknownTypes.Add(1)
		msg := "unsupported message type"
		if !arcp.KnownType(env.Type) {
			msg = "unknown message type"
		}
		return t.push(request{err: &arcp.Error{Code: arcp.CodeInvalidRequest, Message: msg, RequestID: env.ID}})
	}
}

// push hands a request to the dispatcher, waiting while its queue is full.
func (t *transport) push(req request) bool {
	select {
	case t.reqs <- req:
		return true
	case <-t.ctx.Done():
		return false
	}
}

// dispatchLoop handles requests one at a time, in arrival order, until the
// transport ends; requests still queued then are abandoned unanswered, as a
// crash would leave them.
func (t *transport) dispatchLoop() {
	if !t.dispatchLate() {
		return
	}
	for {
		select {
		case req := <-t.reqs:
			t.dispatch(req)
		case <-t.ctx.Done():
			return
		}
	}
}

func (t *transport) dispatch(req request) {
	r := t.r
	if req.err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		t.sendErrorLocked(req.err, req.fatal)
		if req.fatal && t.sess != nil {
			r.discardLocked(t.sess, errSessionGone, false)
		}
		return
	}
	env := req.env
	switch env.Type {
	case arcp.TypeSubmit:
		if t.submit(env, false) && r.opts.Dialect.LateAcceptAcrossResume {
			r.mu.Lock()
			t.keepLateLocked([]*arcp.Envelope{env})
			r.mu.Unlock()
		}
	case arcp.TypeCancel:
		t.cancelJob(env)
	case arcp.TypeListJobs:
		t.listJobs(env)
	case arcp.TypeSubscribe:
		t.subscribe(env)
	case arcp.TypeUnsubscribe:
		t.unsubscribe(env)
	case arcp.TypeClose, arcp.TypeClosed, arcp.TypeBye:
		t.closeSession(env)
	}
}

// dispatchLate answers the submits a previous transport left unanswered
// (Dialect.LateAcceptAcrossResume), once the resume's replay was sent. It
// reports false if the transport ended first; the rest are then kept for
// the next one.
func (t *transport) dispatchLate() bool {
	r := t.r
	r.mu.Lock()
	late := t.late
	t.late = nil
	r.mu.Unlock()
	if len(late) == 0 {
		return true
	}
	select {
	case <-t.replayed:
	case <-t.ctx.Done():
		r.mu.Lock()
		t.keepLateLocked(late)
		r.mu.Unlock()
		return false
	}
	for i, env := range late {
		if t.submit(env, true) {
			r.mu.Lock()
			t.keepLateLocked(late[i:])
			r.mu.Unlock()
			return false
		}
	}
	return true
}

func (t *transport) rejectLocked(env *arcp.Envelope, code, msg string, retryable bool) {
	t.sendErrorLocked(&arcp.Error{Code: code, Message: msg, Retryable: retryable, RequestID: env.ID, JobID: env.JobID}, false)
}

func (t *transport) reject(env *arcp.Envelope, code, msg string, retryable bool) {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	t.rejectLocked(env, code, msg, retryable)
}

// maxRuntimeSecCap keeps max_runtime_sec within time.Duration.
const maxRuntimeSecCap = 1 << 31

// submit answers a job.submit. late submits (left by a previous transport)
// skip the accept delay. It reports true when the transport ended before
// the submit was answered (abandoned).
func (t *transport) submit(env *arcp.Envelope, late bool) (abandoned bool) {
	r := t.r
	d := &r.opts.Dialect
	if delay := time.Duration(r.acceptDelay.Load()); delay > 0 && !late {
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-t.ctx.Done():
			timer.Stop()
			return true
		}
	}
	// reject answers a rejection decided before the state is examined;
	// schema marks a payload the TS runtime's schema would refuse.
	reject := func(code, msg string, retryable, schema bool) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if d.LateAcceptAcrossResume && t.ctx.Err() != nil {
			return true
		}
		t.rejectSubmitLocked(env, code, msg, retryable, schema)
		return false
	}
	p, err := arcp.DecodePayload[arcp.Submit](env)
	if err != nil {
		return reject(arcp.CodeInvalidRequest, "invalid job.submit payload", false, true)
	}
	if p.Agent == "" {
		return reject(arcp.CodeInvalidRequest, "agent is required", false, true)
	}
	if p.MaxRuntimeSec < 0 {
		return reject(arcp.CodeInvalidRequest, "max_runtime_sec must not be negative", false, true)
	}
	ag, version, code := lookupAgent(r.agents, p.Agent)
	if code != "" {
		return reject(code, "agent "+strconv.Quote(truncate(p.Agent, 128))+" is not available", false, false)
	}
	input := p.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("null")
	}
	r.mu.Lock()
	aenv := agentEnv{dialect: d}
	var features map[string]bool
	if t.sess != nil {
		aenv.progress = t.sess.features[arcp.FeatureProgress]
		aenv.resultChunk = t.sess.features[arcp.FeatureResultChunk]
		features = maps.Clone(t.sess.features)
	}
	r.mu.Unlock()
	g, err := grantLease(p, features, r.opts.LeaseLimits, time.Now())
	if err != nil {
		le := err.(*leaseError)
		return reject(le.code, le.msg, false, le.code == arcp.CodeInvalidRequest)
	}
	// Validate the input outside the lock; the error is answered in order
	// below, after the idempotency check.
	run, inputErr := ag.prepare(input, aenv)
	var digest [sha256.Size]byte
	if p.IdempotencyKey != "" {
		digest = inputDigest(input)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sess
	if s == nil || s.gone || r.closed {
		return false
	}
	if t.ctx.Err() != nil {
		return true
	}
	spec := ag.name + "@" + version
	if p.IdempotencyKey != "" {
		if prev := r.keyedJobLocked(s, p.IdempotencyKey); prev != nil {
			if prev.spec == spec && prev.digest == digest {
				trace := prev.traceID
				if d.ReplayRetryTrace {
					trace = r.traceFor(env.TraceID)
				}
				t.sendAcceptedLocked(prev, trace)
				return false
			}
			r.stats.jobsRejected.Add(1)
			const msg = "idempotency_key was used with different parameters"
			if d.RejectAs == RejectJobError {
				details, _ := json.Marshal(map[string]string{"existing_job_id": prev.id})
				t.jobErrorAnswerLocked(prev.id, arcp.CodeDuplicateKey, msg, details)
			} else {
				t.rejectLocked(env, arcp.CodeDuplicateKey, msg, false)
			}
			return false
		}
	}
	if inputErr != nil {
		t.rejectSubmitLocked(env, arcp.CodeInvalidRequest, "invalid input for agent "+ag.name+": "+inputErr.Error(), false, false)
		return false
	}
	if s.live >= r.opts.MaxConcurrentJobs {
		t.rejectSubmitLocked(env, arcp.CodeResourceExhausted, "too many live jobs in this session (max "+strconv.Itoa(r.opts.MaxConcurrentJobs)+")", true, false)
		return false
	}
	id := "job_" + randomHex(16)
	if p.IdempotencyKey == "" {
		if r.reuseID != "" {
			id, r.reuseID = r.reuseID, ""
		} else if d.ReuseLiveJobID {
			if lj := s.lastLiveLocked(); lj != nil {
				id = lj.id
			}
		}
	}
	r.nextOrd++
	j := &job{
		id:         id,
		spec:       spec,
		sess:       s,
		digest:     digest,
		traceID:    r.traceFor(env.TraceID),
		idemKey:    p.IdempotencyKey,
		acceptedAt: now3339(),
		ord:        r.nextOrd,
		run:        run,
		grant:      g,
		ext:        vendorExtensions(env.Extensions),
		cancelCh:   make(chan struct{}),
		done:       make(chan struct{}),
		status:     "pending",
		subs:       make(map[*session]struct{}),
	}
	if p.MaxRuntimeSec > 0 && p.MaxRuntimeSec < maxRuntimeSecCap {
		j.maxRuntime = time.Duration(p.MaxRuntimeSec) * time.Second
	}
	if j.ext != nil {
		_ = json.Unmarshal(j.ext, &j.extMap)
	}
	j.ctx, j.cancel = context.WithCancelCause(r.ctx)
	// job.accepted is queued before the job can emit anything.
	t.sendAcceptedLocked(j, j.traceID)
	if !r.goLocked(func() { r.runJob(j) }) {
		j.cancel(errClosed)
		return false
	}
	s.jobs[j.id] = j
	s.jobList = append(s.jobList, j)
	if j.idemKey != "" {
		s.idem[j.idemKey] = j
		if d.IdempotencyScope == ScopePrincipal {
			r.idem[principalKey(s.principal, j.idemKey)] = j
		}
	}
	s.live++
	r.index.addInput(r.index.record(j.id), input)
	r.stats.jobsAccepted.Add(1)
	r.trimJobsLocked(s)
	return false
}

// traceFor is the trace id of a job submitted with trace (Dialect.Trace).
func (r *Runtime) traceFor(trace string) string {
	switch r.opts.Dialect.Trace {
	case TraceEchoOrMint:
		if trace == "" {
			trace = randomHex(16)
		}
	case TraceNone:
		trace = ""
	}
	return trace
}

// sendAcceptedLocked queues j's job.accepted carrying trace; the envelope
// carries it too with TraceEchoOrMint.
func (t *transport) sendAcceptedLocked(j *job, trace string) {
	a := j.acceptedPayload()
	a.TraceID = trace
	envTrace := ""
	if t.r.opts.Dialect.Trace == TraceEchoOrMint {
		envTrace = trace
	}
	sid := ""
	if t.sess != nil {
		sid = t.sess.id
	}
	// The submit's x-vendor.* extensions are echoed on the envelope.
	if data := t.r.encodeControlTraced(arcp.TypeAccepted, sid, j.id, envTrace, a, j.extMap); data != nil {
		t.enqueueLocked(outFrame{data: data})
	}
}

// rejectSubmitLocked answers a refused job.submit as Dialect.RejectAs and
// Dialect.VersionErrorNoRequestID say; schema marks a payload the TS
// runtime's schema would refuse.
func (t *transport) rejectSubmitLocked(env *arcp.Envelope, code, msg string, retryable, schema bool) {
	r := t.r
	d := &r.opts.Dialect
	r.stats.jobsRejected.Add(1)
	switch {
	case code == arcp.CodeAgentVersionNotAvailable && d.VersionErrorNoRequestID:
		t.sendErrorLocked(&arcp.Error{Code: code, Message: msg}, false)
	case d.RejectAs != RejectJobError:
		t.rejectLocked(env, code, msg, retryable)
	case schema:
		t.sendErrorLocked(&arcp.Error{Code: arcp.CodeInvalidRequest, Message: msg}, false)
	case code == arcp.CodeResourceExhausted:
		t.sendErrorLocked(&arcp.Error{Code: arcp.CodeInternalError, Message: msg, Retryable: true}, false)
	default:
		t.jobErrorAnswerLocked("job_"+randomHex(16), code, msg, nil)
	}
}

// jobErrorAnswerLocked answers a request with a sequenced job.error
// {final_status "error", retryable false} on jobID (RejectJobError).
func (t *transport) jobErrorAnswerLocked(jobID, code, msg string, details json.RawMessage) {
	s := t.sess
	if s == nil || s.gone {
		return
	}
	payload, err := json.Marshal(arcp.JobError{FinalStatus: arcp.StatusError, Code: code, Message: msg, Details: details})
	if err != nil {
		return
	}
	t.appendAnswerLocked(s, arcp.TypeJobError, jobID, "", payload)
}

// keyedJobLocked returns the job holding an idempotency key for s
// (Dialect.IdempotencyScope).
func (r *Runtime) keyedJobLocked(s *session, key string) *job {
	if r.opts.Dialect.IdempotencyScope == ScopePrincipal {
		return r.idem[principalKey(s.principal, key)]
	}
	return s.idem[key]
}

// forgetKeyLocked drops a principal-scoped key of s that j holds.
func (r *Runtime) forgetKeyLocked(s *session, key string, j *job) {
	if r.opts.Dialect.IdempotencyScope != ScopePrincipal {
		return
	}
	if pk := principalKey(s.principal, key); r.idem[pk] == j {
		delete(r.idem, pk)
	}
}

func principalKey(principal, key string) string { return principal + "\x00" + key }

// lastLiveLocked returns the most recently accepted live job of s.
func (s *session) lastLiveLocked() *job {
	for i := len(s.jobList) - 1; i >= 0; i-- {
		if j := s.jobList[i]; !j.terminal {
			return j
		}
	}
	return nil
}

// trimJobsLocked forgets the oldest terminal jobs of s beyond the retention
// cap.
func (r *Runtime) trimJobsLocked(s *session) {
	if len(s.jobList) <= maxRetainedJobs+maxRetainedJobs/4 {
		return
	}
	kept := s.jobList[:0]
	excess := len(s.jobList) - maxRetainedJobs
	for _, j := range s.jobList {
		if excess > 0 && j.terminal {
			excess--
			if s.jobs[j.id] == j { // ids are reused only by ReuseLiveJobID
				delete(s.jobs, j.id)
			}
			if j.idemKey != "" && s.idem[j.idemKey] == j {
				delete(s.idem, j.idemKey)
				r.forgetKeyLocked(s, j.idemKey, j)
			}
			continue
		}
		kept = append(kept, j)
	}
	clear(s.jobList[len(kept):])
	s.jobList = kept
}

// inputDigest hashes the canonical form of a JSON value: object keys
// sorted, insignificant space removed, numbers kept as written. Equal
// digests mean identical inputs for idempotency.
func inputDigest(input json.RawMessage) [sha256.Size]byte {
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil {
		if canon, err := json.Marshal(v); err == nil {
			return sha256.Sum256(canon)
		}
	}
	return sha256.Sum256(input)
}

func (t *transport) cancelJob(env *arcp.Envelope) {
	r := t.r
	p, err := arcp.DecodePayload[arcp.Cancel](env)
	if err != nil {
		t.reject(env, arcp.CodeInvalidRequest, "invalid job.cancel payload", false)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sess
	if s == nil || s.gone {
		return
	}
	r.index.record(env.JobID).cancelled = true
	j := s.jobs[env.JobID]
	notFound := func(msg string) {
		if r.opts.Dialect.RejectAs == RejectJobError {
			t.jobErrorAnswerLocked(env.JobID, arcp.CodeJobNotFound, msg, nil)
		} else {
			t.rejectLocked(env, arcp.CodeJobNotFound, msg, false)
		}
	}
	switch {
	case j == nil:
		notFound("no such job in this session")
		return
	case j.terminal:
		notFound("job already finished")
		return
	}
	if !j.cancelRequested {
		j.cancelRequested = true
		j.cancelReason = truncate(p.Reason, 1024)
		r.stats.jobsCancelled.Add(1)
		close(j.cancelCh)
		j.cancel(errJobCancelled)
	}
	if r.opts.Dialect.CancelledSeq {
		if payload, err := json.Marshal(arcp.Cancelled{JobID: j.id, Reason: j.cancelReason}); err == nil {
			t.appendAnswerLocked(s, arcp.TypeCancelled, j.id, j.traceID, payload)
		}
		return
	}
	t.sendLocked(arcp.TypeCancelled, j.id, arcp.Cancelled{JobID: j.id, Reason: j.cancelReason})
}

const (
	defaultListLimit = 100
	maxListLimit     = 1000
)

func (t *transport) listJobs(env *arcp.Envelope) {
	r := t.r
	p, err := arcp.DecodePayload[arcp.ListJobs](env)
	if err != nil {
		t.reject(env, arcp.CodeInvalidRequest, "invalid session.list_jobs payload", false)
		return
	}
	var filter struct {
		Status       json.RawMessage `json:"status"`
		Agent        string          `json:"agent"`
		CreatedAfter string          `json:"created_after"`
	}
	var statuses []string
	if len(p.Filter) > 0 && !bytes.Equal(bytes.TrimSpace(p.Filter), []byte("null")) {
		if json.Unmarshal(p.Filter, &filter) != nil {
			t.reject(env, arcp.CodeInvalidRequest, "filter must be an object", false)
			return
		}
		if len(filter.Status) > 0 {
			var one string
			if json.Unmarshal(filter.Status, &one) == nil {
				statuses = []string{one}
			} else if json.Unmarshal(filter.Status, &statuses) != nil {
				t.reject(env, arcp.CodeInvalidRequest, "filter.status must be a string or a list of strings", false)
				return
			}
		}
	}
	var createdAfter time.Time
	if filter.CreatedAfter != "" {
		if createdAfter, err = time.Parse(time.RFC3339Nano, filter.CreatedAfter); err != nil {
			t.reject(env, arcp.CodeInvalidRequest, "filter.created_after is not RFC 3339", false)
			return
		}
	}
	limit := p.Limit
	switch {
	case limit < 0:
		t.reject(env, arcp.CodeInvalidRequest, "limit must not be negative", false)
		return
	case limit == 0:
		limit = defaultListLimit
	case limit > maxListLimit:
		limit = maxListLimit
	}
	var after uint64
	if p.Cursor != "" {
		after, err = strconv.ParseUint(p.Cursor, 10, 64)
		if err != nil {
			t.reject(env, arcp.CodeInvalidRequest, "invalid cursor", false)
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sessionWithLocked(env, arcp.FeatureListJobs)
	if s == nil {
		return
	}
	out := arcp.Jobs{RequestID: env.ID, Jobs: []arcp.JobInfo{}}
	var lastOrd uint64
	for _, j := range r.listableLocked(s) {
		if j.ord <= after || j.retired {
			continue
		}
		if len(statuses) > 0 && !slices.Contains(statuses, j.status) {
			continue
		}
		if filter.Agent != "" && filter.Agent != j.spec && filter.Agent != j.agentName() {
			continue
		}
		if !createdAfter.IsZero() {
			if at, err := time.Parse(time.RFC3339Nano, j.acceptedAt); err != nil || !at.After(createdAfter) {
				continue
			}
		}
		if len(out.Jobs) == limit {
			out.NextCursor = strconv.FormatUint(lastOrd, 10)
			break
		}
		info := arcp.JobInfo{JobID: j.id, Agent: j.spec, Status: j.status, AcceptedAt: j.acceptedAt,
			CreatedAt: j.acceptedAt, TraceID: j.traceID, Lease: j.grant.lease, LastEventSeq: &j.lastSeq}
		info.LeaseConstraints, info.Budget = j.boundsJSON()
		out.Jobs = append(out.Jobs, info)
		lastOrd = j.ord
	}
	t.sendLocked(arcp.TypeJobs, "", out)
}

// listableLocked returns the jobs session.list_jobs of s may list, in
// acceptance order: the session's own, or (Dialect.ListScope
// ListPrincipal) those of every session of its principal.
func (r *Runtime) listableLocked(s *session) []*job {
	if r.opts.Dialect.ListScope != ListPrincipal {
		return s.jobList
	}
	var all []*job
	for _, o := range r.sessions {
		if o.principal == s.principal {
			all = append(all, o.jobList...)
		}
	}
	slices.SortFunc(all, func(a, b *job) int { return cmp.Compare(a.ord, b.ord) })
	return all
}
