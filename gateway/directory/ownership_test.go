package directory_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

// TestOwnerIndex: the scripts keep the owner index: OrphansOf names a
// dead replica's sessions and the released ones, exactly, drops entries
// whose record moved or vanished, and a replica with no lease and nothing
// left leaves the registry.
func TestOwnerIndex(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, b := open(t, srv, "a"), open(t, srv, "b")
	rc := raw(t, srv)
	for _, id := range []string{"s1", "s2", "s3", "s4"} {
		if _, err := a.Claim(ctx, session(id)); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(os []directory.Orphan) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.SessionID+"/"+o.Owner)
		}
		slices.Sort(out)
		return out
	}
	got, err := b.OrphansOf(ctx, []string{"a"})
	if err != nil || !slices.Equal(ids(got), []string{"s1/a", "s2/a", "s3/a", "s4/a"}) {
		t.Fatalf("OrphansOf(a) after four claims: %v %v", ids(got), err)
	}
	if err := a.Release(ctx, "s2", 1); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "s3", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Takeover(ctx, "s4"); err != nil { // a has no lease: allowed
		t.Fatal(err)
	}
	rc.Del(ctx, a.SessionKey("s1")) // the record expired: a stale entry
	got, err = b.OrphansOf(ctx, []string{"a"})
	if err != nil || !slices.Equal(ids(got), []string{"s2/"}) {
		t.Fatalf("OrphansOf(a) after release, delete, takeover, expiry: %v %v, want only the released s2", ids(got), err)
	}
	if n := rc.SCard(ctx, "t:owned:a").Val(); n != 0 {
		t.Fatalf("a's index keeps %d stale entries", n)
	}
	if got, err := b.OrphansOf(ctx, []string{"b"}); err != nil || !slices.Equal(ids(got), []string{"s2/", "s4/b"}) {
		t.Fatalf("OrphansOf(b): %v %v", ids(got), err)
	}
	rc.SAdd(ctx, a.RegistryKey(), "a")
	if _, err := b.OrphansOf(ctx, []string{"a"}); err != nil {
		t.Fatal(err)
	}
	if rc.SIsMember(ctx, a.RegistryKey(), "a").Val() {
		t.Fatal("a replica with no lease and nothing left stays in the registry")
	}
}

// TestMarkerRestoreTakeover: after FLUSHALL the marker changes; Takeover
// is refused (ErrFlushed) until the taker reads the new marker; Restore
// re-creates a record, the higher epoch wins, and a record of the same
// owner and epoch is left as it is; Get of a missing record is
// ErrRecovering while the re-created marker is young.
func TestMarkerRestoreTakeover(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, b := open(t, srv, "a"), open(t, srv, "b")
	rc := raw(t, srv)
	m0 := a.LastMarker()
	if m0 == "" || b.LastMarker() != m0 || strings.Contains(m0, ":r:") {
		t.Fatalf("markers at Open: %q %q", m0, b.LastMarker())
	}
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "s"); !errors.Is(err, directory.ErrRecovering) {
		t.Fatalf("Get after FLUSHALL, no marker yet: %v, want ErrRecovering", err)
	}
	m1, err := a.Marker(ctx)
	if err != nil || m1 == m0 || !strings.Contains(m1, ":r:") {
		t.Fatalf("marker after FLUSHALL: %q %v (before %q)", m1, err, m0)
	}
	if _, err := b.Get(ctx, "s"); !errors.Is(err, directory.ErrRecovering) {
		t.Fatalf("Get with a young re-created marker: %v, want ErrRecovering", err)
	}
	// Restore at a lower epoch, then at the owner's: the higher wins.
	if err := b.Restore(ctx, session("s"), 1); err != nil {
		t.Fatal(err)
	}
	// RestoreIfAbsent never replaces a record, even at a lower epoch.
	if err := a.RestoreIfAbsent(ctx, session("s"), 2); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("RestoreIfAbsent over a lower epoch: %v, want fenced", err)
	}
	if rec, err := a.Get(ctx, "s"); err != nil || rec.Owner != "b" || rec.Epoch != 1 {
		t.Fatalf("record after a refused RestoreIfAbsent: %+v %v, want b's at 1", rec, err)
	}
	if err := a.Restore(ctx, session("s"), 2); err != nil {
		t.Fatalf("restore at a higher epoch: %v", err)
	}
	if err := a.RestoreIfAbsent(ctx, session("s"), 2); err != nil {
		t.Fatalf("RestoreIfAbsent of our own record: %v", err)
	}
	if err := b.Restore(ctx, session("s"), 1); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("restore at a lower epoch over a higher: %v, want fenced", err)
	}
	if err := a.Restore(ctx, session("s"), 2); err != nil {
		t.Fatalf("restore of our own record again: %v", err)
	}
	rec, err := b.Get(ctx, "s")
	if err != nil || rec.Owner != "a" || rec.Epoch != 2 {
		t.Fatalf("record after restores: %+v %v", rec, err)
	}
	// b still holds the old marker: its takeover is refused.
	if _, err := b.Takeover(ctx, "s"); !errors.Is(err, directory.ErrFlushed) {
		t.Fatalf("Takeover with a stale marker: %v, want ErrFlushed", err)
	}
	if _, err := b.Marker(ctx); err != nil {
		t.Fatal(err)
	}
	if rec, err := b.Takeover(ctx, "s"); err != nil || rec.Epoch != 3 || rec.Marker != m1 { // a has no lease
		t.Fatalf("Takeover after reading the marker: %+v %v (want marker %q)", rec, err, m1)
	}
	// An empty directory: RestoreIfAbsent creates.
	if err := rc.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.RestoreIfAbsent(ctx, session("s"), 3); err != nil {
		t.Fatalf("RestoreIfAbsent into an empty directory: %v", err)
	}
	if rec, err := a.Get(ctx, "s"); err != nil || rec.Owner != "b" || rec.Epoch != 3 {
		t.Fatalf("record after RestoreIfAbsent: %+v %v", rec, err)
	}
}

