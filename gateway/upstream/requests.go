package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream/internal/correlate"
)

type reqKind uint8

const (
	kindSubmit reqKind = iota
	kindListJobs
	kindSubscribe
	kindCancel
)

type reqState uint8

const (
	stateQueued    reqState = iota // in the outbox, not sent
	stateSent                      // taken by the writer: in pending, or (submits) in the core's FIFO
	stateWritten                   // a submit written on a transport that dropped: in the core's limbo
	stateAbandoned                 // its caller gave up (skipped by the outbox; a written submit's slot is the core's)
	stateDone                      // answered or failed; done is closed
)

// request is a caller's message that expects an answer. Every field is
// guarded by Conn.mu, except done, which is closed exactly once when the
// state becomes stateDone.
type request struct {
	kind    reqKind
	id      string // envelope id; the key of pending and of its tombstone
	env     *arcp.Envelope
	frame   []byte
	gen     uint64 // generation it was sent in
	state   reqState
	traceID string        // submits: the trace id stamped on the envelope
	budget  time.Duration // how long the caller was prepared to wait
	job     *job          // cancel, subscribe: the job concerned

	// Submits: the correlation core's handle, the idempotency key on the
	// wire, whether it is the caller's own, and whether it was ever written
	// (from then on the core owns its slot).
	cid       correlate.ID
	key       string
	callerKey bool
	awaited   bool // SubmitOptions.AwaitResult
	written   bool
	inline    bool // its caller writes the queue itself when no writer runs (writeInline)
	done      chan struct{}

	// Answer.
	acc  arcp.Accepted
	jobs arcp.Jobs
	subd arcp.Subscribed // subscribe: the job.subscribed payload
	err  error
}

func newRequest(kind reqKind, env *arcp.Envelope) *request {
	return &request{kind: kind, id: env.ID, env: env, done: make(chan struct{})}
}

// finishLocked records the answer and wakes the caller.
func (c *Conn) finishRequestLocked(r *request, err error) {
	if r.state == stateDone {
		return
	}
	if r.kind == kindSubmit && (r.state == stateQueued || r.state == stateSent || r.state == stateWritten) {
		c.inflight--
	}
	r.err = err
	r.state = stateDone
	close(r.done)
	if r.job != nil {
		r.job.notifyLocked()
	}
}

// outbox is the FIFO of caller frames waiting for the writer. Abandoned
// entries are skipped lazily and compacted when they dominate.
type outbox struct {
	q    []*request
	head int
	live int
}

func (o *outbox) push(r *request) {
	o.q = append(o.q, r)
	o.live++
}

// pushFront puts requests back at the head, in the given order.
func (o *outbox) pushFront(rs []*request) {
	if len(rs) == 0 {
		return
	}
	rest := o.q[o.head:]
	q := make([]*request, 0, len(rs)+len(rest))
	q = append(q, rs...)
	q = append(q, rest...)
	o.q, o.head = q, 0
	o.live += len(rs)
}

func (o *outbox) pop() *request {
	for o.head < len(o.q) {
		r := o.q[o.head]
		o.q[o.head] = nil
		o.head++
		if r.state == stateQueued {
			o.live--
			o.compact()
			return r
		}
	}
	o.compact()
	return nil
}

// peek returns the next queued request without taking it.
func (o *outbox) peek() *request {
	for _, r := range o.q[o.head:] {
		if r.state == stateQueued {
			return r
		}
	}
	return nil
}

// abandon marks r (queued) as given up.
func (o *outbox) abandon(r *request) {
	r.state = stateAbandoned
	o.live--
	if dead := len(o.q) - o.head - o.live; dead > 64 && dead > o.live {
		q := make([]*request, 0, o.live)
		for _, x := range o.q[o.head:] {
			if x.state == stateQueued {
				q = append(q, x)
			}
		}
		o.q, o.head = q, 0
	}
}

