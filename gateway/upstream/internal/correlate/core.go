package correlate

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
	"time"
)

// ID names a caller's submit to the core. The connection assigns it; it never
// changes, also when the submit is written again after a resume.
type ID uint64

// Kind is what an Action asks the connection to do.
type Kind uint8

const (
	// Deliver: hand Job to the caller of ID (its submit was accepted).
	Deliver Kind = iota + 1
	// Fail: end the caller of ID with Err (a definite answer).
	Fail
	// Cancel: send job.cancel for Job. The cancel is owned by the
	// connection: Cancel is asked for again after every resume until
	// Cancelled or JobEnded confirms it.
	Cancel
	// Discard: forget what was held for Job (it was unclaimed); a Cancel
	// for it precedes this action.
	Discard
	// Resend: write the submit of ID again, before any other submit, with a
	// new envelope id and the same key, trace id and payload; then call
	// Written.
	Resend
	// WriteBarrier: write the barrier request with envelope id Req
	// (session.list_jobs when negotiated, else job.cancel for a job id that
	// cannot exist), before any submit.
	WriteBarrier
	// Drop: drop the transport and resume.
	Drop
	// Lost: end the session with Err.
	Lost
)

// Action is one thing the connection must do.
type Action struct {
	Kind Kind
	ID   ID
	Job  string
	Req  string
	Err  error
	// Foreign (Deliver only): the job is an idempotent replay of a job
	// another session created. Its events go to that session: the
	// connection must attach it here (job.subscribe with history) or end
	// it with a definite error.
	Foreign bool
}

// Errors the core fails callers with.
var (
	// ErrJobIDReused: the runtime answered the submit with the id of a job
	// that belongs to another submit. The submit's outcome is unknown.
	ErrJobIDReused = errors.New("the runtime answered the submit with the id of another live job")
	// ErrBarrierUnanswered is Lost's error when the runtime left
	// maxBarrierMisses barriers in a row unanswered.
	ErrBarrierUnanswered = errors.New("the runtime stopped answering requests (reconciliation barrier unanswered)")
	// ErrSessionEnded is Lost's error for session-fatal session.error
	// codes; the connection wraps it with the runtime's error.
	ErrSessionEnded = errors.New("the runtime ended the session")
	// ErrUnreadableAnswers fails a submit that was in flight when the
	// runtime sent an unreadable answer MaxUnreadable times: the runtime
	// is answering it with garbage, and resuming again would only churn.
	ErrUnreadableAnswers = errors.New("the runtime answered the submit with unreadable frames")
	// ErrUnreadableAnswer is the cause of the Drop that follows an
	// unreadable answer while submits wait.
	ErrUnreadableAnswer = errors.New("unreadable answer while submits wait: FIFO alignment unknown")
	// ErrEchoLost is the cause of the Drop that follows an accept without
	// a trace id from a runtime that had been echoing them, while more
	// than one submit waits: which one it answers is unknown.
	ErrEchoLost = errors.New("the runtime stopped echoing trace ids while several submits wait")
)

// Verdict says what to do with frames of a job the connection does not know.
type Verdict uint8

const (
	// Orphan: nobody will claim it; a Cancel action was emitted.
	Orphan Verdict = iota + 1
	// Hold: a submit may still claim it (reconciliation after a resume is
	// under way): keep its frames.
	Hold
	// Late: a job already cancelled as an orphan: drop its frames.
	Late
)

// Listed is one job of a list_jobs answer.
type Listed struct {
	JobID   string
	TraceID string
}

// Counters count what the core saw. Plain fields: the core is single-threaded.
type Counters struct {
	LateAnswers        uint64 // answers for submits whose caller gave up, or for nobody
	StaleAnswers       uint64 // accepts for forgotten submits (cancelled as orphans)
	OrderViolations    uint64 // accepts matched by trace id that were not the head's
	JobIDReused        uint64 // accepts reusing another submit's live job id
	DuplicateAnswers   uint64 // second answers to one submit (a resend and its original)
	OrphansCancelled   uint64 // Cancel actions for orphans
	FIFOStalls         uint64 // drops because an abandoned head expired with nobody behind
	BarrierTimeouts    uint64 // barriers left unanswered
	Resends            uint64 // submits written again after a resume
	ReconciledByList   uint64 // limbo submits bound by a list_jobs answer
	PositionalIgnored  uint64 // positional rejections during quarantine or with nothing waiting
	SessionErrorResume uint64 // session-level errors that led to a resume
	SerializedWrites   uint64 // submits held back because they could not be pipelined
	UnreadableAnswers  uint64 // unreadable answers while submits waited (each drops the transport)
	UnreadableFailures uint64 // submits failed after MaxUnreadable unreadable answers
	StrayRejections    uint64 // positional rejections the head's own accept proved were not its answer
	EchoLost           uint64 // accepts without a trace id from a runtime that echoed them
	ForeignReplays     uint64 // accepts replaying a job another session created (Deliver with Foreign)
}

type where uint8

const (
	inFIFO where = iota + 1
	inLimbo
	resendPending // asked to be written again, not written yet
	gone          // answered, failed, or forgotten
)

