package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestShortDeadlinesRun: a call that arrives with time left runs, however
// little: RunJob with 20, 50 and 100 ms deadlines reaches the runtime every
// time (the deadline margin is a third of the time left, never all of it).
// Whether the answer then beats the caller's deadline depends on the
// machine; the count is logged, and cmd/deadline-probe measures it.
func TestShortDeadlinesRun(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	id := h.open(t, ctxT(t, 10*time.Second))
	for _, d := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
		const n = 10
		before := h.rt.Runtime().Stats().JobsSubmitted
		ok := 0
		for range n {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValue(t, map[string]any{"i": 1.0})})
			cancel()
			switch {
			case err == nil:
				ok++
			case status.Code(err) != codes.DeadlineExceeded:
				t.Fatalf("RunJob with a %v deadline: %v", d, err)
			}
		}
		// The submits are read by the runtime asynchronously; wait for
		// them, bounded.
		wait := ctxT(t, 5*time.Second)
		for h.rt.Runtime().Stats().JobsSubmitted-before < n && wait.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if got := h.rt.Runtime().Stats().JobsSubmitted - before; got != n {
			t.Errorf("%v deadline: %d of %d calls reached the runtime; a call with time left must run", d, got, n)
		}
		t.Logf("%v deadline: %d/%d RunJob echo answered in time", d, ok, n)
	}
}
