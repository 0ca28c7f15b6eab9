package cluster

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The ownership core's property test: N simulated replicas, each running an
// Ownership and a thin shell that carries its decisions out (as
// gateway/server does), against a simulated directory (stalls, flushes,
// restarts without data, lost replies, partitions from a replica, lease
// expiry by its own clock) and a simulated runtime that enforces
// single-use resume tokens and cuts the previous holder's transport with a
// delay. Replicas are killed, restarted with the same instance id, paused
// (SIGSTOP), and their clocks run at rates within ±3 % and jump forward.
//
// Invariants, checked after every step:
//   - I1: never two replicas may serve a write for one session at once
//     (MayServe, with a transport they believe live).
//   - I2: no live session is answered NOT_FOUND or lost (except the ARCP
//     window that no directory can close: a replica died between a welcome
//     and recording its token).
//   - I3: in a schedule whose only faults are directory stalls of up to
//     2 × LeaseTTL, flushes and restarts without data, no owner changes.
//
// and after the faults end and a quiet period of 2 × LeaseTTL + 1 s, plus
// the longest wait of a claimed session in the resume queue (1 s):
//   - I4: every live session has exactly one owner, alive, serving it, named
//     by its directory record (a session whose owner died was taken over
//     within that bound).
//
// A failing seed is printed; replay it with -ownership.seed=N.

var (
	flagOwnSeeds = flag.Int("ownership.seeds", 10000, "schedules")
	flagOwnSeed  = flag.Uint64("ownership.seed", 0, "replay one seed")
)

const (
	simTTL   = 1000 // ms
	simStep  = 50
	simLease = simTTL / 3
	simTick  = 250
	simSweep = 250
	simRecov = 2 * simTTL // Recovering window after a flush
)

type simRec struct {
	owner string
	epoch uint64
	token int
}

type simLeaseRec struct {
	expires int64
	inc     int
}

type simRT struct {
	token  int
	holder int // replica index whose transport is current (-1: none)
	closed bool
}

type simHeld struct {
	token    int   // token this replica holds
	liveTill int64 // the runtime cut the transport; the replica learns at this time (-1: live)
	cutAt    int64
}

// simPend is a session a replica's sweep has claimed and whose resume is
// queued (held, not serving): resumed at `at` (the background queue), or
// at once by a call for it.
type simPend struct {
	token int    // the stored token the claim read
	epoch uint64 // the epoch claimed
	at    int64  // when the queue reaches it
	since int64  // when it was claimed
}

type simReplica struct {
	idx        int
	name       string
	inc        int
	alive      bool
	pausedTill int64
	partTill   int64 // partitioned from the directory until
	rate       float64
	born       int64
	local0     int64 // local ms at born
	jump       int64
	core       *Ownership
	held       map[string]*simHeld
	pend       map[string]*simPend // claimed, resume queued
	nextLease  int64
	nextTick   int64
	nextSweep  int64
	tickOK     bool
}

type sim struct {
	rng        *rand.Rand
	t          int64
	broken     string
	recs       map[string]*simRec
	leases     map[string]simLeaseRec
	registry   map[string]bool
	marker     string
	markerAt   int64
	markers    int
	stallTill  int64
	rt         map[string]*simRT
	published  map[string]bool // a record was created once: calls may go anywhere
	mayBeLost  map[string]bool // ARCP's window: the holder died with an unrecorded token
	reps       []*simReplica
	nextID     int
	benign     bool
	takeovers  int
	log        []string
	faultsTill int64
	lastFlush  int64
	live       []string // liveSessions, until a session opens or closes
	stats      simStats
}

type simStats struct {
	schedules, steps, calls, served, notYet, takeovers, flushes, kills, lostOK int
}

func (s *sim) logf(format string, a ...any) {
	s.log = append(s.log, fmt.Sprintf("t=%d ", s.t)+fmt.Sprintf(format, a...))
	if len(s.log) > 400 {
		s.log = s.log[1:]
	}
}

func (r *simReplica) now(t int64) time.Time {
	ms := r.local0 + int64(float64(t-r.born)*r.rate) + r.jump
	return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond)
}

// simTime is the schedule's time at which r's clock reads local.
func (r *simReplica) simTime(local time.Time) int64 {
	ms := local.Sub(time.Unix(0, 0)).Milliseconds()
	return r.born + int64(math.Ceil(float64(ms-r.local0-r.jump)/r.rate))
}