// TestPeersAndCheckInstance: Peers reports each registered replica's
// lease; CheckInstance refuses a second process while the first refreshes
// its lease, and lets one start once a dead predecessor's lease expired.
func TestPeersAndCheckInstance(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	ttl := func(c *directory.Config) { c.LeaseTTL = 300 * time.Millisecond }
	a := open(t, srv, "a", ttl)
	stop := run(t, a)
	waitFor(t, 5*time.Second, "a's lease", func() bool { return !a.LeaseValidUntil().IsZero() })
	b := open(t, srv, "b", ttl)
	peers, err := b.Peers(ctx)
	if err != nil || len(peers) != 1 || peers[0].Instance != "a" || !peers[0].Live || peers[0].TTLLeft <= 0 || peers[0].TTLLeft > 300*time.Millisecond {
		t.Fatalf("Peers: %+v %v", peers, err)
	}
	dup := open(t, srv, "a", ttl)
	if err := dup.CheckInstance(ctx); !errors.Is(err, directory.ErrInstanceInUse) {
		t.Fatalf("CheckInstance beside a live a: %v, want ErrInstanceInUse", err)
	}
	// A crashed predecessor: a lease nobody refreshes any more.
	stop()
	rc := raw(t, srv)
	rc.HSet(ctx, a.LeaseKey("a"), "incarnation", "crashed", "addr", "127.0.0.1:1", "started_ms", "0")
	rc.PExpire(ctx, a.LeaseKey("a"), 300*time.Millisecond)
	next := open(t, srv, "a", ttl)
	if err := next.CheckInstance(ctx); err != nil {
		t.Fatalf("CheckInstance after the predecessor crashed: %v", err)
	}
}

// TestTakeoverMany: one script call takes a batch over exactly as Takeover
// would each session: a dead owner's and a released session move to the
// taker at the next epoch with their tokens (the owner index follows), a
// live owner's is refused with its address, a missing one is ErrNotFound;
// a stale marker refuses the whole batch (ErrFlushed) and changes nothing.
func TestTakeoverMany(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, b, c := open(t, srv, "a"), open(t, srv, "b"), open(t, srv, "c")
	rc := raw(t, srv)
	stop := run(t, c) // c's lease is live; a's never was
	defer stop()
	waitFor(t, 5*time.Second, "c's lease", func() bool { return !c.LeaseValidUntil().IsZero() })
	for _, id := range []string{"s1", "s2", "s3"} {
		if _, err := a.Claim(ctx, session(id)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Claim(ctx, session("live")); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, "s2", 1); err != nil {
		t.Fatal(err)
	}
	ids := []string{"s1", "s2", "nope", "live", "s3"}
	// A stale marker: nothing changes.
	rc.Set(ctx, "t:incarnation", "another", 0)
	if _, err := b.TakeoverMany(ctx, ids); !errors.Is(err, directory.ErrFlushed) {
		t.Fatalf("TakeoverMany with a stale marker: %v, want ErrFlushed", err)
	}
	if rec, err := b.Get(ctx, "s1"); err != nil || rec.Owner != "a" || rec.Epoch != 1 {
		t.Fatalf("s1 after a refused batch: %+v %v", rec, err)
	}
	if _, err := b.Marker(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := b.TakeoverMany(ctx, ids)
	if err != nil || len(res) != len(ids) {
		t.Fatalf("TakeoverMany: %d results, %v", len(res), err)
	}
	for i, want := range []string{"a", "", "", "", "a"} {
		id, r := ids[i], res[i]
		switch id {
		case "nope":
			if !errors.Is(r.Err, directory.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", id, r.Err)
			}
		case "live":
			var owned *directory.OwnedError
			if !errors.As(r.Err, &owned) || owned.Owner != "c" || owned.Addr == "" || owned.SessionID != "live" {
				t.Errorf("%s: %v, want OwnedError by c with its address", id, r.Err)
			}
		default:
			if r.Err != nil || r.Record.Owner != "b" || r.Record.Epoch != 2 || r.Record.PreviousOwner != want ||
				r.Record.ResumeToken != session(id).ResumeToken || r.Record.ID != id || r.Record.Caller != session(id).Caller {
				t.Errorf("%s: %+v %v; want b's at epoch 2 from %q with its token", id, r.Record, r.Err, want)
			}
		}
	}
	if got := rc.SMembers(ctx, "t:owned:b").Val(); !sameSet(got, []string{"s1", "s2", "s3"}) {
		t.Errorf("b's index after the batch: %v", got)
	}
	if n := rc.SCard(ctx, "t:owned:a").Val() + rc.SCard(ctx, "t:released").Val(); n != 0 {
		t.Errorf("a's index and the released set keep %d entries", n)
	}
	if rec, err := b.Get(ctx, "live"); err != nil || rec.Owner != "c" || rec.Epoch != 1 {
		t.Errorf("a live owner's session after the batch: %+v %v", rec, err)
	}
	// One script call for the batch (the directory's own op count).
	before := b.Counters().Ops.Load()
	if _, err := b.TakeoverMany(ctx, []string{"s1", "s3"}); err != nil {
		t.Fatal(err)
	}
	if n := b.Counters().Ops.Load() - before; n != 1 {
		t.Errorf("a batch of two took %d directory operations, want 1", n)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
