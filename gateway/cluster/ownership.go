package cluster

import (
	"slices"
	"time"
)

// OwnershipConfig is the data an Ownership is made of.
type OwnershipConfig struct {
	Self     string        // this replica's instance id
	LeaseTTL time.Duration // the directory's lease lifetime
	// Grace: after its own outage (a directory operation failed, its lease
	// lapsed, the directory was flushed) a replica judges no other
	// replica's lease for this long after re-establishing its own
	// (default LeaseTTL: every live peer refreshes within LeaseTTL/3).
	Grace time.Duration
	// Margin is taken off this replica's own lease validity, for clock
	// rate differences between the replica and Redis (default LeaseTTL/10).
	Margin time.Duration

	// brokenRule disables one rule; only tests set it (export_test.go),
	// to show that the property test catches its absence.
	brokenRule string
}

// Work is one directory write the replica's loop should make now.
type Work struct {
	ID    string
	Kind  WorkKind
	Epoch uint64 // Confirm, WriteToken, Restore: the epoch held
	// IfAbsent (Restore): create the record only where none is, never
	// replace one at a lower epoch (a held claim not confirmed since a
	// lapse: the previous owner's own restore wins).
	IfAbsent bool
	gen      uint64 // the replica's generation when the write was decided
}

// WorkKind names a directory write.
type WorkKind uint8

const (
	// Claim creates the record of a session opened here (epoch 1).
	Claim WorkKind = iota
	// WriteToken writes a welcome's resume token (epoch-checked).
	WriteToken
	// Confirm re-confirms the epoch after a lapse or outage (an
	// epoch-checked write of nothing).
	Confirm
	// Restore re-creates a record a flushed directory lost, at the epoch
	// held, unless a record is there.
	Restore
)

func (k WorkKind) String() string {
	return [...]string{"claim", "write_token", "confirm", "restore"}[k]
}

// Result is what the directory answered to a write.
type Result uint8

const (
	// OK: written.
	OK Result = iota
	// Unreachable: the directory could not be asked (the write may or may
	// not have happened).
	Unreachable
	// Fenced: another replica holds the record (a moved epoch; for Claim
	// and Restore, a record already there that is not ours).
	Fenced
	// Missing: no record (NotFound).
	Missing
)

// Verdict is whether a replica may take a session over now.
type Verdict uint8

const (
	// Take: take it over (the directory's epoch decides any race).
	Take Verdict = iota
	// Live: its owner's lease is live: forward to the owner.
	Live
	// NotYet: its owner's lease is gone, but not for a full LeaseTTL as
	// this replica observed it, or this replica is itself recovering
	// (outage, grace, lapsed lease): UNAVAILABLE, retry.
	NotYet
)

// TakeReason is why a takeover is allowed.
type TakeReason uint8

const (
	ReasonReleased TakeReason = iota // handed off
	ReasonDead                       // owner's lease absent a full TTL
	ReasonSelf                       // ours on record, not held (a restart)
)

func (r TakeReason) String() string { return [...]string{"released", "dead", "self"}[r] }

// PeerLease is what the directory said of another replica's lease.
type PeerLease struct {
	Instance string
	Live     bool
	TTLLeft  time.Duration // remaining lease lifetime when Live
}

// Stats count the core's decisions (for metrics).
type Stats struct {
	Lapses      uint64    // own lease found lapsed: writes stop until re-confirmed
	Outages     uint64    // directory outages begun (a lease refresh failed)
	OpFailures  uint64    // other directory operations that failed
	GraceWaits  uint64    // graces begun (after an outage, a lapse, a flush)
	Flushes     uint64    // directory flushes or empty restarts detected
	NotYet      uint64    // takeovers refused: the owner's absence not yet judged
	Fenced      uint64    // sessions detached: another replica holds them
	Vanished    uint64    // sessions detached: the record is gone and no flush explains it
	Takeovers   [3]uint64 // sessions claimed (held, not yet serving), by reason
	Resumed     uint64    // held sessions resumed upstream: serving
	ResumeLost  uint64    // held sessions whose resume the runtime refused: lost
	ResumeGiven uint64    // held sessions given back (released) when their resume failed
	Confirms    uint64    // epoch confirmations after a lapse
	Restores    uint64    // records re-created after a flush
	ResumeHolds uint64    // upstream resumes held back (token not recorded, lease not confirmed)
}

