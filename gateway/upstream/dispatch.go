package upstream

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream/internal/correlate"
)

// seqFrame is a sequenced envelope held by the reorder window.
type seqFrame struct {
	env  *arcp.Envelope
	size int
}

// handle dispatches one decoded envelope read from transport t. Every
// decision about who an answer belongs to is the correlation core's; handle
// feeds it and carries out its actions.
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
		if env.EventSeq > 0 {
			// The Go SDK stamps job.cancelled with an event_seq: it takes
			// its place in the sequence.
			c.onSequencedLocked(t, env, size)
		} else {
			c.onCancelledLocked(env)
		}
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
	c.applyLocked(t)
}

// applyLocked carries out the correlation core's actions. t is the current
// transport (nil when there is none).
func (c *Conn) applyLocked(t *transport) {
	var resend []*request
	for _, a := range c.core.Actions() {
		switch a.Kind {
		case correlate.Deliver:
			c.deliverLocked(a.ID, a.Job)
			if j := c.jobs[a.Job]; a.Foreign && j != nil && j.term == nil && !j.foreign {
				c.attachForeignLocked(j)
			}
		case correlate.Fail:
			r := c.subs[a.ID]
			if r == nil {
				continue
			}
			delete(c.subs, a.ID)
			err := a.Err
			switch {
			case errors.Is(err, correlate.ErrJobIDReused):
				c.ctr.JobIDReused.Add(1)
				err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			case errors.Is(err, correlate.ErrUnreadableAnswers):
				err = &RuntimeFaultError{Fault: "unreadable_answers", Err: err}
			}
			c.finishRequestLocked(r, err)
		case correlate.Cancel:
			c.cancelJobLocked(a.Job)
		case correlate.Discard:
			if j := c.jobs[a.Job]; j != nil && j.held {
				c.removeJobLocked(j)
			}
		case correlate.Resend:
			r := c.subs[a.ID]
			if r == nil || r.state == stateQueued {
				continue // gone, or still queued from an earlier resend
			}
			r.env.ID = arcp.NewID()
			data, err := arcp.Encode(r.env)
			if err != nil {
				continue
			}
			r.id, r.frame, r.state = r.env.ID, data, stateQueued
			c.ctr.Resends.Add(1)
			resend = append(resend, r)
		case correlate.WriteBarrier:
			c.queueCtrlLocked(c.barrierFrame(a.Req))
		case correlate.Drop:
			if t == nil {
				t = c.tr
			}
			if t != nil {
				cause := a.Err
				if cause == nil {
					cause = errReconcile
				}
				c.dropLocked(t, cause, false)
			}
		case correlate.Lost:
			if c.fatal == nil {
				code := arcp.CodeInternalError
				var ae *arcp.Error
				if errors.As(a.Err, &ae) {
					code = arcp.NormalizeCode(ae.Code)
				}
				c.fatal = &LostError{Code: code, Err: a.Err}
			}
			if t == nil {
				t = c.tr
			}
			if t != nil {
				c.dropLocked(t, errSessionEnded, false)
			}
		}
	}
	if len(resend) > 0 {
		c.out.pushFront(resend)
	}
	c.syncCoreCountersLocked()
	if c.out.live > 0 && c.core.MayWriteSubmits() {
		c.wakeWriter()
	}
}

// syncCoreCountersLocked adds what the core counted since the last call to
// the connection's exported counters.
func (c *Conn) syncCoreCountersLocked() {
	if e := c.core.Echo(); e != c.echoSeen {
		// What this session learned of the runtime, for the next ones.
		c.echoSeen = e
		c.cfg.Traits.echo.Store(int32(e))
	}
	now := c.core.Counters()
	if now == c.coreSeen {
		return // the usual case: no shared cache line touched per frame
	}
	was := c.coreSeen
	c.coreSeen = now
	for _, d := range [...]struct {
		ctr      *atomic.Uint64
		now, was uint64
	}{
		{&c.ctr.LateAnswers, now.LateAnswers, was.LateAnswers},
		{&c.ctr.StaleGeneration, now.StaleAnswers, was.StaleAnswers},
		{&c.ctr.ProtocolViolations, now.OrderViolations, was.OrderViolations},
		{&c.ctr.FIFOStalls, now.FIFOStalls, was.FIFOStalls},
		{&c.ctr.DuplicateAnswers, now.DuplicateAnswers, was.DuplicateAnswers},
		{&c.ctr.BarrierTimeouts, now.BarrierTimeouts, was.BarrierTimeouts},
		{&c.ctr.ReconciledByList, now.ReconciledByList, was.ReconciledByList},
		{&c.ctr.SerializedSubmits, now.SerializedWrites, was.SerializedWrites},
		{&c.ctr.UnreadableAnswers, now.UnreadableAnswers, was.UnreadableAnswers},
		{&c.ctr.UnreadableFailures, now.UnreadableFailures, was.UnreadableFailures},
		{&c.ctr.EchoLost, now.EchoLost, was.EchoLost},
	} {
		if d.now != d.was {
			d.ctr.Add(d.now - d.was)
		}
	}
}