func (o *outbox) compact() {
	if o.head == len(o.q) {
		o.q, o.head = o.q[:0], 0
	} else if o.head > 1024 && o.head > len(o.q)/2 {
		n := copy(o.q, o.q[o.head:])
		clear(o.q[n:])
		o.q, o.head = o.q[:n], 0
	}
}

// drain removes and returns every queued request.
func (o *outbox) drain() []*request {
	var rs []*request
	for r := o.pop(); r != nil; r = o.pop() {
		rs = append(rs, r)
	}
	return rs
}

func newTraceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[0] |= 1 // never all zero
	return hex.EncodeToString(b[:])
}

// withDefaultTimeout applies RequestTimeout to a ctx without deadline.
func (c *Conn) withDefaultTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// encodeRequest builds a caller's request for typ.
func (c *Conn) encodeRequest(kind reqKind, typ, jobID string, payload any) (*request, error) {
	return c.encodeRequestWith(kind, typ, jobID, payload, SubmitOptions{})
}

// encodeRequestWith is encodeRequest with a submit's options: the caller's
// trace id (a fresh one when empty) and envelope extensions.
func (c *Conn) encodeRequestWith(kind reqKind, typ, jobID string, payload any, opts SubmitOptions) (*request, error) {
	env, err := arcp.New(typ, c.sessionID, payload)
	if err != nil {
		return nil, err
	}
	env.JobID = jobID
	env.Extensions = opts.Extensions
	r := newRequest(kind, env)
	if kind == kindSubmit && !c.cfg.knobs.noTraceIDs {
		r.traceID = opts.TraceID
		if r.traceID == "" {
			r.traceID = newTraceID()
		}
		env.TraceID = r.traceID
	}
	if r.frame, err = arcp.Encode(env); err != nil {
		return nil, err
	}
	if int64(len(r.frame)) > c.cfg.MaxFrameBytes {
		return nil, &CapError{Cap: "frame_bytes", Limit: c.cfg.MaxFrameBytes}
	}
	return r, nil
}

// enqueueLocked queues r for the writer, waiting (without the lock) while
// the outbox is full. check runs before queueing, every time the lock is
// (re)taken. On success r is queued and the lock is held.
func (c *Conn) enqueueLocked(ctx context.Context, r *request, check func() error) error {
	for {
		if c.ended {
			return c.err
		}
		if c.closeCtx.Err() != nil {
			return ErrClosed // nothing job-scoped follows session.close
		}
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		if c.out.live < outboxCap {
			break
		}
		if c.spaceCh == nil {
			c.spaceCh = make(chan struct{})
		}
		ch := c.spaceCh
		c.waitLocked(ctx, ch)
	}
	r.state = stateQueued
	c.busyLocked()
	c.out.push(r)
	if r.kind == kindSubmit {
		c.inflight++
	}
	if !r.inline {
		c.wakeWriter()
	}
	return nil
}

// abandonLocked handles a caller giving up on r (not done). A queued request
// that was never written is simply dropped. A written submit's slot belongs
// to the correlation core, which keeps it as a tombstone (its late answer is
// recognised and its job cancelled); any other sent request leaves pending
// and is tombstoned by id so that its late answer is recognised.
func (c *Conn) abandonLocked(r *request) {
	now := time.Now()
	if r.kind == kindSubmit {
		if r.state == stateQueued || r.state == stateSent || r.state == stateWritten {
			c.inflight--
		}
		if r.state == stateQueued {
			c.out.abandon(r)
		}
		r.state = stateAbandoned
		if r.written {
			delete(c.subs, r.cid)
			c.core.GaveUp(r.cid, now, c.cfg.tombstoneTTL(r.budget))
			c.applyLocked(c.tr)
		}
		return
	}
	switch r.state {
	case stateQueued:
		c.out.abandon(r)
	case stateSent:
		c.insertTombLocked(r.id, c.cfg.tombstoneTTL(r.budget), now)
		delete(c.pending, r.id)
		r.state = stateAbandoned
	}
}

