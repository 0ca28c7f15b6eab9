package upstream

import (
	"context"
	"encoding/json"
	"github.com/sessiongate/sessiongate/gateway/upstream/internal/correlate"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// Terminal is a job's end: exactly one of Result and Error is set.
type Terminal struct {
	Seq    uint64
	Result *arcp.Result
	Error  *arcp.JobError
	// Assembled is the streamed result (§8.4) when Result names one
	// (result_id), put together from the job's result_chunk events;
	// AssemblyErr says why it could not be (malformed or missing chunks,
	// or more than MaxResultBytes).
	Assembled   *Assembled
	AssemblyErr error
	// Extensions are the terminal envelope's extensions (shared: do not
	// modify).
	Extensions map[string]json.RawMessage
}

// Assembled is a result streamed in result_chunk events.
type Assembled struct {
	ResultID string
	Data     []byte
	Text     bool // every chunk was utf8 and the whole is valid UTF-8
}

// Item is one entry of a job's log: exactly one of Event, Result and Error
// is set. Result and Error are terminal.
type Item struct {
	Seq    uint64
	Event  *arcp.Event
	Result *arcp.Result
	Error  *arcp.JobError
	// Extensions are the envelope's extensions, as received (shared: do not
	// modify).
	Extensions map[string]json.RawMessage
}

func (it *Item) terminal() bool { return it.Result != nil || it.Error != nil }

// finalStatus is a terminal item's final status.
func (it *Item) finalStatus() string {
	switch {
	case it.Error != nil && it.Error.FinalStatus != "":
		return it.Error.FinalStatus
	case it.Error != nil:
		return arcp.StatusError
	case it.Result != nil && it.Result.FinalStatus != "":
		return it.Result.FinalStatus
	}
	return arcp.StatusSuccess
}

// itemOverhead is what an item costs besides its payload, for the byte cap.
const itemOverhead = 64

// job is a job this connection knows: accepted for one of its callers, or
// subscribed to. Guarded by Conn.mu.
//
// Its log is append-only and shared by every watcher; each watcher has its
// own cursor (an absolute index). items holds the retained tail: absolute
// index base is items[0]. Items before base were trimmed by the slow-consumer
// policy (trimmedSeq is the seq of the last one).
type job struct {
	id         string
	items      []Item
	cum        []int64 // cum[i]: accounted bytes of every item up to items[i], since the job began
	base       int
	trimmedSeq uint64
	cumBase    int64 // accounted bytes of the trimmed items
	bytes      int64 // accounted bytes of the retained items
	term       *Item // the terminal, kept after the log is evicted
	cancelled  bool  // job.cancelled received
	removed    bool  // no longer in Conn.jobs
	finishedAt time.Time
	notify     chan struct{} // closed and replaced on every change, created on demand
	watchers   []*Watcher
	cancelReqs []*request
	subReq     *request
	held       bool              // seen during reconciliation, not yet claimed by a caller
	subscribed bool              // attached by job.subscribe: observed, not ours to cancel
	foreign    bool              // handed over by an idempotent replay of another session's job (reattach.go)
	obs        *correlate.Rejoin // subscribed: exactly-once across its re-attachments (reattach.go)
	obsFrom    uint64            // subscribed: the caller's from_event_seq (the submitting session's numbering)
	obsHistory bool              // subscribed with history
	lastSeq    uint64            // event_seq of its latest item
	handedAt   time.Time         // when a caller of this connection first got it (DeliveredAt)
	chunks     chunkAssembler
	doneCh     chan struct{} // JobDone, created on demand
	startAfter uint64        // every item of the job has a seq above it; 0 when not known (JobStartAfter)
	adopted    bool          // registered by a takeover (adoptJobLocked): history from c.adoptFrom on
	refined    bool          // adopted: its history's start was checked against the job listing (refineLocked)
	evicted    bool          // the terminal was trimmed under the caps: Wait says ErrResultEvicted
	awaited    bool          // a caller will Wait for the terminal: the caps keep it (see enforceCapsLocked)
}

// waitChLocked returns a channel closed at j's next change.
func (j *job) waitChLocked() <-chan struct{} {
	if j.notify == nil {
		j.notify = make(chan struct{})
	}
	return j.notify
}

func (j *job) notifyLocked() {
	if j.notify != nil {
		close(j.notify)
		j.notify = nil
	}
}

func (j *job) end() int { return j.base + len(j.items) }

// bytesFrom returns the accounted bytes of the retained items from absolute
// index pos on.
func (j *job) bytesFrom(pos int) int64 {
	if pos >= j.end() {
		return 0
	}
	before := j.cumBase
	if pos > j.base {
		before = j.cum[pos-1-j.base]
	}
	return j.cumBase + j.bytes - before
}

// minWatcher returns the lowest cursor of j's active watchers.
func (j *job) minWatcher() (int, bool) {
	pos, ok := 0, false
	for _, w := range j.watchers {
		if w.active() && (!ok || w.pos < pos) {
			pos, ok = w.pos, true
		}
	}
	return pos, ok
}

func (j *job) dropCancelReq(r *request) {
	if i := slices.Index(j.cancelReqs, r); i >= 0 {
		j.cancelReqs = slices.Delete(j.cancelReqs, i, i+1)
	}
}

// jobQueue is a FIFO of finished jobs. The first empty entries (from head)
// are known to have empty logs, so trimming need not visit them again.
type jobQueue struct {
	q     []*job
	head  int
	empty int
}

func (q *jobQueue) push(j *job) { q.q = append(q.q, j) }

// dropLast removes j if it is the newest entry: a job removed right after
// it finished (RunJob's, by Forget) then leaves no record waiting for its
// retention to end. Others stay until they expire.
func (q *jobQueue) dropLast(j *job) {
	n := len(q.q)
	if n == q.head || q.q[n-1] != j {
		return
	}
	q.q[n-1] = nil
	q.q = q.q[:n-1]
	q.empty = min(q.empty, len(q.q)-q.head)
	if q.head == len(q.q) {
		q.q, q.head, q.empty = q.q[:0], 0, 0
	}
}
func (q *jobQueue) len() int { return len(q.q) - q.head }
func (q *jobQueue) peek() *job {
	if q.head < len(q.q) {
		return q.q[q.head]
	}
	return nil
}
func (q *jobQueue) pop() *job {
	j := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	q.empty = max(q.empty-1, 0)
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	} else if q.head > 1024 && q.head > len(q.q)/2 {
		n := copy(q.q, q.q[q.head:])
		clear(q.q[n:])
		q.q, q.head = q.q[:n], 0
	}
	return j
}