// deliverLocked hands job to the submit id: its job.accepted (when it was
// the accept being handled) or a record made from the job id (when the job
// was found by a list_jobs answer).
func (c *Conn) deliverLocked(id correlate.ID, jobID string) {
	r := c.subs[id]
	if r == nil {
		return
	}
	delete(c.subs, id)
	acc := arcp.Accepted{JobID: jobID}
	accepting := c.curAccept != nil && c.curAccept.JobID == jobID
	if accepting {
		acc = *c.curAccept
	}
	if j := c.jobs[jobID]; j == nil {
		// A job id tombstoned as an orphan and now claimed by its own
		// caller (an idempotent retry) is revived for that caller.
		revived := c.tombs.Take(jobID, time.Now())
		j = c.addJobLocked(jobID)
		if accepting && !revived {
			j.startAfter = c.lastSeq.Load()
		}
	} else if j.held {
		j.held = false // its held events are the caller's now
		if accepting && j.base == 0 && len(j.items) > 0 {
			// Events before the accept (a runtime that sends them
			// first): the job starts before its first one.
			j.startAfter = min(c.lastSeq.Load(), j.items[0].Seq-1)
		}
	}
	if r.awaited {
		c.jobs[jobID].awaited = true
	}
	r.acc = acc
	if j := c.jobs[jobID]; j != nil && j.handedAt.IsZero() {
		j.handedAt = time.Now()
	}
	c.rememberJobLocked(jobID)
	c.finishRequestLocked(r, nil)
}

// cancelJobLocked sends job.cancel for a job the core decided to cancel. A
// job nobody owns (an orphan, or held and unclaimed) is tombstoned so that
// its events and terminal are dropped as late answers; a caller's own job
// (a cancel the caller could not wait for) keeps its log.
func (c *Conn) cancelJobLocked(jobID string) {
	if !c.queueCtrlLocked(c.orphanCancelFrame(jobID)) {
		return // the core asks again after the next resume
	}
	if j := c.jobs[jobID]; j != nil && !j.held {
		return
	} else if j != nil {
		c.removeJobLocked(j)
	}
	c.insertTombLocked(jobID, c.defaultTTL, time.Now())
	c.ctr.OrphansCancelled.Add(1)
	c.orphans = append(c.orphans, jobID)
	if len(c.orphans) > 1<<16 {
		c.orphans = slices.Delete(c.orphans, 0, len(c.orphans)-1<<15)
	}
}

// barrierFrame is the reconciliation barrier: a request the runtime answers
// in order with submits. session.list_jobs when negotiated (its answer also
// binds lost submits by trace id), else a job.cancel for a job id that
// cannot exist (answered with session.error{JOB_NOT_FOUND, request_id}).
func (c *Conn) barrierFrame(req string) []byte {
	var env *arcp.Envelope
	var err error
	if c.feat.listJobs {
		env, err = arcp.New(arcp.TypeListJobs, c.sessionID, arcp.ListJobs{Limit: 1000})
	} else {
		env, err = arcp.New(arcp.TypeCancel, c.sessionID, arcp.Cancel{Reason: "sessiongate: reconciliation barrier"})
		if env != nil {
			env.JobID = "sessiongate-barrier-" + req
		}
	}
	if err != nil {
		return nil
	}
	env.ID = req
	data, err := arcp.Encode(env)
	if err != nil {
		return nil
	}
	return data
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
	acc.TraceID = trace             // carried to the caller
	acc.Extensions = env.Extensions // carried to the caller
	c.curAccept = &acc
	c.core.Accepted(acc.JobID, trace, time.Now())
	c.applyLocked(t)
	c.curAccept = nil
}

