package correlate

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The re-attach property test drives Reattach with random schedules against
// a simulated runtime whose jobs, when the transport drops, either go on
// streaming on the next transport (reference, Go), or stop streaming
// (TS: the job writes to the dead transport) and then either die at their
// next event (no longer listed, job.subscribe JOB_NOT_FOUND: TS) or run on
// into their log (no longer listed once ended, job.subscribe with history
// replays the rest and the terminal: a runtime §7.6 allows). job.subscribe
// adds a subscriber: a job that goes on streaming sends every later event
// twice (Go).
//
// Observed jobs (another session's, attached with job.subscribe from
// cursor 0) run on in their own session whatever this session's transport
// does; what differs is this session's subscription: it survives a resume
// and a second job.subscribe adds a second one that sends every envelope
// again under the same id, with a replay that keeps ids (Go); it survives
// and job.subscribe is idempotent, answered replayed false (reference);
// or it dies with the transport and job.subscribe replays the job's whole
// log under new ids before job.subscribed (TS). The gateway's side filters
// them with Rejoin, as the connection does.
//
// Dialects without session.list_jobs (and without job.subscribe) check the
// silence bound instead of the probe.
//
// After every step it checks, and once the schedule settles:
//
//  1. no event of a job is delivered twice, none out of order;
//  2. every job ends for its caller (terminal delivered, or lost) within
//     the bound once the runtime is done with it: none hangs;
//  3. a job whose whole stream could still be delivered (it goes on, or
//     its log can be replayed) is never lost, except, without list_jobs,
//     after Silence with nothing of it delivered (the documented price);
//  4. a job is lost only when the runtime no longer has it (same
//     exception);
//  5. once the network heals, an observed job's envelopes reach its
//     caller within stallBound of being produced: a subscription the
//     runtime dropped at a resume is re-attached, not waited out until the
//     job ends.
//
// A failing seed is printed; replay it with -seed=N -rdialect=NAME.

type rDialect struct {
	name     string
	mode     []jobMode // modes own jobs are drawn from
	obs      obsKind   // observed jobs too, with this runtime's subscriptions
	noList   bool      // session.list_jobs not negotiated
	noSub    bool      // job.subscribe not negotiated
	onlyObsd bool      // every job is observed
}

type obsKind uint8

const (
	obsNone obsKind = iota
	obsGo           // survives a resume; a second subscription doubles envelopes (same ids); replay keeps ids, after job.subscribed
	obsRef          // survives a resume; job.subscribe idempotent (replayed false)
	obsTS           // dies with the transport; replay under new ids, before job.subscribed
)

// stallBound bounds how long an observed job's envelope may wait, once the
// network heals, before it reaches its caller (sim time): two probe periods
// at their longest (8 s: listed live twice with nothing of it between),
// a probe's timeout (5 s) and two settle ticks.
const stallBound = 2*8*time.Second + 5*time.Second + 2*2*time.Second

type jobMode uint8

const (
	goesOn    jobMode = iota + 1 // streams on after a resume
	diesOnUse                    // stops streaming at a drop and dies at its next event (TS)
	logsOn                       // stops streaming at a drop, runs on into its log
)

var rDialects = []rDialect{
	{name: "goes-on", mode: []jobMode{goesOn}},
	{name: "ts-dies", mode: []jobMode{diesOnUse}},
	{name: "logs-on", mode: []jobMode{logsOn}},
	{name: "mixed", mode: []jobMode{goesOn, diesOnUse, logsOn}},
	{name: "observed-go", mode: []jobMode{goesOn}, obs: obsGo},
	{name: "observed-ref", mode: []jobMode{goesOn}, obs: obsRef},
	{name: "observed-ts", mode: []jobMode{diesOnUse, logsOn}, obs: obsTS},
	{name: "observed-ts-only", obs: obsTS, onlyObsd: true},
	{name: "nolist-ts-dies", mode: []jobMode{diesOnUse}, noList: true},
	{name: "nolist-mixed", mode: []jobMode{goesOn, diesOnUse, logsOn}, noList: true},
	{name: "nolist-nosub", mode: []jobMode{goesOn, diesOnUse, logsOn}, noList: true, noSub: true},
	{name: "nolist-observed-ts", mode: []jobMode{diesOnUse}, obs: obsTS, noList: true},
}