func (c *Conn) addJobLocked(id string) *job {
	j := &job{id: id}
	c.jobs[id] = j
	c.live[j] = struct{}{}
	c.liveJobs++
	c.active.Store(int64(c.liveJobs))
	return j
}

// removeJobLocked forgets j: its log is released (watchers that had not read
// everything get ErrSlowConsumer: what they had not read is gone) and later
// lookups get ErrUnknownJob.
func (c *Conn) removeJobLocked(j *job) {
	if j.removed {
		return
	}
	c.releaseLogLocked(j)
	j.removed = true
	delete(c.jobs, j.id)
	c.finished.dropLast(j)
	c.core.Forget(j.id)
	c.reat.Forget(j.id)
	j.closeDoneLocked()
	// The record may stay referenced (the finished queue, a watcher)
	// until its retention ends: keep the terminal's outline, not its
	// payload.
	j.stripTerm()
	if j.term == nil {
		delete(c.live, j)
		c.liveJobs--
		c.active.Store(int64(c.liveJobs))
	}
	j.notifyLocked()
}

// releaseLogLocked frees j's retained items; watchers behind the end fail
// with ErrSlowConsumer.
func (c *Conn) releaseLogLocked(j *job) {
	c.trimLocked(j, len(j.items))
}

// failBehindLocked fails j's active watchers whose cursor is before pos.
func (c *Conn) failBehindLocked(j *job, pos int) {
	for _, w := range j.watchers {
		if w.active() && w.pos < pos {
			w.err = ErrSlowConsumer
			c.ctr.SlowConsumers.Add(1)
		}
	}
	j.notifyLocked()
}

