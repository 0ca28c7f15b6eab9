package correlate

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The property test drives the core with random schedules against a
// simulated runtime that handles one transport's requests in order, in every
// dialect the official SDKs show. After every step it checks:
//
//  1. no caller is handed a job it did not submit;
//  2. every caller gets at most one outcome, and after the schedule settles
//     exactly one (delivered, failed, or gave up);
//  3. every job the runtime created is, once settled, handed to its own
//     caller or cancelled;
//  4. a job handed to a live caller is never cancelled as an orphan, and no
//     job is handed to two callers.
//
// A failing seed is printed; replay it with -seed=N -dialect=NAME.

var (
	flagSeeds   = flag.Int("seeds", 3000, "schedules per dialect")
	flagSeed    = flag.Uint64("seed", 0, "replay one seed")
	flagDialect = flag.String("dialect", "", "replay in one dialect")
)

type dialect struct {
	name        string
	echo        bool // accepts carry the submit's trace id (replays: the original's)
	late        bool // requests read before a drop are answered on the next transport
	reject      int  // 0 session.error{request_id}, 1 job.error fresh id, 2 session.error without request_id
	listJobs    bool // list_jobs negotiated: the barrier is a list_jobs
	listTrace   bool // list answers carry trace ids (§6.6)
	reuseLive   bool // sometimes answers a submit with a live job's id
	ownTrace    bool // when not echoing, stamps trace ids of its own
	lossyAnswer bool // answers in flight at a drop are lost (always true on a real socket)
	reorder     bool // answers the submits it has read in any order (a hostile or concurrent runtime)
	stray       bool // sometimes sends a job.error for a job that never existed
	garbage     bool // answers some submits (fixed by key) with an unreadable frame
	sharedTrace bool // callers share trace ids (one W3C trace fanning out)
	knownEcho   bool // the core starts knowing the runtime echoes (learned on another session)
	callerKeys  bool // every other caller brings its own idempotency key
	reorderAll  bool // answers any request it has read in any order, barriers included: only safety is checked
	foreign     bool // keys are the principal's: some callers retry a key another session's job holds (Go, TS)
}

var dialects = []dialect{
	{name: "reference", echo: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "go-sdk", echo: true, late: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "ts-sdk", echo: true, reject: 1, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "ts-version-error", echo: true, reject: 2, listJobs: true, lossyAnswer: true},
	{name: "no-echo-late", late: true, listJobs: true, lossyAnswer: true},
	{name: "own-trace-no-list", ownTrace: true, late: true, lossyAnswer: true},
	{name: "no-echo-no-list-positional", reject: 1, late: true, lossyAnswer: true},
	{name: "reuse-live-ids", echo: false, reuseLive: true, listJobs: true, lossyAnswer: true},
	{name: "reuse-live-ids-echo", echo: true, reuseLive: true, listJobs: true, listTrace: true, lossyAnswer: true},
	// Hostile and out-of-order runtimes.
	{name: "reorder-echo", echo: true, reorder: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "reorder-echo-known", echo: true, reorder: true, knownEcho: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "reorder-no-echo", reorder: true, late: true, listJobs: true, lossyAnswer: true},
	{name: "reorder-own-trace", reorder: true, ownTrace: true, lossyAnswer: true},
	{name: "reorder-shared-trace", echo: true, reorder: true, sharedTrace: true, knownEcho: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "stray-errors", echo: true, stray: true, reject: 1, knownEcho: true, callerKeys: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "reorder-all-echo", echo: true, reorderAll: true, stray: true, reject: 1, knownEcho: true, callerKeys: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "stray-errors-no-echo", stray: true, reject: 1, late: true, listJobs: true, lossyAnswer: true},
	{name: "stray-errors-reorder", echo: true, stray: true, reorder: true, knownEcho: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "garbage", echo: true, garbage: true, knownEcho: true, listJobs: true, listTrace: true, lossyAnswer: true},
	{name: "garbage-no-echo", garbage: true, late: true, lossyAnswer: true},
	// Principal-scoped keys: a retry from another session of the caller.
	{name: "principal-keys-go", echo: true, late: true, listJobs: true, listTrace: true, lossyAnswer: true, foreign: true},
	{name: "principal-keys-ts", echo: true, reject: 1, listJobs: true, listTrace: true, lossyAnswer: true, foreign: true},
	{name: "principal-keys-unknown-echo", echo: true, late: true, lossyAnswer: true, foreign: true},
}

