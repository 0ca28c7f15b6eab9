package cluster

import (
	"slices"
	"testing"
	"time"
)

// TestNextJudgement: the time a live peer will be judged gone is its last
// refresh (inferred from the lease's remaining TTL) plus LeaseTTL: a peer
// whose lease is absent is not judged gone a millisecond before it, and is
// at it. A later refresh moves it; peers seen absent do not count.
func TestNextJudgement(t *testing.T) {
	const ttl = time.Second
	o := NewOwnership(OwnershipConfig{Self: "a", LeaseTTL: ttl})
	t0 := time.Unix(1000, 0)
	o.LeaseRefreshed(t0, t0, "m")
	if got := o.NextJudgement(); !got.IsZero() {
		t.Fatalf("NextJudgement with no peers = %v, want zero", got)
	}
	o.PeersSeen(t0, []PeerLease{{Instance: "b", Live: true, TTLLeft: 600 * time.Millisecond}, {Instance: "c", Live: false}})
	// First seen: presumed alive now (never judged on a lease seen once).
	want := t0.Add(ttl)
	if got := o.NextJudgement(); !got.Equal(want) {
		t.Fatalf("NextJudgement = %v, want %v (b first seen now + TTL)", got.Sub(t0), want.Sub(t0))
	}
	// Read again at t0+500 ms: b refreshed 200 ms before (800 ms left).
	t1 := t0.Add(500 * time.Millisecond)
	o.LeaseRefreshed(t1, t1, "m")
	o.PeersSeen(t1, []PeerLease{{Instance: "b", Live: true, TTLLeft: 800 * time.Millisecond}})
	want = t1.Add(800 * time.Millisecond)
	if got := o.NextJudgement(); !got.Equal(want) {
		t.Fatalf("after a refresh: NextJudgement = %v, want %v", got.Sub(t0), want.Sub(t0))
	}
	// b's lease is gone: not dead a millisecond before, dead at it.
	before := want.Add(-time.Millisecond)
	o.LeaseRefreshed(before.Add(-100*time.Millisecond), before, "m")
	o.PeersSeen(before, []PeerLease{{Instance: "b", Live: false}})
	if d := o.Dead(before); slices.Contains(d, "b") {
		t.Fatalf("Dead 1 ms before NextJudgement = %v", d)
	}
	if d := o.Dead(want); !slices.Contains(d, "b") {
		t.Fatalf("Dead at NextJudgement = %v, want b in it", d)
	}
	if got := o.NextJudgement(); !got.IsZero() {
		t.Fatalf("NextJudgement once b is seen absent = %v, want zero", got)
	}
}

// TestHeldClaim: a takeover's claim is held (not serving) until Resumed;
// a flush before the resume makes its record due for a restore, and the
// resume waits for it; a claim made under a marker the replica has since
// seen replaced is restored too; ResumeFailed gives a held session back
// (with the restore first when a flush erased its record) or loses it.
func TestHeldClaim(t *testing.T) {
	const ttl = time.Second
	t0 := time.Unix(1000, 0)
	restores := func(o *Ownership, now time.Time) []Work {
		work, _ := o.Due(now)
		var out []Work
		for _, w := range work {
			if w.Kind == Restore {
				out = append(out, w)
			}
		}
		return out
	}
	o := NewOwnership(OwnershipConfig{Self: "a", LeaseTTL: ttl})
	o.LeaseRefreshed(t0, t0, "m1")
	o.Claimed("s", 2, ReasonDead, "m1", t0)
	if o.MayServe("s", t0) || !o.Held("s") {
		t.Fatal("a held claim is served (or not held)")
	}
	if !o.MayResume("s", t0) {
		t.Fatal("a fresh claim may not be resumed")
	}
	// A flush before the resume: restored (not if absent: no lapse since
	// the claim), and no resume until then.
	t1 := t0.Add(100 * time.Millisecond)
	o.MarkerSeen(t1, "m2")
	rs := restores(o, t1)
	if len(rs) != 1 || rs[0].ID != "s" || rs[0].Epoch != 2 || rs[0].IfAbsent {
		t.Fatalf("restores after a flush with a held claim = %+v, want s at epoch 2", rs)
	}
	if o.MayResume("s", t1) || !o.Restoring("s") {
		t.Fatal("a held claim whose record a flush erased may be resumed before its restore")
	}
	if o.Wrote("s", rs[0], OK, 0) || !o.MayResume("s", t1) {
		t.Fatal("after its restore, the held claim may not be resumed")
	}
	if !o.Resumed("s") || !o.MayServe("s", t1) || o.Held("s") {
		t.Fatal("a resumed claim is not served")
	}
	if o.Resumed("s") {
		t.Fatal("Resumed twice")
	}

	// A claim made under the marker before the one this replica has seen.
	o.Claimed("u", 3, ReasonDead, "m1", t1)
	if rs := restores(o, t1); len(rs) != 1 || rs[0].ID != "u" {
		t.Fatalf("restores of a claim made before a flush already seen = %+v, want u", rs)
	}

	// A lapse after the claim, then a flush: restored only where absent.
	o2 := NewOwnership(OwnershipConfig{Self: "a", LeaseTTL: ttl})
	o2.LeaseRefreshed(t0, t0, "m1")
	o2.Claimed("v", 2, ReasonDead, "m1", t0)
	t2 := t0.Add(2 * ttl) // lapsed
	o2.LeaseRefreshed(t2, t2, "")
	o2.MarkerSeen(t2, "m2")
	if rs := restores(o2, t2); len(rs) != 1 || !rs[0].IfAbsent {
		t.Fatalf("restore of a claim with a lapse since = %+v, want if-absent", rs)
	}
	// Given back meanwhile: not restored to be released (a suspect claim).
	if _, restore := o2.ResumeFailed("v", false); restore || o2.Owned("v") {
		t.Fatal("a suspect claim given back is restored first, or kept")
	}

	// Given back with a restore due: restore first; lost: nothing.
	o3 := NewOwnership(OwnershipConfig{Self: "a", LeaseTTL: ttl})
	o3.LeaseRefreshed(t0, t0, "m1")
	o3.Claimed("w", 4, ReasonReleased, "m1", t0)
	o3.Claimed("x", 5, ReasonReleased, "m1", t0)
	o3.MarkerSeen(t1, "m2")
	if w, restore := o3.ResumeFailed("w", false); !restore || w.Kind != Restore || w.Epoch != 4 || w.IfAbsent {
		t.Fatalf("give-back after a flush: %+v %v, want a restore at epoch 4 first", w, restore)
	}
	if _, restore := o3.ResumeFailed("x", true); restore || o3.Owned("x") {
		t.Fatal("a lost claim is restored, or kept")
	}
	if st := o3.Stats(); st.ResumeGiven != 1 || st.ResumeLost != 1 || st.Takeovers[ReasonReleased] != 2 {
		t.Fatalf("stats %+v", st)
	}
}
