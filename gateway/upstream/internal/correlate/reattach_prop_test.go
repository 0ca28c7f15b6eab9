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
// twice (Go). After every step it checks, and once the schedule settles:
//
//  1. no event of a job is delivered twice;
//  2. every job ends for its caller (terminal delivered, or lost) within
//     the bound once the runtime is done with it: none hangs;
//  3. a job whose whole stream could still be delivered (it goes on, or
//     its log can be replayed) is never lost;
//  4. a job is lost only when the runtime no longer has it.
//
// A failing seed is printed; replay it with -seed=N -rdialect=NAME.

type rDialect struct {
	name string
	mode []jobMode // modes jobs are drawn from
}

type jobMode uint8

const (
	goesOn    jobMode = iota + 1 // streams on after a resume
	diesOnUse                    // stops streaming at a drop and dies at its next event (TS)
	logsOn                       // stops streaming at a drop, runs on into its log
)

var rDialects = []rDialect{
	{"goes-on", []jobMode{goesOn}},
	{"ts-dies", []jobMode{diesOnUse}},
	{"logs-on", []jobMode{logsOn}},
	{"mixed", []jobMode{goesOn, diesOnUse, logsOn}},
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
}

type rMsg struct {
	kind  string // "ev", "term", "list", "subscribed", "notfound"
	job   string
	idx   int
	live  map[string]bool
	gen   int
	reqID int
}

type gwRJob struct {
	got    map[int]bool
	ended  bool
	lost   bool
	lastAt time.Time // when the runtime was last able to deliver it
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
}

func newRSim(t testing.TB, seed uint64, d rDialect, broken string) *rsim {
	s := &rsim{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x51f15e)), d: d,
		r:   NewReattach(ReattachConfig{ProbeAfter: time.Second, ProbeMax: 8 * time.Second, ProbeTimeout: 5 * time.Second, brokenRule: broken}),
		now: time.Unix(1_700_000_000, 0), gen: 1, connected: true, gw: map[string]*gwRJob{}}
	s.r.Features(true, true)
	s.r.connected = true
	n := 1 + s.rng.IntN(4)
	for i := range n {
		j := &rtRJob{id: fmt.Sprintf("j%d", i), mode: d.mode[s.rng.IntN(len(d.mode))], total: 3 + s.rng.IntN(12)}
		s.jobs = append(s.jobs, j)
		s.gw[j.id] = &gwRJob{got: map[int]bool{}}
	}
	return s
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
			s.toRT = append(s.toRT, rMsg{kind: "subscribe", job: a.Job, idx: int(a.From), gen: s.gen})
			s.logf("resubscribe %s", a.Job)
		case JobLost:
			g := s.gw[a.Job]
			if g.ended || g.lost {
				s.fatalf("job %s lost after it ended (ended %v lost %v)", a.Job, g.ended, g.lost)
			}
			j := s.job(a.Job)
			if !j.dead && (j.mode == goesOn || j.mode == logsOn) {
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
	if m.kind == "term" {
		g.ended = true
		s.r.Frame(m.job, s.seq)
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
	s.r.Frame(m.job, s.seq)
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
		msg = rMsg{kind: "term", job: j.id}
		j.ended = true
	} else {
		j.emitted++
	}
	copies := j.subs
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
		s.toGW = append(s.toGW, msg)
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
		if j.dead {
			s.toGW = append(s.toGW, rMsg{kind: "notfound", job: j.id})
			return true
		}
		s.toGW = append(s.toGW, rMsg{kind: "subscribed", job: j.id})
		// History: the job's log after what the gateway has.
		g := s.gw[j.id]
		for i := 0; i < j.emitted; i++ {
			if !g.got[i] {
				s.toGW = append(s.toGW, rMsg{kind: "ev", job: j.id, idx: i})
			}
		}
		if j.ended {
			s.toGW = append(s.toGW, rMsg{kind: "term", job: j.id})
		} else {
			j.subs++
		}
	}
	return true
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
		s.r.Listed(uint64(m.reqID), m.live, true, s.now)
	case "notfound":
		s.r.SubscribeFailed(m.job)
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
	s.toGW, s.toRT = nil, nil
	for _, j := range s.jobs {
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
	s.logf("resume gen %d", s.gen)
	// The resume replays what the session's stream holds after the
	// gateway's cursor.
	var marks []Mark
	for _, j := range s.jobs {
		g := s.gw[j.id]
		for i := 0; i < j.streamedN; i++ {
			if !g.got[i] {
				s.toGW = append(s.toGW, rMsg{kind: "ev", job: j.id, idx: i})
			}
		}
		if j.termInStr && !g.ended {
			s.toGW = append(s.toGW, rMsg{kind: "term", job: j.id})
		}
		if !g.ended && !g.lost {
			marks = append(marks, Mark{Job: j.id})
		}
	}
	s.r.Resumed(marks, s.now)
	s.apply()
}

func (s *rsim) tick(d time.Duration) {
	s.now = s.now.Add(d)
	s.r.Tick(s.now)
	s.apply()
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
		s.tick(time.Duration(s.rng.IntN(1500)) * time.Millisecond)
	}
}

// settle: the network heals, every job runs to its end, time passes.
func (s *rsim) settle() {
	s.resume()
	for i := 0; i < 20_000; i++ {
		progress := s.gwRecv() || s.rtAnswer()
		if progress {
			continue
		}
		moved := false
		for _, j := range s.jobs {
			if !j.ended && !j.dead {
				s.emit(j)
				moved = true
			}
		}
		if moved {
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
		if g.lost && !j.dead {
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
