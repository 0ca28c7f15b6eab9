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

// TestEventsOfUnknownJobAreOrphans: events for a job id nobody here knows
// (as after a submit whose answer was lost with a transport) are dropped as
// late answers and the job is cancelled upstream, once.
func TestEventsOfUnknownJobAreOrphans(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	// A real job of the runtime that this connection does not know: submitted
	// by another session of the same principal.
	other := dial(t, baseConfig(srv.URL()))
	acc, err := other.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	sid := c.Status().SessionID
	for i := range 3 {
		env, _ := arcp.New(arcp.TypeEvent, sid, arcp.Event{Kind: arcp.KindLog, Body: mustJSON(t, i)})
		env.JobID = acc.JobID
		env.EventSeq = c.Status().LastEventSeq + 1
		c.HandleCurrent(env)
	}
	if got := c.OrphanJobs(); len(got) != 1 || got[0] != acc.JobID {
		t.Fatalf("orphans %v", got)
	}
	// The three events are late answers; the runtime's answer to the
	// orphan's cancel may already have arrived and be a fourth.
	ctr := cfgCounters(c)
	if ctr.OrphansCancelled.Load() != 1 || ctr.LateAnswers.Load() < 3 {
		t.Fatalf("orphans cancelled %d, late answers %d; want 1 and at least 3", ctr.OrphansCancelled.Load(), ctr.LateAnswers.Load())
	}
	waitFor(ctx, t, "the cancel upstream", func() bool { return rt.Cancelled(acc.JobID) })
	if n := ctr.OrphansCancelled.Load(); n != 1 {
		t.Fatalf("the orphan was cancelled %d times, want once", n)
	}
	if _, err := c.Watch(acc.JobID, 0); !errors.Is(err, upstream.ErrUnknownJob) {
		t.Fatalf("Watch of an orphan = %v", err)
	}
}

