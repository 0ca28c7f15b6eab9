package arcpruntime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
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
		t.submit(env)
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

func (t *transport) submit(env *arcp.Envelope) {
	r := t.r
	if d := time.Duration(r.acceptDelay.Load()); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-t.ctx.Done():
			timer.Stop()
			return
		}
	}
	reject := func(code, msg string, retryable bool) {
		r.stats.jobsRejected.Add(1)
		t.reject(env, code, msg, retryable)
	}
	p, err := arcp.DecodePayload[arcp.Submit](env)
	if err != nil {
		reject(arcp.CodeInvalidRequest, "invalid job.submit payload", false)
		return
	}
	if p.Agent == "" {
		reject(arcp.CodeInvalidRequest, "agent is required", false)
		return
	}
	if p.MaxRuntimeSec < 0 {
		reject(arcp.CodeInvalidRequest, "max_runtime_sec must not be negative", false)
		return
	}
	ag, version, code := lookupAgent(r.agents, p.Agent)
	if code != "" {
		reject(code, "agent "+strconv.Quote(truncate(p.Agent, 128))+" is not available", false)
		return
	}
	input := p.Input
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("null")
	}
	r.mu.Lock()
	progress := t.sess != nil && t.sess.features[arcp.FeatureProgress]
	r.mu.Unlock()
	// Validate the input outside the lock; the error is answered in order
	// below, after the idempotency check.
	run, inputErr := ag.prepare(input, progress)
	var digest [sha256.Size]byte
	if p.IdempotencyKey != "" {
		digest = inputDigest(input)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	s := t.sess
	if s == nil || s.gone || r.closed || t.ctx.Err() != nil {
		return
	}
	spec := ag.name + "@" + version
	if p.IdempotencyKey != "" {
		if prev := s.idem[p.IdempotencyKey]; prev != nil {
			if prev.spec == spec && prev.digest == digest {
				t.sendLocked(arcp.TypeAccepted, prev.id, prev.acceptedPayload())
				return
			}
			r.stats.jobsRejected.Add(1)
			t.rejectLocked(env, arcp.CodeDuplicateKey, "idempotency_key was used with different parameters", false)
			return
		}
	}
	if inputErr != nil {
		r.stats.jobsRejected.Add(1)
		t.rejectLocked(env, arcp.CodeInvalidRequest, "invalid input for agent "+ag.name+": "+inputErr.Error(), false)
		return
	}
	if s.live >= r.opts.MaxConcurrentJobs {
		r.stats.jobsRejected.Add(1)
		t.rejectLocked(env, arcp.CodeResourceExhausted, "too many live jobs in this session (max "+strconv.Itoa(r.opts.MaxConcurrentJobs)+")", true)
		return
	}
	r.nextOrd++
	j := &job{
		id:         "job_" + randomHex(16),
		spec:       spec,
		sess:       s,
		digest:     digest,
		traceID:    env.TraceID,
		idemKey:    p.IdempotencyKey,
		acceptedAt: now3339(),
		ord:        r.nextOrd,
		run:        run,
		cancelCh:   make(chan struct{}),
		done:       make(chan struct{}),
		status:     "pending",
		subs:       make(map[*session]struct{}),
	}
	if p.MaxRuntimeSec > 0 && p.MaxRuntimeSec < maxRuntimeSecCap {
		j.maxRuntime = time.Duration(p.MaxRuntimeSec) * time.Second
	}
	j.ctx, j.cancel = context.WithCancelCause(r.ctx)
	// job.accepted is queued before the job can emit anything.
	t.sendLocked(arcp.TypeAccepted, j.id, j.acceptedPayload())
	if !r.goLocked(func() { r.runJob(j) }) {
		j.cancel(errClosed)
		return
	}
	s.jobs[j.id] = j
	s.jobList = append(s.jobList, j)
	if j.idemKey != "" {
		s.idem[j.idemKey] = j
	}
	s.live++
	r.index.addInput(r.index.record(j.id), input)
	r.stats.jobsAccepted.Add(1)
	r.trimJobsLocked(s)
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
			delete(s.jobs, j.id)
			if j.idemKey != "" && s.idem[j.idemKey] == j {
				delete(s.idem, j.idemKey)
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
	switch {
	case j == nil:
		t.rejectLocked(env, arcp.CodeJobNotFound, "no such job in this session", false)
		return
	case j.terminal:
		t.rejectLocked(env, arcp.CodeJobNotFound, "job already finished", false)
		return
	}
	if !j.cancelRequested {
		j.cancelRequested = true
		j.cancelReason = truncate(p.Reason, 1024)
		r.stats.jobsCancelled.Add(1)
		close(j.cancelCh)
		j.cancel(errJobCancelled)
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
		Status json.RawMessage `json:"status"`
		Agent  string          `json:"agent"`
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
	for _, j := range s.jobList {
		if j.ord <= after {
			continue
		}
		if len(statuses) > 0 && !slices.Contains(statuses, j.status) {
			continue
		}
		if filter.Agent != "" && filter.Agent != j.spec && filter.Agent != j.agentName() {
			continue
		}
		if len(out.Jobs) == limit {
			out.NextCursor = strconv.FormatUint(lastOrd, 10)
			break
		}
		out.Jobs = append(out.Jobs, arcp.JobInfo{JobID: j.id, Agent: j.spec, Status: j.status, AcceptedAt: j.acceptedAt})
		lastOrd = j.ord
	}
	t.sendLocked(arcp.TypeJobs, "", out)
}
