package cluster

import (
	"fmt"
	"testing"
)

// TestPreferredSpread: 30,000 session ids over 3 and 5 replicas land
// within 5 % of even, and removing a replica moves only the sessions it
// held (each to some survivor), adding one moves only those it wins.
func TestPreferredSpread(t *testing.T) {
	ids := make([]string, 30000)
	for i := range ids {
		ids[i] = fmt.Sprintf("s1.gw-%d.%08x", i%3+1, i*2654435761)
	}
	for _, n := range []int{3, 5} {
		var reps []string
		for i := range n {
			reps = append(reps, fmt.Sprintf("gw-%d", i+1))
		}
		count := map[string]int{}
		for _, id := range ids {
			count[Preferred(id, reps)]++
		}
		even := len(ids) / n
		for r, c := range count {
			if d := float64(c-even) / float64(even); d > 0.05 || d < -0.05 {
				t.Errorf("%d replicas: %s has %d sessions, %.1f %% off even (%d)", n, r, c, 100*d, even)
			}
		}
		// Departure of the last replica: only its sessions move.
		moved := 0
		for _, id := range ids {
			before, after := Preferred(id, reps), Preferred(id, reps[:n-1])
			if before != after {
				moved++
				if before != reps[n-1] {
					t.Fatalf("session %s moved from %s, which stayed", id, before)
				}
			}
		}
		if moved != count[reps[n-1]] {
			t.Errorf("%d replicas: %d sessions moved when %s left, want its %d", n, moved, reps[n-1], count[reps[n-1]])
		}
	}
	if Preferred("x", nil) != "" {
		t.Error("Preferred over no replicas must be empty")
	}
}