func (s *sim) newReplica(idx int) *simReplica {
	r := &simReplica{idx: idx, name: "gw-" + strconv.Itoa(idx+1)}
	s.start(r)
	return r
}

func (s *sim) start(r *simReplica) {
	r.alive = true
	r.inc = s.rng.IntN(1 << 30)
	r.rate = 0.97 + 0.06*s.rng.Float64()
	r.born = s.t
	r.local0 = 1_000_000 + s.rng.Int64N(100_000)
	r.jump = 0
	r.core = NewOwnership(OwnershipConfig{Self: r.name, LeaseTTL: simTTL * time.Millisecond, brokenRule: s.broken})
	r.held = make(map[string]*simHeld)
	r.pend = make(map[string]*simPend)
	r.nextLease = s.t
	r.nextTick = s.t + s.rng.Int64N(simTick)
	r.nextSweep = s.t + s.rng.Int64N(simSweep)
	r.pausedTill, r.partTill = 0, 0
}

func (s *sim) up(r *simReplica) bool { return r.alive && s.t >= r.pausedTill }

// reach says whether r can use the directory now; a lost reply (the
// write happened, the answer did not arrive) is decided by the caller.
func (s *sim) reach(r *simReplica) bool { return s.t >= s.stallTill && s.t >= r.partTill }

func (s *sim) leaseLive(inst string) bool {
	l, ok := s.leases[inst]
	return ok && l.expires > s.t
}

func (s *sim) lostReply() bool { return s.t < s.faultsTill && s.rng.IntN(50) == 0 }

// ---- directory operations (atomic, like the Lua scripts) ----

func (s *sim) ensureMarker() string {
	if s.marker == "" {
		s.markers++
		s.marker = "m" + strconv.Itoa(s.markers)
		s.markerAt = s.t
	}
	return s.marker
}

func (s *sim) write(r *simReplica, w Work) (res Result, epoch uint64) {
	if !s.reach(r) {
		return Unreachable, 0
	}
	rec := s.recs[w.ID]
	tok := s.tokenOf(r, w.ID)
	res, epoch = OK, w.Epoch
	switch w.Kind {
	case Claim:
		if rec != nil && rec.owner == r.name {
			// A claim whose reply was lost, made again: ours (the
			// directory's Claim answers EXISTS with the owner).
			epoch = rec.epoch
			rec.token = tok
			break
		}
		if rec != nil {
			res = Fenced
			break
		}
		s.recs[w.ID] = &simRec{owner: r.name, epoch: 1, token: tok}
		s.published[w.ID] = true
		epoch = 1
	case Restore:
		switch {
		case rec != nil && w.IfAbsent && (rec.owner != r.name || rec.epoch != w.Epoch):
			res = Fenced
		case rec == nil, rec.epoch < w.Epoch:
			// Higher epoch wins: a stale owner that restored first is
			// fenced at its next write.
			s.recs[w.ID] = &simRec{owner: r.name, epoch: w.Epoch, token: tok}
		case rec.owner != r.name || rec.epoch != w.Epoch:
			res = Fenced
		}
	default:
		switch {
		case rec == nil, rec.epoch < w.Epoch:
			// A record below the epoch held is a stale owner's restore
			// after a flush (epochs only grow otherwise): the update
			// script answers NOTFOUND, and the holder restores (the
			// higher epoch wins) once it has seen the flush.
			res = Missing
		case rec.owner != r.name || rec.epoch != w.Epoch:
			res = Fenced
		case w.Kind == WriteToken:
			rec.token = tok
		}
	}
	if s.lostReply() {
		return Unreachable, 0
	}
	return res, epoch
}

// tokenOf is the token r holds for id: its transport's, or (claimed, not
// resumed) the stored one its claim read.
func (s *sim) tokenOf(r *simReplica, id string) int {
	if h := r.held[id]; h != nil {
		return h.token
	}
	if p := r.pend[id]; p != nil {
		return p.token
	}
	return 0
}

// ---- the shell of one replica ----

func (s *sim) drop(r *simReplica, id string) {
	s.logf("%s drops %s", r.name, id)
	delete(r.held, id)
	r.core.Gone(id)
}

