package timeoutprofile

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// This file implements the context a handler runs under when the server
// interceptors enforce a budget themselves. It is a single struct holding
// the deadline, the stream limits, the cause and a pooled timer, so the
// common unary call costs one allocation. It behaves like the context of
// context.WithDeadlineCause:
//
//   - Deadline is the budget's end (the parent's when only stream
//     initial/gap limits apply).
//   - When a limit fires, Done closes, Err returns context.DeadlineExceeded
//     and context.Cause returns the *TimeoutError. Contexts derived from it
//     see the same error and cause.
//   - When the parent is done first, before any of c's limits fell due,
//     Err and Cause are the parent's; a limit already due when the
//     parent ends (its timer late) fires instead.
//   - When the call ends, finish cancels it with context.Canceled.
//
// What is lazy: the Done channel is made on the first Done call, and only
// then does the context register with its parent (context.AfterFunc);
// derived contexts register through the AfterFunc method, which the context
// package uses instead of starting a goroutine. Err consults the parent
// directly, so a parent cancellation is seen even when nobody registered.
// context.Cause finds the cause through Value: once a limit fired, Value
// goes through a context.WithCancelCause child of the parent cancelled with
// the *TimeoutError, whose cause is what context.Cause reports.
//
// Timers come from a sync.Pool of time.AfterFunc timers bound to a slot;
// the slot's owner pointer says which context a firing belongs to, and
// onTimer ignores firings that are not due (a stale firing of a previous
// owner, or a gap limit pushed back by a send).

// closedchan is a reusable closed channel.
var closedchan = make(chan struct{})

func init() { close(closedchan) }

// States of a callCtx.
const (
	stateActive   uint8 = iota
	stateFired          // a limit fired: Err is DeadlineExceeded, Cause the *TimeoutError
	stateParent         // the parent was done first: Err and Cause are the parent's
	stateFinished       // the call ended: Err is Canceled
)

type callCtx struct {
	parent context.Context

	// Immutable after newCallCtx.
	start        time.Time
	deadline     time.Time     // end of the unary/total budget; zero: none of ours
	total        time.Duration // the budget deadline stands for
	totalLimit   string        // LimitUnary, LimitTotal or LimitCallerDeadline
	initial, gap time.Duration // stream limits; 0: not enforced
	profile      *Profile
	m            *method

	cause atomic.Pointer[causeCtx] // set when a limit fires, before the cancellation is visible
	done  atomic.Value             // chan struct{}; made lazily, closedchan once ended

	mu         sync.Mutex
	state      uint8                   // guarded by mu
	err        error                   // guarded by mu; nil while active
	timeout    *TimeoutError           // guarded by mu; set with stateFired
	sent       bool                    // guarded by mu; a message was sent
	lastSend   time.Time               // guarded by mu
	slot       *timerSlot              // guarded by mu; nil when no timer or finished
	stopParent func() bool             // guarded by mu; the registration with parent
	funcs      map[*afterFunc]struct{} // guarded by mu; derived contexts to cancel
}

type causeCtx struct{ context.Context }

type afterFunc struct{ f func() }

var (
	_ context.Context = (*callCtx)(nil)
	_ interface {
		AfterFunc(func()) func() bool
	} = (*callCtx)(nil)
)

func newCallCtx(parent context.Context, m *method, p *Profile, start time.Time, b budget, totalLimit string, pol *StreamingPolicy) *callCtx {
	c := &callCtx{parent: parent, start: start, m: m, profile: p, totalLimit: totalLimit}
	if b.own {
		c.deadline, c.total = b.deadline, b.timeout
	}
	if b.callerBound {
		c.totalLimit = LimitCallerDeadline
	}
	if pol != nil {
		c.initial, c.gap = pol.Initial, pol.Gap
	}
	return c
}

// arm starts the timer for the first limit, if any. It must be called
// before c is shared.
func (c *callCtx) arm(now time.Time) {
	due, _, _, _ := c.nextLocked()
	if due.IsZero() {
		return
	}
	c.slot = acquireSlot(c, due.Sub(now))
}

func (c *callCtx) Deadline() (time.Time, bool) {
	if !c.deadline.IsZero() {
		return c.deadline, true
	}
	return c.parent.Deadline()
}