type entry struct {
	id        ID
	req       string   // current envelope id
	oldReqs   []string // envelope ids of earlier writes
	trace     string
	key       string
	callerKey bool // the key is the caller's own (a replay of an unseen job is possible)
	live      bool // the caller still waits
	where     where
	resent    bool      // written again after a resume: its answer ends reconciliation
	tombExp   time.Time // abandoned: when its slot's tombstone expires
	strikes   int       // unreadable answers received while it was in flight
	rejectErr error     // a positional rejection, pending until rejectReq's barrier is answered
	rejectReq string    // that barrier's envelope id
}

// rejBarrier is a barrier written after a positional rejection: when it is
// answered every answer to what was written before it has come.
type rejBarrier struct {
	req string
	exp time.Time
}

// deadRec remembers the trace id of a submit that ended without its own
// accept (abandoned and not written again, or failed by position): a later
// accept carrying it is the answer to that submit.
type deadRec struct {
	exp time.Time
	key string
}

type jobRec struct {
	key   string
	owner ID // 0: an orphan
}

// Config holds the core's tuning.
type Config struct {
	// BarrierTimeout bounds the wait for the barrier's answer.
	BarrierTimeout time.Duration
	// TraceTTL is how long tombstoned trace ids (of abandoned submits
	// that were not written again) are remembered.
	TraceTTL time.Duration
	// MaxUnclaimed bounds jobs held as unclaimed; beyond it a new one is
	// an orphan at once.
	MaxUnclaimed int
	// MaxUnreadable is how many unreadable answers a submit in flight
	// survives (each drops the transport and reconciles) before it fails
	// with ErrUnreadableAnswers. Default 3.
	MaxUnreadable int
	// MaxDeadTraces bounds the remembered trace ids of submits that ended
	// without their own accept. Default 100,000.
	MaxDeadTraces int
	// Echo is what is already known of the runtime: 1 it copies each
	// submit's trace id onto its job.accepted, -1 it does not, 0 unknown
	// (one submit in flight until the first accept shows it).
	Echo int8
	// brokenRule disables one rule; only tests set it, to show that the
	// property test catches it.
	brokenRule string
}

// maxBarrierMisses is how many barriers in a row may go unanswered before
// the session is given up.
const maxBarrierMisses = 3

// Core is the correlation state of one ARCP session. It is not safe for
// concurrent use: the connection calls it under its mutex.
type Core struct {
	cfg Config

	entries map[ID]*entry
	byReq   map[string]*entry // every envelope id an entry was written under
	byTrace map[string]*entry // waiting entries (fifo, limbo, resendPending) by their unique trace id
	traceN  map[string]int32  // waiting entries per trace id: a trace id identifies a submit only while it is 1
	fifo    []*entry          // current transport, wire order; gone entries skipped
	head    int
	limbo   []*entry // earlier transports' unanswered submits, wire order

	jobs       map[string]*jobRec  // jobs bound to a submit, or cancelled as orphans
	unclaimed  map[string]string   // job id → trace id: accepted or seen during reconciliation, not yet bound
	deadTrace  map[string]deadRec  // trace ids of submits that ended without their own accept
	wantCancel map[string]struct{} // cancels owned by the connection until confirmed

	echo          int8 // 0 unknown, 1 the runtime copies trace ids onto accepts, -1 it does not
	connected     bool
	quarantine    bool
	barrierReq    string
	barrierExp    time.Time
	barrierMisses int          // consecutive barriers left unanswered
	rejBarriers   []rejBarrier // barriers written after positional rejections, oldest first
	resends       int          // resent entries still in the fifo or pending

	out  []Action
	ctr  Counters
	last time.Time // the latest time an event carried (for events that carry none)
	nReq uint64    // barriers the core named itself
}

// at records the time an event carried.
func (c *Core) at(now time.Time) {
	if now.After(c.last) {
		c.last = now
	}
}

// New returns an empty core, not connected.
func New(cfg Config) *Core {
	if cfg.BarrierTimeout <= 0 {
		cfg.BarrierTimeout = 30 * time.Second
	}
	if cfg.TraceTTL <= 0 {
		cfg.TraceTTL = 10 * time.Minute
	}
	if cfg.MaxUnclaimed <= 0 {
		cfg.MaxUnclaimed = 10_000
	}
	if cfg.MaxUnreadable <= 0 {
		cfg.MaxUnreadable = 3
	}
	if cfg.MaxDeadTraces <= 0 {
		cfg.MaxDeadTraces = 100_000
	}
	// The maps are made on first write: an idle session's core costs no
	// more than its struct (reads and deletes work on nil maps).
	return &Core{cfg: cfg, echo: cfg.Echo}
}

// put stores v under k in *m, making the map on first use.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = make(map[K]V)
	}
	(*m)[k] = v
}

// Actions returns the actions emitted since the last call, in order. The
// slice is reused by the next event.
func (c *Core) Actions() []Action {
	a := c.out
	c.out = c.out[:0]
	return a
}

// Counters returns the counts so far.
func (c *Core) Counters() Counters { return c.ctr }

