package tombstone

import (
	"math/rand/v2"
	"testing"
)

// TestTableAgainstMap runs random inserts, raises and deletions against a Go
// map, with hashes crowded into few home slots so that probe runs wrap
// around and backward-shift deletion is exercised.
func TestTableAgainstMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tb table
	ref := map[uint64]int64{}
	for i := range 60_000 {
		// Top bits from a small set: long runs. Low bits distinguish keys.
		h := fixHash(uint64(rng.IntN(8))<<61 | uint64(rng.IntN(4096)))
		switch rng.IntN(3) {
		case 0, 1:
			exp := int64(rng.IntN(100))
			inserted, extended := tb.insertMax(h, exp)
			old, had := ref[h]
			if inserted != !had || extended != (had && exp > old) {
				t.Fatalf("op %d: insertMax(%x) = %v,%v; had=%v old=%d new=%d", i, h, inserted, extended, had, old, exp)
			}
			if !had || exp > old {
				ref[h] = exp
			}
		case 2:
			_, had := ref[h]
			if got := tb.del(h); got != had {
				t.Fatalf("op %d: del(%x) = %v, want %v", i, h, got, had)
			}
			delete(ref, h)
		}
		if tb.n != len(ref) {
			t.Fatalf("op %d: n = %d, want %d", i, tb.n, len(ref))
		}
	}
	for h, exp := range ref {
		if got, ok := tb.get(h); !ok || got != exp {
			t.Fatalf("get(%x) = %d,%v, want %d", h, got, ok, exp)
		}
	}
	n := 0
	for _, s := range tb.slots {
		if s.h != 0 {
			n++
			if _, ok := ref[s.h]; !ok {
				t.Fatalf("stray %x", s.h)
			}
		}
	}
	if n != len(ref) {
		t.Fatalf("%d slots used, want %d", n, len(ref))
	}
}
