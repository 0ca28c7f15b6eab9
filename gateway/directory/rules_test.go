package directory_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
)

type (
	rec = directory.ModelRecord
	mop = directory.ModelOp
)

// TestDecide is the rule table.
func TestDecide(t *testing.T) {
	owned := rec{Exists: true, Owner: "a", Epoch: 3, Seq: 10, Token: "t3"}
	released := owned
	released.Owner = ""
	tests := []struct {
		name      string
		r         rec
		op        mop
		ownerLive bool
		want      rec
		v         directory.Verdict
	}{
		{"claim new", rec{}, mop{Kind: directory.OpClaim, Me: "a", Seq: 2, Token: "t"}, false, rec{Exists: true, Owner: "a", Epoch: 1, Seq: 2, Token: "t"}, directory.VOK},
		{"claim exists", owned, mop{Kind: directory.OpClaim, Me: "b"}, false, owned, directory.VExists},
		{"claim exists, own", owned, mop{Kind: directory.OpClaim, Me: "a"}, true, owned, directory.VExists},
		{"update", owned, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 3, Seq: 12, Token: "t4"}, true, rec{Exists: true, Owner: "a", Epoch: 3, Seq: 12, Token: "t4"}, directory.VOK},
		{"update keeps token", owned, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 3, Seq: 11}, true, rec{Exists: true, Owner: "a", Epoch: 3, Seq: 11, Token: "t3"}, directory.VOK},
		{"update seq backwards", owned, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 3, Seq: 4, Token: "t4"}, true, rec{Exists: true, Owner: "a", Epoch: 3, Seq: 10, Token: "t4"}, directory.VOK},
		{"update stale epoch", owned, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 2}, true, owned, directory.VFenced},
		// A record below the caller's epoch: a stale owner's restore after a flush.
		{"update future epoch", owned, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 4}, true, owned, directory.VNotFound},
		{"update future epoch, other owner", owned, mop{Kind: directory.OpUpdate, Me: "b", Epoch: 4}, true, owned, directory.VNotFound},
		{"update other replica", owned, mop{Kind: directory.OpUpdate, Me: "b", Epoch: 3}, true, owned, directory.VFenced},
		{"update released", released, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 3}, false, released, directory.VFenced},
		{"update missing", rec{}, mop{Kind: directory.OpUpdate, Me: "a", Epoch: 1}, false, rec{}, directory.VNotFound},
		{"takeover live owner", owned, mop{Kind: directory.OpTakeover, Me: "b"}, true, owned, directory.VOwned},
		{"takeover dead owner", owned, mop{Kind: directory.OpTakeover, Me: "b"}, false, rec{Exists: true, Owner: "b", Epoch: 4, Seq: 10, Token: "t3"}, directory.VOK},
		{"takeover own", owned, mop{Kind: directory.OpTakeover, Me: "a"}, true, rec{Exists: true, Owner: "a", Epoch: 4, Seq: 10, Token: "t3"}, directory.VOK},
		{"takeover released", released, mop{Kind: directory.OpTakeover, Me: "b"}, false, rec{Exists: true, Owner: "b", Epoch: 4, Seq: 10, Token: "t3"}, directory.VOK},
		{"takeover missing", rec{}, mop{Kind: directory.OpTakeover, Me: "b"}, false, rec{}, directory.VNotFound},
		{"release", owned, mop{Kind: directory.OpRelease, Me: "a", Epoch: 3}, true, released, directory.VOK},
		{"release stale", owned, mop{Kind: directory.OpRelease, Me: "a", Epoch: 2}, true, owned, directory.VFenced},
		{"release other", owned, mop{Kind: directory.OpRelease, Me: "b", Epoch: 3}, true, owned, directory.VFenced},
		{"release twice", released, mop{Kind: directory.OpRelease, Me: "a", Epoch: 3}, false, released, directory.VFenced},
		{"delete", owned, mop{Kind: directory.OpDelete, Me: "a", Epoch: 3}, true, rec{}, directory.VOK},
		{"delete stale", owned, mop{Kind: directory.OpDelete, Me: "a", Epoch: 1}, true, owned, directory.VFenced},
		{"delete released", released, mop{Kind: directory.OpDelete, Me: "a", Epoch: 3}, false, released, directory.VFenced},
		{"delete missing", rec{}, mop{Kind: directory.OpDelete, Me: "a", Epoch: 3}, false, rec{}, directory.VNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, v := directory.Decide(tt.r, tt.op, tt.ownerLive)
			if got != tt.want || v != tt.v {
				t.Fatalf("decide = %+v, %s; want %+v, %s", got, v, tt.want, tt.v)
			}
		})
	}
}