// Ownership is one replica's ownership state: its own lease, what it has
// seen of its peers' leases, and the sessions it owns. It is sans-IO: the
// caller feeds it facts with the time they were observed (a monotonic
// clock), carries out the writes it asks for (Due) and reports their
// results. It is not safe for concurrent use: the caller serialises calls.
// The rules are in doc.go, "Ownership".
type Ownership struct {
	cfg OwnershipConfig

	leaseStart time.Time // start of the last successful lease refresh (zero: never)
	outage     bool      // a directory operation failed since the last lease refresh
	lapsed     bool      // the lapse of leaseStart has been noted (gen bumped)
	graceUntil time.Time // no judging of peers before this
	gen        uint64    // bumped on every lapse, outage and flush: sessions must re-confirm
	lapses     uint64    // own lease lapses so far (a held claim made before one is suspect)
	marker     string    // the directory's incarnation marker last seen ("" = none yet)
	peers      map[string]*peerView
	sessions   map[string]*ownedSession
	stats      Stats
}

type peerView struct {
	live      bool
	lastAlive time.Time // when its owner last refreshed, as inferred by this replica
}

type ownedSession struct {
	epoch        uint64 // 0: not claimed (yet)
	gen          uint64 // the replica's gen at the last epoch-checked write that succeeded
	tokenPending bool   // a welcome's token not yet written
	missing      bool   // a write found no record: a flush (restore) or gone (detach)
	restore      bool   // a flush was detected: re-create the record
	suspect      bool   // unconfirmed when the flush was detected: confirm after the grace
	claimUnsure  bool   // a claim went unanswered: the record may exist, naming this replica
	// held: claimed by a takeover (the directory names this replica at
	// epoch) but not yet resumed upstream: no transport, nothing served;
	// its record is this replica's to keep (confirm, restore) all the
	// same, until Resumed or ResumeFailed.
	held     bool
	lapseAt  uint64 // held: the replica's lapses when it was claimed
	ifAbsent bool   // restore only where no record is (a suspect held claim)
}

// NewOwnership returns the ownership state of a replica that has not yet
// held its lease.
func NewOwnership(cfg OwnershipConfig) *Ownership {
	if cfg.Grace == 0 {
		cfg.Grace = cfg.LeaseTTL
	}
	if cfg.Margin == 0 {
		cfg.Margin = cfg.LeaseTTL / 10
	}
	return &Ownership{cfg: cfg, peers: make(map[string]*peerView), sessions: make(map[string]*ownedSession), gen: 1}
}

// Stats returns the decision counts so far.
func (o *Ownership) Stats() Stats { return o.stats }

// Valid says this replica's own lease is known to be live at now (its
// last refresh began less than LeaseTTL − Margin ago).
func (o *Ownership) Valid(now time.Time) bool {
	o.noteLapse(now)
	return !o.leaseStart.IsZero() && !o.lapsed
}

func (o *Ownership) noteLapse(now time.Time) {
	if o.leaseStart.IsZero() || o.lapsed {
		return
	}
	if now.Sub(o.leaseStart) >= o.cfg.LeaseTTL-o.cfg.Margin {
		o.lapsed = true
		o.lapses++
		o.stats.Lapses++
		if o.cfg.brokenRule != "no-lapse" {
			o.gen++
		}
	}
}

// LeaseRefreshed: the refresh that began at start succeeded at now, and the
// directory's incarnation marker is marker.
func (o *Ownership) LeaseRefreshed(start, now time.Time, marker string) {
	o.noteLapse(now)
	// No grace at the first refresh: a peer first seen now is presumed
	// alive now anyway (PeersSeen), which is all a grace would do.
	recovering := o.outage || o.lapsed
	unheld := o.lapsed || o.leaseStart.IsZero()
	if start.After(o.leaseStart) {
		o.leaseStart = start
	}
	if unheld && o.cfg.brokenRule != "no-lapse" {
		// Back from a lapse: whatever was confirmed during it is void
		// (the lease was absent: a taker may have moved the epoch after
		// the write).
		o.gen++
	}
	o.lapsed = false
	o.noteLapse(now) // a refresh that took too long is lapsed already
	o.outage = false
	o.MarkerSeen(now, marker)
	if recovering {
		o.beginGrace(now)
	}
}