// trimLocked drops j's first n retained items, failing the watchers that had
// not read them.
func (c *Conn) trimLocked(j *job, n int) {
	n = min(n, len(j.items))
	if n <= 0 {
		return
	}
	c.failBehindLocked(j, j.base+n)
	newBase := j.cum[n-1]
	b := newBase - j.cumBase
	j.trimmedSeq = j.items[n-1].Seq
	c.bufEvents -= n
	c.bufBytes -= b
	j.bytes -= b
	j.cumBase = newBase
	j.base += n
	if n == len(j.items) {
		if j.term != nil {
			// The terminal itself went: its payload must go too (the
			// record shares it), and Wait says so definitely.
			j.stripTerm()
			j.evicted = true
		}
		j.items, j.cum = nil, nil
	} else if n > cap(j.items)/2 {
		j.items = slices.Clone(j.items[n:])
		j.cum = slices.Clone(j.cum[n:])
	} else {
		clear(j.items[:n])
		j.items = j.items[n:]
		j.cum = j.cum[n:]
	}
}

// appendLocked adds it to j's log and applies the caps.
func (c *Conn) appendLocked(j *job, it Item, size int, now time.Time) {
	j.lastSeq = max(j.lastSeq, it.Seq)
	j.items = append(j.items, it)
	j.cum = append(j.cum, j.cumBase+j.bytes+int64(size))
	j.bytes += int64(size)
	c.bufEvents++
	c.bufBytes += int64(size)
	if it.terminal() {
		t := it
		j.term = &t
		j.finishedAt = now
		delete(c.live, j)
		c.liveJobs--
		c.active.Store(int64(c.liveJobs))
		c.finished.push(j)
		c.resolveCancelsLocked(j)
		c.reat.Forget(j.id)
	}
	j.notifyLocked()
	if it.terminal() {
		j.closeDoneLocked()
	}
	c.enforceCapsLocked(now)
	c.reserveRetainedLocked(now)
}

// byteCapLocked is the byte cap in force: MaxBufferedBytes, or less while
// the gateway's retained-bytes budget refuses this session more.
func (c *Conn) byteCapLocked() int64 {
	if c.budgetCap >= 0 {
		return min(c.cfg.MaxBufferedBytes, c.budgetCap)
	}
	return c.cfg.MaxBufferedBytes
}

// reserveRetainedLocked keeps the bytes reserved in the retained-bytes
// account equal to what the logs hold. When the account refuses more (the
// caller or the gateway is at its budget), the logs are trimmed to what is
// reserved by the slow-consumer policy: finished logs first, then read
// history, then the slowest watcher fails with ErrSlowConsumer. Nothing is
// lost silently; a single item larger than everything reserved is kept
// unaccounted (it is bounded by MaxFrameBytes).
func (c *Conn) reserveRetainedLocked(now time.Time) {
	acct := c.cfg.RetainedBytes
	if acct == nil || c.ended {
		return // after the end everything was given back, for good
	}
	switch d := c.bufBytes - c.reserved; {
	case d < 0:
		acct.Release(-d)
		c.reserved = c.bufBytes
		c.budgetCap = -1
	case d > 0:
		if acct.Reserve(d) == nil {
			c.reserved = c.bufBytes
			c.budgetCap = -1
			return
		}
		c.ctr.BudgetTrims.Add(1)
		c.budgetCap = c.reserved
		c.enforceCapsLocked(now)
		if d := c.bufBytes - c.reserved; d < 0 {
			acct.Release(-d)
			c.reserved = c.bufBytes
		}
	}
}

