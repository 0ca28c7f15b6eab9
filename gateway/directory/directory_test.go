package directory_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/directory/redistest"
)

func session(id string) directory.Session {
	return directory.Session{
		ID: id, Caller: "alice", Runtime: "demo", UpstreamSessionID: "up-" + id,
		ResumeToken: "tok-" + id + "-1", AckedSeq: 3,
	}
}

// TestScripts walks every script's accept and reject paths on one record.
func TestScripts(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, b := open(t, srv, "a"), open(t, srv, "b")
	rc := raw(t, srv)
	runA := run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)

	// Claim: accept, then reject (exists).
	e, err := a.Claim(ctx, session("s1"))
	if err != nil || e != 1 {
		t.Fatalf("Claim = %d, %v; want 1, nil", e, err)
	}
	if _, err := b.Claim(ctx, session("s1")); !errors.Is(err, directory.ErrExists) {
		t.Fatalf("second Claim: %v, want ErrExists", err)
	}
	// The token is stored encrypted under the key id, never in clear.
	stored, _ := rc.HGet(ctx, a.SessionKey("s1"), "token").Result()
	if !strings.HasPrefix(stored, "k1:") || strings.Contains(stored, "tok-s1") {
		t.Fatalf("stored token %q: want k1:<ciphertext>", stored)
	}
	r, err := b.Get(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	want := directory.Record{Session: session("s1"), Owner: "a", Epoch: 1}
	want.ResumeToken = "" // Get never returns the token
	if r.Session != want.Session || r.Owner != "a" || r.Epoch != 1 || !r.OwnerLive || r.OwnerAddr != "127.0.0.1:9a" {
		t.Fatalf("Get = %+v", r)
	}
	if r.UpdatedAt.IsZero() || r.ExpiresIn <= 0 || r.ExpiresIn > directory.DefaultSessionTTL {
		t.Fatalf("Get UpdatedAt %v ExpiresIn %v", r.UpdatedAt, r.ExpiresIn)
	}
	// The owner's lease: what is left of it, as Redis counts it.
	if lease, _ := rc.PTTL(ctx, a.LeaseKey("a")).Result(); r.OwnerLeaseLeft <= 0 || r.OwnerLeaseLeft > lease+50*time.Millisecond {
		t.Fatalf("Get OwnerLeaseLeft %v, lease key's PTTL %v", r.OwnerLeaseLeft, lease)
	}

	// Update: accept by the owner at its epoch; reject another replica,
	// a wrong epoch, a missing record.
	if err := a.Update(ctx, "s1", 1, directory.Change{ResumeToken: "tok-s1-2", AckedSeq: 7}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		d     *directory.Directory
		epoch uint64
	}{{b, 1}, {a, 0}} {
		err := c.d.Update(ctx, "s1", c.epoch, directory.Change{AckedSeq: 100})
		var fe *directory.FencedError
		if !errors.Is(err, directory.ErrFenced) || !errors.As(err, &fe) || fe.Owner != "a" || fe.Epoch != 1 {
			t.Fatalf("Update(%s, epoch %d) = %v, want FencedError{a, 1}", c.d.Instance(), c.epoch, err)
		}
	}
	// Above the record's epoch: the record is a stale owner's restore
	// after a flush; the caller restores its own (the higher epoch wins).
	if err := a.Update(ctx, "s1", 2, directory.Change{AckedSeq: 100}); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Update(a, epoch 2) of a record at epoch 1 = %v, want ErrNotFound", err)
	}
	if err := a.Update(ctx, "nope", 1, directory.Change{}); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Update missing: %v", err)
	}

	// Takeover: rejected while a's lease lives; missing record.
	_, err = b.Takeover(ctx, "s1")
	var oe *directory.OwnedError
	if !errors.As(err, &oe) || !errors.Is(err, directory.ErrOwned) || oe.Owner != "a" || oe.Addr != "127.0.0.1:9a" {
		t.Fatalf("Takeover of a live owner's session = %v, want OwnedError{a, 127.0.0.1:9a}", err)
	}
	if _, err := b.Takeover(ctx, "nope"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Takeover missing: %v", err)
	}
	// Takeover by the owner itself: accepted, epoch+1.
	r, err = a.Takeover(ctx, "s1")
	if err != nil || r.Epoch != 2 || r.Owner != "a" || r.PreviousOwner != "a" || r.ResumeToken != "tok-s1-2" || r.AckedSeq != 7 {
		t.Fatalf("self Takeover = %+v, %v", r, err)
	}

	// Release: rejected for a stale epoch and another replica; accepted.
	if err := a.Release(ctx, "s1", 1); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("Release stale epoch: %v", err)
	}
	if err := b.Release(ctx, "s1", 2); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("Release by b: %v", err)
	}
	if err := a.Release(ctx, "nope", 2); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Release missing: %v", err)
	}
	if err := a.Release(ctx, "s1", 2); err != nil {
		t.Fatal(err)
	}
	// Released: the former owner is fenced at once, its data kept.
	if err := a.Update(ctx, "s1", 2, directory.Change{AckedSeq: 8}); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("Update after Release: %v", err)
	}
	if r, _ := b.Get(ctx, "s1"); r.Owner != "" || r.OwnerLive || r.AckedSeq != 7 || r.Epoch != 2 {
		t.Fatalf("released record = %+v", r)
	}
	// Any replica takes it over at once, though a's lease is live.
	r, err = b.Takeover(ctx, "s1")
	if err != nil || r.Owner != "b" || r.Epoch != 3 || r.PreviousOwner != "" || r.ResumeToken != "tok-s1-2" {
		t.Fatalf("Takeover after Release = %+v, %v", r, err)
	}

	// Delete: rejected for the former owner and a stale epoch; accepted.
	if err := a.Delete(ctx, "s1", 2); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("Delete by a: %v", err)
	}
	if err := b.Delete(ctx, "s1", 2); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("Delete stale: %v", err)
	}
	if err := b.Delete(ctx, "s1", 3); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "s1", 3); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := a.Get(ctx, "s1"); !errors.Is(err, directory.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	// After a real close the id may be claimed anew, from epoch 1.
	if e, err := b.Claim(ctx, session("s1")); err != nil || e != 1 {
		t.Fatalf("Claim after Delete = %d, %v", e, err)
	}

	// Owner lookup from the lease; gone when Run ends (it drops the lease).
	rp, err := b.Owner(ctx, "a")
	if err != nil || rp.Addr != "127.0.0.1:9a" || rp.StartedAt.IsZero() || rp.ExpiresIn <= 0 {
		t.Fatalf("Owner(a) = %+v, %v", rp, err)
	}
	runA()
	if _, err := b.Owner(ctx, "a"); !errors.Is(err, directory.ErrNoLease) {
		t.Fatalf("Owner after Run ended: %v", err)
	}
	if a.LeaseValidUntil() != (time.Time{}) {
		t.Fatalf("LeaseValidUntil after Run = %v", a.LeaseValidUntil())
	}

	ca, cb := a.Counters(), b.Counters()
	if ca.Claims.Load() != 1 || ca.Fenced.Load() != 4 || ca.LeaseRefreshes.Load() == 0 || ca.Errors.Load() != 0 ||
		cb.Owned.Load() != 1 || cb.Handoffs.Load() != 1 || cb.Fenced.Load() != 3 {
		t.Fatalf("counters: a claims %d fenced %d lease %d errors %d; b owned %d handoffs %d fenced %d",
			ca.Claims.Load(), ca.Fenced.Load(), ca.LeaseRefreshes.Load(), ca.Errors.Load(),
			cb.Owned.Load(), cb.Handoffs.Load(), cb.Fenced.Load())
	}
}