// wireKey is the idempotency key sent for a submit: the caller's own key,
// namespaced by the connection's caller identity (every session of a
// gateway may share one upstream principal, and runtimes scope keys per
// session or per principal), or a random key of the gateway's, so that a
// submit can be written again after a resume without creating a second job
// (§7.2).
func (c *Conn) wireKey(callerKey string) (key string, own bool) {
	if callerKey != "" {
		if c.keyNS == "" {
			return callerKey, true
		}
		return c.keyNS + callerKey, true
	}
	if c.cfg.knobs.noAutoKeys {
		return "", false
	}
	return "sg1.auto." + newTraceID(), false
}

// Submit sends job.submit and waits for its job.accepted or rejection. A
// rejection is the runtime's *arcp.Error. When ctx has no deadline the wait
// is bounded by RequestTimeout. If ctx ends first the submit keeps its place
// in the session's FIFO as a tombstone: a late job.accepted is matched to it,
// never to another caller, and the job is cancelled upstream.
//
// A submit in flight when the transport drops keeps waiting: after the
// resume it is reconciled (found by list_jobs, or written again under its
// idempotency key, which makes the runtime answer with the job it already
// created, if any). One not yet sent waits for the resumed transport.
func (c *Conn) Submit(ctx context.Context, s arcp.Submit) (arcp.Accepted, error) {
	return c.SubmitWith(ctx, s, SubmitOptions{})
}

// SubmitOptions are a submit's envelope fields besides its payload.
type SubmitOptions struct {
	// TraceID is the job's W3C trace id (32 lowercase hex characters, see
	// arcp.ValidTraceID); empty means a fresh random one. Callers may share
	// one trace id across jobs: accepts are matched by trace id only while
	// it names one submit (see the correlation core's rules), and a submit
	// whose trace id does not is written only when no other waits.
	TraceID string
	// Extensions are put on the job.submit envelope ("x-vendor.*" keys).
	Extensions map[string]json.RawMessage
	// AwaitResult says the caller will Wait for the job's result: once
	// the job ends, its terminal is kept when the session's caps need
	// room (other jobs' logs go first, a flooding live job's included)
	// until a Wait returns or the job is forgotten.
	AwaitResult bool
}

// SubmitWith is Submit with envelope options. The accepted job's trace id
// is in the answer's TraceID (the runtime's, else the envelope's), and the
// job.accepted envelope's extensions in its Extensions.
func (c *Conn) SubmitWith(ctx context.Context, s arcp.Submit, opts SubmitOptions) (arcp.Accepted, error) {
	if opts.TraceID != "" && !arcp.ValidTraceID(opts.TraceID) {
		return arcp.Accepted{}, errorf("submit: trace id %q is not 32 lowercase hex characters", opts.TraceID)
	}
	start := time.Now()
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	key, own := c.wireKey(s.IdempotencyKey)
	s.IdempotencyKey = key
	r, err := c.encodeRequestWith(kindSubmit, arcp.TypeSubmit, "", s, opts)
	if err != nil {
		return arcp.Accepted{}, err
	}
	r.key, r.callerKey, r.awaited = key, own, opts.AwaitResult
	if dl, ok := ctx.Deadline(); ok {
		r.budget = dl.Sub(start)
	}
	r.inline = true
	var w *transport
	c.mu.Lock()
	err = c.enqueueLocked(ctx, r, func() error {
		if c.liveJobs+c.inflight >= c.cfg.MaxLiveJobs {
			return &CapError{Cap: "live_jobs", Limit: int64(c.cfg.MaxLiveJobs)}
		}
		return nil
	})
	if err == nil {
		c.nextCID++
		r.cid = c.nextCID
		c.subs[r.cid] = r
		w = c.claimWriterLocked()
	}
	c.mu.Unlock()
	if err != nil {
		return arcp.Accepted{}, err
	}
	if w != nil {
		c.writeInline(ctx, w)
	}
	if err := c.await(ctx, r); err != nil {
		return arcp.Accepted{}, err
	}
	return r.acc, r.err
}

