package upstream

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/upstream/internal/correlate"
)

// Re-attachment: the connection's side of correlate.Reattach (jobs the
// runtime stops streaming after a resume) and of the core's replay rule
// (an idempotent replay of a job another session created). Both send
// connection-owned requests (a session.list_jobs probe, job.subscribe
// re-attachments) as control frames; their answers are routed here by
// envelope id before the caller-facing request tables are consulted.

// CodeJobLost is the code of the terminal job.error the connection gives a
// job whose outcome it cannot obtain: the runtime stopped streaming it after
// a resume and would not re-attach it, or it is another session's job (an
// idempotent replay) that the runtime would not attach here. It is not an
// ARCP code; the gateway's edge maps it to ABORTED with ErrorInfo reason
// JOB_LOST and the job id.
const CodeJobLost = "JOB_LOST"

// maxProbePages bounds the pages one probe reads.
const maxProbePages = 20

// maxRejoinKept bounds the envelopes (ids, digests) an observed job remembers for its
// re-attachments (correlate.Rejoin).
const maxRejoinKept = 4096

// envDigest is the digest of an envelope's type and payload that Rejoin
// aligns a replay by.
func envDigest(env *arcp.Envelope) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(env.Type))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write(env.Payload)
	return h.Sum64()
}

// reatReq is a connection-owned request in flight.
type reatReq struct {
	job     string // job.subscribe: the job; "" for the probe
	foreign bool   // job.subscribe of another session's job (a replay)
	probe   uint64 // the probe's number
}

// reattachFeaturesLocked tells the core what the session negotiated.
func (c *Conn) reattachFeaturesLocked() {
	c.reat.Features(c.feat.listJobs, c.feat.subscribe)
	c.reat.SetSilence(c.reatSilenceLocked())
}

// reatSilenceLocked is the silence bound of a session without list_jobs
// (Config.ReattachSilence).
func (c *Conn) reatSilenceLocked() time.Duration {
	if c.cfg.ReattachSilence > 0 {
		return c.cfg.ReattachSilence
	}
	return max(30*time.Second, 2*c.hbInterval)
}

// reattachResumedLocked starts watching every live job of the connection
// after a resume: the runtime may have stopped streaming it (the TS SDK's
// jobs keep writing through the transport they were submitted on).
func (c *Conn) reattachResumedLocked(t *transport, now time.Time) {
	c.reattachFeaturesLocked()
	var live []correlate.Mark
	for j := range c.live {
		if j.held || j.term != nil || j.removed || j.foreign || j.subReq != nil {
			// (A caller's job.subscribe still unanswered is sent
			// again by the request tables.)
			continue
		}
		live = append(live, correlate.Mark{Job: j.id, LastSeq: j.lastSeq, Observed: j.subscribed})
	}
	c.reat.Resumed(live, now)
	// Another session's jobs whose attachment went unanswered with the
	// old transport are attached again (nothing of them arrived, so
	// from 0).
	for _, id := range c.foreignRetry {
		if j := c.jobs[id]; j != nil && j.term == nil {
			c.sendReattachLocked(id, 0, true)
		}
	}
	c.foreignRetry = c.foreignRetry[:0]
	c.applyReattachLocked(t)
}

// reattachDroppedLocked: the transport is gone; connection-owned requests
// in flight are void. Unanswered attachments of other sessions' jobs are
// sent again after the resume; the rest Reattach asks for again.
func (c *Conn) reattachDroppedLocked() {
	c.reat.Dropped()
	for _, rr := range c.reatReqs {
		if rr.foreign {
			c.foreignRetry = append(c.foreignRetry, rr.job)
		}
	}
	clear(c.reatReqs)
}

