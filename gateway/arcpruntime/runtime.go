package arcpruntime

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Runtime is an ARCP 1.1 runtime. It implements http.Handler: every request
// it serves is upgraded to a WebSocket carrying one ARCP transport.
//
// All methods are safe for concurrent use.
type Runtime struct {
	// Immutable after New.
	opts   Options
	agents []agent
	log    *slog.Logger
	ctx    context.Context // cancelled by Close; parent of every transport and job
	cancel context.CancelCauseFunc

	// wg counts every goroutine the runtime owns (ServeHTTP calls in
	// progress, writers, dispatchers, jobs, agents) and every armed expiry
	// timer. Add is only called under mu while !closed; Close waits.
	wg sync.WaitGroup

	stats       counters
	acceptDelay atomic.Int64 // time.Duration
	stalled     atomic.Bool  // mirrors unstall != nil, for the heartbeat watchdogs
	silence     atomic.Bool

	mu         sync.Mutex
	closed     bool                    // guarded by mu
	unstall    chan struct{}           // guarded by mu; non-nil while stalled, closed when the stall ends
	sessions   map[string]*session     // guarded by mu
	transports map[*transport]struct{} // guarded by mu
	nextOrd    uint64                  // guarded by mu; runtime-wide job ordinal
	index      jobIndex                // guarded by mu; test-hook records
	idem       map[string]*job         // guarded by mu; principal-scoped keys (ScopePrincipal)
	reuseID    string                  // guarded by mu; ReuseJobIDOnce
}

// New returns a runtime configured by opts (zero fields take defaults).
func New(opts Options) *Runtime {
	if err := opts.Dialect.Validate(); err != nil {
		panic(err)
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Runtime{
		opts:       opts,
		agents:     defaultAgents,
		log:        opts.Logger,
		ctx:        ctx,
		cancel:     cancel,
		sessions:   make(map[string]*session),
		transports: make(map[*transport]struct{}),
		index:      newJobIndex(),
		idem:       make(map[string]*job),
	}
}

var _ http.Handler = (*Runtime)(nil)

// goLocked starts f as a goroutine owned by the runtime. It reports false,
// starting nothing, once the runtime is closed. r.mu must be held.
func (r *Runtime) goLocked(f func()) bool {
	if r.closed {
		return false
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
	return true
}

// Close ends every session, job and transport and waits for every goroutine
// the runtime started. It is idempotent.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		r.wg.Wait()
		return nil
	}
	r.closed = true
	r.cancel(errClosed)
	for _, s := range r.sessions {
		r.discardLocked(s, errClosed, true)
	}
	for t := range r.transports {
		t.abort(errClosed)
	}
	if r.unstall != nil {
		close(r.unstall)
		r.unstall = nil
	}
	r.mu.Unlock()
	r.wg.Wait()
	return nil
}

var (
	errDropped          = errors.New("arcpruntime: transport dropped by test hook")
	errReset            = errors.New("arcpruntime: runtime reset")
	errReplaced         = errors.New("arcpruntime: transport replaced by a resume")
	errHandshakeTimeout = errors.New("arcpruntime: handshake timeout")
	errHeartbeatLost    = errors.New("arcpruntime: heartbeat lost")
	errSlowConsumer     = errors.New("arcpruntime: client too slow")
	errSessionGone      = errors.New("arcpruntime: session ended")
	errSessionExpired   = errors.New("arcpruntime: resume window expired")
	errJobCancelled     = errors.New("arcpruntime: job cancelled")
	errJobTimeout       = errors.New("arcpruntime: max_runtime_sec exceeded")
	errTransportDone    = errors.New("arcpruntime: transport ended")
	errJobDone          = errors.New("arcpruntime: job ended")
)

// DropTransports abruptly closes every live WebSocket, without a close frame
// or session.bye. Sessions, jobs and replay buffers survive for resume. It
// returns how many transports were dropped, after they are gone.
func (r *Runtime) DropTransports() int {
	r.mu.Lock()
	ts := make([]*transport, 0, len(r.transports))
	for t := range r.transports {
		ts = append(ts, t)
		t.abort(errDropped)
	}
	r.mu.Unlock()
	for _, t := range ts {
		<-t.done
	}
	r.stats.dropped.Add(int64(len(ts)))
	return len(ts)
}

// DropSession abruptly closes the live WebSocket of one session, as
// DropTransports does for all. It reports whether the session had one, after
// it is gone.
func (r *Runtime) DropSession(sessionID string) bool {
	r.mu.Lock()
	var t *transport
	if s := r.sessions[sessionID]; s != nil && s.cur != nil {
		t = s.cur
		t.abort(errDropped)
	}
	r.mu.Unlock()
	if t == nil {
		return false
	}
	<-t.done
	r.stats.dropped.Add(1)
	return true
}