// MayWriteSubmits reports whether submits may be written now at all: not
// while a barrier is awaited. MayWriteSubmit says whether a given one may.
func (c *Core) MayWriteSubmits() bool { return c.connected && !c.quarantine }

// MayWriteSubmit reports whether the submit id with trace id trace may be
// written now. Submits are pipelined only when the runtime is known to echo
// trace ids and trace identifies this submit alone; any other submit is
// written only when no earlier one waits on the transport, since nothing
// could tell its accept from theirs if the runtime answered out of order.
// A false answer is counted once per call; the connection asks again after
// the next answer.
func (c *Core) MayWriteSubmit(id ID, trace string) bool {
	if !c.MayWriteSubmits() {
		return false
	}
	if c.fifoIdle() || c.echo == 1 && c.identifies(id, trace) || c.cfg.brokenRule == "pipeline-always" {
		return true
	}
	c.ctr.SerializedWrites++
	return false
}

// identifies reports whether trace would name only the submit id: no other
// waiting submit carries it and no submit that ended without its accept did.
func (c *Core) identifies(id ID, trace string) bool {
	if trace == "" {
		return false
	}
	if _, dead := c.deadTrace[trace]; dead {
		return false
	}
	n := c.traceN[trace]
	if e := c.entries[id]; e != nil {
		return n == 1 && c.byTrace[trace] == e
	}
	return n == 0
}

// fifoIdle reports whether no submit waits on the current transport, live
// or abandoned.
func (c *Core) fifoIdle() bool { return c.front() == nil }

// Echo returns what the core knows of the runtime's trace ids: 1 echoed, -1
// not, 0 unknown (see Config.Echo).
func (c *Core) Echo() int8 { return c.echo }

// Waiting returns the number of submits written and not yet answered
// (live or abandoned), in the FIFO, in limbo or waiting to be written again.
func (c *Core) Waiting() int { return len(c.entries) }

// Reconciling reports whether a resume's reconciliation is under way.
func (c *Core) Reconciling() bool { return c.quarantine || c.resends > 0 }

func (c *Core) emit(a Action) { c.out = append(c.out, a) }

// Connected says the first transport is up (after the handshake).
func (c *Core) Connected() { c.connected = true }

// Written records that the submit id was written on the current transport
// with envelope id req. key is never empty; callerKey says it is the caller's
// own. trace is the trace id on the envelope (empty if none); it identifies
// the submit only while no other waiting submit carries it and no submit
// that ended without its accept did (a caller's trace id may be shared by
// many jobs). A submit asked for by Resend is written with the same key and trace.
// It reports false, changing nothing, for a submit the core knows and did
// not ask to be written (the connection must not write it).
func (c *Core) Written(id ID, req, trace, key string, callerKey bool) bool {
	e := c.entries[id]
	if e == nil {
		unique := c.identifies(id, trace)
		e = &entry{id: id, trace: trace, key: key, callerKey: callerKey, live: true}
		put(&c.entries, id, e)
		if trace != "" {
			// A trace id shared by waiting submits, or by one that
			// ended unanswered, identifies none of them: position
			// decides, and MayWriteSubmit kept this one from being
			// pipelined.
			if unique {
				put(&c.byTrace, trace, e)
			}
			put(&c.traceN, trace, c.traceN[trace]+1)
		}
	} else {
		if e.where != resendPending {
			return false
		}
		e.oldReqs = append(e.oldReqs, e.req)
	}
	e.req = req
	e.where = inFIFO
	put(&c.byReq, req, e)
	c.fifo = append(c.fifo, e)
	return true
}

// GaveUp records that the caller of id stopped waiting at now; its slot
// stays as a tombstone until ttl has passed.
func (c *Core) GaveUp(id ID, now time.Time, ttl time.Duration) {
	c.at(now)
	e := c.entries[id]
	if e == nil || !e.live {
		return
	}
	e.live = false
	e.tombExp = now.Add(ttl)
	if e.where == resendPending {
		// Not written again: nothing will answer it on this transport.
		c.buryLocked(e, now)
		c.resends--
		c.settleReconciliation()
	}
}

// bury forgets an abandoned entry that will not be answered in place, and
// tombstones its trace id so that a late accept carrying it is an orphan.
func (c *Core) buryLocked(e *entry, now time.Time) {
	c.forget(e)
	c.markDead(e, now)
}

// markDead remembers e's trace id (if it identified e alone) as the trace of
// a submit that ended without its own accept. Call after forget.
func (c *Core) markDead(e *entry, now time.Time) {
	if e.trace == "" || c.traceN[e.trace] > 0 || len(c.deadTrace) >= c.cfg.MaxDeadTraces {
		return
	}
	put(&c.deadTrace, e.trace, deadRec{exp: now.Add(c.cfg.TraceTTL), key: e.key})
}

func (c *Core) forget(e *entry) {
	e.where = gone
	delete(c.entries, e.id)
	delete(c.byReq, e.req)
	for _, r := range e.oldReqs {
		delete(c.byReq, r)
	}
	if e.trace != "" {
		if c.byTrace[e.trace] == e {
			delete(c.byTrace, e.trace)
		}
		if n := c.traceN[e.trace] - 1; n > 0 {
			c.traceN[e.trace] = n
		} else {
			delete(c.traceN, e.trace)
		}
	}
}