// applyReattachLocked carries out Reattach's actions.
func (c *Conn) applyReattachLocked(t *transport) {
	for _, a := range c.reat.Actions() {
		switch a.Kind {
		case correlate.Probe:
			c.probePages, c.probeN = 0, a.Probe
			clear(c.probeLive)
			c.sendProbeLocked("")
		case correlate.Resubscribe:
			if a.Observed {
				c.reattachObservedLocked(a.Job)
				continue
			}
			c.ctr.Reattached.Add(1)
			c.sendReattachLocked(a.Job, a.From, false)
		case correlate.JobLost:
			if !c.feat.listJobs {
				c.loseJobLocked(a.Job, fmt.Sprintf("job %s: the runtime sent nothing of it for %v after the upstream session resumed, "+
					"and the session cannot ask whether the runtime still runs it (no session.list_jobs) or re-attach it "+
					"(job.subscribe, or it answered nothing more): it is taken as lost; its outcome is unknown", a.Job, c.reatSilenceLocked()))
				continue
			}
			c.loseJobLocked(a.Job, fmt.Sprintf("job %s was lost by the runtime after the upstream session resumed: "+
				"the runtime no longer streams it and could not re-attach it (job.subscribe); its outcome is unknown", a.Job))
		}
	}
	if t != nil && len(c.ctrl) > 0 {
		c.wakeWriter()
	}
}

// reattachObservedLocked re-attaches an observed job from its caller's
// cursor (the only one this session knows in the submitting session's
// numbering); Rejoin drops what that replays again. A live-only
// subscription (no history) has no cursor to go back to: its events during
// the seam are gone, so it ends with a definite error instead.
func (c *Conn) reattachObservedLocked(id string) {
	j := c.jobs[id]
	if j == nil || j.term != nil || j.obs == nil {
		c.reat.Forget(id)
		return
	}
	if !j.obsHistory {
		c.reat.Forget(id)
		c.loseJobLocked(id, fmt.Sprintf("job %s: the runtime stopped streaming it to this session after the upstream session resumed, "+
			"and it was subscribed to without history, so the events it sent meanwhile cannot be replayed; "+
			"subscribe to it again with history from your cursor to go on", id))
		return
	}
	c.ctr.Reattached.Add(1)
	j.obs.Reattaching()
	c.sendReattachLocked(id, j.obsFrom, false)
}

// sendProbeLocked sends one page of the probe: the runtime's live jobs.
func (c *Conn) sendProbeLocked(cursor string) {
	filter, _ := json.Marshal(arcp.JobFilter{Status: []string{"pending", "running"}})
	env, err := arcp.New(arcp.TypeListJobs, c.sessionID, arcp.ListJobs{Filter: filter, Limit: 1000, Cursor: cursor})
	if err != nil {
		return
	}
	data, err := arcp.Encode(env)
	if err != nil || !c.queueCtrlLocked(data) {
		return // unanswered: Reattach asks again after its probe timeout
	}
	c.probePages++
	c.reatReqs[env.ID] = reatReq{probe: c.probeN}
}

// sendReattachLocked sends job.subscribe{history} for job from seq from.
func (c *Conn) sendReattachLocked(job string, from uint64, foreign bool) {
	env, err := arcp.New(arcp.TypeSubscribe, c.sessionID, arcp.Subscribe{JobID: job, FromEventSeq: from, History: true})
	if err != nil {
		return
	}
	data, err := arcp.Encode(env)
	if err != nil || !c.queueCtrlLocked(data) {
		return // the next probe settles it
	}
	c.reatReqs[env.ID] = reatReq{job: job, foreign: foreign}
}

// onProbeAnswerLocked handles a session.jobs answering a probe page. It
// reports whether req was one.
func (c *Conn) onProbeAnswerLocked(t *transport, req string, p arcp.Jobs) bool {
	rr, ok := c.reatReqs[req]
	if !ok || rr.job != "" {
		return false
	}
	delete(c.reatReqs, req)
	if rr.probe != c.probeN {
		return true // an answer to a probe given up and sent again
	}
	for _, j := range p.Jobs {
		switch j.Status {
		case "pending", "running", "":
			c.probeLive[j.JobID] = true
		}
	}
	if p.NextCursor != "" && c.probePages < maxProbePages {
		c.sendProbeLocked(p.NextCursor)
		if t != nil {
			c.wakeWriter()
		}
		return true
	}
	c.reat.Listed(rr.probe, c.probeLive, p.NextCursor == "", time.Now())
	c.applyReattachLocked(t)
	return true
}