// TestAckedSeqMonotonic: the stored seq never goes backwards, and an Update
// with only a seq keeps the token.
func TestAckedSeqMonotonic(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a := open(t, srv, "a")
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct{ seq, want uint64 }{{10, 10}, {5, 10}, {0, 10}, {11, 11}, {1<<63 + 5, 1<<63 + 5}, {1<<63 + 4, 1<<63 + 5}, {999, 1<<63 + 5}} {
		if err := a.Update(ctx, "s", 1, directory.Change{AckedSeq: step.seq}); err != nil {
			t.Fatal(err)
		}
		r, err := a.Get(ctx, "s")
		if err != nil || r.AckedSeq != step.want {
			t.Fatalf("after Update(seq %d): AckedSeq %d, %v; want %d", step.seq, r.AckedSeq, err, step.want)
		}
	}
	r, err := a.Takeover(ctx, "s")
	if err != nil || r.ResumeToken != "tok-s-1" {
		t.Fatalf("token after seq-only updates: %q, %v", r.ResumeToken, err)
	}
}

// TestGetIsReadOnly: Get changes nothing, not even the TTL or updated_ms,
// and never takes over a session whose owner is dead.
func TestGetIsReadOnly(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, b := open(t, srv, "a"), open(t, srv, "b")
	rc := raw(t, srv)
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	if err := rc.PExpire(ctx, a.SessionKey("s"), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	before, _ := rc.HGetAll(ctx, a.SessionKey("s")).Result()
	for range 3 {
		r, err := b.Get(ctx, "s")
		if err != nil || r.Owner != "a" || r.OwnerLive || r.OwnerAddr != "" || r.OwnerLeaseLeft != 0 { // a runs no lease
			t.Fatalf("Get = %+v, %v", r, err)
		}
	}
	after, _ := rc.HGetAll(ctx, a.SessionKey("s")).Result()
	ttl, _ := rc.PTTL(ctx, a.SessionKey("s")).Result()
	if len(before) != 8 || len(after) != len(before) || ttl < 59*time.Minute {
		t.Fatalf("Get changed the record: %v → %v, ttl %v", before, after, ttl)
	}
	for k, v := range before {
		if after[k] != v {
			t.Fatalf("Get changed %s: %q → %q", k, v, after[k])
		}
	}
}

// TestSessionTTL: writes refresh the record's TTL; an unrefreshed record
// expires by itself.
func TestSessionTTL(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a := open(t, srv, "a", func(c *directory.Config) { c.SessionTTL = 400 * time.Millisecond })
	rc := raw(t, srv)
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	if ttl, _ := rc.PTTL(ctx, a.SessionKey("s")).Result(); ttl <= 0 || ttl > 400*time.Millisecond {
		t.Fatalf("TTL after Claim %v", ttl)
	}
	_ = rc.PExpire(ctx, a.SessionKey("s"), 50*time.Millisecond)
	if err := a.Update(ctx, "s", 1, directory.Change{}); err != nil { // a touch
		t.Fatal(err)
	}
	if ttl, _ := rc.PTTL(ctx, a.SessionKey("s")).Result(); ttl <= 50*time.Millisecond {
		t.Fatalf("TTL after touch %v: not refreshed", ttl)
	}
	waitFor(t, 10*time.Second, "record to expire", func() bool {
		_, err := a.Get(ctx, "s")
		return errors.Is(err, directory.ErrNotFound)
	})
}

// TestTakeoverRace: two live replicas race to take over a dead owner's
// session: exactly one wins, the other is told who, and is fenced if it
// writes with the epoch it had read; the dead owner is fenced too.
func TestTakeoverRace(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	x := open(t, srv, "x") // never runs a lease: dead
	a, b := open(t, srv, "a"), open(t, srv, "b")
	rc := raw(t, srv)
	run(t, a)
	run(t, b)
	waitLease(t, rc, a.LeaseKey("a"), true)
	waitLease(t, rc, b.LeaseKey("b"), true)

	const n = 50
	wins := map[string]int{}
	for i := range n {
		id := "race-" + string(rune('A'+i%26)) + string(rune('0'+i/26))
		if _, err := x.Claim(ctx, session(id)); err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		res := make([]directory.Record, 2)
		errs := make([]error, 2)
		for j, d := range []*directory.Directory{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[j], errs[j] = d.Takeover(ctx, id)
			}()
		}
		close(start)
		wg.Wait()
		var winner, loser int
		switch {
		case errs[0] == nil && errors.Is(errs[1], directory.ErrOwned):
			winner, loser = 0, 1
		case errs[1] == nil && errors.Is(errs[0], directory.ErrOwned):
			winner, loser = 1, 0
		default:
			t.Fatalf("%s: takeover results %v / %v: want exactly one winner", id, errs[0], errs[1])
		}
		ds := []*directory.Directory{a, b}
		w, l := ds[winner], ds[loser]
		wins[w.Instance()]++
		var oe *directory.OwnedError
		if !errors.As(errs[loser], &oe) || oe.Owner != w.Instance() {
			t.Fatalf("%s: loser told %v, want owner %s", id, errs[loser], w.Instance())
		}
		if r := res[winner]; r.Epoch != 2 || r.Owner != w.Instance() || r.PreviousOwner != "x" || r.ResumeToken != "tok-"+id+"-1" {
			t.Fatalf("%s: winner got %+v", id, r)
		}
		if err := l.Update(ctx, id, 1, directory.Change{AckedSeq: 9}); !errors.Is(err, directory.ErrFenced) {
			t.Fatalf("%s: loser's Update: %v, want ErrFenced", id, err)
		}
		if err := l.Update(ctx, id, 2, directory.Change{AckedSeq: 9}); !errors.Is(err, directory.ErrFenced) {
			t.Fatalf("%s: loser's Update at the winner's epoch: %v, want ErrFenced", id, err)
		}
		if err := x.Update(ctx, id, 1, directory.Change{ResumeToken: "zombie"}); !errors.Is(err, directory.ErrFenced) {
			t.Fatalf("%s: dead owner's Update: %v, want ErrFenced", id, err)
		}
		if err := w.Update(ctx, id, 2, directory.Change{ResumeToken: "tok-" + id + "-2", AckedSeq: 9}); err != nil {
			t.Fatalf("%s: winner's Update: %v", id, err)
		}
	}
	t.Logf("wins: %v", wins)
}