// releaseRetainedLocked gives back every reserved byte (the session ended).
func (c *Conn) releaseRetainedLocked() {
	if c.cfg.RetainedBytes != nil && c.reserved > 0 {
		c.cfg.RetainedBytes.Release(c.reserved)
	}
	c.reserved = 0
}

// stripTerm drops the terminal's payload (and an assembled result),
// keeping its outline.
func (j *job) stripTerm() {
	if t := j.term; t != nil && t.Result != nil {
		r := *t.Result
		r.Result = nil
		j.term = &Item{Seq: t.Seq, Result: &r}
	}
	j.chunks = chunkAssembler{}
}

// closeDoneLocked closes j's JobDone channel.
func (j *job) closeDoneLocked() {
	if j.doneCh == nil {
		j.doneCh = closedCh
	} else if j.doneCh != closedCh {
		close(j.doneCh)
		j.doneCh = closedCh
	}
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// JobDone returns a channel closed when the job's terminal has arrived, the
// connection has forgotten the job, or the session has ended: a job's end
// without consuming its result. It is closed already for a job the
// connection does not know.
func (c *Conn) JobDone(jobID string) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil || c.ended {
		return closedCh
	}
	if j.doneCh == nil {
		j.doneCh = make(chan struct{})
	}
	return j.doneCh
}

// Subscribed reports whether the connection attached the job with
// SubscribeJob (a job of another session: §7.6 gives no cancel authority).
func (c *Conn) Subscribed(jobID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	return j != nil && j.subscribed
}

// HasJob reports whether the connection knows the job: accepted for one of
// its callers or subscribed to, and not yet forgotten.
func (c *Conn) HasJob(jobID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	return j != nil && !j.held
}

// Forget drops a finished job whose result was delivered: its log and
// result go (releasing their bytes) unless a watcher still reads them, in
// which case the usual retention applies. Later Wait and Watch calls get
// ErrUnknownJob.
func (c *Conn) Forget(jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil || j.term == nil {
		return
	}
	for _, w := range j.watchers {
		if w.active() {
			return
		}
	}
	c.removeJobLocked(j)
	c.reserveRetainedLocked(time.Now())
}

// enforceCapsLocked applies the slow-consumer policy (see the package
// documentation): the retained items must fit MaxBufferedEvents and
// MaxBufferedBytes.
func (c *Conn) enforceCapsLocked(now time.Time) {
	maxE, maxB := c.cfg.MaxBufferedEvents, c.byteCapLocked()
	over := func() bool { return c.bufEvents > maxE || c.bufBytes > maxB }
	high := func() bool { return c.bufEvents*4 > maxE*3 || c.bufBytes*4 > maxB*3 }
	if over() {
		// 1. Finished jobs' logs, oldest finished first, oldest items
		// first, as much as needed.
		f := &c.finished
		for i := f.head + f.empty; i < len(f.q) && over(); i++ {
			j := f.q[i]
			n := c.excessIn(j)
			if j.awaited && j.term != nil {
				// A caller waits for this result: only the history
				// before it goes; step 3 sheds live jobs instead.
				n = min(n, len(j.items)-1)
			}
			c.trimLocked(j, n)
			if len(j.items) == 0 && i == f.head+f.empty {
				f.empty++
			}
		}
	}
	if high() {
		// 2. What every active watcher of a live job has read: history
		// nobody is reading goes before anything unread.
		for j := range c.live {
			if pos, ok := j.minWatcher(); ok {
				c.trimLocked(j, pos-j.base)
			}
		}
	}
	// 3. Still over: the oldest retained item of a live job goes. If
	// watchers have not read it, they are the slowest consumers of the
	// session: they fail with ErrSlowConsumer, definitely, and the log is
	// trimmed to the next watcher. Unwatched history goes an item at a time.
	for over() {
		var slow *job
		for j := range c.live {
			if len(j.items) > 0 && (slow == nil || j.items[0].Seq < slow.items[0].Seq) {
				slow = j
			}
		}
		if slow == nil {
			break // only the newest item, larger than the cap by itself, is left
		}
		if _, ok := slow.minWatcher(); ok {
			c.failBehindLocked(slow, slow.base+1)
			next, ok := slow.minWatcher()
			if !ok {
				next = slow.end()
			}
			c.trimLocked(slow, max(next-slow.base, 1))
			continue
		}
		c.trimLocked(slow, 1)
	}
	c.backPressureLocked(now)
}