// onReattachAnswerLocked handles job.subscribed or a session.error naming
// a connection-owned job.subscribe. It reports whether req was one.
func (c *Conn) onReattachAnswerLocked(t *transport, req string, refused, replayed bool) bool {
	rr, ok := c.reatReqs[req]
	if !ok || rr.job == "" {
		return false
	}
	delete(c.reatReqs, req)
	if !refused {
		// History and live events follow (or, from the TS SDK, came
		// before).
		c.reat.Subscribed(rr.job)
		if j := c.jobs[rr.job]; j != nil && j.obs != nil && !rr.foreign {
			j.obs.Subscribed(replayed)
		}
		return true
	}
	if rr.foreign {
		c.loseJobLocked(rr.job, foreignLostMessage(rr.job))
		return true
	}
	c.reat.SubscribeFailed(rr.job)
	c.applyReattachLocked(t)
	return true
}

// subscribedAnswerLocked routes a job.subscribed without a caller's request:
// the answer to a connection-owned re-attachment.
func (c *Conn) subscribedAnswerLocked(t *transport, jobID string, replayed bool) bool {
	for req, rr := range c.reatReqs {
		if rr.job == jobID {
			return c.onReattachAnswerLocked(t, req, false, replayed)
		}
	}
	return false
}

// jobNotFoundWhileAttachingLocked: the TS SDK refuses a job.subscribe for a
// job it no longer has with job.error{JOB_NOT_FOUND} on the job's id (no
// request_id). For a job being re-attached that is the definite end: the
// job is lost, and its terminal says so.
func (c *Conn) jobNotFoundWhileAttachingLocked(j *job, it *Item) {
	if it.Error == nil || arcp.NormalizeCode(it.Error.Code) != arcp.CodeJobNotFound {
		return
	}
	attaching := false
	for req, rr := range c.reatReqs {
		if rr.job == j.id {
			attaching = true
			delete(c.reatReqs, req)
		}
	}
	if !attaching && !c.reat.Resubscribing(j.id) {
		return
	}
	msg := fmt.Sprintf("job %s was lost by the runtime after the upstream session resumed: job.subscribe answered JOB_NOT_FOUND", j.id)
	if j.foreign {
		msg = foreignLostMessage(j.id)
	} else if j.subscribed {
		msg = fmt.Sprintf("job %s, observed by this session, was lost by the runtime: it stopped sending it here (after a resume, or "+
			"after its submitting session lost it) and job.subscribe answered JOB_NOT_FOUND", j.id)
	}
	it.Error = &arcp.JobError{FinalStatus: arcp.StatusError, Code: CodeJobLost, Message: msg}
	c.ctr.JobsLost.Add(1)
	c.notifyLostLocked(j.id)
}

func foreignLostMessage(job string) string {
	return fmt.Sprintf("job %s was created through another session (the runtime replayed its job.accepted for this idempotency key) "+
		"and the runtime would not attach it to this session: wait for it from the session that submitted it", job)
}

// loseJobLocked ends job for its callers with a terminal job.error
// {CodeJobLost}: a definite answer instead of a wait that never ends.
func (c *Conn) loseJobLocked(jobID, msg string) {
	j := c.jobs[jobID]
	if j == nil || j.term != nil {
		return
	}
	c.ctr.JobsLost.Add(1)
	// No envelope carries it: it takes the session's latest seq (at least
	// the job's last, and never 0), so that a watcher from any cursor of
	// the job's gets it.
	seq := max(j.lastSeq, c.lastSeq.Load(), 1)
	it := Item{Seq: seq, Error: &arcp.JobError{FinalStatus: arcp.StatusError, Code: CodeJobLost, Message: msg}}
	c.appendLocked(j, it, itemOverhead, time.Now())
	c.core.JobEnded(jobID)
	c.notifyLostLocked(jobID)
}