func (c *callCtx) Done() <-chan struct{} {
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := c.done.Load(); d != nil {
		return d.(chan struct{})
	}
	d := make(chan struct{})
	c.done.Store(d)
	c.watchParentLocked()
	return d
}

func (c *callCtx) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if c.parent.Err() == nil {
		return nil
	}
	// The parent is done and its notice has not arrived yet, or nobody
	// registered for it.
	c.parentDone()
	c.mu.Lock()
	err = c.err
	c.mu.Unlock()
	return err
}

func (c *callCtx) Value(key any) any {
	if cc := c.cause.Load(); cc != nil {
		return cc.Value(key)
	}
	return c.parent.Value(key)
}

func (c *callCtx) String() string {
	return fmt.Sprintf("%v.WithTimeoutProfile(%s)", c.parent, c.profile.Name)
}

// AfterFunc arranges for f to run when c ends. The context package calls
// it to propagate cancellation to contexts derived from c without a
// goroutine. The returned func deregisters f and reports whether it did so
// before f ran.
func (c *callCtx) AfterFunc(f func()) func() bool {
	a := &afterFunc{f: f}
	c.mu.Lock()
	if c.state != stateActive {
		c.mu.Unlock()
		// The context package may hold the derived context's lock while
		// calling AfterFunc, so f must not run on this goroutine. The
		// goroutine only cancels that context, like context.AfterFunc's.
		go f()
		return func() bool { return false }
	}
	if c.funcs == nil {
		c.funcs = make(map[*afterFunc]struct{})
	}
	c.funcs[a] = struct{}{}
	c.watchParentLocked()
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, ok := c.funcs[a]; !ok {
			return false
		}
		delete(c.funcs, a)
		return true
	}
}

// watchParentLocked registers with the parent once something can observe
// c's cancellation asynchronously (a Done channel or a derived context).
func (c *callCtx) watchParentLocked() {
	if c.state == stateActive && c.stopParent == nil && c.parent.Done() != nil {
		c.stopParent = context.AfterFunc(c.parent, c.parentDone)
	}
}

func (c *callCtx) parentDone() {
	now := time.Now()
	c.mu.Lock()
	if c.state != stateActive {
		c.mu.Unlock()
		return
	}
	var fns []func()
	var stop func() bool
	if te := c.expiredLocked(now); te != nil {
		// One of our limits fell due first and its timer has not run yet
		// (a late timer on a loaded machine): it is what ended the call.
		fns, stop = c.fireLocked(te)
	} else {
		err := c.parent.Err()
		if err == nil {
			err = context.Canceled
		}
		fns, stop = c.cancelLocked(stateParent, err)
	}
	c.mu.Unlock()
	runAfter(fns, stop)
}

func (c *callCtx) onTimer() {
	now := time.Now()
	c.mu.Lock()
	if c.state != stateActive {
		c.mu.Unlock()
		return
	}
	te := c.expiredLocked(now)
	if te == nil {
		c.mu.Unlock()
		return
	}
	fns, stop := c.fireLocked(te)
	c.mu.Unlock()
	runAfter(fns, stop)
}

// sending records a message the handler is about to send on a stream and
// reschedules the timer. It returns the *TimeoutError if a limit fired or
// is due.
func (c *callCtx) sending() *TimeoutError {
	now := time.Now()
	c.mu.Lock()
	switch c.state {
	case stateFired:
		te := c.timeout
		c.mu.Unlock()
		return te
	case stateActive:
	default:
		c.mu.Unlock()
		return nil
	}
	if te := c.expiredLocked(now); te != nil {
		fns, stop := c.fireLocked(te)
		c.mu.Unlock()
		runAfter(fns, stop)
		return te
	}
	c.sent, c.lastSend = true, now
	due, _, _, _ := c.nextLocked()
	switch {
	case c.slot != nil && due.IsZero():
		c.slot.t.Stop()
	case c.slot != nil:
		c.slot.t.Reset(due.Sub(now))
	case !due.IsZero():
		// The first limit starts now (a gap-only policy).
		c.slot = acquireSlot(c, due.Sub(now))
	}
	c.mu.Unlock()
	return nil
}

