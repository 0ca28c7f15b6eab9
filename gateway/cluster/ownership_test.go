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