type rtRJob struct {
	id        string
	mode      jobMode
	total     int  // events before the terminal
	emitted   int  // events produced so far (into the job's log)
	ended     bool // the terminal was produced
	cut       bool // stopped streaming to the session at a drop (diesOnUse, logsOn)
	streamedN int  // events that went into the session's stream (a resume replays them)
	termInStr bool // the terminal went into the session's stream
	dead      bool // died (diesOnUse): gone from the runtime
	subs      int  // subscriptions on the current transport (each sends live events once more)

	observed bool        // another session's job, attached here (subs is this session's subscriptions)
	emitAt   []time.Time // when each event (and the terminal) was produced
}

type rMsg struct {
	kind     string // "ev", "term", "list", "subscribed", "notfound"
	job      string
	idx      int
	id       string // envelope id
	live     map[string]bool
	gen      int
	reqID    int
	replayed bool
	replay   bool // part of a resume's replay
	hist     bool // part of a job.subscribe's replay
}

type gwRJob struct {
	got    map[int]bool
	ended  bool
	lost   bool
	quiet  time.Time // since when nothing of it was delivered (or the latest resume)
	rejoin *Rejoin   // observed jobs
}

type rsim struct {
	t   testing.TB
	rng *rand.Rand
	d   rDialect
	r   *Reattach
	now time.Time

	gen       int
	connected bool
	seq       uint64
	jobs      []*rtRJob
	toGW      []rMsg
	toRT      []rMsg
	gw        map[string]*gwRJob
	log       []string
	ids       int       // envelope ids minted
	upSince   time.Time // the transport is up since
	held      []rMsg    // observed jobs' envelopes in the session's stream while it is down (a resume replays them)
	settling  bool
	settledAt time.Time // when the network healed
	broken    string
}

func newRSim(t testing.TB, seed uint64, d rDialect, broken string) *rsim {
	s := &rsim{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x51f15e)), d: d,
		r:   NewReattach(ReattachConfig{ProbeAfter: time.Second, ProbeMax: 8 * time.Second, ProbeTimeout: 5 * time.Second, brokenRule: broken}),
		now: time.Unix(1_700_000_000, 0), gen: 1, connected: true, gw: map[string]*gwRJob{}, broken: broken}
	s.r.Features(!d.noList, !d.noSub)
	s.r.SetSilence(rSilence)
	s.r.connected = true
	s.upSince = s.now
	n := 1 + s.rng.IntN(4)
	for i := range n {
		j := &rtRJob{id: fmt.Sprintf("j%d", i), total: 3 + s.rng.IntN(12)}
		if d.obs != obsNone && (d.onlyObsd || s.rng.IntN(2) == 0) {
			// Subscribed from cursor 0 before anything of it was
			// produced; it runs on in its own session.
			j.observed, j.mode, j.subs, j.total = true, goesOn, 1, 20+s.rng.IntN(20)
		} else {
			j.mode = d.mode[s.rng.IntN(len(d.mode))]
		}
		s.jobs = append(s.jobs, j)
		g := &gwRJob{got: map[int]bool{}, quiet: s.now}
		if j.observed {
			g.rejoin = NewRejoin(64)
			g.rejoin.broken = broken
		}
		s.gw[j.id] = g
	}
	return s
}

// rSilence is the silence bound of the dialects without list_jobs.
const rSilence = 6 * time.Second

func (s *rsim) newID() string {
	s.ids++
	return fmt.Sprintf("e%d", s.ids)
}

// envID is the id of the envelope carrying event idx of j (-1: its
// terminal): the same for every copy of a runtime that keeps ids (Go).
func (s *rsim) envID(j *rtRJob, idx int) string {
	if j.observed && s.d.obs == obsGo {
		return fmt.Sprintf("%s/%d", j.id, idx)
	}
	return s.newID()
}

func (s *rsim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
	if len(s.log) > 300 {
		s.log = s.log[1:]
	}
}

func (s *rsim) fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

