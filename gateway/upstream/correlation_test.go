package upstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestPipelinedSubmitsNoMisdelivery is the worst-bug test: 2,000 submits
// pipelined on one session, a random third of the callers giving up before
// the (slowed) runtime accepts. Every answered caller must get its own job,
// every abandoned job must be cancelled upstream, and nothing may be handed
// to the wrong caller. It runs with the pure FIFO (no trace ids on submits)
// and with the trace-id check.
func TestPipelinedSubmitsNoMisdelivery(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		for _, mode := range []struct {
			name    string
			noTrace bool
		}{{"fifo_only", true}, {"trace_checked", false}} {
			t.Run(d.Name+"/"+mode.name, func(t *testing.T) {
				testPipelinedSubmits(t, d.Dialect, mode.name, mode.noTrace)
			})
		}
	}
}

func testPipelinedSubmits(t *testing.T, dialect arcpruntime.Dialect, modeName string, noTrace bool) {
	mode := struct {
		name    string
		noTrace bool
	}{modeName, noTrace}
	{
		{
			srv := runtimeServer(t, arcpruntime.Options{MaxConcurrentJobs: 5000, Dialect: dialect})
			rt := srv.Runtime()
			cfg := baseConfig(srv.URL())
			cfg.MaxLiveJobs = 5000
			cfg.RequestTimeout = 20 * time.Second
			upstream.SetKnobs(&cfg, upstream.Knobs{NoTraceIDs: mode.noTrace})
			n, delay := 2000, time.Millisecond
			if mode.noTrace {
				// Without trace ids nothing tells a reordered accept from
				// an in-order one: submits are written one at a time, so
				// fewer, and slower to answer so that some callers give
				// up while theirs is in flight.
				n, delay = 300, 3*time.Millisecond
			} else {
				// Pipelined: the runtime is already known to echo.
				cfg.Traits = upstream.KnownEcho(1)
			}
			c := dial(t, cfg)
			rt.SetAcceptDelay(delay)

			res := make([]pipelineOutcome, n)
			rng := rand.New(rand.NewPCG(7, uint64(len(mode.name))))
			for i := range res {
				res[i].impatient = rng.IntN(3) == 0
				res[i].input = mustJSON(t, map[string]string{"token": fmt.Sprintf("caller-%04d-%s", i, arcp.NewID())})
			}
			ctx := testCtx(t, 30*time.Second)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range res {
				wg.Go(func() {
					o := &res[i]
					<-start
					sctx := ctx
					if o.impatient {
						var cancel context.CancelFunc
						sctx, cancel = context.WithTimeout(ctx, time.Duration(20+i%40)*time.Millisecond)
						defer cancel()
					}
					o.acc, o.err = c.Submit(sctx, arcp.Submit{Agent: "echo", Input: o.input})
					if o.err == nil {
						o.term, o.werr = c.Wait(ctx, o.acc.JobID)
					}
				})
			}
			close(start)
			wg.Wait()
			if !mode.noTrace {
				// However loaded the machine (every random caller may give
				// up before its submit is written), one submit is abandoned
				// in flight for sure: its accept is held until the caller
				// has given up after the runtime received it.
				res = append(res, abandonInFlight(ctx, t, c, rt))
			}

			owner := map[string]int{} // job id -> caller
			answered, gaveUp := 0, 0
			for i := range res {
				o := &res[i]
				if o.err != nil {
					if !o.impatient || !errors.Is(o.err, context.DeadlineExceeded) {
						t.Fatalf("caller %d (impatient=%v): Submit err = %v", i, o.impatient, o.err)
					}
					gaveUp++
					continue
				}
				answered++
				if prev, dup := owner[o.acc.JobID]; dup {
					t.Fatalf("MISDELIVERY: job %s handed to callers %d and %d", o.acc.JobID, prev, i)
				}
				owner[o.acc.JobID] = i
				in, ok := rt.JobInput(o.acc.JobID)
				if !ok || !bytes.Equal(in, o.input) {
					t.Fatalf("MISDELIVERY: caller %d got job %s whose input is %s, want %s", i, o.acc.JobID, in, o.input)
				}
				if o.werr != nil || o.term.Result == nil || !bytes.Equal(o.term.Result.Result, o.input) {
					t.Fatalf("MISDELIVERY: caller %d Wait = %+v, %v; want its own echo %s", i, o.term, o.werr, o.input)
				}
			}
			if gaveUp == 0 || answered == 0 {
				t.Fatalf("answered %d, gave up %d: the test did not exercise both paths", answered, gaveUp)
			}
			// Every tombstoned slot is eventually matched by its late accept.
			waitFor(ctx, t, "the FIFO to drain", func() bool { return c.FIFOLen() == 0 })
			orphans := c.OrphanJobs()
			tokens := map[string]int{}
			for i := range res {
				tokens[string(res[i].input)] = i
			}
			for _, id := range orphans {
				if i, mine := owner[id]; mine {
					t.Fatalf("job %s of answered caller %d was cancelled as an orphan", id, i)
				}
				in, ok := rt.JobInput(id)
				if !ok {
					t.Fatalf("orphan %s unknown to the runtime", id)
				}
				i, ok := tokens[string(in)]
				if !ok || res[i].err == nil {
					t.Fatalf("orphan %s (input %s) does not belong to a caller that gave up", id, in)
				}
			}
			if len(orphans) == 0 && !mode.noTrace {
				// (Written one at a time, a submit is rarely abandoned in
				// flight: the serialized path's tombstones are exercised
				// by the correlation core's property test.)
				t.Fatal("no submit was abandoned after being sent, not even abandonInFlight's: the tombstone path was not exercised")
			}
			waitFor(ctx, t, "every orphan to be cancelled upstream", func() bool {
				for _, id := range orphans {
					if !rt.Cancelled(id) {
						return false
					}
				}
				return true
			})
			st := rt.Stats()
			// Everything the runtime accepted is accounted for: a job of an
			// answered caller or a cancelled orphan. (Callers that gave up
			// before their submit was written sent nothing.)
			if int(st.JobsAccepted) != answered+len(orphans) || st.JobsRejected != 0 {
				t.Fatalf("runtime accepted %d, rejected %d; answered %d + orphans %d", st.JobsAccepted, st.JobsRejected, answered, len(orphans))
			}
			ctr := cfgCounters(c)
			if got := ctr.OrphansCancelled.Load(); got != uint64(len(orphans)) {
				t.Fatalf("OrphansCancelled = %d, orphans %d", got, len(orphans))
			}
			if ctr.TombstonesInserted.Load() < uint64(len(orphans)) {
				t.Fatalf("TombstonesInserted = %d < orphans %d", ctr.TombstonesInserted.Load(), len(orphans))
			}
			t.Logf("%s: answered %d, gave up %d (of which %d were sent and became orphans, all cancelled upstream); late answers %d",
				mode.name, answered, gaveUp, len(orphans), ctr.LateAnswers.Load())
		}
	}
}