// A schedule: random operations by a few replicas on a few sessions, and
// leases coming and going.

var replicas = []string{"a", "b", "c"}

const nSessions = 2

type step struct {
	Session int
	Op      mop
	Lease   string // non-empty: toggle this replica's lease instead of an operation
}

func (s step) String() string {
	if s.Lease != "" {
		return "toggle lease " + s.Lease
	}
	return fmt.Sprintf("s%d %s by %s epoch=%d seq=%d token=%q", s.Session, s.Op.Kind, s.Op.Me, s.Op.Epoch, s.Op.Seq, s.Op.Token)
}

// world is the state a schedule generator and the invariant checker keep.
type world struct {
	recs   [nSessions]rec
	grants [nSessions]map[string]uint64 // replica → epoch of its last successful claim/takeover
	live   map[string]bool
	tokens int
}

func newWorld() *world {
	w := &world{live: map[string]bool{"a": true, "b": true, "c": false}}
	for i := range w.grants {
		w.grants[i] = map[string]uint64{}
	}
	return w
}

func (w *world) next(rng *rand.Rand) step {
	if rng.IntN(8) == 0 {
		return step{Lease: replicas[rng.IntN(len(replicas))]}
	}
	s := rng.IntN(nSessions)
	r := w.recs[s]
	me := replicas[rng.IntN(len(replicas))]
	op := mop{Kind: directory.OpKind(rng.IntN(5)), Me: me}
	switch p := rng.IntN(10); {
	case p < 6:
		op.Epoch = w.grants[s][me]
	case p < 8:
		op.Epoch = r.Epoch
	default:
		op.Epoch = uint64(rng.IntN(int(r.Epoch) + 2))
	}
	op.Seq = uint64(max(0, int(r.Seq)+rng.IntN(9)-3))
	if op.Kind == directory.OpClaim || rng.IntN(2) == 0 {
		w.tokens++
		op.Token = "tok-" + strconv.Itoa(w.tokens)
	}
	return step{Session: s, Op: op}
}

// check applies a step's outcome to the world and checks the invariants the
// rules exist for, stated without reference to decide itself.
func (w *world) check(st step, next rec, v directory.Verdict) error {
	if st.Lease != "" {
		w.live[st.Lease] = !w.live[st.Lease]
		return nil
	}
	s, op := st.Session, st.Op
	prev := w.recs[s]
	defer func() { w.recs[s] = next }()
	if v != directory.VOK {
		if next != prev {
			return fmt.Errorf("verdict %s changed the record: %+v → %+v", v, prev, next)
		}
		return nil
	}
	switch op.Kind {
	case directory.OpClaim:
		if prev.Exists || next.Epoch != 1 || next.Owner != op.Me {
			return fmt.Errorf("claim granted over %+v → %+v", prev, next)
		}
		clear(w.grants[s])
		w.grants[s][op.Me] = 1
	case directory.OpTakeover:
		if !prev.Exists || (prev.Owner != "" && prev.Owner != op.Me && w.live[prev.Owner]) {
			return fmt.Errorf("takeover by %s granted while owner %q is live", op.Me, prev.Owner)
		}
		if next.Owner != op.Me || next.Epoch != prev.Epoch+1 || next.Token != prev.Token || next.Seq != prev.Seq {
			return fmt.Errorf("takeover %+v → %+v", prev, next)
		}
		w.grants[s][op.Me] = next.Epoch
	default: // update, release, delete: only the holder of the latest grant
		if prev.Owner != op.Me || w.grants[s][op.Me] != prev.Epoch || op.Epoch != prev.Epoch {
			return fmt.Errorf("%s by %s at epoch %d (granted %d) accepted on %+v", op.Kind, op.Me, op.Epoch, w.grants[s][op.Me], prev)
		}
		switch op.Kind {
		case directory.OpUpdate:
			if next.Owner != prev.Owner || next.Epoch != prev.Epoch {
				return fmt.Errorf("update moved owner/epoch: %+v → %+v", prev, next)
			}
			if op.Token != "" && next.Token != op.Token || op.Token == "" && next.Token != prev.Token {
				return fmt.Errorf("update token: %+v → %+v", prev, next)
			}
		case directory.OpRelease:
			if next.Owner != "" || next.Epoch != prev.Epoch || next.Token != prev.Token || next.Seq != prev.Seq {
				return fmt.Errorf("release %+v → %+v", prev, next)
			}
			delete(w.grants[s], op.Me) // given up
		case directory.OpDelete:
			if next.Exists {
				return fmt.Errorf("delete left %+v", next)
			}
			clear(w.grants[s])
		}
	}
	if prev.Exists && next.Exists && next.Seq < prev.Seq {
		return fmt.Errorf("acked seq went backwards: %d → %d", prev.Seq, next.Seq)
	}
	// Single writer: nobody but the owner holds a grant at the current epoch.
	for r, e := range w.grants[s] {
		if next.Exists && r != next.Owner && e >= next.Epoch {
			return fmt.Errorf("replica %s holds epoch %d, record %+v", r, e, next)
		}
	}
	return nil
}