type frameKind uint8

const (
	fSubmit frameKind = iota + 1
	fListBarrier
	fCancelBarrier
	fCancel
	// answers
	aAccept
	aRejectReq
	aRejectJob
	aRejectSession
	aList
	aCancelled
	aBarrierErr
	aEvent
	aGarbage
)

type frame struct {
	kind  frameKind
	req   string
	id    ID // submits: the caller (the runtime only uses key and trace)
	key   string
	trace string
	job   string
	list  []Listed
}

type caller struct {
	key, trace string
	callerKey  bool   // the caller's own key (Written's callerKey)
	outcome    string // "", "delivered:J", "failed", "gave-up"
	written    bool
	inOutbox   bool
}

type rtJob struct {
	key, trace string
	foreign    bool // created by another session of the principal: its events go there
	cancelled  bool
	eventSeen  bool
}

type sim struct {
	t    testing.TB
	rng  *rand.Rand
	d    dialect
	core *Core
	now  time.Time

	callers   map[ID]*caller
	nextID    ID
	outbox    []ID
	connected bool
	lost      bool
	reqN      int

	held      map[string]bool
	delivered map[string]ID // job → caller it was handed to
	cancelReq map[string]bool

	toRT  []frame // written, not yet read by the runtime
	readQ []frame // read by the runtime, not yet answered
	toGW  []frame // answers in flight

	jobs     map[string]*rtJob
	foreignN int
	jobList  []string
	byKey    map[string]string
	jobN     int

	steps int
	log   []string
}

func newSim(t testing.TB, seed uint64, d dialect, broken string) *sim {
	s := &sim{
		t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), d: d,
		core:      New(Config{BarrierTimeout: 20 * time.Second, TraceTTL: time.Minute, Echo: knownEcho(d), brokenRule: broken}),
		now:       time.Unix(1_700_000_000, 0),
		callers:   map[ID]*caller{},
		held:      map[string]bool{},
		delivered: map[string]ID{},
		cancelReq: map[string]bool{},
		jobs:      map[string]*rtJob{},
		byKey:     map[string]string{},
	}
	s.connected = true
	s.core.Connected()
	return s
}

func knownEcho(d dialect) int8 {
	if d.knownEcho {
		return 1
	}
	return 0
}

func (s *sim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
	if len(s.log) > 400 {
		s.log = s.log[1:]
	}
}

func (s *sim) fatalf(format string, args ...any) {
	s.t.Helper()
	panic(fmt.Sprintf(format, args...))
}

func (s *sim) newReq() string { s.reqN++; return fmt.Sprintf("r%d", s.reqN) }

// apply carries out the core's actions, as the connection does.
func (s *sim) apply() {
	var resend []ID
	for _, a := range s.core.Actions() {
		switch a.Kind {
		case Deliver:
			c := s.callers[a.ID]
			if c == nil || c.outcome != "" {
				s.fatalf("deliver %s to caller %d whose outcome is %q", a.Job, a.ID, c.outcome)
			}
			j := s.jobs[a.Job]
			if j == nil || j.key != c.key {
				s.fatalf("MISDELIVERY: job %s (created for key %v) handed to caller %d (key %s)", a.Job, j, a.ID, c.key)
			}
			if j.foreign && !a.Foreign {
				s.fatalf("HANG: job %s of another session handed to caller %d as this session's own: its events never come here", a.Job, a.ID)
			}
			if !j.foreign && a.Foreign {
				s.fatalf("job %s created by this session handed to caller %d as another session's (its re-attachment would duplicate every event)", a.Job, a.ID)
			}
			if prev, ok := s.delivered[a.Job]; ok && prev != a.ID {
				s.fatalf("job %s handed to callers %d and %d", a.Job, prev, a.ID)
			}
			if s.cancelReq[a.Job] {
				s.fatalf("job %s handed to caller %d after it was cancelled as an orphan", a.Job, a.ID)
			}
			s.delivered[a.Job] = a.ID
			delete(s.held, a.Job)
			c.outcome = "delivered:" + a.Job
			s.logf("deliver %s → %d", a.Job, a.ID)
		case Fail:
			c := s.callers[a.ID]
			if c == nil || c.outcome != "" {
				s.fatalf("fail caller %d whose outcome is %q (%v)", a.ID, c.outcome, a.Err)
			}
			c.outcome = "failed"
			s.logf("fail %d: %v", a.ID, a.Err)
		case Cancel:
			if id, ok := s.delivered[a.Job]; ok && s.callers[id].outcome == "delivered:"+a.Job {
				s.fatalf("job %s of live caller %d cancelled as an orphan", a.Job, id)
			}
			s.cancelReq[a.Job] = true
			if s.connected {
				s.toRT = append(s.toRT, frame{kind: fCancel, req: s.newReq(), job: a.Job})
			}
			s.logf("cancel %s", a.Job)
		case Discard:
			delete(s.held, a.Job)
		case Resend:
			resend = append(resend, a.ID)
			s.callers[a.ID].inOutbox = true
			s.logf("resend %d", a.ID)
		case WriteBarrier:
			k := fCancelBarrier
			if s.d.listJobs {
				k = fListBarrier
			}
			s.toRT = append(s.toRT, frame{kind: k, req: a.Req})
			s.logf("barrier %s", a.Req)
		case Drop:
			s.drop()
		case Lost:
			s.lost = true
		}
	}
	if len(resend) > 0 {
		// A submit still queued from an earlier Resend moves to its new
		// place: a request is never queued twice.
		s.outbox = slices.DeleteFunc(s.outbox, func(x ID) bool { return slices.Contains(resend, x) })
		s.outbox = append(resend, s.outbox...)
	}
}