// TestLeaseExpiryEnablesTakeover: a replica that stops refreshing its lease
// (here: it lost Redis) loses its sessions to another replica once the
// lease has expired, and not before.
func TestLeaseExpiryEnablesTakeover(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	short := func(c *directory.Config) { c.LeaseTTL = 300 * time.Millisecond }
	a, b := open(t, srv, "a", short), open(t, srv, "b", short)
	rc := raw(t, srv)
	run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)
	if _, err := a.Claim(ctx, session("s")); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, "s", 1, directory.Change{ResumeToken: "tok-s-2", AckedSeq: 41}); err != nil {
		t.Fatal(err)
	}
	// Several refresh periods pass and the lease stays (Run refreshes it).
	stamp := a.LeaseValidUntil()
	waitFor(t, 10*time.Second, "three refreshes", func() bool { return a.Counters().LeaseRefreshes.Load() >= 4 })
	if !a.LeaseValidUntil().After(stamp) {
		t.Fatalf("LeaseValidUntil did not advance")
	}
	if _, err := b.Takeover(ctx, "s"); !errors.Is(err, directory.ErrOwned) {
		t.Fatalf("Takeover while a's lease lives: %v", err)
	}

	// a loses Redis: its refreshes fail, its lease expires.
	_ = a.Close()
	lost := time.Now()
	waitLease(t, rc, a.LeaseKey("a"), false)
	t.Logf("lease gone %v after a lost Redis (TTL 300ms)", time.Since(lost).Round(time.Millisecond))
	if a.Counters().LeaseFailures.Load() == 0 {
		// Not guaranteed in a slow run, but a refresh normally fails first.
		t.Logf("no lease failure counted yet")
	}
	r, err := b.Takeover(ctx, "s")
	if err != nil || r.Owner != "b" || r.Epoch != 2 || r.PreviousOwner != "a" || r.ResumeToken != "tok-s-2" || r.AckedSeq != 41 {
		t.Fatalf("Takeover after expiry = %+v, %v", r, err)
	}
	if b.Counters().Adopted.Load() != 1 {
		t.Fatalf("Adopted = %d", b.Counters().Adopted.Load())
	}
	// a, back with a new connection (same instance id), is fenced.
	a2 := open(t, srv, "a", short)
	if err := a2.Update(ctx, "s", 1, directory.Change{ResumeToken: "tok-s-zombie"}); !errors.Is(err, directory.ErrFenced) {
		t.Fatalf("a's Update after takeover: %v", err)
	}
}