// unreadableAnswerLocked handles a job.accepted or session.error that cannot
// be read (or a frame that cannot be read and might be one). It may be the
// answer to the FIFO's head, or junk: either way the FIFO's alignment with
// the runtime is no longer known, and guessing could hand a job to the wrong
// caller. If submits are waiting, the transport is dropped instead: their
// submits are reconciled after the resume.
func (c *Conn) unreadableAnswerLocked(t *transport) {
	c.core.Unreadable(time.Now())
	c.applyLocked(t)
}

func (c *Conn) orphanCancelFrame(jobID string) []byte {
	return c.frame(arcp.TypeCancel, jobID, arcp.Cancel{Reason: "sessiongate: orphaned job, its caller is gone"})
}

func (c *Conn) onSessionErrorLocked(t *transport, env *arcp.Envelope) {
	e, err := arcp.DecodePayload[arcp.Error](env)
	if err != nil {
		c.ctr.MalformedFrames.Add(1)
		c.unreadableAnswerLocked(t)
		return
	}
	if c.closeCtx.Err() != nil {
		// Closing: the runtime refused session.close (the TS SDK knows
		// only session.bye). Say goodbye the way it understands.
		c.closeRefusedLocked()
		return
	}
	now := time.Now()
	if e.RequestID == "" {
		code := arcp.NormalizeCode(e.Code)
		if code == arcp.CodeHeartbeatLost {
			c.ctr.HeartbeatLost.Add(1)
		}
		c.core.SessionError(code, e.Retryable, &e, time.Now())
		return
	}
	if c.core.Rejected(e.RequestID, &e, now) {
		return
	}
	if c.onReattachAnswerLocked(t, e.RequestID, true, false) {
		return
	}
	if rr, ok := c.reatReqs[e.RequestID]; ok && rr.job == "" {
		delete(c.reatReqs, e.RequestID) // a refused probe: Reattach asks again after its timeout
		return
	}
	r := c.pending[e.RequestID]
	if r == nil {
		if e.Code == arcp.CodeJobNotFound && e.JobID != "" {
			c.core.Cancelled(e.JobID) // an orphan that had already ended
		}
		c.tombs.Take(e.RequestID, now)
		c.ctr.LateAnswers.Add(1)
		return
	}
	if r.gen != t.gen {
		c.ctr.StaleGeneration.Add(1) // cannot happen: teardown settles a generation's requests
		return
	}
	delete(c.pending, r.id)
	if r.kind == kindCancel && r.job != nil && e.Code != arcp.CodeJobNotFound {
		r.job.dropCancelReq(r)
	}
	c.finishRequestLocked(r, &e)
}

// onSequencedLocked takes the envelopes that carry the session's event_seq
// (job.event, job.result, job.error, and job.cancelled from the Go SDK)
// through the reorder window: strictly increasing and gap-free on delivery.
func (c *Conn) onSequencedLocked(t *transport, env *arcp.Envelope, size int) {
	now := time.Now()
	switch c.seqr.Offer(env.EventSeq, size, seqFrame{env: env, size: size}, now) {
	case correlate.SeqDuplicate:
		c.ctr.DuplicateEvents.Add(1)
	case correlate.SeqHeld:
		c.ctr.ReorderedEvents.Add(1)
		c.busyLocked()
	case correlate.SeqGap:
		// A hole that does not close within the window: the session is
		// broken. Drop the transport; the resume asks for everything
		// after the last delivered seq.
		c.ctr.SequenceGaps.Add(1)
		c.dropLocked(t, errSeqGap, true)
	case correlate.SeqDeliver:
		c.deliverSeqLocked(env, size, now)
		for c.tr == t {
			f, _, ok := c.seqr.Next(now)
			if !ok {
				break
			}
			c.applyLocked(t)
			c.deliverSeqLocked(f.env, f.size, now)
		}
	}
}