func (s *sim) submit() {
	s.nextID++
	id := s.nextID
	tr := fmt.Sprintf("t%d", id)
	if s.d.sharedTrace && s.rng.IntN(2) == 0 {
		tr = fmt.Sprintf("shared%d", id%3)
	}
	c := &caller{key: fmt.Sprintf("k%d", id), trace: tr, inOutbox: true, callerKey: s.d.callerKeys && id%2 == 0}
	if s.d.foreign && s.rng.IntN(4) == 0 {
		// A retry of a key another session of the principal used: the
		// runtime holds that session's job under it.
		s.foreignN++
		fid := fmt.Sprintf("f%d", s.foreignN)
		c.key, c.callerKey = "fk"+fid, true
		s.jobs[fid] = &rtJob{key: c.key, trace: "ft" + fid, foreign: true}
		s.byKey[c.key] = fid
	} else if s.d.foreign && id%2 == 0 {
		c.callerKey = true
	}
	s.callers[id] = c
	s.outbox = append(s.outbox, id)
	s.logf("new %d", id)
}

func (s *sim) write() bool {
	if !s.connected || len(s.outbox) == 0 || !s.core.MayWriteSubmit(s.outbox[0], s.callers[s.outbox[0]].trace) {
		return false
	}
	id := s.outbox[0]
	s.outbox = s.outbox[1:]
	c := s.callers[id]
	c.inOutbox = false
	req := s.newReq()
	c.written = true
	if !s.core.Written(id, req, c.trace, c.key, c.callerKey) {
		s.fatalf("core refused the write of caller %d", id)
	}
	s.toRT = append(s.toRT, frame{kind: fSubmit, req: req, id: id, key: c.key, trace: c.trace})
	s.logf("write %d as %s", id, req)
	s.apply()
	return true
}

func (s *sim) giveUp() bool {
	var cands []ID
	for id, c := range s.callers {
		if c.outcome == "" {
			cands = append(cands, id)
		}
	}
	if len(cands) == 0 {
		return false
	}
	slices.Sort(cands)
	id := cands[s.rng.IntN(len(cands))]
	c := s.callers[id]
	c.outcome = "gave-up"
	if c.inOutbox {
		s.outbox = slices.DeleteFunc(s.outbox, func(x ID) bool { return x == id })
		c.inOutbox = false
	}
	if c.written {
		s.core.GaveUp(id, s.now, 10*time.Second)
	}
	s.logf("give up %d", id)
	s.apply()
	return true
}

// The runtime.

func (s *sim) rtRead() bool {
	if !s.connected || len(s.toRT) == 0 {
		return false
	}
	s.readQ = append(s.readQ, s.toRT[0])
	s.toRT = s.toRT[1:]
	return true
}

func (s *sim) rejects(key string) bool {
	// Deterministic per key: the same parameters get the same answer.
	h := 0
	for _, b := range key {
		h = h*31 + int(b)
	}
	return h%7 == 3
}

// garbles: the keys whose submits the runtime answers with garbage.
func (s *sim) garbles(key string) bool {
	h := 0
	for _, b := range key {
		h = h*37 + int(b)
	}
	return h%5 == 2
}