// finish ends the call, at now, like the cancel func of
// context.WithTimeout: it stops the timer and cancels c with
// context.Canceled. It returns the *TimeoutError if a limit fired, or fell
// due before the handler returned but its timer callback had not run yet.
func (c *callCtx) finish(now time.Time) *TimeoutError {
	c.mu.Lock()
	slot := c.slot
	c.slot = nil
	var fns []func()
	var stop func() bool
	if c.state == stateActive {
		if te := c.expiredLocked(now); te != nil {
			fns, stop = c.fireLocked(te)
		} else {
			fns, stop = c.cancelLocked(stateFinished, context.Canceled)
		}
	}
	te := c.timeout
	c.mu.Unlock()
	if slot != nil {
		slot.release()
	}
	runAfter(fns, stop)
	return te
}

// nextLocked returns the next limit to fire: when, its name, its budget
// and the instant it is measured from. A zero due means none.
func (c *callCtx) nextLocked() (due time.Time, limit string, budget time.Duration, from time.Time) {
	pick := func(d time.Time, l string, b time.Duration, f time.Time) {
		if due.IsZero() || d.Before(due) {
			due, limit, budget, from = d, l, b, f
		}
	}
	if !c.sent && c.initial > 0 {
		pick(c.start.Add(c.initial), LimitInitial, c.initial, c.start)
	}
	if c.sent && c.gap > 0 {
		pick(c.lastSend.Add(c.gap), LimitGap, c.gap, c.lastSend)
	}
	if !c.deadline.IsZero() {
		pick(c.deadline, c.totalLimit, c.total, c.start)
	}
	return due, limit, budget, from
}

// expiredLocked returns the error of the first limit due at now, nil if
// none is due.
func (c *callCtx) expiredLocked(now time.Time) *TimeoutError {
	due, limit, budget, from := c.nextLocked()
	if due.IsZero() || now.Before(due) {
		return nil
	}
	return &TimeoutError{
		Profile:    c.profile.Name,
		Configured: budget,
		Elapsed:    now.Sub(from),
		Service:    c.m.service,
		Method:     c.m.name,
		Limit:      limit,
	}
}

// fireLocked ends c because te's limit fired.
func (c *callCtx) fireLocked(te *TimeoutError) ([]func(), func() bool) {
	// context.Cause(c) must find te as soon as the cancellation is visible.
	cc, cancel := context.WithCancelCause(c.parent)
	cancel(te)
	c.cause.Store(&causeCtx{cc})
	c.timeout = te
	return c.cancelLocked(stateFired, context.DeadlineExceeded)
}

// cancelLocked ends c. The returned funcs (derived contexts to cancel, and
// the parent registration to undo) must run after c.mu is released.
func (c *callCtx) cancelLocked(state uint8, err error) ([]func(), func() bool) {
	c.state, c.err = state, err
	if d, _ := c.done.Load().(chan struct{}); d != nil {
		close(d)
	} else {
		c.done.Store(closedchan)
	}
	var fns []func()
	for a := range c.funcs {
		fns = append(fns, a.f)
	}
	c.funcs = nil
	stop := c.stopParent
	c.stopParent = nil
	return fns, stop
}

func runAfter(fns []func(), stop func() bool) {
	for _, f := range fns {
		f()
	}
	if stop != nil {
		stop()
	}
}

// timerSlot is a reusable timer. Its callback is bound once, to the slot,
// and acts on whichever context owns the slot when it fires.
type timerSlot struct {
	t     *time.Timer
	owner atomic.Pointer[callCtx]
}

var slotPool = sync.Pool{New: func() any {
	s := new(timerSlot)
	s.t = time.AfterFunc(time.Hour, s.fire)
	s.t.Stop()
	return s
}}

// acquireSlot takes a timer from the pool for c and starts it.
func acquireSlot(c *callCtx, d time.Duration) *timerSlot {
	s := slotPool.Get().(*timerSlot)
	s.owner.Store(c)
	s.t.Reset(d)
	return s
}

func (s *timerSlot) fire() {
	if c := s.owner.Load(); c != nil {
		c.onTimer()
	}
}

func (s *timerSlot) release() {
	s.t.Stop()
	s.owner.Store(nil)
	slotPool.Put(s)
}