func (s *rsim) job(id string) *rtRJob {
	for _, j := range s.jobs {
		if j.id == id {
			return j
		}
	}
	return nil
}

// apply carries out Reattach's actions.
func (s *rsim) apply() {
	for _, a := range s.r.Actions() {
		switch a.Kind {
		case Probe:
			s.toRT = append(s.toRT, rMsg{kind: "list", gen: s.gen, reqID: int(a.Probe)})
			s.logf("probe")
		case Resubscribe:
			if a.Observed != s.job(a.Job).observed {
				s.fatalf("Resubscribe of %s says observed %v", a.Job, a.Observed)
			}
			if a.Observed {
				// From the caller's cursor (0): the replay starts
				// with what was delivered.
				s.gw[a.Job].rejoin.Reattaching()
				s.toRT = append(s.toRT, rMsg{kind: "subscribe", job: a.Job, gen: s.gen})
			} else {
				s.toRT = append(s.toRT, rMsg{kind: "subscribe", job: a.Job, idx: int(a.From), gen: s.gen})
			}
			s.logf("resubscribe %s", a.Job)
		case JobLost:
			g := s.gw[a.Job]
			if g.ended || g.lost {
				s.fatalf("job %s lost after it ended (ended %v lost %v)", a.Job, g.ended, g.lost)
			}
			j := s.job(a.Job)
			silent := s.d.noList && s.now.Sub(g.quiet) >= rSilence
			if !j.dead && (j.mode == goesOn || j.mode == logsOn) && !silent {
				s.fatalf("job %s (mode %d) lost although the runtime could still deliver it whole", a.Job, j.mode)
			}
			g.lost = true
			s.logf("lost %s", a.Job)
		}
	}
}

// deliver hands an event or terminal of job j to the gateway.
func (s *rsim) deliver(m rMsg) {
	g := s.gw[m.job]
	if g.ended || g.lost {
		return // nothing follows a terminal
	}
	s.seq++
	if g.rejoin != nil && !g.rejoin.Admit(m.id, uint64(m.idx+2)) {
		s.logf("dropped %s/%d (%s)", m.job, m.idx, m.id)
		return
	}
	s.deliverAdmitted(g, m)
}

func (s *rsim) deliverAdmitted(g *gwRJob, m rMsg) {
	if g.ended || g.lost {
		return
	}
	g.quiet = s.now
	if m.kind == "term" {
		g.ended = true
		s.r.Frame(m.job, s.seq, s.now)
		s.r.Forget(m.job)
		s.logf("terminal %s", m.job)
		return
	}
	if g.got[m.idx] {
		s.fatalf("DUPLICATE: event %d of job %s delivered twice", m.idx, m.job)
	}
	if m.idx > 0 && !g.got[m.idx-1] {
		s.fatalf("GAP: event %d of job %s before event %d", m.idx, m.job, m.idx-1)
	}
	g.got[m.idx] = true
	s.r.Frame(m.job, s.seq, s.now)
	s.logf("event %s/%d", m.job, m.idx)
}

// emit lets job j produce its next event (or terminal).
func (s *rsim) emit(j *rtRJob) {
	if j.ended || j.dead {
		return
	}
	if j.mode == diesOnUse && j.cut {
		// It writes to its dead transport, fails and is gone.
		j.dead = true
		s.logf("rt: %s dies", j.id)
		return
	}
	msg := rMsg{kind: "ev", job: j.id, idx: j.emitted}
	if j.emitted == j.total {
		msg = rMsg{kind: "term", job: j.id, idx: -1}
		j.ended = true
	} else {
		j.emitted++
	}
	j.emitAt = append(j.emitAt, s.now)
	copies := j.subs
	if j.observed {
		// Only its subscriptions bring it here.
		if copies > 0 {
			if msg.kind == "term" {
				j.termInStr = true
			} else {
				j.streamedN = j.emitted
			}
		}
		for range copies {
			m := msg
			m.id = s.envID(j, msg.idx)
			if !s.connected {
				s.held = append(s.held, m)
				continue
			}
			s.toGW = append(s.toGW, m)
		}
		return
	}
	if !j.cut {
		if msg.kind == "term" {
			j.termInStr = true
		} else {
			j.streamedN = j.emitted
		}
		copies++
	}
	if !s.connected {
		copies = 0 // the session's stream keeps it for the resume
	}
	for range copies {
		m := msg
		m.id = s.newID()
		s.toGW = append(s.toGW, m)
	}
}

