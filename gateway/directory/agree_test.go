package directory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

// TestScriptsAgreeWithModel runs random schedules through the Lua scripts on
// a real Redis and through decide, and requires the same verdict and the
// same record after every step, and the invariants of the model to hold.
// Leases are written and deleted directly so the schedule controls them.
func TestScriptsAgreeWithModel(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	rc := raw(t, srv)
	for _, seed := range seeds(t, 20) {
		if err := agree(ctx, t, srv, rc, seed, 200); err != nil {
			t.Fatalf("seed %d (replay: DIRECTORY_SEED=%d go test -run TestScriptsAgreeWithModel): %v", seed, seed, err)
		}
	}
}

func agree(ctx context.Context, t *testing.T, srv *redistest.Server, rc *redis.Client, seed uint64, steps int) error {
	prefix := "agree" + strconv.FormatUint(seed, 10) + ":"
	dirs := map[string]*directory.Directory{}
	for _, r := range replicas {
		dirs[r] = open(t, srv, r, func(c *directory.Config) { c.Prefix = prefix })
	}
	d0 := dirs["a"]
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := newWorld()
	setLease := func(r string, live bool) error {
		if live {
			return rc.HSet(ctx, d0.LeaseKey(r), "addr", "addr-"+r, "incarnation", "test").Err()
		}
		return rc.Del(ctx, d0.LeaseKey(r)).Err()
	}
	for r, live := range w.live {
		if err := setLease(r, live); err != nil {
			return err
		}
	}
	for i := range steps {
		st := w.next(rng)
		if st.Lease != "" {
			if err := setLease(st.Lease, !w.live[st.Lease]); err != nil {
				return err
			}
			_ = w.check(st, rec{}, "")
			continue
		}
		id := "s" + strconv.Itoa(st.Session)
		prev := w.recs[st.Session]
		want, wantV := directory.Decide(prev, st.Op, prev.Owner != "" && w.live[prev.Owner])

		d, op := dirs[st.Op.Me], st.Op
		var err error
		var tr directory.Record
		switch op.Kind {
		case directory.OpClaim:
			_, err = d.Claim(ctx, directory.Session{ID: id, ResumeToken: op.Token, AckedSeq: op.Seq})
		case directory.OpUpdate:
			err = d.Update(ctx, id, op.Epoch, directory.Change{ResumeToken: op.Token, AckedSeq: op.Seq})
		case directory.OpTakeover:
			tr, err = d.Takeover(ctx, id)
		case directory.OpRelease:
			err = d.Release(ctx, id, op.Epoch)
		case directory.OpDelete:
			err = d.Delete(ctx, id, op.Epoch)
		}
		gotV := verdictOf(t, err)
		got, rerr := readRecord(ctx, rc, d0, id)
		if rerr != nil {
			return rerr
		}
		if gotV != wantV || got != want {
			return fmt.Errorf("step %d (%s) on %+v: Lua %s %+v, model %s %+v", i, st, prev, gotV, got, wantV, want)
		}
		if op.Kind == directory.OpTakeover && gotV == directory.VOK &&
			(tr.Epoch != want.Epoch || tr.Owner != want.Owner || tr.ResumeToken != want.Token || tr.AckedSeq != want.Seq) {
			return fmt.Errorf("step %d (%s): Takeover returned %+v, model %+v", i, st, tr, want)
		}
		if err := w.check(st, got, gotV); err != nil {
			return fmt.Errorf("step %d (%s): %w", i, st, err)
		}
	}
	return nil
}

// readRecord reads a record the way the model sees it, token decrypted.
func readRecord(ctx context.Context, rc *redis.Client, d *directory.Directory, id string) (rec, error) {
	h, err := rc.HGetAll(ctx, d.SessionKey(id)).Result()
	if err != nil || len(h) == 0 {
		return rec{}, err
	}
	r := rec{Exists: true, Owner: h["owner"]}
	r.Epoch, _ = strconv.ParseUint(h["epoch"], 10, 64)
	r.Seq, _ = strconv.ParseUint(h["seq"], 10, 64)
	r.Token, err = d.Keys().Open(id, h["token"])
	return r, err
}