// TestLeaseConflict: a second process with the same instance id does not
// steal a live lease; it gets it once the first one's lease is gone.
func TestLeaseConflict(t *testing.T) {
	srv := redistest.Start(t)
	rc := raw(t, srv)
	ttl := func(c *directory.Config) { c.LeaseTTL = time.Second }
	a1, a2 := open(t, srv, "a", ttl), open(t, srv, "a", ttl)
	stop1 := run(t, a1)
	waitLease(t, rc, a1.LeaseKey("a"), true)
	inc1, _ := rc.HGet(context.Background(), a1.LeaseKey("a"), "incarnation").Result()
	run(t, a2)
	waitFor(t, 10*time.Second, "a conflict", func() bool { return a2.Counters().LeaseConflicts.Load() > 0 })
	if inc, _ := rc.HGet(context.Background(), a1.LeaseKey("a"), "incarnation").Result(); inc != inc1 {
		t.Fatalf("lease taken over by the second process")
	}
	stop1() // drops its lease
	waitFor(t, 10*time.Second, "the second process's lease", func() bool {
		inc, err := rc.HGet(context.Background(), a1.LeaseKey("a"), "incarnation").Result()
		return err == nil && inc != inc1
	})
}

// TestRunOnce: Run refuses to run twice at once.
func TestRunOnce(t *testing.T) {
	srv := redistest.Start(t)
	a := open(t, srv, "a")
	rc := raw(t, srv)
	run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)
	if err := a.Run(testCtx(t)); err == nil {
		t.Fatal("second Run returned nil")
	}
}

