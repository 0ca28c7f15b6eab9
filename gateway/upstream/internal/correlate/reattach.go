package correlate

import (
	"slices"
	"time"
)

// Reattach decides, after a resume, which of the connection's live jobs the
// runtime has stopped streaming, and what to do about each: re-attach it
// with job.subscribe{history, from_event_seq}, or fail its callers with a
// definite error naming it. Like Core it is sans-IO: events in, actions out,
// no clock of its own. The rules are in doc.go ("Re-attach after a
// resume").
type Reattach struct {
	cfg ReattachConfig

	canList, canSub bool
	connected       bool

	jobs      map[string]*rjob
	resumedAt time.Time // the latest resume
	probing   bool      // a probe is in flight on the current transport
	probeN    uint64    // number of the latest probe
	probeAt   time.Time // next probe due (when not probing)
	sentAt    time.Time // when the probe in flight was sent
	backoff   time.Duration

	out []RAction
	ctr ReattachCounters
}

// ReattachConfig holds Reattach's tuning.
type ReattachConfig struct {
	// ProbeAfter is the wait between a resume and its first probe, and the
	// first probe period (1 s when zero).
	ProbeAfter time.Duration
	// ProbeMax caps the probe period, which doubles while jobs stay
	// unconfirmed (30 s when zero).
	ProbeMax time.Duration
	// ProbeTimeout bounds the wait for a probe's answer; an unanswered
	// probe is sent again (10 s when zero).
	ProbeTimeout time.Duration
	// Silence bounds, on a runtime without session.list_jobs, how long a
	// tracked job may stay silent after a resume (or after its
	// re-attachment) before it is re-attached or lost (30 s when zero;
	// SetSilence changes it).
	Silence time.Duration
	// brokenRule disables one rule; only tests set it.
	brokenRule string
}

// RKind is what an RAction asks for.
type RKind uint8

const (
	// Probe: send session.list_jobs{filter {status [pending, running]}}
	// and report its answer with Listed.
	Probe RKind = iota + 1
	// Resubscribe: send job.subscribe{job_id Job, history true,
	// from_event_seq From} and report a refusal with SubscribeFailed.
	Resubscribe
	// JobLost: end Job for its callers with a definite error naming it:
	// the runtime no longer streams it and cannot re-attach it.
	JobLost
)

// RAction is one thing the connection must do.
type RAction struct {
	Kind     RKind
	Job      string
	From     uint64
	Observed bool   // the job is observed (Mark.Observed): the connection picks the cursor
	Probe    uint64 // Probe: its number, for Listed
}

// Mark is a live job at a resume: its id and the event_seq of the last of
// its envelopes delivered.
type Mark struct {
	Job     string
	LastSeq uint64
	// Observed: the job is another session's, attached here by
	// job.subscribe. The runtime listing it live says the job runs, not
	// that this session's subscription survived the resume (the TS SDK's
	// do not).
	Observed bool
}

// ReattachCounters count what Reattach did.
type ReattachCounters struct {
	Probes       uint64 // list_jobs probes sent
	Resubscribes uint64 // job.subscribe re-attachments sent
	Lost         uint64 // jobs failed as lost
	Confirmed    uint64 // jobs the runtime went on streaming
}

type rstate uint8

const (
	unconfirmed  rstate = iota + 1 // resumed, no probe answer yet
	listedLive                     // the runtime lists it as live; a frame confirms it
	resubscribed                   // re-attached; its terminal or the next probe settles it
)

type rjob struct {
	last     uint64
	state    rstate
	observed bool
	framed   bool      // a frame of it arrived since the resume (or Watch)
	since    time.Time // its latest frame, resume or re-attachment (the silence clock)
}

// NewReattach returns an empty Reattach.
func NewReattach(cfg ReattachConfig) *Reattach {
	if cfg.ProbeAfter <= 0 {
		cfg.ProbeAfter = time.Second
	}
	if cfg.ProbeMax <= 0 {
		cfg.ProbeMax = 30 * time.Second
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 10 * time.Second
	}
	if cfg.Silence <= 0 {
		cfg.Silence = 30 * time.Second
	}
	return &Reattach{cfg: cfg}
}

// Actions returns the actions emitted since the last call, in order.
func (r *Reattach) Actions() []RAction {
	a := r.out
	r.out = r.out[:0]
	return a
}

// Counters returns the counts so far.
func (r *Reattach) Counters() ReattachCounters { return r.ctr }