// cfgCounters returns the connection's counters (the tests use private ones).
func cfgCounters(c *upstream.Conn) *upstream.Counters { return upstream.CountersOf(c) }

// TestRejectionRemovesExactlyThatSubmit pipelines valid and invalid submits:
// every rejection goes to its own caller and shifts nobody.
func TestRejectionRemovesExactlyThatSubmit(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{MaxConcurrentJobs: 1000})
	cfg := baseConfig(srv.URL())
	cfg.MaxLiveJobs = 1000
	upstream.SetKnobs(&cfg, upstream.Knobs{NoTraceIDs: true})
	c := dial(t, cfg)
	ctx := testCtx(t, 20*time.Second)
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	accs := make([]arcp.Accepted, n)
	for i := range n {
		wg.Go(func() {
			agent := "echo"
			if i%3 == 1 {
				agent = "no-such-agent"
			}
			accs[i], errs[i] = c.Submit(ctx, arcp.Submit{Agent: agent, Input: mustJSON(t, i)})
		})
	}
	wg.Wait()
	for i := range n {
		if i%3 == 1 {
			if ae := asArcpError(errs[i]); ae == nil || ae.Code != arcp.CodeAgentNotAvailable {
				t.Fatalf("caller %d: err = %v, want AGENT_NOT_AVAILABLE", i, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		in, _ := srv.Runtime().JobInput(accs[i].JobID)
		if string(in) != fmt.Sprint(i) {
			t.Fatalf("MISDELIVERY: caller %d got job with input %s", i, in)
		}
	}
}

// TestTombstoneTTLForLongCalls: the default TTL is the ADR's formula, and a
// call whose budget exceeded RequestTimeout gets a tombstone as long as it
// needed.
func TestTombstoneTTLForLongCalls(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := upstream.Config{URL: srv.URL()} // all defaults
	c := dial(t, cfg)
	if got := c.TombstoneTTL(0); got != 75*time.Second {
		t.Fatalf("default TTL = %v, want 75s", got)
	}
	if got := c.TombstoneTTL(10 * time.Second); got != 75*time.Second {
		t.Fatalf("TTL for a short call = %v, want 75s", got)
	}
	if got := c.TombstoneTTL(120 * time.Second); got != 165*time.Second {
		t.Fatalf("TTL for a 120s call = %v, want 165s", got)
	}

	// A live case: a submit with a 300ms budget (RequestTimeout 100ms) that
	// gives up gets a head tombstone living budget+init+backoff+slack.
	rt := srv.Runtime()
	cfg = baseConfig(srv.URL())
	cfg.RequestTimeout = 100 * time.Millisecond
	cfg.InitTimeout = time.Second
	cfg.BackoffMax = 50 * time.Millisecond
	c2 := dial(t, cfg)
	rt.SetAcceptDelay(2 * time.Second)
	ctx, cancel := context.WithTimeout(testCtx(t, 10*time.Second), 300*time.Millisecond)
	defer cancel()
	_, err := c2.Submit(ctx, arcp.Submit{Agent: "echo"})
	gaveUp := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit err = %v", err)
	}
	exp, ok := c2.HeadTombstone()
	if !ok {
		t.Fatal("no tombstoned FIFO head")
	}
	want := 300*time.Millisecond + time.Second + 50*time.Millisecond + 5*time.Second
	if d := exp.Sub(gaveUp); d < want-100*time.Millisecond || d > want+100*time.Millisecond {
		t.Fatalf("tombstone lives %v after giving up, want about %v", d, want)
	}
	rt.SetAcceptDelay(0)
}

// TestFIFOStallDropsTransport: a tombstoned submit the runtime never answers
// must not expire out of the FIFO (that would shift later accepts onto the
// wrong callers). While a patient caller waits behind it nothing is
// dropped: one impatient caller does not bound the others, and the patient
// one gets its own job. Once nobody live waits and the slot is past its TTL,
// the transport is dropped and resumed.
func TestFIFOStallDropsTransport(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.RequestTimeout = 50 * time.Millisecond
	cfg.InitTimeout = 200 * time.Millisecond
	cfg.BackoffMax = 10 * time.Millisecond
	upstream.SetKnobs(&cfg, upstream.Knobs{TombstoneSlack: 1, Housekeeping: 5 * time.Millisecond})
	cfg.Traits = upstream.KnownEcho(1) // submits are pipelined behind the tombstone
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)

	rt.SetAcceptDelay(600 * time.Millisecond) // beyond the 260ms TTL
	sctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	_, err := c.Submit(sctx, arcp.Submit{Agent: "echo"})
	cancel()
	gaveUp := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit err = %v", err)
	}
	if _, ok := c.HeadTombstone(); !ok {
		t.Fatal("the abandoned submit did not keep its FIFO slot")
	}
	// A second caller queues behind the tombstone in the same generation,
	// with budget to spare: the head's TTL passes, nothing is dropped.
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "second")})
	if err != nil {
		t.Fatalf("patient Submit behind an expired tombstone: %v", err)
	}
	if d := time.Since(gaveUp); d < 260*time.Millisecond {
		t.Fatalf("answered after %v: the test did not outlive the tombstone's TTL", d)
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"second"` {
		t.Fatalf("the patient caller got a job with input %s", in)
	}
	if n := cfgCounters(c).FIFOStalls.Load(); n != 0 || c.Status().Generation != 1 {
		t.Fatalf("FIFOStalls = %d, generation %d: the transport was dropped under a patient caller", n, c.Status().Generation)
	}

	// Alone, an abandoned head past its TTL is a stall: the transport goes.
	rt.SetAcceptDelay(5 * time.Second)
	sctx, cancel = context.WithTimeout(ctx, 20*time.Millisecond)
	_, err = c.Submit(sctx, arcp.Submit{Agent: "echo"})
	cancel()
	gaveUp = time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit err = %v", err)
	}
	waitFor(ctx, t, "the FIFO stall to drop the transport", func() bool {
		return cfgCounters(c).FIFOStalls.Load() == 1 && c.Status().Generation == 2 && c.Status().State == upstream.StateReady
	})
	if d := time.Since(gaveUp); d < 260*time.Millisecond {
		t.Fatalf("slot dropped after %v, before its TTL", d)
	}
	rt.SetAcceptDelay(0)
	acc, err = c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "third")})
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"third"` {
		t.Fatalf("third got a job with input %s", in)
	}
}