// excessIn returns how many of j's oldest items must go for the buffer to
// fit the caps (at most all of them).
func (c *Conn) excessIn(j *job) int {
	needE := c.bufEvents - c.cfg.MaxBufferedEvents
	needB := c.bufBytes - c.byteCapLocked()
	n := max(needE, 0)
	if needB > 0 {
		k := sort.Search(len(j.items), func(i int) bool { return j.cum[i]-j.cumBase >= needB })
		n = max(n, k+1)
	}
	return min(n, len(j.items))
}

// pressureLocked returns what the active watchers of live jobs have not read
// yet: the items the runtime should be slowed down for.
func (c *Conn) pressureLocked() (int, int64) {
	n, b := 0, int64(0)
	for j := range c.live {
		if pos, ok := j.minWatcher(); ok {
			n += j.end() - pos
			b += j.bytesFrom(pos)
		}
	}
	return n, b
}

// backPressureLocked pauses acking while watchers leave more than 3/4 of a
// cap unread, and resumes it when they are back under half. While paused the
// runtime holds the events in its replay buffer.
func (c *Conn) backPressureLocked(now time.Time) {
	maxE, maxB := c.cfg.MaxBufferedEvents, c.cfg.MaxBufferedBytes
	if !c.ackPaused && c.bufEvents*4 <= maxE*3 && c.bufBytes*4 <= maxB*3 {
		return // unread items are a subset of retained ones: no pressure
	}
	n, b := c.pressureLocked()
	switch {
	case n*4 > maxE*3 || b*4 > maxB*3:
		if !c.ackPaused {
			c.ackPaused = true
			c.pausedAt = now
			c.ctr.BackPressure.Add(1)
		}
	case c.ackPaused && n*2 <= maxE && b*2 <= maxB:
		c.ackPaused = false
		c.ackWanted = true
		c.wakeWriter()
	}
}

// slowestLocked fails the watchers holding the oldest unread item of a live
// job, after back-pressure did not help within the grace period.
func (c *Conn) failSlowestLocked(now time.Time) {
	var slow *job
	var slowSeq uint64
	for j := range c.live {
		if pos, ok := j.minWatcher(); ok && pos < j.end() {
			if seq := j.items[pos-j.base].Seq; slow == nil || seq < slowSeq {
				slow, slowSeq = j, seq
			}
		}
	}
	if slow == nil {
		return
	}
	pos, _ := slow.minWatcher()
	c.failBehindLocked(slow, pos+1)
	next, ok := slow.minWatcher()
	if !ok {
		next = slow.end()
	}
	c.trimLocked(slow, next-slow.base)
	c.pausedAt = now
	c.backPressureLocked(now)
}

// Wait waits for the job's terminal result or error. Every call gets it
// once. ErrUnknownJob if the job is not known or no longer retained.
func (c *Conn) Wait(ctx context.Context, jobID string) (Terminal, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil {
		return Terminal{}, ErrUnknownJob
	}
	// Whatever this Wait returns, the terminal is no longer kept for it.
	defer func() { j.awaited = false }()
	for {
		if j.removed {
			return Terminal{}, ErrUnknownJob
		}
		if j.evicted {
			return Terminal{}, ErrResultEvicted
		}
		if t := j.term; t != nil {
			term := Terminal{Seq: t.Seq, Result: t.Result, Error: t.Error, Extensions: t.Extensions}
			term.Assembled, term.AssemblyErr = j.chunks.assembled(t.Result)
			return term, nil
		}
		if c.ended {
			return Terminal{}, c.err
		}
		ch := j.waitChLocked()
		c.waitLocked(ctx, ch)
		if j.term == nil && ctx.Err() != nil {
			return Terminal{}, context.Cause(ctx)
		}
	}
}

