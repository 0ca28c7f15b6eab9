package upstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
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
	stateQueued     reqState = iota // in the outbox, not sent
	stateSent                       // taken by the writer: in pending (and the FIFO for submits)
	stateTombstoned                 // a submit whose caller gave up after it was sent: keeps its FIFO slot
	stateAbandoned                  // its caller gave up while it was queued (skipped by the outbox)
	stateDone                       // answered or failed; done is closed
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
	tombExp time.Time     // stateTombstoned: when the FIFO slot's tombstone expires
	job     *job          // cancel, subscribe: the job concerned
	done    chan struct{}

	// Answer.
	acc  arcp.Accepted
	jobs arcp.Jobs
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
	if r.kind == kindSubmit && (r.state == stateQueued || r.state == stateSent) {
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

// fifo is the session's queue of sent, unanswered submits (live or
// tombstoned) in wire order. ARCP answers submits in order without a request
// id, so job.accepted belongs to the head. Entries answered out of band (a
// session.error naming them) are marked done and skipped lazily.
type fifo struct {
	q    []*request
	head int
}

func (f *fifo) push(r *request) { f.q = append(f.q, r) }

// front returns the oldest entry still waiting (sent or tombstoned).
func (f *fifo) front() *request {
	for f.head < len(f.q) {
		r := f.q[f.head]
		if r.state == stateSent || r.state == stateTombstoned {
			return r
		}
		f.q[f.head] = nil
		f.head++
	}
	f.q, f.head = f.q[:0], 0
	return nil
}

// remove takes r out of the queue (r must be waiting in it).
func (f *fifo) remove(r *request) {
	if f.front() == r {
		f.q[f.head] = nil
		f.head++
		if f.head > 1024 && f.head > len(f.q)/2 {
			n := copy(f.q, f.q[f.head:])
			clear(f.q[n:])
			f.q, f.head = f.q[:n], 0
		}
		return
	}
	// Not the head: the caller marks r done; front skips it later.
}

// findTrace returns the waiting entry whose trace id is trace.
func (f *fifo) findTrace(trace string) *request {
	for _, r := range f.q[f.head:] {
		if r != nil && r.traceID == trace && (r.state == stateSent || r.state == stateTombstoned) {
			return r
		}
	}
	return nil
}

// drain empties the queue and returns the entries still waiting.
func (f *fifo) drain() []*request {
	var rs []*request
	for _, r := range f.q[f.head:] {
		if r != nil && (r.state == stateSent || r.state == stateTombstoned) {
			rs = append(rs, r)
		}
	}
	clear(f.q)
	f.q, f.head = f.q[:0], 0
	return rs
}

func (f *fifo) len() int {
	n := 0
	for _, r := range f.q[f.head:] {
		if r != nil && (r.state == stateSent || r.state == stateTombstoned) {
			n++
		}
	}
	return n
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
	env, err := arcp.New(typ, c.sessionID, payload)
	if err != nil {
		return nil, err
	}
	env.JobID = jobID
	r := newRequest(kind, env)
	if kind == kindSubmit && !c.cfg.knobs.noTraceIDs {
		r.traceID = newTraceID()
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
	c.out.push(r)
	if r.kind == kindSubmit {
		c.inflight++
	}
	c.wakeWriter()
	return nil
}

// abandonLocked handles a caller giving up on r (not done). A queued request
// is simply dropped: it was never sent. A sent submit keeps its FIFO slot as
// a tombstone; any other sent request leaves pending and is tombstoned by id
// so that its late answer is recognised.
func (c *Conn) abandonLocked(r *request) {
	now := time.Now()
	switch r.state {
	case stateQueued:
		if r.kind == kindSubmit {
			c.inflight--
		}
		c.out.abandon(r)
	case stateSent:
		ttl := c.cfg.tombstoneTTL(r.budget)
		c.insertTombLocked(r.id, ttl, now)
		if r.kind == kindSubmit {
			c.inflight--
			r.state = stateTombstoned
			r.tombExp = now.Add(ttl)
			return
		}
		delete(c.pending, r.id)
		r.state = stateAbandoned
	}
}

// Submit sends job.submit and waits for its job.accepted or rejection. A
// rejection is the runtime's *arcp.Error. When ctx has no deadline the wait
// is bounded by RequestTimeout. If ctx ends first the submit keeps its place
// in the session's FIFO as a tombstone: a late job.accepted is matched to it,
// never to another caller, and the job is cancelled upstream.
//
// A submit that was sent when the transport dropped fails with
// ErrOutcomeUnknown; one not yet sent waits for the resumed transport.
func (c *Conn) Submit(ctx context.Context, s arcp.Submit) (arcp.Accepted, error) {
	start := time.Now()
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	r, err := c.encodeRequest(kindSubmit, arcp.TypeSubmit, "", s)
	if err != nil {
		return arcp.Accepted{}, err
	}
	if dl, ok := ctx.Deadline(); ok {
		r.budget = dl.Sub(start)
	}
	c.mu.Lock()
	err = c.enqueueLocked(ctx, r, func() error {
		if c.liveJobs+c.inflight >= c.cfg.MaxLiveJobs {
			return &CapError{Cap: "live_jobs", Limit: int64(c.cfg.MaxLiveJobs)}
		}
		return nil
	})
	c.mu.Unlock()
	if err != nil {
		return arcp.Accepted{}, err
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
	if !c.feat.subscribe {
		return fmt.Errorf("%w: subscribe", ErrFeatureNotNegotiated)
	}
	if jobID == "" {
		return ErrUnknownJob
	}
	ctx, cancel := c.withDefaultTimeout(ctx)
	defer cancel()
	r, err := c.encodeRequest(kindSubscribe, arcp.TypeSubscribe, "",
		arcp.Subscribe{JobID: jobID, FromEventSeq: fromSeq, History: true})
	if err != nil {
		return err
	}
	c.mu.Lock()
	if _, ok := c.jobs[jobID]; ok {
		c.mu.Unlock()
		return nil
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
		return nil
	}
	if err != nil {
		c.mu.Unlock()
		return err
	}
	// Register the job now: its events may follow job.subscribed at once.
	j := c.addJobLocked(jobID)
	j.subReq = r
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
		return r.err
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
	return c.gaveUpErrLocked(ctx)
}

var errAlreadyKnown = errors.New("upstream: job already known")

// Cancel sends job.cancel and returns once job.cancelled or the job's
// terminal arrives, or ctx ends (when ctx has no deadline, RequestTimeout
// bounds the wait). It returns nil at once for a job that already ended. A
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
	if j.term != nil || j.cancelled {
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