func (s *sim) stepReplica(r *simReplica) {
	if !s.up(r) {
		return
	}
	// The runtime cut a transport: the replica learns it now, and resumes
	// when the core allows.
	for _, id := range heldIDs(r) {
		if h := r.held[id]; h != nil && h.liveTill >= 0 && s.t >= h.liveTill {
			s.tryResume(r, id, h)
		}
	}
	// The background resumes of claimed sessions the queue has reached.
	for _, id := range pendIDs(r) {
		if p := r.pend[id]; p != nil && s.t >= p.at {
			s.resumePending(r, id)
		}
	}
	// The lease loop (directory.Run), the tick and the sweep run on their
	// own timers (gateway/server: a goroutine, and a select that picks
	// among ready cases at random): when several are due in one step (a
	// replica back from a pause), they run in a random order.
	var due []func()
	if s.t >= r.nextLease {
		r.nextLease = s.t + simLease
		due = append(due, func() { s.refreshLease(r) })
	}
	if s.t >= r.nextTick {
		r.nextTick = s.t + simTick
		due = append(due, func() { s.tick(r) })
	}
	if s.t >= r.nextSweep {
		r.nextSweep = s.t + simSweep
		due = append(due, func() {
			s.sweep(r)
			// As gateway/server's loop: a sweep also when a peer seen
			// live would be judged gone (NextJudgement), if sooner.
			if nj := r.core.NextJudgement(); !nj.IsZero() {
				if at := r.simTime(nj); at < r.nextSweep {
					r.nextSweep = max(at, s.t+1)
				}
			}
		})
	}
	s.rng.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, f := range due {
		f()
	}
}