// byTraceID returns the waiting entry trace id t identifies.
func (c *Core) byTraceID(t string) *entry {
	if t == "" || c.traceN[t] != 1 {
		return nil
	}
	return c.byTrace[t]
}

func (c *Core) front() *entry {
	for c.head < len(c.fifo) {
		if e := c.fifo[c.head]; e.where == inFIFO {
			return e
		}
		c.fifo[c.head] = nil
		c.head++
	}
	c.fifo, c.head = c.fifo[:0], 0
	return nil
}

// finishEntry takes e out of wherever it waits. A resent entry ends its part
// of the reconciliation.
func (c *Core) finishEntry(e *entry) {
	if e.resent && (e.where == inFIFO || e.where == resendPending) {
		c.resends--
	}
	c.forget(e)
}

// bind gives job to e: delivered when its caller waits, else cancelled as an
// orphan (unless the job belongs to a live caller: an idempotent replay).
func (c *Core) bind(e *entry, job string) {
	if e.rejectErr != nil {
		// Its own accept came: the positional rejection was not its answer.
		c.ctr.StrayRejections++
	}
	live := e.live
	c.finishEntry(e)
	delete(c.unclaimed, job)
	if live {
		put(&c.jobs, job, &jobRec{key: e.key, owner: e.id})
		c.emit(Action{Kind: Deliver, ID: e.id, Job: job})
	} else {
		c.ctr.LateAnswers++
		if r := c.jobs[job]; r == nil || r.owner == 0 {
			c.orphan(job)
			c.jobs[job].key = e.key
		}
	}
	c.settleReconciliation()
}

func (c *Core) fail(e *entry, err error) {
	live := e.live
	c.finishEntry(e)
	if live {
		c.emit(Action{Kind: Fail, ID: e.id, Err: err})
	} else {
		c.ctr.LateAnswers++
	}
	c.settleReconciliation()
}

// orphan cancels job: nobody owns it.
func (c *Core) orphan(job string) {
	if r := c.jobs[job]; r != nil && r.owner == 0 {
		return // already cancelled
	}
	put(&c.jobs, job, &jobRec{})
	c.ctr.OrphansCancelled++
	put(&c.wantCancel, job, struct{}{})
	if c.connected {
		c.emit(Action{Kind: Cancel, Job: job})
	}
	if _, held := c.unclaimed[job]; held {
		delete(c.unclaimed, job)
		c.emit(Action{Kind: Discard, Job: job})
	}
}

// Accepted handles a job.accepted for job with trace id trace ("" if none).
func (c *Core) Accepted(job, trace string, now time.Time) {
	c.at(now)
	if c.quarantine {
		c.acceptedInQuarantine(job, trace, now)
		return
	}
	if e := c.byTraceID(trace); e != nil && e.where == inFIFO {
		c.echo = 1
		if e != c.front() {
			c.ctr.OrderViolations++
		}
		if r := c.jobs[job]; r != nil && (r.key == "" || r.key != e.key) && c.cfg.brokenRule != "no-key-check" {
			// Its own answer, but with another submit's job id.
			c.ctr.JobIDReused++
			c.fail(e, ErrJobIDReused)
			return
		}
		c.bind(e, job)
		return
	}
	head := c.front()
	if r := c.jobs[job]; r != nil {
		switch {
		case head != nil && r.key != "" && r.key == head.key && c.cfg.brokenRule != "no-key-check":
			// An idempotent replay for the head (§7.2).
			c.bind(head, job)
		case head == nil || r.owner != 0 && c.isDuplicateOf(r, head):
			c.ctr.DuplicateAnswers++
		case c.cfg.brokenRule == "no-key-check":
			c.bind(head, job)
		default:
			c.ctr.JobIDReused++
			c.fail(head, ErrJobIDReused)
		}
		return
	}
	if d, ok := c.deadTrace[trace]; trace != "" && ok && now.Before(d.exp) && c.traceN[trace] == 0 && c.cfg.brokenRule != "no-dead-trace" {
		if head != nil && head.callerKey && head.key == d.key {
			// An idempotent replay for the head (§7.2): the submit
			// that ended unanswered had the head's own key.
			c.bind(head, job)
			return
		}
		// The answer to a submit that ended without it (abandoned, or
		// failed by a positional rejection that was not its own).
		c.ctr.LateAnswers++
		c.orphan(job)
		return
	}
	if head == nil {
		c.ctr.LateAnswers++
		c.orphan(job)
		return
	}
	if trace == "" && c.echo == 1 {
		// The runtime echoed trace ids and stopped. With one submit
		// waiting position is sound; with more, which one this answers
		// is unknown: reconcile on a new transport.
		c.ctr.EchoLost++
		c.echo = -1
		if c.inFIFO() > 1 {
			c.emit(Action{Kind: Drop, Err: ErrEchoLost})
			return
		}
	}
	if next := c.firstUnrejected(); next != nil && c.replayOfUnseen(trace, next) {
		// The submit an in-order runtime answers next (a head whose
		// positional rejection waits for its barrier was answered).
		c.bindReplay(next, job)
		return
	}
	if trace != "" && c.echo == 1 && !head.callerKey && trace != head.trace && c.cfg.brokenRule != "no-stale-check" {
		// The runtime copies trace ids, this one names nothing waiting,
		// and the head cannot be a replay: an answer to a forgotten submit.
		c.ctr.StaleAnswers++
		c.orphan(job)
		return
	}
	if c.echo == 0 {
		if trace != "" && trace == head.trace {
			c.echo = 1
		} else {
			c.echo = -1
		}
	}
	c.bind(head, job)
}