// Watcher reads one job's log from a cursor: first the retained history,
// then live items, ending with the terminal item and then io.EOF. A Watcher
// is used by one goroutine at a time; Close may be called from any.
type Watcher struct {
	c *Conn
	j *job
	// Guarded by c.mu.
	pos    int    // absolute index of the next item
	after  uint64 // the cursor Watch was given: items at or below it are skipped
	eof    bool
	err    error
	closed bool
}

// active reports whether w still reads (it holds unread items back).
func (w *Watcher) active() bool { return !w.closed && !w.eof && w.err == nil }

// Watch returns a Watcher of the job's items with seq > fromSeq: retained
// history first, then live items. Of a job that has ended, from the
// terminal's seq it returns the terminal alone, and past it a
// *BeyondEndError naming the terminal's seq. ErrUnknownJob if the job is unknown (or
// was forgotten JobRetention after it ended); ErrSlowConsumer if items after
// fromSeq were already dropped by the session's buffer caps.
func (c *Conn) Watch(jobID string, fromSeq uint64) (*Watcher, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil {
		return nil, ErrUnknownJob
	}
	if fromSeq < j.trimmedSeq {
		return nil, &NotRetainedError{JobID: jobID, From: fromSeq, Held: j.trimmedSeq}
	}
	if j.term != nil && fromSeq > j.term.Seq {
		// Past the job's last event: nothing will ever come.
		return nil, &BeyondEndError{JobID: jobID, LastSeq: j.term.Seq}
	}
	if j.term != nil && fromSeq == j.term.Seq && j.term.Seq > 0 {
		// From the terminal itself: the stream is the terminal again,
		// so that a watch always ends with one.
		fromSeq--
	}
	w := &Watcher{c: c, j: j, after: fromSeq}
	w.pos = j.base + sort.Search(len(j.items), func(i int) bool { return j.items[i].Seq > fromSeq })
	if j.term != nil && w.pos == j.end() {
		w.eof = true
	}
	j.watchers = append(j.watchers, w)
	return w, nil
}

// Next returns the next item, waiting for it. After the terminal item it
// returns io.EOF. Other errors: ErrSlowConsumer, the session's end
// (ErrClosed or *LostError) once the retained items are read, ErrClosed
// after Close, or ctx's error.
func (w *Watcher) Next(ctx context.Context) (Item, error) {
	c, j := w.c, w.j
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		switch {
		case w.closed:
			return Item{}, ErrClosed
		case w.err != nil:
			return Item{}, w.err
		case w.eof:
			return Item{}, io.EOF
		case w.pos < j.base:
			w.err = ErrSlowConsumer
			return Item{}, w.err
		case w.pos < j.end():
			it := j.items[w.pos-j.base]
			w.pos++
			if it.terminal() {
				w.eof = true
			}
			if it.Seq <= w.after {
				// Appended after Watch but at or below its cursor (a
				// replay arriving after a takeover's Watch, say): the
				// caller has it already. A terminal still ends the
				// stream with an answer: the terminal itself when the
				// cursor was its seq, else the cursor was past the end.
				if !it.terminal() {
					continue
				}
				if it.Seq < w.after {
					w.err = &BeyondEndError{JobID: j.id, LastSeq: it.Seq}
					return Item{}, w.err
				}
			}
			return it, nil
		case j.removed:
			return Item{}, ErrUnknownJob
		case c.ended:
			return Item{}, c.err
		}
		ch := j.waitChLocked()
		c.waitLocked(ctx, ch)
		if ctx.Err() != nil && !(w.pos < j.end() && w.pos >= j.base) {
			return Item{}, context.Cause(ctx)
		}
	}
}

