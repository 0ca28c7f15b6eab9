package directory

// The fencing rules, apart from I/O. The Lua scripts in scripts.go are the
// production implementation (Redis runs them atomically); this file is their
// specification, written so it can be checked exhaustively: the property test
// runs random schedules through both and requires identical verdicts and
// identical records after every step (TestScriptsAgreeWithModel).
//
// The model knows nothing of time, sockets or encryption: a record is the
// fields the scripts compare, and "is the owner's lease live" is an input.

// verdict is a script's answer. The strings are what the Lua returns.
type verdict string

const (
	vOK       verdict = "OK"
	vExists   verdict = "EXISTS"   // Claim: a record is already there
	vNotFound verdict = "NOTFOUND" // no record
	vFenced   verdict = "FENCED"   // owner or epoch differ from the caller's
	vOwned    verdict = "OWNED"    // Takeover: another replica's lease is live
)

// opKind names the five writing operations.
type opKind uint8

const (
	opClaim opKind = iota
	opUpdate
	opTakeover
	opRelease
	opDelete
)

func (k opKind) String() string {
	return [...]string{"claim", "update", "takeover", "release", "delete"}[k]
}

// modelRecord is the part of a session record the rules read or write.
type modelRecord struct {
	Exists bool
	Owner  string // "" = released, any replica may take over
	Epoch  uint64
	Seq    uint64 // last acked event_seq
	Token  string // plaintext in the model
}

// modelOp is one call: who makes it, with which epoch, and what it writes.
type modelOp struct {
	Kind  opKind
	Me    string
	Epoch uint64 // Update, Release, Delete: the epoch the caller holds
	Seq   uint64 // Claim, Update
	Token string // Claim, Update ("" in Update keeps the stored token)
}

// decide applies op to r. ownerLive reports whether the lease of r.Owner
// exists; it is consulted only by a takeover of a record owned by another
// replica. It returns the new record and the verdict; a verdict other than
// vOK leaves the record unchanged.
func decide(r modelRecord, op modelOp, ownerLive bool) (modelRecord, verdict) {
	switch op.Kind {
	case opClaim:
		if r.Exists {
			return r, vExists
		}
		return modelRecord{Exists: true, Owner: op.Me, Epoch: 1, Seq: op.Seq, Token: op.Token}, vOK
	}
	if !r.Exists {
		return r, vNotFound
	}
	switch op.Kind {
	case opTakeover:
		if r.Owner != "" && r.Owner != op.Me && ownerLive {
			return r, vOwned
		}
		r.Owner = op.Me
		r.Epoch++
		return r, vOK
	}
	// An update finding the record below the epoch its caller holds finds
	// a stale owner's restore after a flush (epochs only grow otherwise):
	// NOTFOUND, not FENCED, so that the caller restores its record (the
	// higher epoch wins) instead of giving the session up.
	if op.Kind == opUpdate && op.Epoch > r.Epoch {
		return r, vNotFound
	}
	// Update, Release and Delete need the caller to be the owner at its epoch.
	// A released record (Owner "") fences its former owner too.
	if r.Owner != op.Me || r.Epoch != op.Epoch {
		return r, vFenced
	}
	switch op.Kind {
	case opUpdate:
		if op.Token != "" {
			r.Token = op.Token
		}
		r.Seq = max(r.Seq, op.Seq) // the acked seq never goes backwards
	case opRelease:
		r.Owner = ""
	case opDelete:
		r = modelRecord{}
	}
	return r, vOK
}