// deliverSeqLocked handles the sequenced envelope env, next in order.
func (c *Conn) deliverSeqLocked(env *arcp.Envelope, size int, now time.Time) {
	c.lastSeq.Store(env.EventSeq)
	c.progressless = 0
	defer c.noteProgressLocked()
	if env.Type == arcp.TypeCancelled {
		c.onCancelledLocked(env)
		return
	}
	it := Item{Seq: env.EventSeq, Extensions: env.Extensions}
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
	if j == nil {
		if c.tombs.Contains(env.JobID, now) {
			c.ctr.LateAnswers.Add(1)
			if it.terminal() {
				c.core.JobEnded(env.JobID)
			}
			return
		}
		if c.adopt && (it.Error == nil || c.core.Waiting() == 0) {
			// A taken-over session's job, submitted through the
			// previous owner: adopt it, with history from the
			// takeover on.
			j = c.adoptJobLocked(env.JobID)
			goto known
		}
		var v correlate.Verdict
		if it.Error != nil {
			// A job.error for a job never accepted is the TS SDK's way to
			// reject a submit.
			v = c.core.UnknownJobError(env.JobID, jobErrorAsError(it.Error), now)
		} else {
			v = c.core.UnknownJob(env.JobID, now)
		}
		if v == correlate.Late {
			c.ctr.LateAnswers.Add(1)
		}
		if v != correlate.Hold {
			return // (an orphan's late answer is counted by the core)
		}
		// Held until reconciliation tells whose it is.
		j = c.addJobLocked(env.JobID)
		j.held = true
	} else if it.Error != nil && c.core.ExistingJobError(it.Error.Code, jobErrorAsError(it.Error), time.Now()) {
		// The TS SDK's DUPLICATE_KEY rejection, sent on the existing
		// job's id: it answers the waiting submit, not this job.
		return
	}
known:
	if j.term != nil {
		// Nothing follows a terminal.
		c.ctr.ProtocolViolations.Add(1)
		return
	}
	if j.obs != nil && !j.obs.Admit(env.ID, envDigest(env)) {
		// An observed job's envelope that its re-attachment replayed
		// again (reattach.go).
		c.ctr.RejoinDropped.Add(1)
		return
	}
	c.admitItemLocked(j, it, size, now)
}

// admitItemLocked appends the sequenced item it, next in order, to job j.
func (c *Conn) admitItemLocked(j *job, it Item, size int, now time.Time) {
	if j.term != nil {
		c.ctr.ProtocolViolations.Add(1)
		return
	}
	c.reat.Frame(j.id, it.Seq, now)
	c.jobNotFoundWhileAttachingLocked(j, &it)
	if it.Event != nil && it.Event.Kind == "result_chunk" {
		j.chunks.add(it.Event.Body, c.cfg.MaxResultBytes)
	}
	c.appendLocked(j, it, size+itemOverhead, now)
	if it.terminal() {
		c.core.JobEnded(j.id)
	}
}