// TestOrphans: released sessions and sessions of replicas without a lease
// are orphans; sessions of live replicas are not. Enough records for several
// SCAN batches.
func TestOrphans(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a, x := open(t, srv, "a"), open(t, srv, "x")
	rc := raw(t, srv)
	run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)
	const live, dead, released = 1500, 300, 200
	want := map[string]string{}
	for i := range live + dead + released {
		id := "s" + strconv.Itoa(i)
		d := a
		if i >= live && i < live+dead {
			d = x
			want[id] = "x"
		}
		if _, err := d.Claim(ctx, session(id)); err != nil {
			t.Fatal(err)
		}
		if i >= live+dead {
			if err := a.Release(ctx, id, 1); err != nil {
				t.Fatal(err)
			}
			want[id] = ""
		}
	}
	// Unrelated keys under the prefix and elsewhere are ignored.
	_ = rc.Set(ctx, "t:other", "1", 0)
	_ = rc.Set(ctx, "u:session:zzz", "1", 0)

	got, err := a.Orphans(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Orphans: %d, want %d", len(got), len(want))
	}
	for _, o := range got {
		if w, ok := want[o.SessionID]; !ok || w != o.Owner || o.Epoch != 1 {
			t.Fatalf("orphan %+v not expected (want owner %q, known %v)", o, w, ok)
		}
	}
	if a.Counters().OrphanScans.Load() != 1 {
		t.Fatalf("OrphanScans = %d", a.Counters().OrphanScans.Load())
	}
	got, err = a.Orphans(ctx, 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("Orphans(limit 10): %d, %v", len(got), err)
	}
	// Taking one over removes it from the orphans.
	if _, err := a.Takeover(ctx, got[0].SessionID); err != nil {
		t.Fatal(err)
	}
	all, err := a.Orphans(ctx, 0)
	if err != nil || len(all) != len(want)-1 {
		t.Fatalf("Orphans after a takeover: %d, %v", len(all), err)
	}
}