// Close detaches the watcher; a Next in progress returns ErrClosed.
func (w *Watcher) Close() {
	c, j := w.c, w.j
	c.mu.Lock()
	defer c.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if i := slices.Index(j.watchers, w); i >= 0 {
		j.watchers = slices.Delete(j.watchers, i, i+1)
	}
	j.notifyLocked()
}

// JobStartAfter returns an event_seq every item of the job is above: the
// session's latest delivered seq when the runtime's job.accepted for this
// connection's submit was handled (events are delivered in seq order, and
// the runtime emits none of the job's before accepting it; events a runtime
// sent before its accept lower it to below the first). A watch from it
// gets the same items as one from 0. 0 when it is not known: a job found
// by a listing, subscribed, adopted, revived from a tombstone, or
// forgotten.
func (c *Conn) JobStartAfter(jobID string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if j := c.jobs[jobID]; j != nil {
		return j.startAfter
	}
	return 0
}

// adoptJobLocked records a job of a taken-over session that this
// connection did not submit. Its history before the takeover is not here:
// a Watch from before it gets ErrSlowConsumer, a definite error.
func (c *Conn) adoptJobLocked(id string) *job {
	c.rememberJobLocked(id)
	j := c.addJobLocked(id)
	j.trimmedSeq = c.adoptFrom
	j.adopted = true
	if l := c.adoptL; l != nil && l.gen == c.gen.Load() && isDone(l.done) && l.err == nil {
		c.refineLocked(j, l)
	}
	return j
}

// refineLocked moves the start of an adopted job's history down to the
// job's last event_seq as the runtime's listing gives it (§6.6), when that
// is at or below the takeover's resume point: the job had no event after
// it up to the resume point, so a watcher from there on misses nothing,
// although the replay began after it. A job quieter than the owner's ack
// lag (an agent that reports once a minute, one that has not reported yet)
// is so watched across a takeover from its caller's cursor. A listing
// without the job's last_event_seq, or one above the resume point, leaves
// the start at the resume point; so does a cap's trim.
func (c *Conn) refineLocked(j *job, l *adoptList) {
	if !j.adopted || j.refined {
		return
	}
	j.refined = true
	last, ok := l.last[j.id]
	if ok && last <= c.adoptFrom && j.trimmedSeq == c.adoptFrom && j.base == 0 {
		j.trimmedSeq = last
		c.ctr.AdoptRefined.Add(1)
	}
}