// LeaseFailed: a lease refresh failed (or was refused: another process
// holds the lease). The lease refresh, every LeaseTTL/3, is the replica's
// probe of the directory: an outage is what it sees.
func (o *Ownership) LeaseFailed(now time.Time) {
	o.noteLapse(now)
	if !o.outage {
		// Writes go on while the lease is valid (nobody may take these
		// sessions before it lapses); judging peers stops until a grace
		// after the next refresh.
		o.outage = true
		o.stats.Outages++
	}
}

// DirectoryFailed: another directory operation could not be carried out.
// One failure is no outage (a lost reply, a slow answer); an outage long
// enough to matter fails the next lease refresh too.
func (o *Ownership) DirectoryFailed(now time.Time) {
	o.noteLapse(now)
	o.stats.OpFailures++
}

func (o *Ownership) beginGrace(now time.Time) {
	o.stats.GraceWaits++
	if o.cfg.brokenRule != "no-grace" {
		o.graceUntil = now.Add(o.cfg.Grace)
	}
	if o.cfg.brokenRule == "no-grace" {
		return
	}
	// Evidence gathered before the outage is void: every peer is
	// presumed alive now.
	for _, p := range o.peers {
		p.live, p.lastAlive = true, now
	}
}

// MarkerSeen: the directory's incarnation marker (created by the first
// replica that finds it missing) read at now. A marker other than the one
// last seen means the directory lost its data: every owned record is
// restored at once, and the peers' leases are judged only after a grace.
func (o *Ownership) MarkerSeen(now time.Time, marker string) {
	switch {
	case marker == "" || marker == o.marker:
	case o.marker == "":
		o.marker = marker
	default:
		o.marker = marker
		o.stats.Flushes++
		valid := o.Valid(now)
		for _, s := range o.sessions {
			if s.epoch == 0 {
				// A claim that went unanswered may have created the
				// record, and another replica may have taken it over
				// since; the flush erased both. The claim made again
				// succeeds, but it serves only after the grace and a
				// confirmation, as a restored record does.
				if s.claimUnsure && o.cfg.brokenRule != "no-restore" {
					s.suspect = true
				}
				continue
			}
			// Not confirmed since this replica's last lapse: it may have
			// been taken over before the flush erased the epochs. It
			// restores its record (a higher epoch restored by the taker
			// wins), but serves only after the grace and a confirmation,
			// by when the runtime has cut its transport if it was.
			suspect := s.gen != o.gen || !valid
			if s.held {
				// A held claim is unconfirmed only by a lapse since
				// it was made (a flush before this one bumps the gen
				// too, and must not cost the claim).
				suspect = s.lapseAt != o.lapses || !valid
				if o.cfg.brokenRule == "no-held-restore" {
					continue // as if unknown: its next write finds no record
				}
				// Claimed, not resumed, and not confirmed since a
				// lapse: the previous owner may be live again and
				// restore its own record, its transport never cut (no
				// resume has moved the runtime's token). A restore at
				// this claim's higher epoch would take the session
				// from under it: the claim restores only where no
				// record is (and is fenced, dropped, where one is).
				s.ifAbsent = suspect
			}
			if o.cfg.brokenRule != "no-restore" {
				// A held session (claimed, its resume queued) too: its
				// record is the only trace of it in the directory.
				s.restore = true
			}
			s.suspect = suspect
		}
		o.gen++
		o.beginGrace(now)
	}
	// A write that found no record under an unchanged marker: the record
	// really is gone (closed elsewhere, expired). Detached by Due.
}

// Marker is the incarnation marker last seen.
func (o *Ownership) Marker() string { return o.marker }

// PeersSeen: the leases of the replicas the directory knows, read at now.
func (o *Ownership) PeersSeen(now time.Time, peers []PeerLease) {
	judging := o.judging(now)
	for _, pl := range peers {
		if pl.Instance == o.cfg.Self {
			continue
		}
		p := o.peers[pl.Instance]
		if p == nil {
			p = &peerView{lastAlive: now}
			o.peers[pl.Instance] = p
		}
		p.live = pl.Live
		switch {
		case !judging && o.cfg.brokenRule != "no-grace":
			p.lastAlive = now
		case pl.Live:
			at := now.Add(pl.TTLLeft - o.cfg.LeaseTTL)
			if o.cfg.brokenRule == "no-full-ttl" {
				at = now.Add(-o.cfg.LeaseTTL)
			}
			if at.After(p.lastAlive) {
				p.lastAlive = at
			}
		}
	}
}