// Tracking returns the number of jobs not yet settled.
func (r *Reattach) Tracking() int { return len(r.jobs) }

// Features records what the session negotiated (every welcome: a
// transport is up).
func (r *Reattach) Features(listJobs, subscribe bool) {
	r.canList, r.canSub, r.connected = listJobs, subscribe, true
}

// Watch starts tracking one live job as after a resume, without one: an
// observed job whose submitting session (elsewhere in the gateway) lost it,
// so that the runtime may have stopped sending it here too. A probe follows
// ProbeAfter from now unless one is due sooner; without list_jobs the
// silence bound runs from now.
func (r *Reattach) Watch(m Mark, now time.Time) {
	if _, ok := r.jobs[m.Job]; ok {
		return
	}
	put(&r.jobs, m.Job, &rjob{last: m.LastSeq, state: unconfirmed, observed: m.Observed, since: now})
	if r.resumedAt.Before(now) {
		r.resumedAt = now
	}
	if due := now.Add(r.cfg.ProbeAfter); !r.probing && (r.probeAt.Before(now) || r.probeAt.After(due)) {
		r.probeAt, r.backoff = due, r.cfg.ProbeAfter
	}
}

// SetSilence sets the silence bound (see ReattachConfig.Silence); zero or
// less keeps the current one.
func (r *Reattach) SetSilence(d time.Duration) {
	if d > 0 {
		r.cfg.Silence = d
	}
}

// Resumed records a new transport of a resumed session and the jobs live
// on it. Every one of them is unconfirmed until a probe says otherwise: the
// frames the resume replays prove nothing about the runtime going on.
func (r *Reattach) Resumed(live []Mark, now time.Time) {
	r.connected = true
	r.probing = false
	r.resumedAt = now
	for _, m := range live {
		if j := r.jobs[m.Job]; j != nil {
			j.last, j.state, j.observed, j.since, j.framed = max(j.last, m.LastSeq), unconfirmed, m.Observed, now, false
			continue
		}
		put(&r.jobs, m.Job, &rjob{last: m.LastSeq, state: unconfirmed, observed: m.Observed, since: now})
	}
	r.backoff = r.cfg.ProbeAfter
	r.probeAt = now.Add(r.cfg.ProbeAfter)
}

// Dropped records that the transport is gone: a probe in flight is void.
func (r *Reattach) Dropped() {
	r.connected = false
	r.probing = false
}

// Frame records a sequenced envelope of job delivered in order, at now.
func (r *Reattach) Frame(job string, seq uint64, now time.Time) {
	j := r.jobs[job]
	if j == nil {
		return
	}
	j.last = max(j.last, seq)
	j.framed = true
	switch {
	case j.state == listedLive || r.cfg.brokenRule == "reattach-replay-confirms":
		// The runtime listed it as live after the replay and streams it:
		// it goes on.
	case !r.canList && j.state == unconfirmed && now.Sub(r.resumedAt) >= r.cfg.ProbeAfter:
		// No listing to ask: a frame that comes ProbeAfter after the
		// resume is no longer the resume's replay, so the runtime
		// streams it.
	default:
		j.since = now
		return
	}
	r.ctr.Confirmed++
	delete(r.jobs, job)
}

// Forget stops tracking job: it ended (its terminal was delivered) or the
// connection forgot it.
func (r *Reattach) Forget(job string) { delete(r.jobs, job) }

// Tick lets time pass: a due probe is asked for; without list_jobs, a job
// silent for Silence is re-attached or lost.
func (r *Reattach) Tick(now time.Time) {
	if len(r.jobs) == 0 || !r.connected || r.cfg.brokenRule == "reattach-none" {
		return
	}
	if !r.canList {
		if r.cfg.brokenRule == "reattach-no-silence" {
			return
		}
		for _, id := range sortedKeys(r.jobs) {
			j := r.jobs[id]
			if now.Sub(j.since) < r.cfg.Silence {
				continue
			}
			if j.state != resubscribed && r.canSub {
				r.resubscribe(id, j, now)
				continue
			}
			r.lose(id)
		}
		return
	}
	if r.probing {
		if now.Sub(r.sentAt) < r.cfg.ProbeTimeout {
			return
		}
		r.probing = false // unanswered: ask again
	}
	if now.Before(r.probeAt) {
		return
	}
	if r.cfg.brokenRule == "reattach-no-list" {
		// Broken on purpose: re-attach every unconfirmed job without
		// asking whether the runtime still streams it.
		for _, id := range sortedKeys(r.jobs) {
			if j := r.jobs[id]; j.state != resubscribed && r.canSub {
				r.resubscribe(id, j, now)
			}
		}
	}
	r.probing, r.sentAt = true, now
	r.probeN++
	r.ctr.Probes++
	r.out = append(r.out, RAction{Kind: Probe, Probe: r.probeN})
}