func (s *sim) rtAnswer() bool {
	if !s.connected || len(s.readQ) == 0 {
		return false
	}
	i := 0
	if s.d.reorder {
		// Any of the submits read in a row may be answered first (the
		// runtime still answers other requests in order).
		n := 0
		for n < len(s.readQ) && s.readQ[n].kind == fSubmit {
			n++
		}
		if n > 1 {
			i = s.rng.IntN(n)
		}
	}
	if s.d.reorderAll {
		i = s.rng.IntN(len(s.readQ))
	}
	f := s.readQ[i]
	s.readQ = slices.Delete(s.readQ, i, i+1)
	if s.d.stray && s.rng.IntN(6) == 0 {
		s.jobN++
		s.toGW = append(s.toGW, frame{kind: aRejectJob, job: fmt.Sprintf("stray%d", s.jobN)})
	}
	switch f.kind {
	case fSubmit:
		if s.d.garbage && s.garbles(f.key) {
			s.toGW = append(s.toGW, frame{kind: aGarbage})
			return true
		}
		if s.rejects(f.key) {
			switch s.d.reject {
			case 0:
				s.toGW = append(s.toGW, frame{kind: aRejectReq, req: f.req})
			case 1:
				s.jobN++
				s.toGW = append(s.toGW, frame{kind: aRejectJob, job: fmt.Sprintf("x%d", s.jobN)})
			case 2:
				s.toGW = append(s.toGW, frame{kind: aRejectSession})
			}
			return true
		}
		if j, ok := s.byKey[f.key]; ok {
			tr := ""
			if s.d.echo {
				tr = s.jobs[j].trace
			}
			s.toGW = append(s.toGW, frame{kind: aAccept, job: j, trace: tr})
			return true
		}
		if s.d.reuseLive && s.rng.IntN(8) == 0 {
			// Reuse the id of a job the gateway has seen (handed to a
			// caller or cancelled). One it never heard of cannot be told
			// from a new job by any client.
			var seen []string
			for _, j := range s.jobList {
				if _, ok := s.delivered[j]; ok || s.cancelReq[j] {
					seen = append(seen, j)
				}
			}
			if len(seen) > 0 {
				j := seen[s.rng.IntN(len(seen))]
				tr := ""
				if s.d.echo {
					tr = f.trace
				}
				s.toGW = append(s.toGW, frame{kind: aAccept, job: j, trace: tr})
				return true
			}
		}
		s.jobN++
		id := fmt.Sprintf("j%d", s.jobN)
		tr := ""
		switch {
		case s.d.echo:
			tr = f.trace
		case s.d.ownTrace:
			tr = "rt" + id
		}
		s.jobs[id] = &rtJob{key: f.key, trace: f.trace}
		s.jobList = append(s.jobList, id)
		s.byKey[f.key] = id
		s.toGW = append(s.toGW, frame{kind: aAccept, job: id, trace: tr}, frame{kind: aEvent, job: id})
	case fListBarrier:
		var l []Listed
		for _, id := range s.jobList {
			tr := ""
			if s.d.listTrace {
				tr = s.jobs[id].trace
			}
			l = append(l, Listed{JobID: id, TraceID: tr})
		}
		s.toGW = append(s.toGW, frame{kind: aList, req: f.req, list: l})
	case fCancelBarrier:
		s.toGW = append(s.toGW, frame{kind: aBarrierErr, req: f.req})
	case fCancel:
		if j := s.jobs[f.job]; j != nil {
			j.cancelled = true
			s.toGW = append(s.toGW, frame{kind: aCancelled, job: f.job})
		} else {
			s.toGW = append(s.toGW, frame{kind: aBarrierErr, req: f.req})
		}
	}
	return true
}

var errRejected = errors.New("rejected")

func (s *sim) gwRecv() bool {
	if !s.connected || len(s.toGW) == 0 {
		return false
	}
	f := s.toGW[0]
	s.toGW = s.toGW[1:]
	switch f.kind {
	case aAccept:
		s.logf("recv accept %s trace %q", f.job, f.trace)
		s.core.Accepted(f.job, f.trace, s.now)
	case aRejectReq:
		s.logf("recv reject req %s", f.req)
		if !s.core.Rejected(f.req, errRejected, s.now) {
			s.logf("  (not a submit)")
		}
	case aRejectJob, aRejectSession:
		s.logf("recv positional reject")
		s.core.RejectedByPosition(errRejected, s.now)
	case aList:
		s.logf("recv list %s", f.req)
		s.core.ListAnswered(f.req, f.list, s.now)
	case aBarrierErr:
		s.logf("recv error for %s", f.req)
		s.core.Rejected(f.req, errRejected, s.now)
	case aCancelled:
		s.core.Cancelled(f.job)
	case aGarbage:
		s.logf("recv garbage")
		s.core.Unreadable(s.now)
	case aEvent:
		s.jobs[f.job].eventSeen = true
		if _, ok := s.delivered[f.job]; ok || s.held[f.job] {
			break
		}
		switch v := s.core.UnknownJob(f.job, s.now); v {
		case Hold:
			s.held[f.job] = true
		}
	}
	s.apply()
	return true
}

