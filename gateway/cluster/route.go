package cluster

import "time"

// Dir says what the directory said about a session.
type Dir uint8

const (
	// DirUnavailable: Redis could not be asked (down, timed out).
	DirUnavailable Dir = iota
	// DirNone: no record (never existed, closed, expired).
	DirNone
	// DirRecord: a record; see Facts.Owner, OwnerLive, OwnerAddr.
	DirRecord
)

// Facts are what a replica knows about a call for a session.
type Facts struct {
	Self      string // this replica's instance id
	Local     bool   // this replica holds the session and its upstream is live
	Forwarded bool   // the call came from a peer (hop header, authenticated)
	ReadOnly  bool   // a probe: may read the directory, never take over

	Dir           Dir
	CallerMatches bool   // the record's caller is the call's caller
	Owner         string // record owner; "" = released for handoff
	OwnerLive     bool   // the owner's lease exists
	OwnerAddr     string // the owner's advertised address ("" when unknown)

	// OwnerSilent: a forward from this replica to the owner's address got
	// no response header within the first-byte bound, and none was
	// answered since (the owner is frozen, overloaded or gone).
	OwnerSilent bool
	// OwnerLeaseLeft is what is left of the owner's lease (0: unknown).
	OwnerLeaseLeft time.Duration
	// FirstByte is this replica's first-byte bound on a forward
	// (ClusterConfig.PeerFirstByte; 0: none).
	FirstByte time.Duration
}

// Action is what to do with the call.
type Action uint8

const (
	// Serve: run the handler here (the session is local, or the handler's
	// own NOT_FOUND is the right answer).
	Serve Action = iota
	// NotFound: no such session for this caller: run the handler, which
	// answers NOT_FOUND (never reveal another caller's session).
	NotFound
	// Forward: send the call to the owner at Facts.OwnerAddr.
	Forward
	// TakeOver: claim the session by epoch (directory Takeover), resume the
	// upstream session here, then serve.
	TakeOver
	// Unavailable: the directory cannot be read: UNAVAILABLE naming it.
	Unavailable
	// Misrouted: a forwarded call reached a replica that is not the owner
	// while the owner is alive: UNAVAILABLE with the owner as a hint (a
	// forwarded call is never forwarded again).
	Misrouted
	// Status: a probe for a session held elsewhere: answer from the record.
	Status
	// Await: the owner is silent and its lease ends before a forward's
	// first-byte bound would: wait for the lease to lapse (the session is
	// then taken over) and route the call again, instead of a forward the
	// silent owner would hold past the lease's end.
	Await
)

func (a Action) String() string {
	return [...]string{"serve", "not_found", "forward", "take_over", "unavailable", "misrouted", "status", "await"}[a]
}

// Route decides what a replica does with a call for a session.
func Route(f Facts) Action {
	switch {
	case f.Local:
		return Serve
	case f.Dir == DirUnavailable:
		return Unavailable
	case f.Dir == DirNone, !f.CallerMatches:
		return NotFound
	case f.ReadOnly:
		return Status
	case f.Owner != "" && f.Owner != f.Self && f.OwnerLive && f.OwnerAddr != "":
		if f.Forwarded {
			return Misrouted
		}
		if f.OwnerSilent && f.OwnerLeaseLeft > 0 && f.FirstByte > 0 && f.OwnerLeaseLeft <= f.FirstByte {
			return Await
		}
		return Forward
	case f.Owner != "" && f.Owner != f.Self && f.OwnerLive:
		// Live lease without an address: nobody to forward to, and the
		// session must not be taken from a live owner.
		return Misrouted
	default:
		// Released (""), ours on record but not held (a restart with the
		// same instance id, a failed adoption), or the owner's lease is
		// gone: take it over. The directory's epoch decides races.
		return TakeOver
	}
}