// inFIFO counts the submits waiting on the current transport.
func (c *Core) inFIFO() int {
	n := 0
	for _, e := range c.fifo[c.head:] {
		if e != nil && e.where == inFIFO {
			n++
		}
	}
	return n
}

// isDuplicateOf: a second accept for job r while head waits. It is a
// duplicate answer (not head's) only when the runtime could have answered
// r's submit twice: never within one transport in order, so only while
// resent submits are still being answered.
func (c *Core) isDuplicateOf(r *jobRec, head *entry) bool {
	return c.resends > 0 && r.key != head.key && !head.resent
}

func (c *Core) acceptedInQuarantine(job, trace string, now time.Time) {
	if e := c.byTraceID(trace); e != nil && e.where == inLimbo {
		c.bind(e, job)
		return
	}
	if c.jobs[job] != nil {
		c.ctr.DuplicateAnswers++
		return
	}
	if d, ok := c.deadTrace[trace]; trace != "" && ok && now.Before(d.exp) && c.traceN[trace] == 0 {
		c.ctr.LateAnswers++
		c.orphan(job)
		return
	}
	c.hold(job, trace)
}

func (c *Core) hold(job, trace string) {
	if len(c.unclaimed) >= c.cfg.MaxUnclaimed {
		c.orphan(job)
		return
	}
	put(&c.unclaimed, job, trace)
}

// Rejected handles a session.error naming request id req with err. It
// reports whether req was a submit's (or the barrier's) envelope id; other
// requests are the connection's business.
func (c *Core) Rejected(req string, err error, now time.Time) bool {
	c.at(now)
	if req != "" && req == c.barrierReq {
		c.barrierAnswered(nil, now)
		return true
	}
	if req != "" && c.rejBarrierAnswered(req) {
		return true
	}
	e := c.byReq[req]
	if e == nil {
		return false
	}
	if req != e.req && (e.where == inFIFO || e.where == resendPending) {
		// The rejection of an earlier write of a submit that was written
		// again: the caller has its answer; the new write keeps its slot
		// (its own answer will consume it) as an abandoned one.
		live := e.live
		delete(c.byReq, req)
		if live {
			e.live = false
			e.tombExp = now.Add(c.cfg.TraceTTL)
			c.emit(Action{Kind: Fail, ID: e.id, Err: err})
		}
		return true
	}
	c.fail(e, err)
	return true
}

// RejectedByPosition handles a rejection that names no request: job.error
// under a job id never accepted, job.error DUPLICATE_KEY on an existing
// job, or a session.error without request_id carrying a submit rejection
// code. It answers the FIFO head.
func (c *Core) RejectedByPosition(err error, now time.Time) {
	c.at(now)
	if c.quarantine {
		c.ctr.PositionalIgnored++
		return
	}
	head := c.firstUnrejected()
	if head == nil {
		c.ctr.PositionalIgnored++
		return
	}
	c.rejectByPosition(head, err)
}

// firstUnrejected returns the first submit on the transport with no
// positional rejection pending: the one an in-order runtime answers next.
func (c *Core) firstUnrejected() *entry {
	for _, e := range c.fifo[c.head:] {
		if e != nil && e.where == inFIFO && e.rejectErr == nil {
			return e
		}
	}
	return nil
}

// rejectByPosition records a rejection that did not name e. It may be e's
// answer, or a stray (a job.error for a job that never existed) or, from a
// runtime that reorders, another's. So e is not failed yet: a barrier is
// written, and if e's own accept comes before the barrier is answered the
// rejection was not its answer (counted) and e gets its job; once the
// barrier is answered, e fails with the rejection. Its trace id is then
// remembered, so an accept of e that comes even later is cancelled as an
// orphan, never handed to another submit.
func (c *Core) rejectByPosition(e *entry, err error) {
	if c.cfg.brokenRule == "no-position-barrier" {
		c.failRejected(e, err)
		return
	}
	e.rejectErr = err
	c.nReq++
	req := "sessiongate-barrier-" + strconv.FormatUint(c.nReq, 10)
	e.rejectReq = req
	c.rejBarriers = append(c.rejBarriers, rejBarrier{req: req, exp: c.last.Add(c.cfg.BarrierTimeout)})
	c.emit(Action{Kind: WriteBarrier, Req: req})
}

// failRejected fails e with its positional rejection.
func (c *Core) failRejected(e *entry, err error) {
	c.fail(e, err)
	if c.cfg.brokenRule != "no-dead-trace" {
		c.markDead(e, c.last)
	}
}

