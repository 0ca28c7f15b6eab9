package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestRunPairSerial: the two sides alternate, the side that goes first
// swaps every round, each side makes maxCalls calls, and the first error
// ends the pair with that error.
func TestRunPairSerial(t *testing.T) {
	var order strings.Builder
	side := func(name string) callFunc {
		return func(context.Context) error { order.WriteString(name); return nil }
	}
	pa, pb, err := runPairSerial(context.Background(), side("a"), side("b"), bounds{time.Minute, 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := order.String(); got != "abbaab" {
		t.Errorf("call order %q, want abbaab", got)
	}
	if pa.Calls != 3 || pb.Calls != 3 || pa.Concurrency != 1 || pb.Concurrency != 1 {
		t.Errorf("points %+v and %+v: want 3 calls each at concurrency 1", pa, pb)
	}

	boom := errors.New("boom")
	n := 0
	failing := func(context.Context) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	}
	order.Reset()
	if _, _, err := runPairSerial(context.Background(), side("a"), failing, bounds{time.Minute, 100}); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	// Round 0: a, then b's first call; round 1: b first, which fails.
	if got := order.String(); got != "a" || n != 2 {
		t.Errorf("calls before the failure: a %q, b %d; want a once, b twice (the pair stops at the error)", got, n)
	}
}