func (s *rsim) rtAnswer() bool {
	if !s.connected || len(s.toRT) == 0 {
		return false
	}
	m := s.toRT[0]
	s.toRT = s.toRT[1:]
	switch m.kind {
	case "list":
		live := map[string]bool{}
		for _, j := range s.jobs {
			if !j.ended && !j.dead {
				live[j.id] = true
			}
		}
		s.toGW = append(s.toGW, rMsg{kind: "list", live: live, gen: s.gen, reqID: m.reqID})
	case "subscribe":
		j := s.job(m.job)
		if j.observed {
			s.answerObservedSubscribe(j)
			return true
		}
		if j.dead {
			s.toGW = append(s.toGW, rMsg{kind: "notfound", job: j.id})
			return true
		}
		s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id})
		if s.d.noList && !j.cut {
			// Without list_jobs the rules assume that a runtime
			// answers a session's job.subscribe for its own job that
			// it still streams to it without a second copy (the
			// reference).
			return true
		}
		// History: the job's log after what the gateway has.
		g := s.gw[j.id]
		for i := 0; i < j.emitted; i++ {
			if !g.got[i] {
				s.toGW = append(s.toGW, rMsg{kind: "ev", job: j.id, idx: i, id: s.newID()})
			}
		}
		if j.ended {
			s.toGW = append(s.toGW, rMsg{kind: "term", job: j.id, idx: -1, id: s.newID()})
		} else {
			j.subs++
		}
	}
	return true
}

// answerObservedSubscribe answers job.subscribe{history, from 0} for an
// observed job as the dialect's runtime does.
func (s *rsim) answerObservedSubscribe(j *rtRJob) {
	history := func() {
		// The runtime's buffer may have been trimmed (acknowledged in
		// the submitting session): the replay starts anywhere up to
		// what this session was delivered (a later start would be a
		// gap no client can see).
		from := 0
		if s.d.obs != obsGo {
			from = s.rng.IntN(len(s.gw[j.id].got) + 1)
		}
		for i := from; i < j.emitted; i++ {
			s.toGW = append(s.toGW, rMsg{kind: "ev", job: j.id, idx: i, id: s.envID(j, i), hist: true})
		}
		if j.ended {
			s.toGW = append(s.toGW, rMsg{kind: "term", job: j.id, idx: -1, id: s.envID(j, -1), hist: true})
		}
	}
	switch s.d.obs {
	case obsGo:
		s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id, replayed: true})
		history()
		if !j.ended {
			j.subs++
		}
	case obsRef:
		if j.subs > 0 {
			s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id, replayed: false})
			return
		}
		s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id, replayed: true})
		history()
		if !j.ended {
			j.subs = 1
		}
	case obsTS:
		history()
		s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id, replayed: j.emitted > 0 || j.ended})
		if !j.ended {
			j.subs = 1
		}
	}
}

func (s *rsim) gwRecv() bool {
	if !s.connected || len(s.toGW) == 0 {
		return false
	}
	m := s.toGW[0]
	s.toGW = s.toGW[1:]
	switch m.kind {
	case "ev", "term":
		s.deliver(m)
	case "list":
		s.logf("listed #%d %v at %v", m.reqID, m.live, s.now.Unix()%1000)
		s.r.Listed(uint64(m.reqID), m.live, true, s.now)
	case "notfound":
		s.r.SubscribeFailed(m.job)
	case "subscribed":
		s.r.Subscribed(m.job)
		if g := s.gw[m.job]; g.rejoin != nil {
			g.rejoin.Subscribed(m.replayed)
		}
	}
	s.apply()
	return true
}