// Due returns when Tick next has something to do, if anything.
func (r *Reattach) Due() (time.Time, bool) {
	if len(r.jobs) == 0 || !r.connected {
		return time.Time{}, false
	}
	if !r.canList {
		var due time.Time
		for _, j := range r.jobs {
			if t := j.since.Add(r.cfg.Silence); due.IsZero() || t.Before(due) {
				due = t
			}
		}
		return due, true
	}
	if r.probing {
		return r.sentAt.Add(r.cfg.ProbeTimeout), true
	}
	return r.probeAt, true
}

// Listed handles the answer to probe number probe: live holds the jobs the runtime listed
// as pending or running; complete says the listing was whole (no further
// page). A job listed live is watched for its next frame; a job missing from
// a whole listing has ended or been dropped by the runtime without its end
// reaching this connection: it is re-attached (subscribe negotiated) or
// lost. A job re-attached at the previous probe that is still not live and
// has no terminal is lost.
func (r *Reattach) Listed(probe uint64, live map[string]bool, complete bool, now time.Time) {
	if !r.probing || probe != r.probeN {
		// A late answer: of a dropped transport's probe, or of one
		// given up and sent again. It may predate a re-attachment.
		return
	}
	r.probing = false
	for _, id := range sortedKeys(r.jobs) {
		j := r.jobs[id]
		switch {
		case live[id] && j.observed && (j.state == listedLive || !j.framed) && j.state != resubscribed && r.canSub &&
			r.cfg.brokenRule != "reattach-observed-trusts-listing":
			// Listed live, and nothing of it arrived since the resume
			// (or since the previous probe listed it): the job runs,
			// but this session's subscription did not survive the
			// resume (TS). Re-attached now, before the job ends (the
			// TS SDK forgets an ended job: job.subscribe would answer
			// JOB_NOT_FOUND).
			r.resubscribe(id, j, now)
		case live[id]:
			j.state = listedLive
		case !complete:
			// Not seen: it may be on a later page. Ask again later.
		case j.state == resubscribed:
			r.lose(id)
		case r.canSub && r.cfg.brokenRule != "reattach-no-subscribe":
			r.resubscribe(id, j, now)
		default:
			r.lose(id)
		}
	}
	r.backoff = min(r.backoff*2, r.cfg.ProbeMax)
	r.probeAt = now.Add(r.backoff)
}

// Subscribed handles the runtime's acceptance (job.subscribed) of a
// Resubscribe. An observed job is then settled: the runtime attached it to
// this transport, with its history from the cursor. A job of this session
// stays tracked: a runtime that lost it may still accept the subscription
// and replay what it buffered (the reference's TS dialect); its terminal,
// the next probe or the silence bound settles it.
func (r *Reattach) Subscribed(job string) {
	if j := r.jobs[job]; j != nil && j.state == resubscribed && j.observed {
		r.ctr.Confirmed++
		delete(r.jobs, job)
	}
}

// SubscribeFailed handles the refusal of a Resubscribe (JOB_NOT_FOUND, say):
// the job is lost.
func (r *Reattach) SubscribeFailed(job string) {
	if j := r.jobs[job]; j != nil && j.state == resubscribed {
		r.lose(job)
	}
}

// Resubscribing reports whether job was re-attached and is not settled yet.
func (r *Reattach) Resubscribing(job string) bool {
	j := r.jobs[job]
	return j != nil && j.state == resubscribed
}

func (r *Reattach) resubscribe(id string, j *rjob, now time.Time) {
	j.state, j.since = resubscribed, now
	r.ctr.Resubscribes++
	r.out = append(r.out, RAction{Kind: Resubscribe, Job: id, From: j.last, Observed: j.observed})
}

func (r *Reattach) lose(job string) {
	delete(r.jobs, job)
	r.ctr.Lost++
	r.out = append(r.out, RAction{Kind: JobLost, Job: job})
}

// Jobs returns the tracked job ids in order (for tests and status).
func (r *Reattach) Jobs() []string {
	ks := make([]string, 0, len(r.jobs))
	for k := range r.jobs {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