// rejBarrierAnswered handles the answer to a positional rejection's barrier
// req: every submit whose rejection waited for it fails with it.
func (c *Core) rejBarrierAnswered(req string) bool {
	i := slices.IndexFunc(c.rejBarriers, func(b rejBarrier) bool { return b.req == req })
	if i < 0 {
		return false
	}
	c.rejBarriers = slices.Delete(c.rejBarriers, i, i+1)
	var due []*entry
	for _, e := range c.entries {
		if e.rejectErr != nil && e.rejectReq == req {
			due = append(due, e)
		}
	}
	slices.SortFunc(due, func(a, b *entry) int { return cmp.Compare(a.id, b.id) })
	for _, e := range due {
		c.failRejected(e, e.rejectErr)
	}
	return true
}

// Unreadable handles an answer that cannot be read (a job.accepted or
// session.error that does not decode, or a frame that might be one) at now.
// With no submit waiting it is junk and changes nothing. Otherwise the
// FIFO's alignment with the runtime is unknown and guessing could hand a job
// to the wrong caller: every live submit on the transport takes a strike,
// one that reaches MaxUnreadable fails with ErrUnreadableAnswers (its slot
// stays as a tombstone, so its late accept is still recognised), and the
// transport is dropped so the rest are reconciled.
func (c *Core) Unreadable(now time.Time) {
	c.at(now)
	if len(c.entries) == 0 {
		return
	}
	c.ctr.UnreadableAnswers++
	for _, e := range c.fifo[c.head:] {
		if e == nil || e.where != inFIFO || !e.live {
			continue
		}
		if e.strikes++; e.strikes >= c.cfg.MaxUnreadable && c.cfg.brokenRule != "no-unreadable-bound" {
			e.live = false
			e.tombExp = now.Add(c.cfg.TraceTTL)
			c.ctr.UnreadableFailures++
			c.emit(Action{Kind: Fail, ID: e.id, Err: ErrUnreadableAnswers})
		}
	}
	c.emit(Action{Kind: Drop, Err: ErrUnreadableAnswer})
}

// Submit rejection codes a session.error without request_id may carry.
var rejectionCodes = map[string]bool{
	"AGENT_NOT_AVAILABLE": true, "AGENT_VERSION_NOT_AVAILABLE": true, "DUPLICATE_KEY": true,
	"INVALID_REQUEST": true, "PERMISSION_DENIED": true, "LEASE_SUBSET_VIOLATION": true,
	"RESOURCE_EXHAUSTED": true,
}

// IsRejectionCode reports whether code is one a runtime rejects a submit with.
func IsRejectionCode(code string) bool { return rejectionCodes[code] }

// SessionError handles a session.error without request_id.
func (c *Core) SessionError(code string, retryable bool, err error, now time.Time) {
	switch {
	case code == "UNAUTHENTICATED" || code == "RESUME_WINDOW_EXPIRED":
		c.emit(Action{Kind: Lost, Err: err})
	case code == "HEARTBEAT_LOST":
		// §6.4: the session lives on for the resume window, whatever
		// the retryable flag says (Go sends true, TS false).
		c.ctr.SessionErrorResume++
		c.emit(Action{Kind: Drop, Err: err})
	case rejectionCodes[code]:
		c.RejectedByPosition(err, now)
	case !retryable:
		c.emit(Action{Kind: Lost, Err: err})
	case code == "INTERNAL_ERROR" && !c.quarantine && c.front() != nil:
		// The TS SDK refuses a submit at its caps with a retryable
		// INTERNAL_ERROR and no request_id: the head's answer.
		c.RejectedByPosition(err, now)
	default:
		// Anything else retryable: resume; the runtime answers the
		// resume with the truth.
		c.ctr.SessionErrorResume++
		c.emit(Action{Kind: Drop, Err: err})
	}
}

// UnknownJob says what to do with a frame of a job the connection does not
// know.
func (c *Core) UnknownJob(job string, now time.Time) Verdict {
	c.at(now)
	if r := c.jobs[job]; r != nil {
		if r.owner == 0 {
			return Late
		}
		return Hold // bound but not yet known to the connection: cannot happen
	}
	if _, ok := c.unclaimed[job]; ok {
		return Hold
	}
	if c.Reconciling() {
		c.hold(job, "")
		if _, ok := c.unclaimed[job]; ok {
			return Hold
		}
		return Orphan
	}
	c.ctr.LateAnswers++
	c.orphan(job)
	return Orphan
}

// Consumed is UnknownJobError's verdict when the job.error was a rejection
// of the FIFO head.
const Consumed Verdict = 4

// UnknownJobError classifies a job.error for a job the connection does not
// know. A job id never accepted, while submits wait in order and no
// reconciliation is under way, is the TS SDK's rejection of the FIFO head
// (Consumed); otherwise it is handled as UnknownJob.
func (c *Core) UnknownJobError(job string, err error, now time.Time) Verdict {
	c.at(now)
	if r := c.jobs[job]; r != nil && r.owner == 0 {
		return Late
	}
	if _, ok := c.unclaimed[job]; !ok && !c.Reconciling() && c.front() != nil {
		c.RejectedByPosition(err, now)
		return Consumed
	}
	return c.UnknownJob(job, now)
}