func (s *rsim) drop() {
	if !s.connected {
		return
	}
	s.logf("drop")
	s.connected = false
	// What of the observed jobs was in flight stays in the session's
	// stream, except a Go replay (not persisted).
	for _, m := range s.toGW {
		if (m.kind == "ev" || m.kind == "term") && s.job(m.job).observed && !(m.hist && s.d.obs == obsGo) {
			m.replay = false
			s.held = append(s.held, m)
		}
	}
	s.toGW, s.toRT = nil, nil
	for _, j := range s.jobs {
		if j.observed {
			if s.d.obs == obsTS {
				j.subs = 0 // this session's subscription dies with the transport
			}
			continue
		}
		j.subs = 0 // subscriptions die with the transport here (TS)
		if j.mode != goesOn {
			j.cut = true
		}
	}
	s.r.Dropped()
	s.apply()
}

func (s *rsim) resume() {
	if s.connected {
		return
	}
	s.gen++
	s.connected = true
	s.upSince = s.now
	s.logf("resume gen %d", s.gen)
	// The resume replays what the session's stream holds after the
	// gateway's cursor.
	var marks []Mark
	for _, m := range s.held {
		m.replay = true
		s.toGW = append(s.toGW, m)
	}
	s.held = nil
	for _, j := range s.jobs {
		g := s.gw[j.id]
		for i := 0; i < j.streamedN && !j.observed; i++ {
			if !g.got[i] {
				s.toGW = append(s.toGW, rMsg{kind: "ev", job: j.id, idx: i, id: s.envID(j, i), replay: true})
			}
		}
		if j.termInStr && !g.ended && !j.observed {
			s.toGW = append(s.toGW, rMsg{kind: "term", job: j.id, idx: -1, id: s.envID(j, -1), replay: true})
		}
		if !g.ended && !g.lost {
			marks = append(marks, Mark{Job: j.id, Observed: j.observed})
			g.quiet = s.now
		}
	}
	s.r.Resumed(marks, s.now)
	s.apply()
}

func (s *rsim) tick(d time.Duration) {
	s.now = s.now.Add(d)
	s.r.Tick(s.now)
	s.apply()
	s.checkStalls()
}

// checkStalls: property 5, once the network heals (settle): before, the
// random schedule's latencies are not bounded.
func (s *rsim) checkStalls() {
	if !s.connected || !s.settling {
		return
	}
	for _, j := range s.jobs {
		g := s.gw[j.id]
		if !j.observed || g.ended || g.lost {
			continue
		}
		next := len(g.got) // the index of the first envelope not delivered
		if next >= len(j.emitAt) {
			continue
		}
		since := j.emitAt[next]
		if s.upSince.After(since) {
			since = s.upSince
		}
		if s.settledAt.After(since) {
			since = s.settledAt
		}
		if s.now.Sub(since) > stallBound {
			s.fatalf("STALL: observed job %s: envelope %d produced %v ago has not reached its caller (transport up since %v ago); tracking %v; queued to the gateway %d, to the runtime %d",
				j.id, next, s.now.Sub(j.emitAt[next]), s.now.Sub(s.upSince), s.r.Jobs(), len(s.toGW), len(s.toRT))
		}
	}
}

func (s *rsim) step() {
	switch r := s.rng.IntN(100); {
	case r < 30:
		j := s.jobs[s.rng.IntN(len(s.jobs))]
		s.emit(j)
	case r < 55:
		s.gwRecv()
	case r < 70:
		s.rtAnswer()
	case r < 74:
		s.drop()
	case r < 82:
		s.resume()
	default:
		if s.d.noList && s.connected && slices.ContainsFunc(s.toGW, func(m rMsg) bool { return m.replay }) {
			// Without list_jobs the rules assume that a resume's
			// replay arrives within ProbeAfter of the welcome.
			s.gwRecv()
			return
		}
		s.tick(time.Duration(s.rng.IntN(1500)) * time.Millisecond)
	}
}