// jobErrorAsError gives a job.error that rejects a submit the shape of a
// session.error, so callers see one error type for rejections.
func jobErrorAsError(e *arcp.JobError) error {
	return &arcp.Error{Code: arcp.NormalizeCode(e.Code), Message: e.Message, Retryable: e.Retryable, Details: e.Details}
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
	c.core.Cancelled(id)
	j := c.jobs[id]
	if j == nil {
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
	listed := make([]correlate.Listed, 0, len(p.Jobs))
	for _, j := range p.Jobs {
		listed = append(listed, correlate.Listed{JobID: j.JobID, TraceID: j.TraceID})
	}
	if c.core.ListAnswered(p.RequestID, listed, time.Now()) {
		return
	}
	if c.onProbeAnswerLocked(t, p.RequestID, p) {
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
	if (j == nil || j.subReq == nil) && c.subscribedAnswerLocked(t, id, p.Replayed) {
		return
	}
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
	if j.obs != nil {
		j.obs.Subscribed(p.Replayed)
	}
	r.subd = p
	c.finishRequestLocked(r, nil)
}

// onCloseLocked: session.closed / session.bye / session.close from the
// runtime end the session — the answer to our Close, or the runtime's own
// decision.
func (c *Conn) onCloseLocked(t *transport, env *arcp.Envelope) {
	if c.closeCtx.Err() != nil {
		c.closeConfirmedLocked()
		return
	}
	reason := ""
	if p, err := arcp.DecodePayload[arcp.Close](env); err == nil {
		reason = p.Reason
	}
	c.fatal = fmt.Errorf("%w by the runtime (%s %q)", ErrClosed, env.Type, reason)
	c.dropLocked(t, errSessionEnded, false)
}

func (c *Conn) closeConfirmedLocked() {
	select {
	case <-c.closedRecv:
	default:
		close(c.closedRecv)
	}
}

// closeRefusedLocked answers a session.error received while closing: the
// runtime does not know session.close, so session.bye (which every runtime
// knows and which needs no answer) ends the session; the close counts as
// confirmed once bye is queued, and the runtime ends the session when it
// reads it.
func (c *Conn) closeRefusedLocked() {
	if c.byeQueued {
		return
	}
	c.byeQueued = true
	c.queueCtrlLocked(c.frame(arcp.TypeBye, "", arcp.Close{Reason: c.closeReason}))
	c.closeConfirmedLocked()
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

// chunkAssembler puts a streamed result (§8.4) back together from its
// result_chunk events: the decoded data of each chunk in chunk_seq order.
type chunkAssembler struct {
	resultID string
	next     int64
	data     []byte
	utf8     bool // every chunk so far was encoding utf8
	err      error
}

type resultChunk struct {
	ResultID string `json:"result_id"`
	ChunkSeq *int64 `json:"chunk_seq"`
	Data     string `json:"data"`
	Encoding string `json:"encoding"`
	More     bool   `json:"more"`
}

// add appends one chunk. A malformed, out-of-order or oversized chunk
// spoils the assembly with a definite error (reported with the result),
// never a silent short result.
func (a *chunkAssembler) add(body json.RawMessage, limit int64) {
	if a.err != nil {
		return
	}
	var ch resultChunk
	if err := json.Unmarshal(body, &ch); err != nil || ch.ResultID == "" || ch.ChunkSeq == nil {
		a.err = errors.New("malformed result_chunk")
		return
	}
	if a.resultID == "" {
		a.resultID, a.utf8 = ch.ResultID, true
	}
	if ch.ResultID != a.resultID {
		a.err = fmt.Errorf("result_chunk for result %q while assembling %q", ch.ResultID, a.resultID)
		return
	}
	if *ch.ChunkSeq != a.next {
		a.err = fmt.Errorf("result_chunk %d out of order (want %d)", *ch.ChunkSeq, a.next)
		return
	}
	a.next++
	var b []byte
	switch ch.Encoding {
	case "utf8":
		b = []byte(ch.Data)
	case "base64":
		d, err := base64.StdEncoding.DecodeString(ch.Data)
		if err != nil {
			a.err = fmt.Errorf("result_chunk %d: bad base64: %w", *ch.ChunkSeq, err)
			return
		}
		b = d
		a.utf8 = false
	default:
		a.err = fmt.Errorf("result_chunk %d: unknown encoding %q", *ch.ChunkSeq, ch.Encoding)
		return
	}
	if int64(len(a.data)+len(b)) > limit {
		a.err = &CapError{Cap: "result_bytes", Limit: limit}
		a.data = nil
		return
	}
	a.data = append(a.data, b...)
}

// assembled returns the streamed result for res, if res references one.
func (a *chunkAssembler) assembled(res *arcp.Result) (*Assembled, error) {
	if res == nil || res.ResultID == "" {
		return nil, nil
	}
	if a.err != nil {
		return nil, a.err
	}
	if a.resultID != res.ResultID {
		if a.resultID == "" && res.ResultSize == 0 {
			return &Assembled{ResultID: res.ResultID, Text: true}, nil
		}
		return nil, fmt.Errorf("job.result names result %q but the chunks were for %q", res.ResultID, a.resultID)
	}
	if res.ResultSize > 0 && res.ResultSize != int64(len(a.data)) {
		return nil, fmt.Errorf("result %q: result_size %d but %d bytes assembled", res.ResultID, res.ResultSize, len(a.data))
	}
	return &Assembled{ResultID: a.resultID, Data: a.data, Text: a.utf8 && utf8.Valid(a.data)}, nil
}