// TestStaleGenerationFrameDropped: an answer read from an older generation's
// transport is dropped and counted, and the pending caller gets its own job.
func TestStaleGenerationFrameDropped(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(200 * time.Millisecond)
	done := make(chan arcp.Accepted, 1)
	go func() {
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "mine")})
		if err != nil {
			t.Error(err)
		}
		done <- acc
	}()
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	env, _ := arcp.New(arcp.TypeAccepted, c.Status().SessionID, arcp.Accepted{JobID: "job-from-the-past", AcceptedAt: time.Now().Format(time.RFC3339)})
	env.JobID = "job-from-the-past"
	c.HandleStale(env)
	if got := cfgCounters(c).StaleGeneration.Load(); got != 1 {
		t.Fatalf("StaleGeneration = %d", got)
	}
	acc := <-done
	if acc.JobID == "job-from-the-past" {
		t.Fatal("MISDELIVERY: stale accept delivered")
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"mine"` {
		t.Fatalf("got job with input %s", in)
	}
}

// TestForeignAcceptWithTraceIDs: once the runtime has shown that it copies
// our trace ids onto job.accepted, an accept carrying a trace id of no
// waiting submit (for example one answering a previous transport's submit)
// is not matched by position: it is counted as stale and its job cancelled.
func TestForeignAcceptWithTraceIDs(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil { // teaches the echo
		t.Fatal(err)
	}
	rt.SetAcceptDelay(300 * time.Millisecond)
	done := make(chan arcp.Accepted, 1)
	go func() {
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "mine")})
		if err != nil {
			t.Error(err)
		}
		done <- acc
	}()
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	sid := c.Status().SessionID
	frame := fmt.Sprintf(`{"arcp":"1.1","id":"%s","type":"job.accepted","session_id":"%s","job_id":"foreign","trace_id":"0123456789abcdef0123456789abcdef","payload":{"job_id":"foreign","accepted_at":"2026-01-01T00:00:00Z","trace_id":"0123456789abcdef0123456789abcdef"}}`, arcp.NewID(), sid)
	if err := rt.InjectFrame(sid, []byte(frame), false); err != nil {
		t.Fatal(err)
	}
	acc := <-done
	if acc.JobID == "foreign" {
		t.Fatal("MISDELIVERY: foreign accept delivered by position")
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"mine"` {
		t.Fatalf("got job with input %s", in)
	}
	if cfgCounters(c).StaleGeneration.Load() != 1 {
		t.Fatalf("StaleGeneration = %d", cfgCounters(c).StaleGeneration.Load())
	}
	if o := c.OrphanJobs(); len(o) != 1 || o[0] != "foreign" {
		t.Fatalf("orphans = %v", o)
	}
}

