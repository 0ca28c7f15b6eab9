package correlate

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestSequencerReordersWithinWindow: frames shuffled within the window come
// out once each, in order, for thousands of random schedules; a frame
// displaced beyond the window is a gap.
func TestSequencerReordersWithinWindow(t *testing.T) {
	const window = 8
	now := time.Unix(0, 0)
	for seed := uint64(1); seed <= 2000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 50 + rng.IntN(200)
		order := make([]uint64, n)
		for i := range order {
			order[i] = uint64(i + 1)
		}
		// Swap within blocks of window/2 so no frame runs more than the
		// window ahead of the hole.
		for b := 0; b < n; b += window / 2 {
			e := min(b+window/2, n)
			rng.Shuffle(e-b, func(i, j int) { order[b+i], order[b+j] = order[b+j], order[b+i] })
		}
		s := NewSequencer[uint64](SeqConfig{Window: window, WindowBytes: 1 << 20, MaxHold: time.Second}, 0)
		var got []uint64
		for _, seq := range order {
			if rng.IntN(10) == 0 {
				// A duplicate of something already delivered.
				if d := s.Delivered(); d > 0 && s.Offer(d, 1, d, now) != SeqDuplicate {
					t.Fatalf("seed %d: redelivery of %d not a duplicate", seed, d)
				}
			}
			switch v := s.Offer(seq, 1, seq, now); v {
			case SeqDeliver:
				got = append(got, seq)
				for {
					x, _, ok := s.Next(now)
					if !ok {
						break
					}
					got = append(got, x)
				}
			case SeqHeld:
			default:
				t.Fatalf("seed %d: seq %d: verdict %d", seed, seq, v)
			}
		}
		if len(got) != n || s.Held() != 0 {
			t.Fatalf("seed %d: delivered %d of %d, %d held", seed, len(got), n, s.Held())
		}
		for i, x := range got {
			if x != uint64(i+1) {
				t.Fatalf("seed %d: position %d has seq %d", seed, i, x)
			}
		}
	}
}

func TestSequencerBounds(t *testing.T) {
	now := time.Unix(0, 0)
	cfg := SeqConfig{Window: 4, WindowBytes: 100, MaxHold: time.Second}
	s := NewSequencer[int](cfg, 10)
	if v := s.Offer(16, 1, 0, now); v != SeqGap {
		t.Fatalf("seq 16 after 10 with window 4: %d, want gap", v)
	}
	if v := s.Offer(12, 60, 0, now); v != SeqHeld {
		t.Fatalf("seq 12: %d, want held", v)
	}
	if v := s.Offer(13, 60, 0, now); v != SeqGap {
		t.Fatalf("seq 13 over the byte window: %d, want gap", v)
	}
	if s.Expired(now.Add(999 * time.Millisecond)) {
		t.Fatal("hole expired before MaxHold")
	}
	if !s.Expired(now.Add(time.Second)) {
		t.Fatal("hole open for MaxHold not expired")
	}
	s.Reset()
	if s.Held() != 0 || s.Delivered() != 10 {
		t.Fatalf("after Reset: held %d delivered %d", s.Held(), s.Delivered())
	}
	// Window 0: strict order.
	z := NewSequencer[int](SeqConfig{}, 0)
	if v := z.Offer(2, 1, 0, now); v != SeqGap {
		t.Fatalf("window 0, seq 2 first: %d, want gap", v)
	}
}