// ExistingJobError reports whether a job.error with code on a job the
// connection knows is in fact the rejection of the FIFO head: the TS SDK
// answers a conflicting idempotency key with job.error DUPLICATE_KEY on the
// existing job's id. The existing job is not ended by it.
func (c *Core) ExistingJobError(code string, err error, now time.Time) bool {
	c.at(now)
	if code != "DUPLICATE_KEY" || c.quarantine {
		return false
	}
	if h := c.firstUnrejected(); h != nil {
		c.rejectByPosition(h, err)
		return true
	}
	return false
}

// WantCancel makes the cancel of job owned by the connection: it is sent now
// (if connected) and after every resume until confirmed.
func (c *Core) WantCancel(job string) {
	if _, ok := c.wantCancel[job]; ok {
		return
	}
	put(&c.wantCancel, job, struct{}{})
	if c.connected {
		c.emit(Action{Kind: Cancel, Job: job})
	}
}

// Cancelled records job.cancelled for job (or the runtime saying it is not
// found): its cancel is confirmed.
func (c *Core) Cancelled(job string) { delete(c.wantCancel, job) }

// JobEnded records job's terminal: its cancel, if any, is confirmed.
func (c *Core) JobEnded(job string) { delete(c.wantCancel, job) }

// Forget drops what the core remembers of a job the connection no longer
// retains.
func (c *Core) Forget(job string) {
	if r := c.jobs[job]; r != nil {
		if _, wanted := c.wantCancel[job]; !wanted {
			delete(c.jobs, job)
		}
	}
}

// Dropped records that the current transport is gone: its unanswered
// submits move to limbo, behind those already there.
func (c *Core) Dropped() {
	c.connected = false
	c.quarantine = false
	c.barrierReq = ""
	// Their answers went with the transport; submits whose positional
	// rejection waited for one go to limbo, and are written again after
	// the resume's barrier.
	c.rejBarriers = c.rejBarriers[:0]
	for _, e := range c.fifo[c.head:] {
		if e == nil || e.where != inFIFO {
			continue
		}
		e.where = inLimbo
		c.limbo = append(c.limbo, e)
	}
	clear(c.fifo)
	c.fifo, c.head = c.fifo[:0], 0
	// Entries asked to be written again but not yet written stay in
	// limbo too: the next reconciliation decides again.
	var pend []*entry
	for _, e := range c.entries {
		if e.where == resendPending {
			pend = append(pend, e)
		}
	}
	slices.SortFunc(pend, func(a, b *entry) int { return cmp.Compare(a.id, b.id) })
	for _, e := range pend {
		e.where = inLimbo
		c.limbo = append(c.limbo, e)
	}
	c.resends = 0
	for _, e := range c.limbo {
		e.resent = false
	}
}

// Resumed records that a new transport is up. barrierReq is the envelope id
// the connection will use if a barrier is needed.
func (c *Core) Resumed(barrierReq string, now time.Time) {
	c.at(now)
	c.connected = true
	for _, job := range sortedKeys(c.wantCancel) {
		c.emit(Action{Kind: Cancel, Job: job})
	}
	c.compactLimbo()
	if len(c.limbo) == 0 {
		return
	}
	if c.cfg.brokenRule == "no-barrier" {
		c.barrierAnswered(nil, now)
		return
	}
	c.quarantine = true
	c.barrierReq = barrierReq
	c.barrierExp = now.Add(c.cfg.BarrierTimeout)
	c.emit(Action{Kind: WriteBarrier, Req: barrierReq})
}

func (c *Core) compactLimbo() {
	n := 0
	for _, e := range c.limbo {
		if e.where == inLimbo {
			c.limbo[n] = e
			n++
		}
	}
	clear(c.limbo[n:])
	c.limbo = c.limbo[:n]
}

// ListAnswered handles a session.jobs answer naming req. It reports whether
// it was the barrier.
func (c *Core) ListAnswered(req string, jobs []Listed, now time.Time) bool {
	c.at(now)
	if req != "" && c.rejBarrierAnswered(req) {
		return true
	}
	if req == "" || req != c.barrierReq {
		return false
	}
	c.barrierAnswered(jobs, now)
	return true
}