// AdoptJob makes a job of a taken-over session watchable before any of its
// events has arrived here (a caller watching from its cursor after the
// takeover). Only a job the runtime lists is registered: the connection
// lists the session's jobs once per generation (session.list_jobs, at most
// maxAdoptPages pages) and answers every AdoptJob of that generation from
// the listing, so an unknown id costs no request of its own. A job the
// listing does not name is ErrUnknownJob; one that already ended before the
// takeover cannot be served from here (ErrSlowConsumer). Without list_jobs
// nothing is registered ahead of the runtime: ErrUnknownJob until the job's
// first frame arrives (it is adopted then). Adopted jobs count against
// MaxLiveJobs (*CapError). ErrUnknownJob for a session that was not taken
// over.
func (c *Conn) AdoptJob(ctx context.Context, jobID string) error {
	c.mu.Lock()
	j, known := c.jobs[jobID]
	if known && (!j.adopted || j.refined) {
		c.mu.Unlock()
		return nil
	}
	adopt := c.adopt
	c.mu.Unlock()
	if !adopt || jobID == "" || !c.feat.listJobs {
		if known {
			return nil
		}
		return ErrUnknownJob
	}
	l, err := c.adoptListing(ctx)
	if known {
		// Adopted from the resume's replay: its history's start is
		// refined once from the listing (refineLocked); without a
		// listing it stays at the resume point.
		if err == nil {
			c.mu.Lock()
			c.refineLocked(j, l)
			c.mu.Unlock()
		}
		return nil
	}
	if err != nil {
		return err
	}
	st, ok := l.status[jobID]
	if !ok {
		return ErrUnknownJob
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch st {
	case arcp.StatusSuccess, arcp.StatusError, arcp.StatusCancelled, arcp.StatusTimedOut:
		if _, ok := c.jobs[jobID]; ok {
			// Ended, and its frames after the takeover were replayed
			// here meanwhile: adopted with them.
			return nil
		}
		if last, ok := l.last[jobID]; !ok || last <= c.adoptFrom || c.lastSeq.Load() >= last {
			// Ended before the resume point (its events were acked
			// and are gone), or nothing says its frames are still to
			// come: not servable here.
			return ErrSlowConsumer
		}
		// Ended after the resume point: its last frames are in the
		// resume's replay, which has not reached them yet. A runtime
		// may answer the listing before it finishes the replay (the
		// reference runtime sends control frames first), so the job
		// is registered now and its frames fill it as they come.
	}
	if _, ok := c.jobs[jobID]; ok || c.ended {
		return nil
	}
	if c.liveJobs+c.inflight >= c.cfg.MaxLiveJobs {
		return &CapError{Cap: "live_jobs", Limit: int64(c.cfg.MaxLiveJobs)}
	}
	c.adoptJobLocked(jobID)
	return nil
}

// maxAdoptPages bounds the pages of one adoption listing.
const maxAdoptPages = 100

// adoptList is one generation's listing of a taken-over session's jobs.
type adoptList struct {
	gen    uint64
	done   chan struct{} // closed when fetched
	status map[string]string
	agent  map[string]string // the agent the runtime names (§6.6), where it names one
	last   map[string]uint64 // the job's last_event_seq, where the runtime gives it
	err    error
}

// adoptListing returns the current generation's listing, fetching it once:
// concurrent callers wait for the one fetch (bounded by their contexts).
func (c *Conn) adoptListing(ctx context.Context) (*adoptList, error) {
	gen := c.gen.Load()
	c.mu.Lock()
	l := c.adoptL
	fetch := l == nil || l.gen != gen || l.err != nil && isDone(l.done)
	if fetch {
		l = &adoptList{gen: gen, done: make(chan struct{}), status: make(map[string]string), agent: make(map[string]string),
			last: make(map[string]uint64)}
		c.adoptL = l
		c.ctr.AdoptListings.Add(1)
	}
	c.mu.Unlock()
	if fetch {
		cursor := ""
		for page := 0; page < maxAdoptPages; page++ {
			jobs, err := c.ListJobs(ctx, arcp.ListJobs{Limit: 1000, Cursor: cursor})
			if err != nil {
				l.err = err
				break
			}
			for _, j := range jobs.Jobs {
				l.status[j.JobID] = j.Status
				if j.Agent != "" {
					l.agent[j.JobID] = j.Agent
				}
				if j.LastEventSeq != nil {
					l.last[j.JobID] = *j.LastEventSeq
				}
			}
			if cursor = jobs.NextCursor; cursor == "" {
				break
			}
		}
		close(l.done)
	}
	select {
	case <-l.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if l.err != nil {
		return nil, l.err
	}
	return l, nil
}

// ListedAgent returns the agent the runtime's job listing names for jobID
// in a taken-over session ("name" or "name@version", as the runtime wrote
// it), "" for a session that was not taken over, a runtime without
// list_jobs, a job the listing does not name or one named without its
// agent. It reads the generation's one listing, the one AdoptJob reads
// (fetching it if no call did yet, within ctx), so a job adopted from the
// resume's replay, which AdoptJob never lists, has its agent too.
func (c *Conn) ListedAgent(ctx context.Context, jobID string) string {
	c.mu.Lock()
	adopt := c.adopt
	c.mu.Unlock()
	if !adopt || jobID == "" || !c.feat.listJobs {
		return ""
	}
	l, err := c.adoptListing(ctx)
	if err != nil {
		return ""
	}
	return l.agent[jobID]
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