func (s *sim) drop() {
	if !s.connected {
		return
	}
	s.logf("drop")
	s.connected = false
	s.toRT = nil
	if !s.d.late {
		s.readQ = nil
	}
	if s.d.lossyAnswer {
		s.toGW = nil
	}
	s.core.Dropped()
	s.apply()
}

func (s *sim) resume() {
	if s.connected {
		return
	}
	s.logf("resume")
	s.connected = true
	// The runtime replays the events the gateway has not seen.
	for _, id := range s.jobList {
		if !s.jobs[id].eventSeen {
			s.toGW = append(s.toGW, frame{kind: aEvent, job: id})
		}
	}
	s.core.Resumed(s.newReq(), s.now)
	s.apply()
}

func (s *sim) tick(d time.Duration) {
	s.now = s.now.Add(d)
	s.core.Tick(s.now)
	s.apply()
}

func (s *sim) step() {
	s.steps++
	switch r := s.rng.IntN(100); {
	case r < 18:
		if len(s.callers) < 40 {
			s.submit()
		}
	case r < 33:
		s.write()
	case r < 48:
		s.rtRead()
	case r < 63:
		s.rtAnswer()
	case r < 80:
		s.gwRecv()
	case r < 85:
		s.giveUp()
	case r < 89:
		s.drop()
	case r < 95:
		s.resume()
	default:
		s.tick(time.Duration(s.rng.IntN(4000)) * time.Millisecond)
	}
}

// settle runs the schedule to quiescence with a well-behaved network.
func (s *sim) settle() {
	s.resume()
	for i := 0; i < 10_000 && !s.lost; i++ {
		progress := s.write() || s.rtRead() || s.rtAnswer() || s.gwRecv()
		if !progress {
			if !s.connected {
				s.resume()
				continue
			}
			// Every runtime job emits (again) so unknown ones surface.
			emitted := false
			for _, id := range s.jobList {
				if !s.jobs[id].eventSeen {
					s.toGW = append(s.toGW, frame{kind: aEvent, job: id})
					emitted = true
				}
			}
			if emitted {
				continue
			}
			before := len(s.core.out)
			s.tick(6 * time.Second)
			if before == 0 && !s.connected {
				continue
			}
			if len(s.toRT)+len(s.toGW)+len(s.readQ)+len(s.outbox) == 0 && !s.core.Reconciling() {
				break
			}
		}
	}
}

func (s *sim) checkSettled() {
	if s.lost || s.d.reorderAll {
		// A runtime that answers barriers before older requests voids
		// what reconciliation relies on: callers may wait to their
		// deadlines, and only "never a wrong job" (checked at every
		// step) is promised.
		return
	}
	for id, c := range s.callers {
		if c.outcome == "" {
			s.fatalf("caller %d has no outcome after settling (written %v, in outbox %v)", id, c.written, c.inOutbox)
		}
		if s.d.stray && !s.d.reorder && c.outcome == "failed" && !s.rejects(c.key) {
			// An in-order runtime never rejected this submit: a stray
			// job.error must not have been taken for its answer.
			s.fatalf("caller %d was failed by a stray rejection", id)
		}
	}
	for _, id := range s.jobList {
		j := s.jobs[id]
		owner := ID(0)
		for cid, c := range s.callers {
			if c.key == j.key {
				owner = cid
			}
		}
		if s.delivered[id] == owner && s.callers[owner].outcome == "delivered:"+id {
			continue
		}
		if !s.cancelReq[id] {
			s.fatalf("job %s created for caller %d (outcome %q) was neither handed to it nor cancelled", id, owner, s.callers[owner].outcome)
		}
	}
}

// scheduleStats add up what the schedules exercised, so a run shows it
// reached the interesting states.
type scheduleStats struct {
	schedules, steps, lost, delivered, failed, gaveUp int
	ctr                                               Counters
}