// TestOrphansWalkOnlyWhenNeeded: in a steady cluster Orphans answers from
// the sweep check without walking the keyspace; a release, a replica whose
// lease is gone, orphans found last time or OrphanScanEvery passing make it
// walk; a gone replica leaves the registry once nothing of its is left.
func TestOrphansWalkOnlyWhenNeeded(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	rc := raw(t, srv)
	a := open(t, srv, "a", func(c *directory.Config) { c.OrphanScanEvery = time.Hour })
	x := open(t, srv, "x")
	run(t, a)
	waitLease(t, rc, a.LeaseKey("a"), true)
	for i := range 10 {
		if _, err := a.Claim(ctx, session("a"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	scans, checks := &a.Counters().OrphanScans, &a.Counters().OrphanChecks
	orphans := func(want int, walk bool) []directory.Orphan {
		t.Helper()
		s0, c0 := scans.Load(), checks.Load()
		got, err := a.Orphans(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("Orphans: %d, want %d (%+v)", len(got), want, got)
		}
		if walked := scans.Load() == s0+1 && checks.Load() == c0; walked != walk {
			t.Fatalf("Orphans walked the keyspace: %v, want %v (scans %d → %d, checks %d → %d)", walked, walk, s0, scans.Load(), c0, checks.Load())
		}
		return got
	}
	orphans(0, true)  // the first call walks
	orphans(0, false) // nothing changed
	orphans(0, false)

	// A release: walked until the session is adopted.
	if err := a.Release(ctx, "a3", 1); err != nil {
		t.Fatal(err)
	}
	if got := orphans(1, true); got[0].SessionID != "a3" || got[0].Owner != "" {
		t.Fatalf("orphan %+v, want a3 released", got[0])
	}
	orphans(1, true) // still there: walked again
	if _, err := a.Takeover(ctx, "a3"); err != nil {
		t.Fatal(err)
	}
	orphans(0, true)
	orphans(0, false)

	// A replica that held a lease and is gone.
	stopX := run(t, x)
	waitLease(t, rc, x.LeaseKey("x"), true)
	if ok, err := rc.SIsMember(ctx, a.RegistryKey(), "x").Result(); err != nil || !ok {
		t.Fatalf("x is not in the registry after its lease: %v, %v", ok, err)
	}
	for i := range 3 {
		if _, err := x.Claim(ctx, session("x"+strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	orphans(0, false) // x is alive
	stopX()           // drops x's lease, as a stop does; a SIGKILL lets it expire
	waitLease(t, rc, x.LeaseKey("x"), false)
	for _, o := range orphans(3, true) {
		if o.Owner != "x" {
			t.Fatalf("orphan %+v, want x's", o)
		}
		if _, err := a.Takeover(ctx, o.SessionID); err != nil {
			t.Fatal(err)
		}
	}
	if ok, _ := rc.SIsMember(ctx, a.RegistryKey(), "x").Result(); !ok {
		t.Fatal("x left the registry while its sessions were still to adopt")
	}
	orphans(0, true) // the last walk found some
	if ok, _ := rc.SIsMember(ctx, a.RegistryKey(), "x").Result(); ok {
		t.Fatal("x is still in the registry after a walk found nothing of its")
	}
	orphans(0, false)
	if !rc.SIsMember(ctx, a.RegistryKey(), "a").Val() {
		t.Fatal("a, alive, left the registry")
	}

	// A record of a replica that never entered the registry (an older
	// version): found by the walk OrphanScanEvery brings.
	b := open(t, srv, "b", func(c *directory.Config) { c.OrphanScanEvery = 2 * time.Second })
	y := open(t, srv, "y")
	if got, err := b.Orphans(ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("b's first Orphans: %v, %v", got, err)
	}
	if _, err := y.Claim(ctx, session("y0")); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Orphans(ctx, 0); err != nil || len(got) != 0 {
		t.Fatalf("Orphans within OrphanScanEvery of a walk, nothing in the registry gone: %v, %v; want none (no walk)", got, err)
	}
	waitFor(t, 10*time.Second, "y0 found by the periodic walk", func() bool {
		got, err := b.Orphans(ctx, 0)
		return err == nil && len(got) == 1 && got[0].SessionID == "y0" && got[0].Owner == "y"
	})
}