// ListJobs sends session.list_jobs and waits for session.jobs. It needs the
// list_jobs feature. When ctx has no deadline the wait is bounded by
// RequestTimeout. A list_jobs in flight when the transport drops is sent again
// on the resumed transport.
func (c *Conn) ListJobs(ctx context.Context, q arcp.ListJobs) (arcp.Jobs, error) {
	if !c.feat.listJobs {
		return arcp.Jobs{}, fmt.Errorf("%w: list_jobs", ErrFeatureNotNegotiated)
	}
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	r, err := c.encodeRequest(kindListJobs, arcp.TypeListJobs, "", q)
	if err != nil {
		return arcp.Jobs{}, err
	}
	c.mu.Lock()
	if err := c.enqueueLocked(ctx, r, nil); err != nil {
		c.mu.Unlock()
		return arcp.Jobs{}, err
	}
	c.mu.Unlock()
	if err := c.await(ctx, r); err != nil {
		return arcp.Jobs{}, err
	}
	return r.jobs, r.err
}

// Subscribe attaches this session to a job of another session of the same
// principal (job.subscribe with history from fromSeq, in that session's
// numbering) and waits for job.subscribed. It needs the subscribe feature.
// Afterwards Watch and Wait work for the job; its events are numbered in
// this session's event_seq. Subscribing to a job this connection already
// knows returns at once.
func (c *Conn) Subscribe(ctx context.Context, jobID string, fromSeq uint64) error {
	_, err := c.SubscribeJob(ctx, arcp.Subscribe{JobID: jobID, FromEventSeq: fromSeq, History: true})
	return err
}

