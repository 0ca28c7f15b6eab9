package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPacerSpaces: calls from several workers sharing a pacer are spaced
// by its interval, so n calls take at least (n-1) intervals however the
// workers are scheduled (a lower bound holds on a loaded machine).
func TestPacerSpaces(t *testing.T) {
	const every, n, workers = 2 * time.Millisecond, 40, 4
	p := &pacer{every: every}
	var made atomic.Int64
	calls := make([]callFunc, workers)
	for i := range calls {
		calls[i] = func(context.Context) error { made.Add(1); return nil }
	}
	calls = paced(p, calls)
	start := time.Now()
	var wg sync.WaitGroup
	for _, call := range calls {
		wg.Go(func() {
			for range n / workers {
				if err := call(context.Background()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := made.Load(); got != n {
		t.Fatalf("%d calls made, want %d", got, n)
	}
	if took := time.Since(start); took < (n-1)*every {
		t.Fatalf("%d calls at one per %v took %v, under %v: the pacer let calls through early", n, every, took, (n-1)*every)
	}
}

// TestPacerNoBurst: slots that passed while nobody called are not made up
// for: after an idle spell the next two calls are still an interval apart.
func TestPacerNoBurst(t *testing.T) {
	const every = 5 * time.Millisecond
	p := &pacer{every: every}
	// An idle spell of 100 intervals, as between a warm-up and its point.
	p.next = time.Now().Add(-100 * every)
	ctx := context.Background()
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if err := p.wait(ctx); err != nil {
		t.Fatal(err)
	}
	if gap := time.Since(first); gap < every-time.Millisecond {
		t.Fatalf("second call %v after the first, want about %v: the pacer caught up on missed slots", gap, every)
	}
}

// TestPacerCancel: a call waiting for a far slot returns the context's
// cause as soon as the context ends, and the call itself is not made.
func TestPacerCancel(t *testing.T) {
	p := &pacer{every: time.Hour}
	p.next = time.Now().Add(time.Hour)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("point over")
	made := false
	call := paced(p, []callFunc{func(context.Context) error { made = true; return nil }})[0]
	done := make(chan error, 1)
	go func() { done <- call(ctx) }()
	cancel(stop)
	select {
	case err := <-done:
		if !errors.Is(err, stop) || made {
			t.Fatalf("got %v (call made: %v), want the cause %v and no call", err, made, stop)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled wait did not return")
	}
}
