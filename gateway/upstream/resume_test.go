package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestResumeAcross20Drops drops the transport 20 times while stream jobs
// run: the watcher sees every event exactly once, in order, with contiguous
// event_seq, and every welcome rotated the resume token.
func TestResumeAcross20Drops(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		if d.Dialect.LoseRunningJobsOnResume {
			// A running job never emits again after a drop in this
			// dialect (TS SDK): there is nothing to resume into.
			continue
		}
		t.Run(d.Name, func(t *testing.T) { testResumeAcross20Drops(t, d.Dialect) })
	}
}

func testResumeAcross20Drops(t *testing.T, dialect arcpruntime.Dialect) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialect})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 30*time.Second)
	const count = 1500
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": count, "interval_ms": 1})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	var wg sync.WaitGroup
	const drops = 20
	dropped := 0
	wg.Go(func() {
		lastSeq := uint64(0)
		for dropped < drops {
			// Drop once the resumed transport is up and delivering.
			waitFor(ctx, t, "progress on a ready transport", func() bool {
				st := c.Status()
				return st.State == upstream.StateReady && st.LastEventSeq > lastSeq+10 && st.Generation == uint64(dropped+1)
			})
			lastSeq = c.Status().LastEventSeq
			if rt.DropTransports() != 1 {
				t.Error("DropTransports did not drop exactly one transport")
				return
			}
			dropped++
		}
	})

	var prevSeq uint64
	next := 0
	for {
		it, err := w.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next after %d events: %v", next, err)
		}
		if prevSeq != 0 && it.Seq != prevSeq+1 {
			t.Fatalf("event_seq %d after %d: not contiguous", it.Seq, prevSeq)
		}
		prevSeq = it.Seq
		if it.Result != nil {
			var r struct{ Count int }
			if json.Unmarshal(it.Result.Result, &r) != nil || r.Count != count {
				t.Fatalf("result %s", it.Result.Result)
			}
			continue
		}
		if it.Event == nil || it.Event.Kind != arcp.KindLog {
			continue // e.g. a back_pressure status event
		}
		var body struct{ I int }
		if err := json.Unmarshal(it.Event.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.I != next {
			t.Fatalf("event i=%d, want %d (duplicate or hole)", body.I, next)
		}
		next++
	}
	wg.Wait()
	if next != count {
		t.Fatalf("saw %d events, want %d", next, count)
	}
	if dropped != drops {
		t.Fatalf("dropped %d times (the job ended before %d drops)", dropped, drops)
	}
	tokens := c.ResumeTokens()
	distinct := map[string]bool{}
	for _, tok := range tokens {
		distinct[tok] = true
	}
	if len(distinct) < drops+1 || len(distinct) != len(tokens) {
		t.Fatalf("resume tokens: %d distinct of %d, want %d rotations", len(distinct), len(tokens), drops+1)
	}
	ctr := cfgCounters(c)
	if ctr.Resumes.Load() != drops || c.Status().Generation != drops+1 {
		t.Fatalf("resumes %d, generation %d", ctr.Resumes.Load(), c.Status().Generation)
	}
	if ctr.DuplicateEvents.Load() != 0 || ctr.SequenceGaps.Load() != 0 {
		t.Fatalf("duplicates %d, gaps %d", ctr.DuplicateEvents.Load(), ctr.SequenceGaps.Load())
	}
	t.Logf("%d events through %d drops; reconnect attempts %d", next, drops, ctr.Reconnects.Load())
}

// TestResetLosesSession: the runtime restarts and forgets the session, so the
// resume is refused; the session is lost and every waiter learns it.
func TestResetLosesSession(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 20*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(acc.JobID, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rt.SetAcceptDelay(time.Minute)

	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	record := func(name string, err error) {
		mu.Lock()
		errs[name] = err
		mu.Unlock()
	}
	wg.Go(func() {
		_, err := c.Wait(ctx, acc.JobID)
		record("wait", err)
	})
	wg.Go(func() {
		for {
			if _, err := w.Next(ctx); err != nil {
				record("watch", err)
				return
			}
		}
	})
	wg.Go(func() {
		_, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
		record("submit", err)
	})
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })

	rt.Reset()
	start := time.Now()
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("session not reported lost")
	}
	wg.Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("waiters learned of the loss after %v", d)
	}
	var lost *upstream.LostError
	if !errors.As(c.Err(), &lost) || lost.Code != arcp.CodeResumeWindowExpired {
		t.Fatalf("Err = %v, want *LostError RESUME_WINDOW_EXPIRED", c.Err())
	}
	for _, name := range []string{"wait", "watch"} {
		if !errors.As(errs[name], &lost) {
			t.Fatalf("%s err = %v, want *LostError", name, errs[name])
		}
	}
	// The submit had been written when the transport went: it waited for
	// reconciliation, and learned of the loss with everyone else.
	if !errors.As(errs["submit"], &lost) {
		t.Fatalf("submit err = %v, want *LostError", errs["submit"])
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); !errors.As(err, &lost) {
		t.Fatalf("Submit after loss = %v", err)
	}
	if st := c.Status(); st.State != upstream.StateClosed {
		t.Fatalf("state %s", st.State)
	}
	if cfgCounters(c).ResumeFailures.Load() != 1 {
		t.Fatalf("ResumeFailures = %d", cfgCounters(c).ResumeFailures.Load())
	}
}