// barrierAnswered ends quarantine: limbo submits are bound by the listed
// trace ids, the live rest written again, the abandoned rest buried.
func (c *Core) barrierAnswered(jobs []Listed, now time.Time) {
	c.barrierMisses = 0
	// Quarantine lasts until the list is bound: binding must not settle
	// the reconciliation half-way.
	c.quarantine = true
	c.barrierReq = ""
	for _, l := range jobs {
		if l.TraceID == "" {
			continue
		}
		if e := c.byTraceID(l.TraceID); e != nil && e.where == inLimbo && c.jobs[l.JobID] == nil {
			c.ctr.ReconciledByList++
			c.bind(e, l.JobID)
		} else if d, ok := c.deadTrace[l.TraceID]; ok && now.Before(d.exp) && c.traceN[l.TraceID] == 0 && c.jobs[l.JobID] == nil {
			c.orphan(l.JobID)
		}
	}
	c.quarantine = false
	for _, e := range c.limbo {
		if e.where != inLimbo {
			continue
		}
		if !e.live {
			c.buryLocked(e, now)
			continue
		}
		// A positional rejection still pending is not trusted either:
		// written again under its key, the submit is answered again (a
		// replay of its job, or its rejection).
		e.rejectErr, e.rejectReq = nil, ""
		e.where = resendPending
		e.resent = true
		c.resends++
		c.ctr.Resends++
		c.emit(Action{Kind: Resend, ID: e.id})
	}
	clear(c.limbo)
	c.limbo = c.limbo[:0]
	c.settleReconciliation()
}

// settleReconciliation: once quarantine is over and every resent submit is
// answered, unclaimed jobs are orphans.
func (c *Core) settleReconciliation() {
	if c.quarantine || c.resends > 0 || len(c.unclaimed) == 0 {
		return
	}
	for _, job := range sortedKeys(c.unclaimed) {
		c.orphan(job)
	}
}

// Idle reports whether Tick has nothing to act on, now or later, until the
// next event: no submit waiting, no trace tombstone to expire, no barrier.
func (c *Core) Idle() bool {
	return len(c.entries) == 0 && len(c.deadTrace) == 0 && !c.quarantine && len(c.rejBarriers) == 0
}

// Tick lets time pass: expired trace tombstones go, a stalled FIFO drops the
// transport, an unanswered barrier times out.
func (c *Core) Tick(now time.Time) {
	c.at(now)
	for t, d := range c.deadTrace {
		if !now.Before(d.exp) {
			delete(c.deadTrace, t)
		}
	}
	if c.quarantine && !now.Before(c.barrierExp) {
		// Answers to older writes may still come: the transport cannot
		// be trusted with new submits. Drop it; a runtime that leaves
		// barrier after barrier unanswered has stopped answering.
		c.ctr.BarrierTimeouts++
		c.quarantine = false
		if c.barrierMisses++; c.barrierMisses >= maxBarrierMisses {
			c.emit(Action{Kind: Lost, Err: ErrBarrierUnanswered})
			return
		}
		c.emit(Action{Kind: Drop})
		return
	}
	if len(c.rejBarriers) > 0 && !now.Before(c.rejBarriers[0].exp) {
		// A barrier after a positional rejection left unanswered: the
		// rejected submits are decided by the resume's barrier.
		c.ctr.BarrierTimeouts++
		c.emit(Action{Kind: Drop})
		return
	}
	if h := c.front(); h != nil && !h.live && !now.Before(h.tombExp) && !c.liveIn(c.fifo[c.head:]) {
		c.ctr.FIFOStalls++
		c.emit(Action{Kind: Drop})
	}
}

func (c *Core) liveIn(es []*entry) bool {
	for _, e := range es {
		if e != nil && e.live && (e.where == inFIFO || e.where == inLimbo) {
			return true
		}
	}
	return false
}

// Closed ends the session: every caller still waiting fails with err.
func (c *Core) Closed(err error) {
	ids := make([]ID, 0, len(c.entries))
	for id, e := range c.entries {
		if e.live {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		c.emit(Action{Kind: Fail, ID: id, Err: err})
	}
	clear(c.entries)
	clear(c.byReq)
	clear(c.byTrace)
	clear(c.traceN)
	clear(c.fifo)
	c.fifo, c.head = c.fifo[:0], 0
	c.limbo = c.limbo[:0]
	c.rejBarriers = c.rejBarriers[:0]
	c.quarantine, c.connected, c.resends = false, false, 0
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// HeadTombstone returns when the FIFO head's tombstone expires, if its
// caller gave up.
func (c *Core) HeadTombstone() (time.Time, bool) {
	if h := c.front(); h != nil && !h.live {
		return h.tombExp, true
	}
	return time.Time{}, false
}

// replayOfUnseen reports whether an accept of a job this connection does not
// know, carrying trace, is an idempotent replay of a job another session
// created: the head's key is the caller's own (namespaced per caller, so
// every session of the caller shares it), and the accept carries a trace
// id that is not the head's while the runtime is not known to ignore trace
// ids. A replay carries the original submit's trace id (§7.2: the same
// job.accepted payload); a runtime that copies trace ids answers a new job
// with the head's.
func (c *Core) replayOfUnseen(trace string, head *entry) bool {
	return trace != "" && head.trace != "" && trace != head.trace && head.callerKey && c.echo != -1 && c.cfg.brokenRule != "no-foreign"
}

// bindReplay binds job to e as bind does and marks the delivery Foreign.
func (c *Core) bindReplay(e *entry, job string) {
	c.ctr.ForeignReplays++
	n := len(c.out)
	c.bind(e, job)
	for i := n; i < len(c.out); i++ {
		if c.out[i].Kind == Deliver && c.out[i].Job == job {
			c.out[i].Foreign = true
		}
	}
}