func (o *Ownership) judging(now time.Time) bool {
	if o.cfg.brokenRule == "no-grace" {
		return o.Valid(now)
	}
	return o.Valid(now) && !o.outage && !now.Before(o.graceUntil)
}

// Dead returns, sorted, the replicas whose sessions this replica may take
// over at now: their lease was absent when last read and, as this replica
// observed it, nobody has refreshed it for a full LeaseTTL.
func (o *Ownership) Dead(now time.Time) []string {
	if !o.judging(now) {
		return nil
	}
	var out []string
	for inst, p := range o.peers {
		if !p.live && o.deadLocked(p, now) {
			out = append(out, inst)
		}
	}
	slices.Sort(out)
	return out
}

// NextJudgement is when a peer seen live will be judged gone if it does
// not refresh its lease meanwhile: the earliest last refresh (as inferred)
// plus LeaseTTL, over the peers whose lease was live when last read (zero:
// none). A sweep run then, rather than up to a sweep period later, takes a
// dead replica's sessions over as soon as the rules allow.
func (o *Ownership) NextJudgement() time.Time {
	var next time.Time
	for _, p := range o.peers {
		if !p.live {
			continue
		}
		if at := p.lastAlive.Add(o.cfg.LeaseTTL); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

func (o *Ownership) deadLocked(p *peerView, now time.Time) bool {
	if o.cfg.brokenRule == "no-full-ttl" {
		return true
	}
	return now.Sub(p.lastAlive) >= o.cfg.LeaseTTL
}

// MayTakeOver decides whether a session whose record names owner (""
// = released) may be taken over at now; ownerLive is the directory's
// answer for the owner's lease.
func (o *Ownership) MayTakeOver(owner string, ownerLive bool, now time.Time) (Verdict, TakeReason) {
	switch {
	case owner != "" && owner != o.cfg.Self && ownerLive:
		return Live, 0
	case !o.Valid(now) && o.cfg.brokenRule != "no-lapse":
		// A replica that cannot show it is live takes nothing: it may be
		// the one cut off.
		o.stats.NotYet++
		return NotYet, 0
	case owner == "":
		return Take, ReasonReleased
	case owner == o.cfg.Self:
		return Take, ReasonSelf
	}
	if !o.judging(now) {
		o.stats.NotYet++
		return NotYet, 0
	}
	p := o.peers[owner]
	if p == nil {
		// Never seen: start observing now.
		o.peers[owner] = &peerView{lastAlive: now}
		o.stats.NotYet++
		return NotYet, 0
	}
	p.live = false
	if !o.deadLocked(p, now) {
		o.stats.NotYet++
		return NotYet, 0
	}
	return Take, ReasonDead
}

// Opened: a session opened here, not yet claimed.
func (o *Ownership) Opened(id string) {
	if o.sessions[id] == nil {
		o.sessions[id] = &ownedSession{}
	}
}

// Claimed: this replica took the session over at epoch (the directory's
// compare-and-set, checked against the incarnation marker, succeeded) and
// has not yet resumed it upstream: it is held, not serving, until Resumed
// or ResumeFailed. Its record is kept like any other (a flush restores
// it). A marker other than the one last seen means the directory lost its
// data between the claim and now, and this replica has learnt it already:
// the record is restored all the same (unconfirmed if the lease has lapsed
// meanwhile).
func (o *Ownership) Claimed(id string, epoch uint64, reason TakeReason, marker string, now time.Time) {
	s := &ownedSession{epoch: epoch, gen: o.gen, held: true, lapseAt: o.lapses}
	if marker != "" && o.marker != "" && marker != o.marker && o.cfg.brokenRule != "no-held-restore" {
		s.restore = true
		s.suspect = !o.Valid(now)
	}
	o.sessions[id] = s
	o.stats.Takeovers[reason]++
}

// Resumed: the held session's upstream resume was welcomed: it is served
// from now on (MayServe decides each write). It returns false when the
// session is no longer this replica's (fenced, or its record vanished,
// while the resume was under way): detach the new transport silently.
func (o *Ownership) Resumed(id string) bool {
	s := o.sessions[id]
	if s == nil || !s.held {
		return false
	}
	s.held = false
	o.stats.Resumed++
	return true
}

// ResumeFailed: the resume of a held session failed (or the session was
// adopted and could not be registered): it is no longer this replica's.
// lost: the runtime refused it (token spent, window expired): the record
// is deleted. Otherwise it is given back: released for another replica to
// adopt; restoreFirst (ok) is then the restore a flush made due and not
// yet done: it is made before the release (its result is not fed back),
// or the session would vanish with its record. The caller feeds the directory's
// marker (MarkerSeen) first, so that a flush not yet seen is known.
func (o *Ownership) ResumeFailed(id string, lost bool) (restoreFirst Work, ok bool) {
	s := o.sessions[id]
	if s == nil {
		return Work{}, false
	}
	delete(o.sessions, id)
	if lost {
		o.stats.ResumeLost++
		return Work{}, false
	}
	o.stats.ResumeGiven++
	if !s.held || !s.restore || s.ifAbsent {
		// A suspect claim (a lapse since it was made) is not restored
		// to be released: released, it would be adopted at once, before
		// the grace in which the true owner's restore lands.
		return Work{}, false
	}
	return Work{ID: id, Kind: Restore, Epoch: s.epoch, gen: o.gen}, true
}

// Restoring says a restore of id's record is due (a flush erased it): a
// held session is not given back meanwhile, or its record would be lost
// with it.
func (o *Ownership) Restoring(id string) bool {
	s := o.sessions[id]
	return s != nil && s.restore
}

// Held says whether id is held (claimed, not yet resumed).
func (o *Ownership) Held(id string) bool {
	s := o.sessions[id]
	return s != nil && s.held
}

// Welcome: the upstream session of id was welcomed with a new resume token.
func (o *Ownership) Welcome(id string) {
	if s := o.sessions[id]; s != nil && s.epoch != 0 {
		s.tokenPending = true
	}
}

// Gone: the session no longer is this replica's (closed, detached,
// released).
func (o *Ownership) Gone(id string) { delete(o.sessions, id) }

// Epoch is the epoch held for id (0: not claimed, or not ours).
func (o *Ownership) Epoch(id string) uint64 {
	if s := o.sessions[id]; s != nil {
		return s.epoch
	}
	return 0
}

// Owned says whether this replica owns id.
func (o *Ownership) Owned(id string) bool { return o.sessions[id] != nil }

// Len is the number of sessions owned (claimed or not).
func (o *Ownership) Len() int { return len(o.sessions) }

// MayServe says whether this replica may serve a write (a call that
// changes the session: a submit, a cancel, a close) for id at now. An
// unclaimed session is nobody else's; a claimed one needs a live lease and
// its epoch confirmed since the last lapse, outage or flush.
func (o *Ownership) MayServe(id string, now time.Time) bool {
	s := o.sessions[id]
	if s == nil {
		return false
	}
	if s.held {
		return false // no transport yet: a call resumes it first
	}
	if s.epoch == 0 {
		// Unclaimed: nobody else can know of it. A claim that went
		// unanswered may have created the record: then it is served
		// like a claimed one, while the lease holds.
		return !s.claimUnsure || o.cfg.brokenRule == "no-lapse" || (o.Valid(now) && s.gen == o.gen)
	}
	if o.cfg.brokenRule == "no-lapse" {
		return !s.missing
	}
	return o.Valid(now) && s.gen == o.gen && !s.missing
}

// MayResume says whether the upstream session of id may be resumed now with
// the token this replica holds: never while the directory lacks that token
// (a takeover would present an older, spent one) or while the epoch is not
// confirmed (a taker may be presenting the stored token right now).
func (o *Ownership) MayResume(id string, now time.Time) bool {
	ok := o.mayResume(id, now)
	if !ok && o.sessions[id] != nil {
		o.stats.ResumeHolds++
	}
	return ok
}

// MayResumeQuiet is MayResume without counting a hold (for a caller that
// polls until it may).
func (o *Ownership) MayResumeQuiet(id string, now time.Time) bool { return o.mayResume(id, now) }

func (o *Ownership) mayResume(id string, now time.Time) bool {
	s := o.sessions[id]
	if s == nil {
		return false
	}
	if s.epoch == 0 && !s.claimUnsure {
		return true
	}
	if o.cfg.brokenRule == "no-resume-hold" {
		return true
	}
	if s.held {
		// The first resume of a claimed session: its record confirmed
		// in this gen and present (restored, after a flush), so that
		// the welcome's token can be recorded.
		return s.epoch != 0 && !s.tokenPending && !s.missing && !s.restore && o.Valid(now) && s.gen == o.gen
	}
	return !s.tokenPending && s.epoch != 0 && o.MayServe(id, now)
}

// Due returns the writes to make now, in a stable order: claims of opened
// sessions, restores after a flush, tokens not yet written, confirmations
// of epochs after a lapse or outage. It also returns the sessions to detach
// (their record vanished and no flush explains it).
func (o *Ownership) Due(now time.Time) (work []Work, detach []string) {
	valid := o.Valid(now)
	for id, s := range o.sessions {
		switch {
		case s.missing && !s.restore:
			detach = append(detach, id)
		case s.epoch == 0:
			work = append(work, Work{ID: id, Kind: Claim, gen: o.gen})
		case s.restore:
			// At once, lease or not: the record is missing, and the
			// higher epoch wins if a stale owner restores too.
			work = append(work, Work{ID: id, Kind: Restore, Epoch: s.epoch, IfAbsent: s.ifAbsent, gen: o.gen})
		case !valid:
			// Writes wait for the lease: a lapsed replica may have been
			// taken over, and its writes would be fenced anyway.
		case s.tokenPending:
			work = append(work, Work{ID: id, Kind: WriteToken, Epoch: s.epoch, gen: o.gen})
		case s.gen != o.gen && !(s.suspect && now.Before(o.graceUntil)):
			work = append(work, Work{ID: id, Kind: Confirm, Epoch: s.epoch, gen: o.gen})
		}
	}
	slices.SortFunc(work, func(a, b Work) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		return cmpString(a.ID, b.ID)
	})
	slices.Sort(detach)
	for _, id := range detach {
		delete(o.sessions, id)
		o.stats.Vanished++
	}
	return work, detach
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Wrote reports the result of a write (Due's, or an ack write: Confirm) of
// id made at epoch. detach says the session is no longer this replica's:
// drop it silently (never close it upstream).
func (o *Ownership) Wrote(id string, w Work, r Result, epoch uint64) (detach bool) {
	s := o.sessions[id]
	if s == nil || (w.Kind != Claim && s.epoch != w.Epoch) {
		return false
	}
	switch r {
	case OK:
		if w.Kind == Claim {
			s.epoch = epoch
		}
		if !(s.suspect && (w.Kind == Restore || w.Kind == Claim)) && w.gen == o.gen {
			// Confirmed only if no lapse began since the write was
			// decided.
			s.gen = o.gen
			s.suspect = false
		}
		s.missing = false
		if w.Kind == Restore {
			s.restore, s.ifAbsent = false, false
			o.stats.Restores++
		}
		if w.Kind == Confirm {
			o.stats.Confirms++
		}
		if w.Kind == WriteToken {
			s.tokenPending = false
		}
	case Fenced:
		delete(o.sessions, id)
		o.stats.Fenced++
		return true
	case Unreachable:
		if w.Kind == Claim && !s.claimUnsure {
			s.claimUnsure, s.gen = true, w.gen
		}
	case Missing:
		if s.restore {
			// Restore found nothing to compare with: it creates.
			return false
		}
		s.missing = true
	}
	return false
}

// TokenWork is the write of a welcome's token made at once (outside Due);
// its result goes to Wrote like any other.
func (o *Ownership) TokenWork(id string) Work {
	return Work{ID: id, Kind: WriteToken, Epoch: o.Epoch(id), gen: o.gen}
}

// ClaimWork is the claim of a session made outside Due (at once, when
// OpenSession registers it); its result goes to Wrote like any other.
func (o *Ownership) ClaimWork(id string) Work {
	return Work{ID: id, Kind: Claim, gen: o.gen}
}

// ConfirmWork is an epoch-checked write made outside Due (an acked seq);
// its result goes to Wrote like any other.
func (o *Ownership) ConfirmWork(id string) Work {
	return Work{ID: id, Kind: Confirm, Epoch: o.Epoch(id), gen: o.gen}
}

// Recovering says a lookup that found no record for a session must not be
// answered NOT_FOUND: the directory lost its data (its marker is missing,
// or younger than window) and owners may not have restored their records
// yet.
func Recovering(markerAge time.Duration, markerPresent bool, window time.Duration) bool {
	return !markerPresent || markerAge < window
}