// settle: the network heals, every job runs to its end, time passes.
func (s *rsim) settle() {
	s.settling, s.settledAt = true, s.now
	s.resume()
	for i := 0; i < 20_000; i++ {
		progress := s.gwRecv() || s.rtAnswer()
		if progress {
			continue
		}
		moved := false
		for _, j := range s.jobs {
			if !j.ended && !j.dead && !j.observed {
				s.emit(j)
				moved = true
			}
		}
		if moved {
			continue
		}
		// Observed jobs run in their own session, an envelope per
		// tick: time passes while they stream (property 5).
		for _, j := range s.jobs {
			if !j.ended && j.observed {
				s.emit(j)
				moved = true
			}
		}
		if moved {
			s.tick(2 * time.Second)
			continue
		}
		if s.r.Tracking() == 0 {
			break
		}
		s.tick(2 * time.Second)
	}
	for _, j := range s.jobs {
		g := s.gw[j.id]
		if !g.ended && !g.lost {
			s.fatalf("HANG: job %s (mode %d, dead %v, ended %v) neither ended nor lost for its caller after settling; tracking %v",
				j.id, j.mode, j.dead, j.ended, s.r.Jobs())
		}
		if g.lost && !j.dead && !s.d.noList {
			s.fatalf("job %s lost although the runtime still has it (mode %d)", j.id, j.mode)
		}
		if g.ended && len(g.got) != j.total {
			s.fatalf("job %s ended with %d of %d events", j.id, len(g.got), j.total)
		}
	}
}

func runRSchedule(t testing.TB, seed uint64, d rDialect, broken string) error {
	return runRScheduleStats(t, seed, d, broken, nil)
}

func runRScheduleStats(t testing.TB, seed uint64, d rDialect, broken string, st *ReattachCounters) (err error) {
	s := newRSim(t, seed, d, broken)
	if st != nil {
		defer func() {
			k := s.r.Counters()
			st.Probes += k.Probes
			st.Resubscribes += k.Resubscribes
			st.Lost += k.Lost
			st.Confirmed += k.Confirmed
		}()
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v\nlast events:\n  %s", r, joinLines(s.log))
		}
	}()
	for range 300 {
		s.step()
	}
	s.settle()
	return nil
}

var flagRDialect = flag.String("rdialect", "", "replay the re-attach test in one dialect")

func TestReattachProperties(t *testing.T) {
	seeds := *flagSeeds
	if testing.Short() {
		seeds = 300
	}
	for _, d := range rDialects {
		if *flagRDialect != "" && d.name != *flagRDialect {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			if *flagSeed != 0 {
				if err := runRSchedule(t, *flagSeed, d, ""); err != nil {
					t.Fatalf("seed %d: %v", *flagSeed, err)
				}
				return
			}
			var st ReattachCounters
			defer func() {
				t.Logf("%d schedules: probes %d, re-attachments %d, jobs lost %d, jobs confirmed streaming %d",
					seeds, st.Probes, st.Resubscribes, st.Lost, st.Confirmed)
			}()
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				if err := runRScheduleStats(t, seed, d, "", &st); err != nil {
					t.Fatalf("seed %d (replay: go test ./gateway/upstream/internal/correlate -run TestReattachProperties -rdialect=%s -seed=%d): %v",
						seed, d.name, seed, err)
				}
			}
		})
	}
}

// TestReattachPropertiesCatchBrokenRules shows that each rule, broken on
// purpose, is caught.
func TestReattachPropertiesCatchBrokenRules(t *testing.T) {
	for _, tc := range []struct{ rule, dialect string }{
		{"reattach-none", "ts-dies"},
		{"reattach-no-list", "goes-on"},
		{"reattach-replay-confirms", "ts-dies"},
		{"reattach-no-subscribe", "logs-on"},
		{"reattach-no-silence", "nolist-ts-dies"},
		{"reattach-observed-trusts-listing", "observed-ts-only"},
		{"rejoin-no-align", "observed-ts-only"},
		{"rejoin-no-ids", "observed-go"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			i := slices.IndexFunc(rDialects, func(d rDialect) bool { return d.name == tc.dialect })
			for seed := uint64(1); seed <= 3000; seed++ {
				if err := runRSchedule(t, seed, rDialects[i], tc.rule); err != nil {
					t.Logf("broken rule %q caught at seed %d: %.300s", tc.rule, seed, err)
					return
				}
			}
			t.Fatalf("broken rule %q was not caught in 3000 seeds", tc.rule)
		})
	}
}