// SubscribeJob is Subscribe with the whole job.subscribe payload (history
// may be false: live events only), returning the job.subscribed payload,
// the job's authority descriptor (§7.6). For a job this connection already
// knows nothing is sent and the answer holds only JobID.
func (c *Conn) SubscribeJob(ctx context.Context, sub arcp.Subscribe) (arcp.Subscribed, error) {
	jobID := sub.JobID
	if !c.feat.subscribe {
		return arcp.Subscribed{}, fmt.Errorf("%w: subscribe", ErrFeatureNotNegotiated)
	}
	if jobID == "" {
		return arcp.Subscribed{}, ErrUnknownJob
	}
	known := arcp.Subscribed{JobID: jobID}
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	r, err := c.encodeRequest(kindSubscribe, arcp.TypeSubscribe, "", sub)
	if err != nil {
		return arcp.Subscribed{}, err
	}
	c.mu.Lock()
	if _, ok := c.jobs[jobID]; ok {
		c.mu.Unlock()
		return known, nil
	}
	err = c.enqueueLocked(ctx, r, func() error {
		if _, ok := c.jobs[jobID]; ok {
			return errAlreadyKnown
		}
		if c.liveJobs+c.inflight >= c.cfg.MaxLiveJobs {
			return &CapError{Cap: "live_jobs", Limit: int64(c.cfg.MaxLiveJobs)}
		}
		return nil
	})
	if errors.Is(err, errAlreadyKnown) {
		c.mu.Unlock()
		return known, nil
	}
	if err != nil {
		c.mu.Unlock()
		return arcp.Subscribed{}, err
	}
	// Register the job now: its events may follow job.subscribed at once.
	j := c.addJobLocked(jobID)
	c.rememberJobLocked(jobID)
	j.subReq = r
	j.subscribed = true
	j.obs, j.obsFrom, j.obsHistory = correlate.NewRejoin(maxRejoinKept), sub.FromEventSeq, sub.History
	r.job = j
	c.mu.Unlock()

	select {
	case <-r.done:
	case <-ctx.Done():
	case <-c.done:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.state == stateDone {
		j.subReq = nil
		if r.err != nil && len(j.items) == 0 && j.base == 0 && j.term == nil {
			c.removeJobLocked(j)
		}
		if r.err != nil {
			return arcp.Subscribed{}, r.err
		}
		return r.subd, nil
	}
	// Gave up. If the subscribe was sent the runtime may attach the job, so
	// the record stays (its events are retained under the usual caps); a
	// job of another session is never cancelled as an orphan.
	j.subReq = nil
	wasQueued := r.state == stateQueued
	c.abandonLocked(r)
	if wasQueued {
		c.removeJobLocked(j)
	}
	return arcp.Subscribed{}, c.gaveUpErrLocked(ctx)
}

var errAlreadyKnown = errors.New("upstream: job already known")

// Cancel sends job.cancel and returns once job.cancelled or the job's
// terminal arrives, or ctx ends (when ctx has no deadline, RequestTimeout
// bounds the wait). For a job whose terminal had arrived before the call it
// sends nothing and returns a *JobEndedError with the final status. A
// cancel in flight when the transport drops is sent again after resume.
func (c *Conn) Cancel(ctx context.Context, jobID, reason string) error {
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	r, err := c.encodeRequest(kindCancel, arcp.TypeCancel, jobID, arcp.Cancel{Reason: reason})
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil {
		return ErrUnknownJob
	}
	if j.term != nil {
		return &JobEndedError{JobID: jobID, FinalStatus: j.term.finalStatus(), Seq: j.term.Seq}
	}
	if j.cancelled {
		return nil
	}
	r.job = j
	if err := c.enqueueLocked(ctx, r, nil); err != nil {
		return err
	}
	j.cancelReqs = append(j.cancelReqs, r)
	for {
		switch {
		case j.term != nil || j.cancelled:
			c.resolveCancelsLocked(j)
			return nil
		case r.state == stateDone && r.err != nil:
			var ae *arcp.Error
			if errors.As(r.err, &ae) && ae.Code == arcp.CodeJobNotFound {
				// The runtime says the job already ended; its terminal,
				// sent after this answer, is on its way. Keep waiting.
				break
			}
			return r.err
		case c.ended:
			return c.err
		}
		ch := j.waitChLocked()
		c.waitLocked(ctx, ch)
		if ctx.Err() != nil && j.term == nil && !j.cancelled {
			if r.state != stateDone {
				c.abandonLocked(r)
				j.dropCancelReq(r)
			}
			// The caller stops waiting, the cancel does not: it is the
			// connection's until job.cancelled or the job's end confirms
			// it, and is written again after every resume.
			c.core.WantCancel(jobID)
			c.applyLocked(c.tr)
			return context.Cause(ctx)
		}
	}
}

// resolveCancelsLocked completes the cancels waiting on j.
func (c *Conn) resolveCancelsLocked(j *job) {
	for _, r := range j.cancelReqs {
		if r.state == stateSent {
			delete(c.pending, r.id)
		}
		if r.state == stateQueued {
			c.out.abandon(r)
			continue
		}
		c.finishRequestLocked(r, nil)
	}
	j.cancelReqs = nil
}

// waitLocked releases mu until ch fires, ctx ends or the session ends, and
// takes it again. c.mu must be held; callers re-check their condition.
func (c *Conn) waitLocked(ctx context.Context, ch <-chan struct{}) {
	c.mu.Unlock()
	defer c.mu.Lock()
	select {
	case <-ch:
	case <-ctx.Done():
	case <-c.done:
	}
}

// await waits until r is answered, ctx ends or the session ends. It returns
// nil when r was answered: its answer fields were written under mu before
// it was marked done and never change afterwards, so the caller reads them
// without the lock. Otherwise r is abandoned (a sent submit keeps its FIFO
// slot as a tombstone) and await says why.
func (c *Conn) await(ctx context.Context, r *request) error {
	select {
	case <-r.done:
	case <-ctx.Done():
	case <-c.done:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.state == stateDone {
		return nil
	}
	c.abandonLocked(r)
	return c.gaveUpErrLocked(ctx)
}

// gaveUpErrLocked is the error of a wait that ended before its request was
// answered: the caller's cause, or else why the session ended. It is never
// nil, so an unanswered request can never look like a success.
func (c *Conn) gaveUpErrLocked(ctx context.Context) error {
	if err := context.Cause(ctx); err != nil {
		return err
	}
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}
