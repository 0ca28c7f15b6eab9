package upstream

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// handle dispatches one decoded envelope read from transport t.
func (c *Conn) handle(t *transport, env *arcp.Envelope, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// Generation gate: a frame read from a transport the connection has
	// already given up (a drop was decided, or a newer generation runs) is
	// not trusted with anything.
	if c.tr != t || t.gen != c.gen.Load() || c.ended {
		c.ctr.StaleGeneration.Add(1)
		return
	}
	if env.SessionID != c.sessionID {
		c.ctr.MalformedFrames.Add(1)
		if env.Type == arcp.TypeAccepted || env.Type == arcp.TypeError {
			c.unreadableAnswerLocked(t)
		}
		return
	}
	switch env.Type {
	case arcp.TypePing:
		c.queueCtrlLocked(c.pongFrame(env, c.sessionID))
	case arcp.TypePong:
		// Traffic; the reader already noted it.
	case arcp.TypeAccepted:
		c.onAcceptedLocked(t, env)
	case arcp.TypeError:
		c.onSessionErrorLocked(t, env)
	case arcp.TypeEvent, arcp.TypeResult, arcp.TypeJobError:
		c.onSequencedLocked(t, env, size)
	case arcp.TypeCancelled:
		c.onCancelledLocked(env)
	case arcp.TypeJobs:
		c.onJobsLocked(t, env)
	case arcp.TypeSubscribed:
		c.onSubscribedLocked(t, env)
	case arcp.TypeClose, arcp.TypeClosed, arcp.TypeBye:
		c.onCloseLocked(t, env)
	default:
		if arcp.KnownType(env.Type) {
			// A client-to-runtime type, or a second welcome.
			c.ctr.ProtocolViolations.Add(1)
		} else {
			c.ctr.UnknownTypes.Add(1)
		}
	}
}

// matchAcceptLocked finds the submit a job.accepted answers. ARCP answers
// submits in order, so it is the FIFO's head. When the runtime has been seen
// to copy our per-submit trace ids onto job.accepted, the trace id is
// checked too: an accept whose trace id names another waiting submit goes to
// that submit (and is counted as a protocol violation), and one whose trace
// id names no waiting submit belongs to an older generation (stale=true).
func (c *Conn) matchAcceptLocked(trace string) (r *request, stale bool) {
	head := c.fifo.front()
	if head == nil {
		return nil, false
	}
	if trace == "" || head.traceID == "" {
		return head, false
	}
	if trace == head.traceID {
		c.echoTrace = true
		return head, false
	}
	if !c.echoTrace {
		// The runtime sets trace ids of its own: position is all we have.
		return head, false
	}
	if r := c.fifo.findTrace(trace); r != nil {
		c.ctr.ProtocolViolations.Add(1)
		return r, false
	}
	return nil, true
}

func (c *Conn) onAcceptedLocked(t *transport, env *arcp.Envelope) {
	acc, err := arcp.DecodePayload[arcp.Accepted](env)
	if err == nil && acc.JobID == "" {
		acc.JobID = env.JobID
	}
	if err != nil || acc.JobID == "" {
		c.ctr.MalformedFrames.Add(1)
		c.unreadableAnswerLocked(t)
		return
	}
	trace := acc.TraceID
	if trace == "" {
		trace = env.TraceID
	}
	now := time.Now()
	r, stale := c.matchAcceptLocked(trace)
	if r == nil {
		// An accept nobody in this generation waits for.
		if stale {
			c.ctr.StaleGeneration.Add(1)
		} else {
			c.ctr.LateAnswers.Add(1)
		}
		if _, known := c.jobs[acc.JobID]; !known {
			c.cancelOrphanLocked(acc.JobID, now)
		}
		return
	}
	if r.gen != t.gen {
		// Cannot happen: teardown empties the FIFO of a generation. Do not
		// guess: drop the transport.
		c.ctr.StaleGeneration.Add(1)
		c.dropLocked(t, errUnreadableAnswer, false)
		return
	}
	if r.state == stateSent || r.state == stateTombstoned {
		delete(c.pending, r.id)
	}
	c.fifo.remove(r)
	if r.state == stateTombstoned {
		// The caller gave up: the job is an orphan. It is never handed to
		// anybody else; it is cancelled upstream and its id tombstoned so
		// its events are dropped as late answers.
		c.tombs.Take(r.id, now)
		c.ctr.LateAnswers.Add(1)
		r.state = stateDone
		if _, known := c.jobs[acc.JobID]; !known {
			// (A known id is an idempotent repeat of a live caller's job:
			// not an orphan.)
			c.cancelOrphanLocked(acc.JobID, now)
		}
		return
	}
	if _, known := c.jobs[acc.JobID]; !known {
		// A job id tombstoned as an orphan and now claimed by a live caller
		// (an idempotency key reused) is revived for that caller.
		c.tombs.Take(acc.JobID, now)
		delete(c.orphanWait, acc.JobID)
		c.addJobLocked(acc.JobID)
	}
	r.acc = acc
	c.finishRequestLocked(r, nil)
}