type decideFunc func(rec, mop, bool) (rec, directory.Verdict)

// runModel runs one schedule through decide; it returns the first
// violation, with the step that caused it.
func runModel(seed uint64, steps int, decide decideFunc) error {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := newWorld()
	for i := range steps {
		st := w.next(rng)
		var next rec
		var v directory.Verdict
		if st.Lease == "" {
			prev := w.recs[st.Session]
			next, v = decide(prev, st.Op, prev.Owner != "" && w.live[prev.Owner])
		}
		if err := w.check(st, next, v); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, st, err)
		}
	}
	return nil
}

// seeds returns the seeds to run: DIRECTORY_SEED replays one.
func seeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv("DIRECTORY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DIRECTORY_SEED: %v", err)
		}
		return []uint64{v}
	}
	base := uint64(time.Now().UnixNano())
	out := make([]uint64, n)
	for i := range out {
		out[i] = base + uint64(i)
	}
	return out
}

// TestModelInvariants: random schedules through the rules keep every
// invariant.
func TestModelInvariants(t *testing.T) {
	for _, seed := range seeds(t, 500) {
		if err := runModel(seed, 400, directory.Decide); err != nil {
			t.Fatalf("seed %d (replay: DIRECTORY_SEED=%d go test -run TestModelInvariants): %v", seed, seed, err)
		}
	}
}

// TestModelCatchesBrokenRules: the invariants and schedules are strong enough
// to catch a deliberately broken rule.
func TestModelCatchesBrokenRules(t *testing.T) {
	broken := map[string]decideFunc{
		"takeover ignores the owner's lease": func(r rec, op mop, live bool) (rec, directory.Verdict) {
			return directory.Decide(r, op, false)
		},
		"update ignores the epoch": func(r rec, op mop, live bool) (rec, directory.Verdict) {
			if op.Kind == directory.OpUpdate && r.Exists {
				op.Epoch = r.Epoch
			}
			return directory.Decide(r, op, live)
		},
		"update lets the seq go back": func(r rec, op mop, live bool) (rec, directory.Verdict) {
			n, v := directory.Decide(r, op, live)
			if op.Kind == directory.OpUpdate && v == directory.VOK {
				n.Seq = op.Seq
			}
			return n, v
		},
		"takeover keeps the epoch": func(r rec, op mop, live bool) (rec, directory.Verdict) {
			n, v := directory.Decide(r, op, live)
			if op.Kind == directory.OpTakeover && v == directory.VOK {
				n.Epoch--
			}
			return n, v
		},
		"release keeps the owner": func(r rec, op mop, live bool) (rec, directory.Verdict) {
			n, v := directory.Decide(r, op, live)
			if op.Kind == directory.OpRelease && v == directory.VOK {
				n.Owner = r.Owner
			}
			return n, v
		},
	}
	for name, f := range broken {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(200) {
				if err := runModel(seed, 400, f); err != nil {
					t.Logf("caught at seed %d: %v", seed, err)
					return
				}
			}
			t.Fatal("broken rule not caught in 200 schedules")
		})
	}
}