// Stall stops (on) or resumes (off) all sending. While stalled the runtime
// writes nothing at all — no answers, events, pings or pongs — holds every
// incoming frame unprocessed, and does not enforce heartbeats; jobs keep
// running and their events go to the replay buffer. When Stall(true)
// returns, no write is in progress and none will start until Stall(false).
// Stall(false) processes the held frames and sends everything that is due.
func (r *Runtime) Stall(on bool) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if !on {
		if r.unstall != nil {
			// Nothing was heard while frames were held: restart the
			// heartbeat clocks.
			now := time.Now().UnixNano()
			for t := range r.transports {
				t.lastRecv.Store(now)
			}
			close(r.unstall)
			r.unstall = nil
			r.stalled.Store(false)
		}
		r.mu.Unlock()
		return
	}
	if r.unstall == nil {
		r.unstall = make(chan struct{})
		r.stalled.Store(true)
	}
	ts := make([]*transport, 0, len(r.transports))
	for t := range r.transports {
		ts = append(ts, t)
	}
	r.mu.Unlock()
	// Wait for writes already in progress: writers check the stall under
	// wmu before every write.
	for _, t := range ts {
		t.wmu.Lock()
		//lint:ignore SA2001 the empty critical section is a barrier.
		t.wmu.Unlock()
	}
}

// stallCh returns a channel closed when the current stall ends, or nil when
// the runtime is not stalled.
func (r *Runtime) stallCh() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unstallLocked()
}

func (r *Runtime) unstallLocked() <-chan struct{} {
	if r.unstall == nil {
		return nil
	}
	return r.unstall
}

// SetAcceptDelay delays the processing of every job.submit — and so its
// job.accepted or session.error and the job's start — by d. Requests of one
// transport are still answered in arrival order. Zero turns it off.
func (r *Runtime) SetAcceptDelay(d time.Duration) {
	if d < 0 {
		d = 0
	}
	r.acceptDelay.Store(int64(d))
}

// SetHandshakeSilence makes the runtime ignore session.hello while on, so
// clients run into their handshake timeout.
func (r *Runtime) SetHandshakeSilence(on bool) { r.silence.Store(on) }

// InjectFrame writes frame as one WebSocket message (binary or text) to the
// live transport of the session, in order with the runtime's other frames.
func (r *Runtime) InjectFrame(sessionID string, frame []byte, binary bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errClosed
	}
	s := r.sessions[sessionID]
	if s == nil {
		return errors.New("arcpruntime: inject: unknown session")
	}
	t := s.cur
	if t == nil {
		return errors.New("arcpruntime: inject: session has no live transport")
	}
	if !t.enqueueLocked(outFrame{data: append([]byte(nil), frame...), binary: binary}) {
		return errors.New("arcpruntime: inject: transport is closing")
	}
	return nil
}

// Reset forgets all state as a restart would: every session and resume
// token, every job (running jobs are stopped and awaited) and every
// transport (dropped abruptly). Counters in Stats are kept.
func (r *Runtime) Reset() {
	r.mu.Lock()
	var jobs []*job
	for _, s := range r.sessions {
		jobs = append(jobs, r.discardLocked(s, errReset, true)...)
	}
	ts := make([]*transport, 0, len(r.transports))
	for t := range r.transports {
		ts = append(ts, t)
		t.abort(errReset)
	}
	r.index = newJobIndex()
	r.mu.Unlock()
	for _, t := range ts {
		<-t.done
	}
	for _, j := range jobs {
		<-j.done
	}
}

// ReuseJobIDOnce makes the next job accepted for a submit without
// idempotency key, in any session, get jobID instead of a fresh id — even
// when a live job has that id, as a buggy runtime would. Empty turns it off.
func (r *Runtime) ReuseJobIDOnce(jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reuseID = jobID
}

// Cancelled reports whether job.cancel was received for jobID (from any
// session) since the last Reset.
func (r *Runtime) Cancelled(jobID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.index.get(jobID)
	return rec != nil && rec.cancelled
}

// JobInput returns the input submitted for jobID, if the job is known (jobs
// are remembered until Reset, up to a bounded number).
func (r *Runtime) JobInput(jobID string) (json.RawMessage, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.index.get(jobID)
	if rec == nil || !rec.known {
		return nil, false
	}
	return append(json.RawMessage(nil), rec.input...), true
}