// unreadableAnswerLocked handles a job.accepted or session.error that cannot
// be read (or a frame that cannot be read and might be one). It may be the
// answer to the FIFO's head, or junk: either way the FIFO's alignment with
// the runtime is no longer known, and guessing could hand a job to the wrong
// caller. If submits are waiting, the transport is
// dropped instead: the new generation starts with an empty FIFO and the
// waiting submits fail with ErrOutcomeUnknown.
func (c *Conn) unreadableAnswerLocked(t *transport) {
	if c.fifo.front() != nil {
		c.dropLocked(t, errUnreadableAnswer, false)
	}
}

func (c *Conn) orphanCancelFrame(jobID string) []byte {
	return c.frame(arcp.TypeCancel, jobID, arcp.Cancel{Reason: "sessiongate: orphaned job, its caller is gone"})
}

// cancelOrphanLocked cancels a job nobody waits for and tombstones its id.
// Until job.cancelled or the job's end confirms it, the cancel is sent again
// after every resume (a cancel lost with a transport would otherwise leave
// the orphan running, its events dropped as late answers).
func (c *Conn) cancelOrphanLocked(jobID string, now time.Time) {
	if !c.queueCtrlLocked(c.orphanCancelFrame(jobID)) {
		// Not tombstoned: its next event tries again.
		return
	}
	if len(c.orphanWait) < c.cfg.MaxTombstones {
		c.orphanWait[jobID] = struct{}{}
	}
	c.insertTombLocked(jobID, c.defaultTTL, now)
	c.ctr.OrphansCancelled.Add(1)
	c.orphans = append(c.orphans, jobID)
	if len(c.orphans) > 1<<16 {
		c.orphans = slices.Delete(c.orphans, 0, len(c.orphans)-1<<15)
	}
}

func (c *Conn) onSessionErrorLocked(t *transport, env *arcp.Envelope) {
	e, err := arcp.DecodePayload[arcp.Error](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		c.unreadableAnswerLocked(t)
		return
	}
	if e.RequestID == "" {
		// Session-fatal.
		c.fatal = &LostError{Code: arcp.NormalizeCode(e.Code), Err: &e}
		c.dropLocked(t, errSessionEnded, false)
		return
	}
	r := c.pending[e.RequestID]
	if r == nil {
		if e.Code == arcp.CodeJobNotFound && e.JobID != "" {
			delete(c.orphanWait, e.JobID) // an orphan that had already ended
		}
		c.tombs.Take(e.RequestID, time.Now())
		c.ctr.LateAnswers.Add(1)
		return
	}
	if r.gen != t.gen {
		c.ctr.StaleGeneration.Add(1) // cannot happen: teardown settles a generation's requests
		return
	}
	delete(c.pending, r.id)
	switch r.kind {
	case kindSubmit:
		// Exactly that submit leaves the FIFO; nobody else moves.
		c.fifo.remove(r)
		if r.state == stateTombstoned {
			c.tombs.Take(r.id, time.Now())
			c.ctr.LateAnswers.Add(1)
			r.state = stateDone
			return
		}
	case kindCancel:
		if r.job != nil && e.Code != arcp.CodeJobNotFound {
			r.job.dropCancelReq(r)
		}
	}
	c.finishRequestLocked(r, &e)
}

// onSequencedLocked takes job.event, job.result and job.error, which carry
// the session's event_seq: strictly increasing and gap-free.
func (c *Conn) onSequencedLocked(t *transport, env *arcp.Envelope, size int) {
	seq := env.EventSeq
	last := c.lastSeq.Load()
	if seq <= last {
		c.ctr.DuplicateEvents.Add(1)
		return
	}
	if seq != last+1 {
		// A hole: the session is broken. Drop the transport; the resume
		// asks for everything after last.
		c.ctr.SequenceGaps.Add(1)
		c.dropLocked(t, errSeqGap, true)
		return
	}
	c.lastSeq.Store(seq)
	c.progressless = 0
	it := Item{Seq: seq}
	switch env.Type {
	case arcp.TypeEvent:
		ev, err := arcp.DecodePayload[arcp.Event](env)
		if err != nil {
			// Never silent loss: the seq is consumed, the event is
			// delivered as a vendor kind carrying the raw payload.
			c.ctr.MalformedFrames.Add(1)
			ev = arcp.Event{Kind: "x-vendor.sessiongate.malformed_event", Body: env.Payload}
		}
		it.Event = &ev
	case arcp.TypeResult:
		res, err := arcp.DecodePayload[arcp.Result](env)
		if err != nil {
			c.ctr.MalformedFrames.Add(1)
			res = arcp.Result{FinalStatus: arcp.StatusSuccess}
		}
		it.Result = &res
	case arcp.TypeJobError:
		je, err := arcp.DecodePayload[arcp.JobError](env)
		if err != nil {
			c.ctr.MalformedFrames.Add(1)
			je = arcp.JobError{FinalStatus: arcp.StatusError, Code: arcp.CodeInternalError, Message: "malformed job.error payload"}
		}
		it.Error = &je
	}
	j := c.jobs[env.JobID]
	switch {
	case j == nil:
		now := time.Now()
		c.ctr.LateAnswers.Add(1)
		if it.terminal() {
			delete(c.orphanWait, env.JobID)
		}
		if !c.tombs.Contains(env.JobID, now) && !it.terminal() {
			// Events of a job nobody here knows: a job accepted for a
			// submit whose answer was lost with a transport. An orphan.
			c.cancelOrphanLocked(env.JobID, now)
		}
	case j.term != nil:
		// Nothing follows a terminal.
		c.ctr.ProtocolViolations.Add(1)
	default:
		c.appendLocked(j, it, size+itemOverhead, time.Now())
	}
	c.noteProgressLocked()
}