// TestLateRejectionOfTombstone: a rejection that arrives after its caller
// gave up removes the tombstone and nothing else.
func TestLateRejectionOfTombstone(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(100 * time.Millisecond)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	_, err := c.Submit(sctx, arcp.Submit{Agent: "no-such-agent"})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "after")})
	if err != nil {
		t.Fatalf("Submit after a tombstoned rejection: %v", err)
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"after"` {
		t.Fatalf("got job with input %s", in)
	}
	if c.FIFOLen() != 0 || cfgCounters(c).LateAnswers.Load() == 0 {
		t.Fatalf("FIFO %d, late answers %d", c.FIFOLen(), cfgCounters(c).LateAnswers.Load())
	}
}

// TestUnreadableAcceptDropsTransport: an accept that cannot be read while a
// submit waits could be that submit's answer or junk; the connection does
// not guess. It drops the transport; after the resume the waiting submit is
// reconciled (written again under its idempotency key) and gets its own job.
func TestUnreadableAcceptDropsTransport(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(300 * time.Millisecond)
	done := make(chan error, 1)
	accs := make(chan arcp.Accepted, 1)
	go func() {
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "mine")})
		accs <- acc
		done <- err
	}()
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	sid := c.Status().SessionID
	bad := `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"job.accepted","session_id":"` + sid + `","payload":{"job_id":["not","a","string"]}}`
	if err := rt.InjectFrame(sid, []byte(bad), false); err != nil {
		t.Fatal(err)
	}
	acc := <-accs
	if err := <-done; err != nil {
		t.Fatalf("Submit err = %v, want its own job after reconciliation", err)
	}
	if in, _ := rt.JobInput(acc.JobID); string(in) != `"mine"` {
		t.Fatalf("reconciled submit got a job with input %s", in)
	}
	rt.SetAcceptDelay(0)
	waitFor(ctx, t, "the resume", func() bool { return c.Status().Generation == 2 && c.Status().State == upstream.StateReady })
	if cfgCounters(c).MalformedFrames.Load() != 1 {
		t.Fatalf("MalformedFrames = %d", cfgCounters(c).MalformedFrames.Load())
	}
}

// TestUndecodableFrameWhileSubmitWaits: a frame that does not decode at all
// might have been the waiting submit's accept: the transport is dropped
// rather than risk shifting the FIFO, and the submit is reconciled.
func TestUndecodableFrameWhileSubmitWaits(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(300 * time.Millisecond)
	done := make(chan error, 1)
	go func() {
		_, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
		done <- err
	}()
	waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
	sid := c.Status().SessionID
	// A valid envelope shape with an upper-case trace id fails Decode.
	bad := `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"job.accepted","session_id":"` + sid + `","job_id":"j1","trace_id":"0123456789ABCDEF0123456789ABCDEF","payload":{"job_id":"j1","accepted_at":"x"}}`
	if err := rt.InjectFrame(sid, []byte(bad), false); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Submit err = %v, want its own job after reconciliation", err)
	}
	if g := c.Status().Generation; g < 2 {
		t.Fatalf("generation %d: the transport was not dropped", g)
	}
	rt.SetAcceptDelay(0)
}

// pipelineOutcome is one caller of testPipelinedSubmits.
type pipelineOutcome struct {
	input     json.RawMessage
	impatient bool
	acc       arcp.Accepted
	err       error
	term      upstream.Terminal
	werr      error
}

// abandonInFlight submits one job whose accept the runtime holds for two
// seconds, and gives up once the runtime has received the submit: an abandon
// in flight whatever the scheduling. The runtime's accept delay is restored.
func abandonInFlight(ctx context.Context, t *testing.T, c *upstream.Conn, rt *arcpruntime.Runtime) pipelineOutcome {
	t.Helper()
	o := pipelineOutcome{impatient: true, input: mustJSON(t, map[string]string{"token": "abandoned-in-flight-" + arcp.NewID()})}
	before := rt.Stats().JobsSubmitted
	rt.SetAcceptDelay(2 * time.Second)
	defer rt.SetAcceptDelay(0)
	sctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.acc, o.err = c.Submit(sctx, arcp.Submit{Agent: "echo", Input: o.input})
	}()
	waitFor(ctx, t, "the runtime to receive the submit", func() bool { return rt.Stats().JobsSubmitted > before })
	cancel(context.DeadlineExceeded)
	<-done
	if o.err == nil {
		t.Fatalf("abandonInFlight: Submit answered %+v although the runtime held its accept", o.acc)
	}
	o.err = fmt.Errorf("%w (gave up in flight: %w)", context.DeadlineExceeded, o.err)
	return o
}