// TestQueuedSubmitSurvivesDrop: a submit made while the connection is
// reconnecting was never sent; it waits and goes out on the resumed
// transport.
func TestQueuedSubmitSurvivesDrop(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.BackoffInitial = 300 * time.Millisecond
	cfg.BackoffMax = time.Second
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	rt.DropTransports()
	waitFor(ctx, t, "reconnecting", func() bool { return c.Status().State == upstream.StateReconnecting })
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "queued")})
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"queued"` {
		t.Fatalf("input %s", in)
	}
	if g := c.Status().Generation; g != 2 {
		t.Fatalf("generation %d", g)
	}
}

// TestHeartbeatLost: a runtime that stops sending is detected within two
// heartbeat intervals of the last frame received; the transport is dropped
// and resumed once the runtime recovers.
func TestHeartbeatLost(t *testing.T) {
	const iv = 100 * time.Millisecond
	srv := runtimeServer(t, arcpruntime.Options{HeartbeatInterval: iv})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.InitTimeout = 500 * time.Millisecond
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)

	// Idle but alive: our pings keep the runtime content and its pings keep
	// us content. (Observing an absence takes a wait.)
	idle := time.NewTimer(6 * iv)
	<-idle.C
	if n := cfgCounters(c).HeartbeatLost.Load(); n != 0 {
		t.Fatalf("heartbeat lost %d times on an idle healthy session", n)
	}
	if n := rt.Stats().HeartbeatLosses; n != 0 {
		t.Fatalf("runtime lost our heartbeat %d times", n)
	}

	rt.Stall(true)
	waitFor(ctx, t, "HEARTBEAT_LOST", func() bool { return cfgCounters(c).HeartbeatLost.Load() == 1 })
	losses := c.HeartbeatLosses()
	if len(losses) != 1 {
		t.Fatalf("losses %v", losses)
	}
	silent := losses[0].Detected.Sub(losses[0].LastRecv)
	if silent < 2*iv || silent > 2*iv+300*time.Millisecond {
		t.Fatalf("detected after %v of silence, want within two intervals (%v) plus scheduling slack", silent, 2*iv)
	}
	t.Logf("heartbeat loss detected %v after the last frame (interval %v)", silent, iv)
	rt.Stall(false)
	waitFor(ctx, t, "the resume", func() bool {
		st := c.Status()
		return st.State == upstream.StateReady && st.Generation >= 2
	})
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
}

// TestResumeGivesUpAfterWindow: when the runtime is unreachable the
// connection retries until the resume window has passed since the drop,
// then reports the session lost.
func TestResumeGivesUpAfterWindow(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{ResumeWindow: time.Second})
	cfg := baseConfig(srv.URL())
	cfg.InitTimeout = 200 * time.Millisecond
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	start := time.Now()
	srv.Close() // the runtime goes away entirely: dials fail
	select {
	case <-c.Done():
	case <-ctx.Done():
		t.Fatal("never gave up")
	}
	elapsed := time.Since(start)
	var lost *upstream.LostError
	if !errors.As(c.Err(), &lost) || lost.Code != arcp.CodeResumeWindowExpired {
		t.Fatalf("Err = %v", c.Err())
	}
	if elapsed < time.Second || elapsed > 5*time.Second {
		t.Fatalf("gave up after %v, want about the 1s resume window", elapsed)
	}
	if n := cfgCounters(c).Reconnects.Load(); n < 3 {
		t.Fatalf("only %d attempts", n)
	}
	ctx2, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.Close(ctx2); err != nil {
		t.Fatalf("Close after loss = %v", err)
	}
}
