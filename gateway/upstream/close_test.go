package upstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

func TestCloseGraceful(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	var waitErr, watchErr error
	wg.Go(func() { _, waitErr = c.Wait(ctx, acc.JobID) })
	wg.Go(func() {
		for watchErr == nil {
			_, watchErr = w.Next(ctx)
		}
	})

	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	wg.Wait()
	for name, err := range map[string]error{"wait": waitErr, "watch": watchErr, "Err": c.Err()} {
		if !errors.Is(err, upstream.ErrClosed) {
			t.Fatalf("%s = %v, want ErrClosed", name, err)
		}
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Done not closed")
	}
	if st := c.Status(); st.State != upstream.StateClosed {
		t.Fatalf("state %s", st.State)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); !errors.Is(err, upstream.ErrClosed) {
		t.Fatalf("Submit after Close = %v", err)
	}
	// A graceful close ends the runtime's session for good.
	waitFor(ctx, t, "the runtime to drop the session", func() bool { return rt.Stats().Sessions == 0 })
}

// TestCloseWithUnansweredSubmit: the runtime handles a session's requests in
// order, so a submit it sits on also holds up session.close. Close gives up
// waiting at its context, and the submit's caller gets ErrClosed.
func TestCloseWithUnansweredSubmit(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(time.Minute)
	defer rt.SetAcceptDelay(0)
	errc := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
		errc <- err
	}()
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := c.Close(cctx); err == nil {
		t.Fatal("Close reported a clean close")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	} else {
		t.Logf("Close took %v", d)
	}
	if err := <-errc; !errors.Is(err, upstream.ErrClosed) {
		t.Fatalf("Submit = %v, want ErrClosed", err)
	}
}

func TestCloseStalledRuntimeBoundedByCtx(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	srv.Runtime().Stall(true)
	defer srv.Runtime().Stall(false)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Close(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v with a 200ms context", d)
	}
	if err == nil {
		t.Fatal("Close of a stalled runtime reported a clean close")
	}
	if !errors.Is(c.Err(), upstream.ErrClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
}

func TestCloseWhileReconnecting(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.BackoffInitial = 5 * time.Second
	cfg.BackoffMax = 10 * time.Second
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	srv.Runtime().DropTransports()
	waitFor(ctx, t, "reconnecting", func() bool { return c.Status().State == upstream.StateReconnecting })
	start := time.Now()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close while backing off took %v", d)
	}
	if !errors.Is(c.Err(), upstream.ErrClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
}

func TestConcurrentClose(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = c.Close(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Close %d = %v", i, err)
		}
	}
}

// TestStatusHasNoSideEffects: Status is a pure read; calling it in a loop
// sends nothing upstream.
func TestStatusHasNoSideEffects(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Features: []string{arcp.FeatureAck}}) // no heartbeat: nothing periodic
	c := dial(t, baseConfig(srv.URL()))
	before := srv.Runtime().Stats().FramesReceived
	var last upstream.Status
	for range 10_000 {
		last = c.Status()
	}
	if got := srv.Runtime().Stats().FramesReceived; got != before {
		t.Fatalf("Status sent %d frames", got-before)
	}
	if last.State != upstream.StateReady || last.Generation != 1 {
		t.Fatalf("status %+v", last)
	}
}

// TestCloseDuringReconnectReachesRuntime: Close while the transport is down.
// Before: session.close was never sent and the runtime kept the session and
// its jobs for its whole resume window. Now one bounded resume carries the
// close.
func TestCloseDuringReconnectReachesRuntime(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.BackoffInitial, cfg.BackoffMax = 5*time.Second, 5*time.Second
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})}); err != nil {
		t.Fatal(err)
	}
	rt.DropTransports()
	waitFor(ctx, t, "reconnecting", func() bool { return c.Status().State == upstream.StateReconnecting })
	start := time.Now()
	if err := c.CloseWithReason(ctx, "closing while reconnecting"); err != nil {
		t.Fatalf("Close = %v, want a clean close", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("Close waited %v: it waited out the backoff instead of closing at once", d)
	}
	waitFor(ctx, t, "the runtime to forget the session", func() bool { return rt.Stats().Sessions == 0 })
}