// heldIDs are r's sessions in a stable order: a loop that draws from the
// schedule's random source must not follow map order, or a seed would not
// replay.
func heldIDs(r *simReplica) []string {
	ids := make([]string, 0, len(r.held))
	for id := range r.held {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func pendIDs(r *simReplica) []string {
	ids := make([]string, 0, len(r.pend))
	for id := range r.pend {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (s *sim) refreshLease(r *simReplica) {
	start := r.now(s.t)
	l, ok := s.leases[r.name]
	switch {
	case !s.reach(r):
		r.core.LeaseFailed(r.now(s.t))
	case ok && l.expires > s.t && l.inc != r.inc:
		r.core.LeaseFailed(r.now(s.t)) // another process holds it
	default:
		s.leases[r.name] = simLeaseRec{expires: s.t + simTTL, inc: r.inc}
		s.registry[r.name] = true
		if s.lostReply() {
			r.core.LeaseFailed(r.now(s.t))
		} else {
			// As gateway/server feeds it: the lease script does not
			// read the marker (only the loop's tick and a refused
			// takeover do), so a refresh brings no news of a flush.
			r.core.LeaseRefreshed(start, r.now(s.t), "")
		}
	}
}

func (s *sim) tick(r *simReplica) {
	if !s.reach(r) {
		r.core.DirectoryFailed(r.now(s.t))
		return
	}
	r.core.MarkerSeen(r.now(s.t), s.ensureMarker())
	work, detach := r.core.Due(r.now(s.t))
	for _, id := range detach {
		s.logf("%s detaches %s: its record vanished", r.name, id)
		delete(r.held, id)
		delete(r.pend, id)
	}
	for _, w := range work {
		if r.held[w.ID] == nil && r.pend[w.ID] == nil {
			continue
		}
		res, epoch := s.write(r, w)
		if res == Unreachable {
			r.core.Wrote(w.ID, w, res, 0)
			r.core.DirectoryFailed(r.now(s.t))
			break
		}
		if r.core.Wrote(w.ID, w, res, epoch) {
			s.logf("%s: %s of %s fenced; detached", r.name, w.Kind, w.ID)
			delete(r.held, w.ID)
			delete(r.pend, w.ID)
		}
	}
}

func (s *sim) tryResume(r *simReplica, id string, h *simHeld) {
	rt := s.rt[id]
	if rt.closed {
		s.drop(r, id)
		return
	}
	if !r.core.MayResume(id, r.now(s.t)) {
		return
	}
	if rt.token != h.token {
		// Refused: somebody else resumed; the session is not ours. The
		// real connection ends lost and deletes its record, epoch-checked
		// (a stale owner that restored a flushed record first).
		if rec := s.recs[id]; rec != nil && rec.owner == r.name && rec.epoch == r.core.Epoch(id) && s.reach(r) {
			s.logf("%s: resume of %s refused; deletes its record at epoch %d", r.name, id, rec.epoch)
			delete(s.recs, id)
		}
		s.drop(r, id)
		return
	}
	s.resumeAt(r, id, h)
}

func (s *sim) resumeAt(r *simReplica, id string, h *simHeld) {
	rt := s.rt[id]
	if rt.holder >= 0 && rt.holder != r.idx {
		if o := s.reps[rt.holder].held[id]; o != nil && o.liveTill < 0 {
			o.liveTill = s.t + s.rng.Int64N(1000) // the old holder learns late
		}
	}
	rt.token++
	rt.holder = r.idx
	h.token, h.liveTill = rt.token, -1
	r.core.Welcome(id)
	// The token is written at once (onWelcome).
	if r.core.Epoch(id) != 0 {
		w := r.core.TokenWork(id)
		res, _ := s.write(r, w)
		if res == Unreachable {
			if s.t < r.partTill && (r.core.Valid(r.now(s.t)) || r.core.Epoch(id) == 0) {
				// ARCP's own window: the runtime spent the stored
				// token and the new one cannot be recorded, though the
				// lease was valid (nobody could take over) when the
				// resume began. A resume while the lease had lapsed is
				// no such window: the core must not allow it.
				s.mayBeLost[id] = true
			}
			r.core.DirectoryFailed(r.now(s.t))
		} else if r.core.Wrote(id, w, res, 0) {
			s.logf("%s: token write of %s fenced; detached", r.name, id)
			delete(r.held, id)
		}
	}
}

func (s *sim) peers(r *simReplica) []PeerLease {
	var out []PeerLease
	for inst := range s.registry {
		l, ok := s.leases[inst]
		live := ok && l.expires > s.t
		pl := PeerLease{Instance: inst, Live: live}
		if live {
			pl.TTLLeft = time.Duration(l.expires-s.t) * time.Millisecond
		}
		out = append(out, pl)
	}
	slices.SortFunc(out, func(a, b PeerLease) int { return cmpString(a.Instance, b.Instance) })
	return out
}

func (s *sim) sweep(r *simReplica) {
	if !s.reach(r) {
		r.core.DirectoryFailed(r.now(s.t))
		return
	}
	r.core.PeersSeen(r.now(s.t), s.peers(r))
	dead := r.core.Dead(r.now(s.t))
	ids := make([]string, 0, len(s.recs))
	for id := range s.recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		rec := s.recs[id]
		if rec == nil {
			continue
		}
		if rec.owner == "" || slices.Contains(dead, rec.owner) || (rec.owner == r.name && r.held[id] == nil && r.pend[id] == nil) {
			s.takeOver(r, id, "sweep")
		}
	}
}

// takeOver is the directory's Takeover and the resume after it; it
// returns whether r serves the session now.
func (s *sim) takeOver(r *simReplica, id, why string) Verdict {
	rec := s.recs[id]
	if rec == nil {
		return NotYet
	}
	v, reason := r.core.MayTakeOver(rec.owner, s.leaseLive(rec.owner), r.now(s.t))
	if v != Take {
		if v == NotYet {
			s.stats.notYet++
		}
		return v
	}
	if !s.reach(r) {
		r.core.DirectoryFailed(r.now(s.t))
		return NotYet
	}
	if rec.owner != "" && rec.owner != r.name && s.leaseLive(rec.owner) {
		return Live // the script's own check
	}
	if s.marker != r.core.Marker() && s.broken != "no-marker-check" {
		// The script's marker check: the directory lost its data since
		// this replica last looked; leases it saw absent may just have
		// been flushed.
		if s.marker != "" {
			r.core.MarkerSeen(r.now(s.t), s.marker)
		}
		return NotYet
	}
	prev := rec.owner
	if rt := s.rt[id]; rt.closed {
		// A record left behind by a close while Redis was down: the
		// resume is refused and the record deleted.
		delete(s.recs, id)
		return NotYet
	}
	rec.owner, rec.epoch = r.name, rec.epoch+1
	s.takeovers++
	s.stats.takeovers++
	s.logf("%s takes %s over from %q (%s, %s) epoch %d", r.name, id, prev, why, reason, rec.epoch)
	if s.benign {
		s.fail("I3: %s took %s over from %q (%s) in a schedule with directory faults only", r.name, id, prev, reason)
	}
	rt := s.rt[id]
	if old := r.held[id]; old != nil {
		delete(r.held, id)
	}
	if rt.token != rec.token {
		if !s.mayBeLost[id] && !rt.closed {
			s.fail("I2: session %s lost at takeover by %s: stored token %d, runtime's %d", id, r.name, rec.token, rt.token)
		}
		delete(s.recs, id)
		rt.closed = true
		s.live = nil
		return NotYet
	}
	// Claimed: held, not serving. A call resumes it at once; a sweep's
	// batch queues its resume (gateway/server: 64 at once in the
	// background), so that a flush or a fault can land in between.
	delete(r.pend, id)
	r.core.Claimed(id, rec.epoch, reason, s.marker, r.now(s.t))
	p := &simPend{token: rec.token, epoch: rec.epoch, at: s.t, since: s.t}
	r.pend[id] = p
	if why == "call" {
		s.resumePending(r, id)
		if r.held[id] != nil {
			return Take
		}
		return NotYet
	}
	p.at = s.t + s.rng.Int64N(simQueue)
	return Take
}

// simGiveUp: a claimed session whose resume the core has held back this
// long (lease lapsed, epoch unconfirmed) is given back (gateway/server:
// awaitResume).
const simGiveUp = 2 * simTTL

// simQueue bounds how long a sweep's claim waits in the resume queue.
const simQueue = 1000

// resumePending resumes a claimed session upstream, as gateway/server's
// runResume: when the core allows it, with the stored token the claim
// read; given back (released) when the resume fails or waits too long;
// lost when the runtime refuses the token.
func (s *sim) resumePending(r *simReplica, id string) {
	p := r.pend[id]
	if !r.core.Held(id) {
		// Fenced, or its record vanished, while queued.
		s.logf("%s: claimed %s no longer held; dropped", r.name, id)
		delete(r.pend, id)
		return
	}
	rt := s.rt[id]
	if !r.core.MayResume(id, r.now(s.t)) {
		if s.t-p.since >= simGiveUp && s.reach(r) {
			s.giveBack(r, id, p, "held back too long")
		}
		return
	}
	if s.t < s.faultsTill && s.reach(r) && s.rng.IntN(25) == 0 {
		s.giveBack(r, id, p, "runtime unreachable")
		return
	}
	if rt.closed || rt.token != p.token {
		// Refused: the token was spent. The record goes (epoch-checked).
		r.core.ResumeFailed(id, true)
		delete(r.pend, id)
		if rec := s.recs[id]; rec != nil && rec.owner == r.name && rec.epoch == p.epoch && s.reach(r) {
			delete(s.recs, id)
		}
		if !s.mayBeLost[id] && !rt.closed {
			s.fail("I2: session %s lost: %s's resume refused (claimed with token %d, runtime's %d)", id, r.name, p.token, rt.token)
		}
		rt.closed = true
		s.live = nil
		return
	}
	delete(r.pend, id)
	h := &simHeld{token: p.token, liveTill: -1}
	r.held[id] = h
	s.resumeAt(r, id, h)
	if r.held[id] != nil && !r.core.Resumed(id) {
		s.logf("%s: %s resumed but no longer held; detached", r.name, id)
		delete(r.held, id)
	}
}

// giveBack releases a claimed session whose resume failed: the release
// script, epoch-checked; a record that is missing (a flush: known to the
// core, or found by the release) is re-created first at the epoch held.
func (s *sim) giveBack(r *simReplica, id string, p *simPend, why string) {
	// As gateway/server: the marker first (a flush not yet seen), then
	// the core's verdict.
	r.core.MarkerSeen(r.now(s.t), s.ensureMarker())
	if r.core.Restoring(id) && why != "runtime unreachable" {
		return // not while its record is to be restored
	}
	w, restoreFirst := r.core.ResumeFailed(id, false)
	rec := s.recs[id]
	s.logf("%s gives %s back (%s; restore first %v %+v, record %+v)", r.name, id, why, restoreFirst, w, rec)
	if restoreFirst {
		s.write(r, w)
	}
	delete(r.pend, id)
	if rec = s.recs[id]; rec != nil && rec.owner == r.name && rec.epoch == p.epoch {
		rec.owner = ""
	}
}

// ---- clients ----

func (s *sim) open() {
	var ups []*simReplica
	for _, r := range s.reps {
		if s.up(r) {
			ups = append(ups, r)
		}
	}
	if len(ups) == 0 {
		return
	}
	r := ups[s.rng.IntN(len(ups))]
	s.nextID++
	id := "s" + strconv.Itoa(s.nextID)
	s.rt[id] = &simRT{token: 1, holder: r.idx}
	s.live = nil
	r.held[id] = &simHeld{token: 1, liveTill: -1}
	r.core.Opened(id)
}

func (s *sim) call() {
	ids := s.liveSessions()
	if len(ids) == 0 {
		return
	}
	id := ids[s.rng.IntN(len(ids))]
	r := s.reps[s.rng.IntN(len(s.reps))]
	if !s.up(r) || !s.published[id] {
		return
	}
	s.stats.calls++
	if r.pend[id] != nil {
		// Claimed here, its resume queued: the call resumes it at once.
		s.resumePending(r, id)
	}
	if h := r.held[id]; h != nil {
		if s.believesLive(h) && r.core.MayServe(id, r.now(s.t)) {
			s.stats.served++
			if s.rng.IntN(30) == 0 {
				s.close(r, id)
			}
		}
		return
	}
	if !s.reach(r) {
		r.core.DirectoryFailed(r.now(s.t))
		return
	}
	rec := s.recs[id]
	if rec == nil {
		present := s.marker != ""
		age := time.Duration(s.t-s.markerAt) * time.Millisecond
		if Recovering(age, present, simRecov*time.Millisecond) || s.broken == "no-recovering" {
			if s.broken != "no-recovering" {
				return // UNAVAILABLE, retry
			}
		}
		if !s.mayBeLost[id] {
			s.fail("I2: live session %s answered NOT_FOUND by %s", id, r.name)
		}
		return
	}
	s.takeOver(r, id, "call")
}

func (s *sim) close(r *simReplica, id string) {
	if rec := s.recs[id]; rec != nil && rec.owner == r.name && rec.epoch == r.core.Epoch(id) && s.reach(r) {
		delete(s.recs, id)
	}
	s.rt[id].closed = true
	s.live = nil
	s.drop(r, id)
}

func (s *sim) liveSessions() []string {
	if s.live != nil {
		return s.live
	}
	out := []string{}
	for id, rt := range s.rt {
		if !rt.closed {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	s.live = out
	return out
}

// ---- faults ----

func (s *sim) fault() {
	n := s.rng.IntN(100)
	r := s.reps[s.rng.IntN(len(s.reps))]
	switch {
	case n < 20:
		d := 100 + s.rng.Int64N(2*simTTL-100)
		if s.t-s.lastFlush < simRecov {
			s.doubleFault()
		}
		s.stallTill = max(s.stallTill, s.t+d)
		s.logf("redis stalled %d ms", d)
	case n < 30:
		s.flush()
		s.logf("redis flushed")
	case n < 38:
		s.flush()
		s.stallTill = max(s.stallTill, s.t+100+s.rng.Int64N(400))
		s.lastFlush = s.stallTill
		s.logf("redis restarted without data")
	case n < 55:
		// The runtime drops a transport.
		for _, id := range heldIDs(r) {
			if h := r.held[id]; h.liveTill < 0 && s.rng.IntN(3) == 0 {
				h.liveTill = s.t
				s.rt[id].holder = -1
			}
		}
	case s.benign:
	case n < 93 && s.t-s.lastFlush < simRecov && n >= 55 && !(n >= 65 && n < 75):
		// A replica down or cut off within the restore window of a
		// flush: a double fault; its records may stay lost.
		for id := range r.held {
			s.mayBeLost[id] = true
		}
		for id := range r.pend {
			s.mayBeLost[id] = true
		}
		s.replicaFault(n, r)
	case n < 93:
		s.replicaFault(n, r)
	default:
		r.jump += s.rng.Int64N(100)
	}
}

func (s *sim) replicaFault(n int, r *simReplica) {
	if r.alive {
		for id := range r.held {
			if ss := r.core.sessions[id]; ss != nil && ss.tokenPending {
				s.mayBeLost[id] = true // ARCP's own window
			}
		}
	}
	switch {
	case n < 65:
		if r.alive && s.aliveCount() > 1 {
			s.kill(r)
		}
	case n < 75:
		if !r.alive {
			s.start(r)
			s.logf("%s restarted", r.name)
		}
	case n < 85:
		d := 100 + s.rng.Int64N(3*simTTL)
		r.pausedTill = max(r.pausedTill, s.t+d)
		s.logf("%s paused %d ms", r.name, d)
	case n < 93:
		d := 100 + s.rng.Int64N(3*simTTL)
		r.partTill = max(r.partTill, s.t+d)
		s.logf("%s cut from redis %d ms", r.name, d)
	}
}

// doubleFault: a stall within the restore window of a flush; records not
// yet restored may stay lost.
func (s *sim) doubleFault() {
	for _, r := range s.reps {
		for id := range r.held {
			if s.recs[id] == nil {
				s.mayBeLost[id] = true
			}
		}
		for id := range r.pend {
			if s.recs[id] == nil {
				s.mayBeLost[id] = true
			}
		}
	}
}

func (s *sim) aliveCount() int {
	n := 0
	for _, r := range s.reps {
		if r.alive {
			n++
		}
	}
	return n
}

func (s *sim) flush() {
	// A double fault: the records of an owner that is down (or cut off
	// from Redis) when Redis loses them cannot be restored by anyone.
	for _, r := range s.reps {
		if !s.up(r) || s.t < r.partTill {
			for id := range r.held {
				s.mayBeLost[id] = true
			}
			for id := range r.pend {
				s.mayBeLost[id] = true
			}
		}
	}
	for id, rt := range s.rt {
		if (rt.holder < 0 || !s.up(s.reps[rt.holder]) || s.reps[rt.holder].held[id] == nil) && !s.claimedBy(id) {
			s.mayBeLost[id] = true
		}
	}
	s.recs = make(map[string]*simRec)
	s.leases = make(map[string]simLeaseRec)
	s.marker = ""
	s.lastFlush = s.t
	s.stats.flushes++
}

// claimedBy says a replica that is up and reaches the directory holds
// id claimed at its record's epoch, its resume queued: it restores the
// record after a flush (no double fault).
func (s *sim) claimedBy(id string) bool {
	rec := s.recs[id]
	if rec == nil {
		return false
	}
	for _, r := range s.reps {
		if p := r.pend[id]; p != nil && s.up(r) && s.t >= r.partTill && rec.owner == r.name && rec.epoch == p.epoch {
			return true
		}
	}
	return false
}

func (s *sim) kill(r *simReplica) {
	s.stats.kills++
	s.logf("%s killed", r.name)
	for id := range r.held {
		if ss := r.core.sessions[id]; ss != nil && (ss.tokenPending || s.recs[id] == nil) {
			s.mayBeLost[id] = true // ARCP's own window
		}
		if rt := s.rt[id]; rt.holder == r.idx {
			rt.holder = -1
		}
	}
	for id := range r.pend {
		if s.recs[id] == nil {
			s.mayBeLost[id] = true // a flush not yet restored
		}
	}
	r.alive = false
	r.held = nil
	r.pend = nil
}

// ---- invariants ----

type simFailure struct{ msg string }

func (s *sim) fail(format string, a ...any) {
	panic(simFailure{fmt.Sprintf("t=%d ", s.t) + fmt.Sprintf(format, a...)})
}

func (s *sim) checkServing() {
	for _, id := range s.liveSessions() {
		var who []string
		for _, r := range s.reps {
			if !s.up(r) {
				continue
			}
			if h := r.held[id]; h != nil && s.believesLive(h) && r.core.MayServe(id, r.now(s.t)) {
				who = append(who, r.name)
			}
		}
		if len(who) > 1 {
			var st []string
			for _, r := range s.reps {
				if ss := r.core.sessions[id]; ss != nil {
					st = append(st, fmt.Sprintf("%s %+v gen %d valid %v", r.name, *ss, r.core.gen, r.core.Valid(r.now(s.t))))
				}
			}
			s.fail("I1: session %s served by %v at once (%v, record %+v)", id, who, st, s.recs[id])
		}
	}
}

// believesLive: the replica has not yet learnt that the runtime cut its
// transport (it would submit on it).
func (s *sim) believesLive(h *simHeld) bool { return h.liveTill < 0 || s.t < h.liveTill }

func (s *sim) checkEnd() {
	for _, id := range s.liveSessions() {
		if s.mayBeLost[id] || !s.published[id] {
			continue
		}
		var who []string
		for _, r := range s.reps {
			if h := r.held[id]; s.up(r) && h != nil && h.liveTill < 0 && r.core.MayServe(id, r.now(s.t)) {
				who = append(who, r.name)
			}
		}
		rec := s.recs[id]
		switch {
		case len(who) != 1:
			s.fail("I4: session %s has %d serving owners %v after the quiet period (record %+v)", id, len(who), who, rec)
		case rec == nil || rec.owner != who[0]:
			s.fail("I4: session %s served by %s but the record says %+v", id, who[0], rec)
		}
	}
}

func runOwnership(seed uint64, broken string) (st simStats, err error) {
	s := &sim{
		rng: rand.New(rand.NewPCG(seed, seed^0x51ed2701)), broken: broken,
		recs: make(map[string]*simRec), leases: make(map[string]simLeaseRec), registry: make(map[string]bool),
		rt: make(map[string]*simRT), published: make(map[string]bool), mayBeLost: make(map[string]bool),
	}
	s.benign = s.rng.IntN(3) == 0
	n := 2 + s.rng.IntN(3)
	for i := range n {
		s.reps = append(s.reps, s.newReplica(i))
	}
	defer func() {
		if v := recover(); v != nil {
			f, ok := v.(simFailure)
			if !ok {
				panic(v)
			}
			err = fmt.Errorf("%s (benign=%v, %d replicas)\nlast events:\n  %s", f.msg, s.benign, n, joinLines(s.log))
		}
		st = s.stats
	}()
	faultSteps := int64(150 + s.rng.IntN(150))
	end := faultSteps*simStep + 2*simTTL + 1000 + simQueue
	s.faultsTill = faultSteps * simStep
	// Warm-up: leases and a few sessions, no faults.
	for ; s.t < end; s.t += simStep {
		s.stats.steps++
		inFaults := s.t >= 2*simTTL && s.t < faultSteps*simStep
		if s.t < faultSteps*simStep && s.rng.IntN(8) == 0 && len(s.rt) < 12 {
			s.open()
		}
		if inFaults && s.rng.IntN(12) == 0 {
			s.fault()
		}
		if s.t == faultSteps*simStep {
			// Heal: every fault ends, dead replicas come back.
			s.stallTill = 0
			for _, r := range s.reps {
				r.pausedTill, r.partTill = 0, 0
				if !r.alive && s.rng.IntN(2) == 0 {
					s.start(r)
				}
			}
			s.logf("healed")
		}
		for _, i := range s.rng.Perm(len(s.reps)) {
			s.stepReplica(s.reps[i])
		}
		for range 2 {
			s.call()
		}
		s.checkServing()
	}
	s.checkEnd()
	return s.stats, nil
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

func TestOwnershipProperties(t *testing.T) {
	if *flagOwnSeed != 0 {
		if _, err := runOwnership(*flagOwnSeed, ""); err != nil {
			t.Fatalf("seed %d: %v", *flagOwnSeed, err)
		}
		return
	}
	seeds := *flagOwnSeeds
	if testing.Short() {
		seeds = 1000
	}
	var total simStats
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		st, err := runOwnership(seed, "")
		if err != nil {
			t.Fatalf("seed %d (replay: go test ./gateway/cluster -run TestOwnershipProperties -ownership.seed=%d): %v", seed, seed, err)
		}
		total.steps += st.steps
		total.calls += st.calls
		total.served += st.served
		total.notYet += st.notYet
		total.takeovers += st.takeovers
		total.flushes += st.flushes
		total.kills += st.kills
	}
	t.Logf("%d schedules, %d steps, %d calls (%d served), %d takeovers, %d refused not-yet, %d flushes, %d kills",
		seeds, total.steps, total.calls, total.served, total.takeovers, total.notYet, total.flushes, total.kills)
}

// TestOwnershipCatchesBrokenRules shows that the property test fails when a
// rule is removed on purpose.
func TestOwnershipCatchesBrokenRules(t *testing.T) {
	for _, rule := range []string{"no-grace", "no-lapse", "no-restore", "no-held-restore", "no-recovering", "no-resume-hold", "no-marker-check"} {
		t.Run(rule, func(t *testing.T) {
			for seed := uint64(1); seed <= 3000; seed++ {
				if _, err := runOwnership(seed, rule); err != nil {
					t.Logf("broken rule %q caught at seed %d: %.400s", rule, seed, err)
					return
				}
			}
			t.Fatalf("broken rule %q was not caught in 3000 seeds", rule)
		})
	}
}