// notifyLostLocked calls Config.OnJobLost for jobID off the lock.
func (c *Conn) notifyLostLocked(jobID string) {
	if f := c.cfg.OnJobLost; f != nil {
		go f(jobID)
	}
}

// Recheck makes the connection check on a job it observes (attached with
// SubscribeJob) as it does after a resume: the job's submitting session
// lost it (Config.OnJobLost), and the runtime may then have stopped sending
// it to this session too, without a resume here to notice. Listed live and
// streaming, nothing changes; no longer listed, it is re-attached or ends as
// JOB_LOST (without list_jobs: after Config.ReattachSilence of silence). A
// job this connection submitted, or does not know, is left alone.
func (c *Conn) Recheck(jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil || !j.subscribed || j.foreign || j.term != nil || j.subReq != nil {
		return
	}
	c.reat.Watch(correlate.Mark{Job: jobID, LastSeq: j.lastSeq, Observed: true}, time.Now())
	c.busyLocked()
}

// attachForeignLocked handles a job handed to a caller by an idempotent
// replay of a job another session created: its events go to that session,
// not this one. With subscribe negotiated it is attached here with its
// whole history; without, it ends at once with a definite error (the
// gateway's edge first looks for the session that owns it).
func (c *Conn) attachForeignLocked(j *job) {
	j.foreign = true
	c.ctr.ForeignReplays.Add(1)
	if !c.feat.subscribe {
		c.loseJobLocked(j.id, foreignLostMessage(j.id))
		return
	}
	c.sendReattachLocked(j.id, 0, true)
	if c.tr != nil {
		c.wakeWriter()
	}
}

// OwnedElsewhere reports whether the job was handed to this connection by
// an idempotent replay of a job another session created (its events are
// that session's unless the runtime attaches it here).
func (c *Conn) OwnedElsewhere(jobID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	return j != nil && j.foreign
}

// maxKnownJobs bounds the ids a connection remembers as its callers' own
// (Knows); the oldest go first.
const maxKnownJobs = 10_000

// rememberJobLocked records id as a job of this connection's callers:
// accepted for one of them, subscribed to, or adopted.
func (c *Conn) rememberJobLocked(id string) {
	if _, ok := c.known[id]; ok {
		return
	}
	if c.known == nil {
		c.known = make(map[string]struct{})
	}
	c.known[id] = struct{}{}
	c.knownOrder = append(c.knownOrder, id)
	if len(c.knownOrder) > maxKnownJobs {
		delete(c.known, c.knownOrder[0])
		c.knownOrder[0] = ""
		c.knownOrder = c.knownOrder[1:]
	}
}

// Knows reports whether the job is one of this connection's callers' jobs:
// accepted for one of them, subscribed to or adopted, also after it was
// forgotten (the newest 10,000 are remembered). A runtime may list every
// job of its principal (both official SDKs do), and every session of a
// gateway may share one principal: the gateway shows a caller only the
// jobs its sessions know.
func (c *Conn) Knows(jobID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.known[jobID]
	return ok
}

// DeliveredAt returns when a caller of this connection was first handed the
// job by a job.accepted (its own submit, or an idempotent replay).
func (c *Conn) DeliveredAt(jobID string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil || j.handedAt.IsZero() {
		return time.Time{}, false
	}
	return j.handedAt, true
}

// LetGo forgets a live job whose outcome a caller took from another
// session that owns it, when nothing of it has arrived here (a replay the
// connection could not tell from a new job, so its events go elsewhere).
// Its id is tombstoned: a later frame of it is a late answer, never an
// orphan to cancel. Jobs with items, watchers or an attachment stay.
func (c *Conn) LetGo(jobID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	j := c.jobs[jobID]
	if j == nil || j.term != nil || j.foreign || j.subscribed || j.end() > 0 || len(j.watchers) > 0 {
		return
	}
	c.removeJobLocked(j)
	c.insertTombLocked(jobID, c.defaultTTL, time.Now())
}