// noteProgressLocked schedules an ack for the events handled so far: at once
// after ackBatch events, else within ackEvery.
func (c *Conn) noteProgressLocked() {
	if !c.feat.ack || c.ackPaused {
		return
	}
	if c.lastSeq.Load()-c.lastAcked >= c.cfg.knobs.ackBatch {
		c.ackWanted = true
		c.wakeWriter()
		return
	}
	c.kickSupervisor()
}

func (c *Conn) onCancelledLocked(env *arcp.Envelope) {
	p, err := arcp.DecodePayload[arcp.Cancelled](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		return
	}
	id := env.JobID
	if id == "" {
		id = p.JobID
	}
	j := c.jobs[id]
	if j == nil {
		delete(c.orphanWait, id)
		c.ctr.LateAnswers.Add(1) // e.g. the confirmation of an orphan's cancel
		return
	}
	j.cancelled = true
	c.resolveCancelsLocked(j)
	j.notifyLocked()
}

func (c *Conn) onJobsLocked(t *transport, env *arcp.Envelope) {
	p, err := arcp.DecodePayload[arcp.Jobs](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		return
	}
	r := c.pending[p.RequestID]
	if r == nil || r.kind != kindListJobs {
		c.tombs.Take(p.RequestID, time.Now())
		c.ctr.LateAnswers.Add(1)
		return
	}
	if r.gen != t.gen {
		c.ctr.StaleGeneration.Add(1)
		return
	}
	delete(c.pending, r.id)
	r.jobs = p
	c.finishRequestLocked(r, nil)
}

func (c *Conn) onSubscribedLocked(t *transport, env *arcp.Envelope) {
	p, err := arcp.DecodePayload[arcp.Subscribed](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		return
	}
	id := p.JobID
	if id == "" {
		id = env.JobID
	}
	j := c.jobs[id]
	if j == nil || j.subReq == nil || j.subReq.state != stateSent {
		c.ctr.LateAnswers.Add(1)
		return
	}
	r := j.subReq
	if r.gen != t.gen {
		c.ctr.StaleGeneration.Add(1)
		return
	}
	delete(c.pending, r.id)
	c.finishRequestLocked(r, nil)
}

// onCloseLocked: session.closed / session.bye / session.close from the
// runtime end the session — the answer to our Close, or the runtime's own
// decision.
func (c *Conn) onCloseLocked(t *transport, env *arcp.Envelope) {
	if c.closeCtx.Err() != nil {
		select {
		case <-c.closedRecv:
		default:
			close(c.closedRecv)
		}
		return
	}
	reason := ""
	if p, err := arcp.DecodePayload[arcp.Close](env); err == nil {
		reason = p.Reason
	}
	c.fatal = fmt.Errorf("%w by the runtime (%s %q)", ErrClosed, env.Type, reason)
	c.dropLocked(t, errSessionEnded, false)
}

// dropLocked gives up transport t: frames it still delivers are stale from
// now on, and the supervisor resumes (or ends the session if c.fatal is
// set). progressGuard marks drops that a misbehaving runtime could repeat
// forever (gaps, oversize frames).
func (c *Conn) dropLocked(t *transport, cause error, progressGuard bool) {
	if c.tr != t {
		return
	}
	if progressGuard {
		seq := c.lastSeq.Load()
		if c.progressless > 0 && seq != c.lastDropSeq {
			c.progressless = 0
		}
		c.progressless++
		c.lastDropSeq = seq
		if c.progressless >= maxProgressless && c.fatal == nil {
			code := arcp.CodeInternalError
			var err error = cause
			if errors.Is(cause, errOversize) {
				code = arcp.CodeResourceExhausted
				err = &CapError{Cap: "frame_bytes", Limit: c.cfg.MaxFrameBytes}
			}
			c.fatal = &LostError{Code: code, Err: err}
		}
	}
	c.tr = nil
	t.cancel(cause)
}