// Stats is a snapshot of the runtime's counters and gauges.
type Stats struct {
	// Gauges.
	Sessions       int64 // sessions that exist (attached or resumable)
	LiveTransports int64 // open WebSockets, handshaken or not
	LiveJobs       int64 // pending or running jobs

	// Counters since New.
	JobsSubmitted     int64 // job.submit envelopes received
	JobsAccepted      int64 // distinct jobs created (idempotent repeats excluded)
	JobsRejected      int64 // job.submit answered with session.error
	JobsCancelled     int64 // job.cancel that reached a live job (answered job.cancelled)
	Resumes           int64 // successful resumes
	ResumeFailures    int64 // resume attempts answered with session.error
	FramesReceived    int64 // WebSocket messages read
	FramesSent        int64 // WebSocket messages written
	InvalidFrames     int64 // binary frames, undecodable envelopes, wrong session_id
	UnknownTypes      int64 // valid envelopes of a type the runtime does not take
	HandshakeFailures int64 // transports closed with session.error during the handshake
	AuthFailures      int64 // UNAUTHENTICATED answers
	HeartbeatLosses   int64 // transports closed for lack of client traffic
	SlowConsumers     int64 // transports dropped because the client could not keep up
	Dropped           int64 // transports closed by DropTransports
	EventsEvicted     int64 // sequenced envelopes dropped from replay buffers by the caps
}

type counters struct {
	jobsSubmitted, jobsAccepted, jobsRejected, jobsCancelled atomic.Int64
	resumes, resumeFailures                                  atomic.Int64
	framesReceived, framesSent, invalidFrames, unknownTypes  atomic.Int64
	handshakeFailures, authFailures, heartbeatLosses         atomic.Int64
	slowConsumers, dropped, eventsEvicted                    atomic.Int64
}

// Stats returns a snapshot of the counters.
func (r *Runtime) Stats() Stats {
	r.mu.Lock()
	st := Stats{
		Sessions:       int64(len(r.sessions)),
		LiveTransports: int64(len(r.transports)),
	}
	for _, s := range r.sessions {
		st.LiveJobs += int64(s.live)
	}
	r.mu.Unlock()
	c := &r.stats
	st.JobsSubmitted = c.jobsSubmitted.Load()
	st.JobsAccepted = c.jobsAccepted.Load()
	st.JobsRejected = c.jobsRejected.Load()
	st.JobsCancelled = c.jobsCancelled.Load()
	st.Resumes = c.resumes.Load()
	st.ResumeFailures = c.resumeFailures.Load()
	st.FramesReceived = c.framesReceived.Load()
	st.FramesSent = c.framesSent.Load()
	st.InvalidFrames = c.invalidFrames.Load()
	st.UnknownTypes = c.unknownTypes.Load()
	st.HandshakeFailures = c.handshakeFailures.Load()
	st.AuthFailures = c.authFailures.Load()
	st.HeartbeatLosses = c.heartbeatLosses.Load()
	st.SlowConsumers = c.slowConsumers.Load()
	st.Dropped = c.dropped.Load()
	st.EventsEvicted = c.eventsEvicted.Load()
	return st
}

// jobIndex remembers, runtime-wide and across session ends, which job ids
// were cancelled and what they were submitted with, for the test hooks. It
// is bounded by count and input bytes; the oldest records go first.
type jobIndex struct {
	recs  map[string]*jobRecord
	order []string
	head  int
	bytes int
}

type jobRecord struct {
	known     bool // a job of that id was accepted
	input     json.RawMessage
	cancelled bool
}

const (
	maxIndexRecords = 100_000
	maxIndexBytes   = 64 << 20
)

func newJobIndex() jobIndex { return jobIndex{recs: make(map[string]*jobRecord)} }

func (x *jobIndex) get(id string) *jobRecord { return x.recs[id] }

// record returns the record of id, creating it if needed.
func (x *jobIndex) record(id string) *jobRecord {
	if rec := x.recs[id]; rec != nil {
		return rec
	}
	rec := &jobRecord{}
	x.recs[id] = rec
	x.order = append(x.order, id)
	x.evict()
	return rec
}

func (x *jobIndex) addInput(rec *jobRecord, input json.RawMessage) {
	rec.known = true
	rec.input = input
	x.bytes += len(input)
	x.evict()
}

func (x *jobIndex) evict() {
	for len(x.order)-x.head > maxIndexRecords || (x.bytes > maxIndexBytes && len(x.order)-x.head > 1) {
		id := x.order[x.head]
		x.order[x.head] = ""
		x.head++
		if rec := x.recs[id]; rec != nil {
			x.bytes -= len(rec.input)
			delete(x.recs, id)
		}
	}
	if x.head > 1024 && x.head*2 > len(x.order) {
		x.order = append([]string(nil), x.order[x.head:]...)
		x.head = 0
	}
}