// TestTombstoneOverflow: with a tiny tombstone cap, tombstones are evicted
// and counted, and correlation is unaffected: every abandoned submit is
// still matched to its own slot and cancelled, and a patient caller behind
// them gets its own job.
func TestTombstoneOverflow(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{MaxConcurrentJobs: 1000})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.MaxTombstones = 3
	cfg.Traits = upstream.KnownEcho(1) // all n submits are written before any is answered
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	// The runtime sits on each submit long enough for all of them to be
	// written before any is answered; then every caller gives up, so all n
	// slots are tombstones (a timer racing the writes would make that
	// depend on the machine's load).
	rt.SetAcceptDelay(300 * time.Millisecond)
	const n = 8
	var wg sync.WaitGroup
	sctx, giveUp := context.WithCancel(ctx)
	for range n {
		wg.Go(func() {
			c.Submit(sctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "impatient")})
		})
	}
	waitFor(ctx, t, "the submits to be written", func() bool { return c.FIFOLen() == n })
	giveUp()
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "patient")})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"patient"` {
		t.Fatalf("MISDELIVERY: patient caller got input %s", in)
	}
	waitFor(ctx, t, "the FIFO to drain", func() bool { return c.FIFOLen() == 0 })
	ctr := cfgCounters(c)
	orphans := c.OrphanJobs()
	if len(orphans) == 0 || ctr.TombstoneOverflow.Load() == 0 || c.Tombstones() > 3 {
		t.Fatalf("orphans %d, overflow %d, tombstones %d", len(orphans), ctr.TombstoneOverflow.Load(), c.Tombstones())
	}
	for _, id := range orphans {
		if in, _ := rt.JobInput(id); string(in) != `"impatient"` {
			t.Fatalf("orphan %s has input %s", id, in)
		}
	}
	t.Logf("%d orphans, %d tombstones inserted, %d evicted at the cap of 3", len(orphans), ctr.TombstonesInserted.Load(), ctr.TombstoneOverflow.Load())
}

// TestTombstonesExpire: tombstones are expired by the housekeeping tick.
func TestTombstonesExpire(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.RequestTimeout = 20 * time.Millisecond
	cfg.InitTimeout = 500 * time.Millisecond
	cfg.BackoffMax = 10 * time.Millisecond
	upstream.SetKnobs(&cfg, upstream.Knobs{TombstoneSlack: 1, Housekeeping: 5 * time.Millisecond})
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(50 * time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	_, err := c.Submit(sctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 10_000})})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	// The late accept makes the job an orphan (job id tombstoned); all
	// tombstones are then expired by the housekeeping.
	waitFor(ctx, t, "the orphan", func() bool { return len(c.OrphanJobs()) == 1 })
	waitFor(ctx, t, "tombstone expiry", func() bool {
		return c.Tombstones() == 0 && cfgCounters(c).TombstonesExpired.Load() >= 1
	})
}

// TestListJobsLateAnswer: a list_jobs whose caller gave up is tombstoned;
// its answer is a late answer.
func TestListJobsLateAnswer(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(200 * time.Millisecond)
	go c.Submit(ctx, arcp.Submit{Agent: "echo"}) // holds the runtime's queue
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	lctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := c.ListJobs(lctx, arcp.ListJobs{})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ListJobs = %v", err)
	}
	waitFor(ctx, t, "the late session.jobs", func() bool { return cfgCounters(c).LateAnswers.Load() == 1 })
	if _, err := c.ListJobs(ctx, arcp.ListJobs{}); err != nil {
		t.Fatal(err)
	}
}

// TestAcksFreeTheRuntime: with our acks the runtime's un-acked lag stays
// below its back-pressure threshold; with acks suppressed (ack negotiated,
// but the rate limit set to never) the runtime reports back-pressure.
func TestAcksFreeTheRuntime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		suppress bool
	}{{"acking", false}, {"acks_suppressed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{BackPressureThreshold: 300})
			cfg := baseConfig(srv.URL())
			cfg.Features = []string{arcp.FeatureAck}
			if tc.suppress {
				upstream.SetKnobs(&cfg, upstream.Knobs{AckEvery: time.Hour, AckBatch: 1 << 40})
			}
			c := dial(t, cfg)
			ctx := testCtx(t, 20*time.Second)
			acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: streamInput(t, 400, 1)})
			if err != nil {
				t.Fatal(err)
			}
			items := watchAll(t, ctx, c, acc.JobID, 0)
			bp := 0
			for _, it := range items {
				if it.Event != nil && it.Event.Kind == arcp.KindStatus {
					bp++
				}
			}
			if !tc.suppress && bp != 0 {
				t.Fatalf("runtime reported back-pressure %d times although we ack", bp)
			}
			if tc.suppress && bp == 0 {
				t.Fatal("runtime never reported back-pressure without acks: the test proves nothing")
			}
			t.Logf("%s: %d back_pressure status events", tc.name, bp)
		})
	}
}

// TestOrphanCancelSurvivesDrop: an orphan's job.cancel that the runtime never
// processed (the transport dropped first) is sent again after the resume.
func TestOrphanCancelSurvivesDrop(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	other := dial(t, baseConfig(srv.URL()))
	acc, err := other.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	rt.Stall(true)
	before := rt.Stats().FramesReceived
	// An accept nobody waits for (the FIFO is empty) makes the job an
	// orphan without touching event_seq.
	env, _ := arcp.New(arcp.TypeAccepted, c.Status().SessionID, arcp.Accepted{JobID: acc.JobID})
	env.JobID = acc.JobID
	c.HandleCurrent(env)
	if o := c.OrphanJobs(); len(o) != 1 {
		t.Fatalf("orphans %v", o)
	}
	waitFor(ctx, t, "the cancel to reach the stalled runtime", func() bool { return rt.Stats().FramesReceived > before })
	rt.DropTransports() // the held cancel is abandoned unprocessed
	rt.Stall(false)
	if rt.Cancelled(acc.JobID) {
		t.Fatal("the cancel was processed before the drop: the test proves nothing")
	}
	waitFor(ctx, t, "the cancel to be re-sent after the resume", func() bool { return rt.Cancelled(acc.JobID) })
	if c.Status().Generation < 2 {
		t.Fatal("no resume")
	}
}