func (a *scheduleStats) add(s *sim) {
	a.schedules++
	a.steps += s.steps
	if s.lost {
		a.lost++
	}
	for _, c := range s.callers {
		switch {
		case c.outcome == "failed":
			a.failed++
		case c.outcome == "gave-up":
			a.gaveUp++
		case c.outcome != "":
			a.delivered++
		}
	}
	k := s.core.Counters()
	a.ctr.Resends += k.Resends
	a.ctr.ReconciledByList += k.ReconciledByList
	a.ctr.OrphansCancelled += k.OrphansCancelled
	a.ctr.JobIDReused += k.JobIDReused
	a.ctr.StaleAnswers += k.StaleAnswers
	a.ctr.FIFOStalls += k.FIFOStalls
	a.ctr.BarrierTimeouts += k.BarrierTimeouts
	a.ctr.PositionalIgnored += k.PositionalIgnored
	a.ctr.DuplicateAnswers += k.DuplicateAnswers
	a.ctr.ForeignReplays += k.ForeignReplays
}

func runSchedule(t testing.TB, seed uint64, d dialect, broken string, steps int) error {
	return runScheduleStats(t, seed, d, broken, steps, nil)
}

func runScheduleStats(t testing.TB, seed uint64, d dialect, broken string, steps int, st *scheduleStats) (err error) {
	s := newSim(t, seed, d, broken)
	if st != nil {
		defer st.add(s)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v\nlast events:\n  %s", r, joinLines(s.log))
		}
	}()
	for i := 0; i < steps && !s.lost; i++ {
		s.step()
	}
	s.settle()
	s.checkSettled()
	return nil
}

func joinLines(l []string) string {
	out := ""
	for i, x := range l {
		if i > 0 {
			out += "\n  "
		}
		out += x
	}
	return out
}

func TestCoreProperties(t *testing.T) {
	seeds := *flagSeeds
	if testing.Short() {
		seeds = 300
	}
	for _, d := range dialects {
		if *flagDialect != "" && d.name != *flagDialect {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			if *flagSeed != 0 {
				if err := runSchedule(t, *flagSeed, d, "", 400); err != nil {
					t.Fatalf("seed %d: %v", *flagSeed, err)
				}
				return
			}
			var st scheduleStats
			defer func() {
				t.Logf("%d schedules, %d steps; callers: %d delivered, %d failed, %d gave up; sessions lost %d; "+
					"resends %d, bound by list %d, orphans cancelled %d, reused ids caught %d, stale %d, stalls %d, barrier timeouts %d, positional ignored %d, replays of other sessions' jobs %d",
					st.schedules, st.steps, st.delivered, st.failed, st.gaveUp, st.lost, st.ctr.Resends, st.ctr.ReconciledByList,
					st.ctr.OrphansCancelled, st.ctr.JobIDReused, st.ctr.StaleAnswers, st.ctr.FIFOStalls, st.ctr.BarrierTimeouts, st.ctr.PositionalIgnored, st.ctr.ForeignReplays)
			}()
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				if err := runScheduleStats(t, seed, d, "", 400, &st); err != nil {
					t.Fatalf("seed %d (replay: go test ./gateway/upstream/internal/correlate -run TestCoreProperties -dialect=%s -seed=%d): %v",
						seed, d.name, seed, err)
				}
			}
		})
	}
}

// TestCorePropertiesCatchBrokenRules shows that the property test fails when
// a rule is broken on purpose.
func TestCorePropertiesCatchBrokenRules(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		dialect string
	}{
		{"no-barrier", "no-echo-late"},
		{"no-key-check", "reuse-live-ids"},
		{"pipeline-always", "reorder-no-echo"},
		{"no-unreadable-bound", "garbage"},
		{"no-position-barrier", "stray-errors-no-echo"},
		{"no-position-barrier", "stray-errors"},
		{"no-dead-trace", "reorder-all-echo"},
		{"no-foreign", "principal-keys-go"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var d dialect
			for _, x := range dialects {
				if x.name == tc.dialect {
					d = x
				}
			}
			for seed := uint64(1); seed <= 3000; seed++ {
				if err := runSchedule(t, seed, d, tc.rule, 400); err != nil {
					t.Logf("broken rule %q caught at seed %d: %.300s", tc.rule, seed, err)
					return
				}
			}
			t.Fatalf("broken rule %q was not caught in 3000 seeds", tc.rule)
		})
	}
}
