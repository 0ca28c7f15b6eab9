package upstream_test

import (
	"bytes"
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

// One test per failure the official SDK runtimes showed, each against the
// dialect that shows it, over real WebSockets. The comment of each names the
// assertion that failed before the correlation core.

func dialectOf(t *testing.T, name string) arcpruntime.Dialect {
	t.Helper()
	for _, d := range arcpruntime.Dialects {
		if d.Name == name {
			return d.Dialect
		}
	}
	t.Fatalf("no dialect %q", name)
	return arcpruntime.Dialect{}
}

type submitResult struct {
	acc arcp.Accepted
	err error
}

// submitAsync starts a Submit and returns its result channel.
func submitAsync(ctx context.Context, c *upstream.Conn, s arcp.Submit) <-chan submitResult {
	ch := make(chan submitResult, 1)
	go func() {
		acc, err := c.Submit(ctx, s)
		ch <- submitResult{acc, err}
	}()
	return ch
}

// TS SDK: a submit for an unknown agent is rejected by job.error under a
// fresh job id (no job.accepted, no request_id). Before: the FIFO did not
// move, the next caller received the rejected caller's slot: "caller A
// received caller B's job", and B hung.
func TestTSRejectionByJobErrorConsumesItsSlot(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	rt.SetAcceptDelay(50 * time.Millisecond) // both submits wait in the FIFO together
	a := submitAsync(ctx, c, arcp.Submit{Agent: "no-such-agent", Input: mustJSON(t, "A")})
	waitFor(ctx, t, "A to be written", func() bool { return c.FIFOLen() == 1 })
	b := submitAsync(ctx, c, arcp.Submit{Agent: "echo", Input: mustJSON(t, "B")})
	ra, rb := <-a, <-b
	if ae := asArcpError(ra.err); ae == nil || ae.Code != arcp.CodeAgentNotAvailable {
		t.Fatalf("A = %+v, %v; want AGENT_NOT_AVAILABLE", ra.acc, ra.err)
	}
	if rb.err != nil {
		t.Fatalf("B = %v", rb.err)
	}
	if in, _ := rt.JobInput(rb.acc.JobID); string(in) != `"B"` {
		t.Fatalf("B got a job with input %s", in)
	}
	if term, err := c.Wait(ctx, rb.acc.JobID); err != nil || string(term.Result.Result) != `"B"` {
		t.Fatalf("B's result = %+v, %v", term.Result, err)
	}
}

// TS SDK: DUPLICATE_KEY is job.error on the EXISTING job's id. Before: the
// existing job was ended by it and the submit waited. Now the submit gets
// DUPLICATE_KEY and the existing job runs on.
func TestTSDuplicateKeyOnExistingJob(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	first, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 300}), IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 999}), IdempotencyKey: "k"})
	if ae := asArcpError(err); ae == nil || ae.Code != arcp.CodeDuplicateKey {
		t.Fatalf("conflicting reuse of a key = %v, want DUPLICATE_KEY", err)
	}
	term, err := c.Wait(ctx, first.JobID)
	if err != nil || term.Result == nil {
		t.Fatalf("the existing job ended with %+v, %v; want its own result", term, err)
	}
}

// Go SDK: job.cancelled carries an event_seq. Before: the seq was ignored,
// the next event looked like a gap, three resumes later the session ended
// with INTERNAL. Now the cancel is one step of the sequence: no resume.
func TestGoCancelledWithSeqKeepsSession(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "go-sdk")})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	for range 3 {
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Cancel(ctx, acc.JobID, "enough"); err != nil {
			t.Fatal(err)
		}
		term, err := c.Wait(ctx, acc.JobID)
		if err != nil || term.Error == nil || term.Error.Code != arcp.CodeCancelled {
			t.Fatalf("cancelled job ended %+v, %v", term, err)
		}
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	if g := c.Status().Generation; g != 1 || cfgCounters(c).SequenceGaps.Load() != 0 {
		t.Fatalf("generation %d, gaps %d: a sequenced job.cancelled broke the session", g, cfgCounters(c).SequenceGaps.Load())
	}
}

// Both SDKs and the reference: a repeated submit with the same key gets the
// original job.accepted with the ORIGINAL trace id. Before: once trace
// echoes were seen, that accept was taken as stale and the retry hung until
// its deadline, then stalled the FIFO for everyone.
func TestIdempotentRetryGetsTheOriginalJob(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		t.Run(d.Name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{Dialect: d.Dialect})
			c := dial(t, baseConfig(srv.URL()))
			ctx := testCtx(t, 10*time.Second)
			if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil { // the runtime shows it echoes
				t.Fatal(err)
			}
			s := arcp.Submit{Agent: "echo", Input: mustJSON(t, "once"), IdempotencyKey: "retry-me"}
			first, err := c.Submit(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			again, err := c.Submit(rctx, s)
			if err != nil || again.JobID != first.JobID {
				t.Fatalf("retry = %+v, %v; want job %s", again, err, first.JobID)
			}
			next, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "next")})
			if err != nil || next.JobID == first.JobID {
				t.Fatalf("next submit = %+v, %v", next, err)
			}
			if in, _ := srv.Runtime().JobInput(next.JobID); string(in) != `"next"` {
				t.Fatalf("next got a job with input %s", in)
			}
		})
	}
}

// Go (retryable true) and TS (retryable false): session.error HEARTBEAT_LOST
// without request_id. Before: the session ended. §6.4: it lives on for the
// resume window; now the connection resumes.
func TestHeartbeatLostNoticeResumes(t *testing.T) {
	for _, retryable := range []bool{true, false} {
		srv := runtimeServer(t, arcpruntime.Options{})
		c := dial(t, baseConfig(srv.URL()))
		ctx := testCtx(t, 10*time.Second)
		acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": 20, "interval_ms": 20})})
		if err != nil {
			t.Fatal(err)
		}
		sid := c.Status().SessionID
		notice := `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"session.error","session_id":"` + sid +
			`","payload":{"code":"HEARTBEAT_LOST","message":"heartbeat lost","retryable":` + map[bool]string{true: "true", false: "false"}[retryable] + `}}`
		if err := srv.Runtime().InjectFrame(sid, []byte(notice), false); err != nil {
			t.Fatal(err)
		}
		waitFor(ctx, t, "the resume", func() bool { return c.Status().Generation >= 2 && c.Status().State == upstream.StateReady })
		term, err := c.Wait(ctx, acc.JobID)
		if err != nil || term.Result == nil {
			t.Fatalf("retryable=%v: job across the notice = %+v, %v", retryable, term, err)
		}
	}
}

// TS and the draft's §13.8: AGENT_VERSION_NOT_AVAILABLE as session.error
// WITHOUT request_id. Before: the whole session ended. Now that submit fails
// and the session goes on.
func TestVersionErrorWithoutRequestIDFailsOneSubmit(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	_, err := c.Submit(ctx, arcp.Submit{Agent: "echo@9.9.9"})
	if ae := asArcpError(err); ae == nil || ae.Code != arcp.CodeAgentVersionNotAvailable {
		t.Fatalf("submit of a missing version = %v", err)
	}
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "after")})
	if err != nil {
		t.Fatalf("session after a version error: %v", err)
	}
	if in, _ := srv.Runtime().JobInput(acc.JobID); string(in) != `"after"` {
		t.Fatalf("got a job with input %s", in)
	}
}

// §8.4: a result streamed in result_chunk events. Before: result_chunk was
// not negotiated and a streamed result reached Wait empty. Now Wait returns
// the assembled bytes, utf8 and base64, in every dialect.
func TestStreamedResultAssembled(t *testing.T) {
	for _, d := range arcpruntime.Dialects {
		for _, enc := range []string{"utf8", "base64"} {
			t.Run(d.Name+"/"+enc, func(t *testing.T) {
				srv := runtimeServer(t, arcpruntime.Options{Dialect: d.Dialect})
				c := dial(t, baseConfig(srv.URL()))
				ctx := testCtx(t, 10*time.Second)
				const size = 100_000
				acc, err := c.Submit(ctx, arcp.Submit{Agent: "chunked", Input: mustJSON(t, map[string]any{"size": size, "chunk_bytes": 7_000, "encoding": enc})})
				if err != nil {
					t.Fatal(err)
				}
				term, err := c.Wait(ctx, acc.JobID)
				if err != nil || term.Result == nil || term.AssemblyErr != nil {
					t.Fatalf("Wait = %+v, %v", term, err)
				}
				a := term.Assembled
				if a == nil || a.ResultID == "" || a.ResultID != term.Result.ResultID {
					t.Fatalf("no assembled result: %+v", a)
				}
				want := make([]byte, size)
				for i := range want {
					want[i] = arcpruntime.ChunkedByte(int64(i))
				}
				if !bytes.Equal(a.Data, want) {
					t.Fatalf("assembled %d bytes, want %d of the pattern", len(a.Data), size)
				}
				if a.Text != (enc == "utf8") {
					t.Fatalf("Text = %v for %s", a.Text, enc)
				}
			})
		}
	}
}

// The assembler refuses what it cannot put together, definitely.
func TestStreamedResultTooLarge(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	cfg := baseConfig(srv.URL())
	cfg.MaxResultBytes = 10_000
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "chunked", Input: mustJSON(t, map[string]any{"size": 50_000, "chunk_bytes": 4_000, "encoding": "utf8"})})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Wait(ctx, acc.JobID)
	var capErr *upstream.CapError
	if err != nil || !errors.As(term.AssemblyErr, &capErr) || capErr.Cap != "result_bytes" {
		t.Fatalf("Wait = %+v, %v; want AssemblyErr result_bytes", term, err)
	}
}

// Go SDK: a submit the runtime read just before a drop is answered on the
// NEXT transport, without echoing our trace id. Before: that caller failed
// with OUTCOME_UNKNOWN and its late accept went to the next caller. Now the
// reconciliation barrier takes the late answer for the submit it belongs
// to, and every caller gets its own job.
func TestLateAcceptAcrossResumeGoesToItsCaller(t *testing.T) {
	d := dialectOf(t, "go-sdk")
	d.Trace = arcpruntime.TraceNone
	srv := runtimeServer(t, arcpruntime.Options{Dialect: d})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	for round := range 5 {
		rt.SetAcceptDelay(200 * time.Millisecond)
		a := submitAsync(ctx, c, arcp.Submit{Agent: "echo", Input: mustJSON(t, map[string]int{"a": round})})
		waitFor(ctx, t, "A to be written", func() bool { return c.FIFOLen() == 1 })
		rt.DropTransports()
		rt.SetAcceptDelay(0)
		b := submitAsync(ctx, c, arcp.Submit{Agent: "echo", Input: mustJSON(t, map[string]int{"b": round})})
		ra, rb := <-a, <-b
		if ra.err != nil || rb.err != nil {
			t.Fatalf("round %d: A %v, B %v", round, ra.err, rb.err)
		}
		for name, r := range map[string]submitResult{"a": ra, "b": rb} {
			in, _ := rt.JobInput(r.acc.JobID)
			var got map[string]int
			if json.Unmarshal(in, &got) != nil || got[name] != round || len(got) != 1 {
				t.Fatalf("round %d: MISDELIVERY: caller %s got job %s with input %s", round, name, r.acc.JobID, in)
			}
		}
	}
	if st := rt.Stats(); st.JobsAccepted != 10 {
		t.Fatalf("runtime created %d jobs for 10 submits", st.JobsAccepted)
	}
}

// A buggy runtime answers a keyless submit with the id of another caller's
// live job. Before: the second caller was handed the first caller's job.
// Now it fails with a definite error and the job stays with its owner. (The
// connection gives every submit a key of its own, which keeps such a runtime
// from reusing ids at all; the test turns that off to reach the check.)
func TestReusedLiveJobIDIsRefused(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	upstream.SetKnobs(&cfg, upstream.Knobs{NoAutoKeys: true})
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	first, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 400})})
	if err != nil {
		t.Fatal(err)
	}
	rt.ReuseJobIDOnce(first.JobID)
	second, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "second")})
	if !errors.Is(err, upstream.ErrOutcomeUnknown) || second.JobID != "" {
		t.Fatalf("second = %+v, %v; want ErrOutcomeUnknown and no job", second, err)
	}
	if cfgCounters(c).JobIDReused.Load() != 1 {
		t.Fatalf("JobIDReused = %d", cfgCounters(c).JobIDReused.Load())
	}
	if term, err := c.Wait(ctx, first.JobID); err != nil || term.Result == nil {
		t.Fatalf("the owner's job = %+v, %v", term, err)
	}
}

// SDK runtimes scope idempotency keys per principal, and every gateway
// session uses one principal. Before: session S2 submitting with S1's key
// and input got S1's job. Now keys are namespaced per caller.
func TestIdempotencyKeysNamespacedPerCaller(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "go-sdk")})
	ctx := testCtx(t, 10*time.Second)
	cfgA, cfgB := baseConfig(srv.URL()), baseConfig(srv.URL())
	cfgA.KeyNamespace, cfgB.KeyNamespace = "alice", "bob"
	a, b := dial(t, cfgA), dial(t, cfgB)
	s := arcp.Submit{Agent: "echo", Input: mustJSON(t, "same"), IdempotencyKey: "shared-key"}
	ja, err := a.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := b.Submit(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if ja.JobID == jb.JobID {
		t.Fatalf("bob got alice's job %s through her idempotency key", ja.JobID)
	}
	// The same caller in another session still gets its own job back.
	a2 := dial(t, cfgA)
	if j, err := a2.Submit(ctx, s); err != nil || j.JobID != ja.JobID {
		t.Fatalf("alice's retry from another session = %+v, %v; want %s", j, err, ja.JobID)
	}
}

// A cancel the caller could not wait for while the connection was
// reconnecting. Before: it was dropped after its timeout and the job ran on
// for nobody. Now the connection owns it until the runtime confirms.
func TestCancelOwnedAcrossReconnect(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.BackoffInitial, cfg.BackoffMax = 300*time.Millisecond, 300*time.Millisecond
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
	if err != nil {
		t.Fatal(err)
	}
	rt.DropTransports()
	waitFor(ctx, t, "reconnecting", func() bool { return c.Status().State == upstream.StateReconnecting })
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	err = c.Cancel(cctx, acc.JobID, "caller gave up")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cancel while reconnecting = %v", err)
	}
	waitFor(ctx, t, "the cancel to reach the runtime after the resume", func() bool { return rt.Cancelled(acc.JobID) })
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || term.Error == nil || term.Error.Code != arcp.CodeCancelled {
		t.Fatalf("job = %+v, %v", term, err)
	}
}

// Go SDK: concurrent jobs put event_seq slightly out of order on the wire.
// Before: every reorder cost a resume and a ~1 s stall. Now the reorder
// window restores the order without a resume.
func TestReorderedSeqsWithoutResume(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "go-sdk")})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 15*time.Second)
	const jobs, count = 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, jobs)
	for range jobs {
		wg.Go(func() {
			acc, err := c.Submit(ctx, arcp.Submit{Agent: "stream", Input: mustJSON(t, map[string]int{"count": count, "interval_ms": 0})})
			if err != nil {
				errs <- err
				return
			}
			w, err := c.Watch(acc.JobID, 0)
			if err != nil {
				errs <- err
				return
			}
			defer w.Close()
			next, last := 0, uint64(0)
			for {
				it, err := w.Next(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					errs <- err
					return
				}
				if it.Seq <= last {
					errs <- errors.New("seqs out of order within a job")
					return
				}
				last = it.Seq
				if it.Event != nil {
					var b struct{ I int }
					_ = json.Unmarshal(it.Event.Body, &b)
					if b.I != next {
						errs <- errors.New("event lost or repeated")
						return
					}
					next++
				}
			}
			if next != count {
				errs <- errors.New("events missing")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ctr := cfgCounters(c)
	if g := c.Status().Generation; g != 1 || ctr.SequenceGaps.Load() != 0 {
		t.Fatalf("generation %d, gaps %d: reordering cost a resume", g, ctr.SequenceGaps.Load())
	}
	if ctr.ReorderedEvents.Load() == 0 {
		t.Fatal("the runtime reordered nothing: the test proves nothing")
	}
}

// TS SDK knows only session.bye: session.close is answered with
// INVALID_REQUEST. Before: Close logged an error and never ended the
// runtime's session. Now the connection falls back to session.bye with the
// caller's reason, and the runtime's session is gone.
func TestCloseFallsBackToBye(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "ts-sdk")})
	cfg := baseConfig(srv.URL())
	var tok string
	cfg.OnWelcome = func(_, token string) { tok = token }
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	sid := c.Status().SessionID
	if err := c.CloseWithReason(ctx, "done for today"); err != nil {
		t.Fatalf("Close = %v, want a clean close through session.bye", err)
	}
	// session.bye has no answer, so Close returns once it is queued: the
	// runtime ends the session when it reads it, which may be a moment
	// later. Once it has, a takeover with the session's token is refused.
	waitFor(ctx, t, "the runtime to end the session", func() bool { return srv.Runtime().Stats().Sessions == 0 })
	cfg2 := baseConfig(srv.URL())
	cfg2.Resume = &upstream.ResumeFrom{SessionID: sid, ResumeToken: tok}
	if _, err := upstream.Dial(ctx, cfg2); err == nil {
		t.Fatal("the session outlived its close")
	}
}

// Go SDK knows only session.close (and answers session.bye with an error):
// the reason reaches the runtime in session.close and Close is clean.
func TestCloseCarriesReason(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{Dialect: dialectOf(t, "go-sdk")})
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	if err := c.CloseWithReason(ctx, "maintenance window"); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if !errors.Is(c.Err(), upstream.ErrClosed) {
		t.Fatalf("Err = %v", c.Err())
	}
}

// TS SDK refuses a resume that has nothing to replay. Before: the session
// was lost at the first drop with no new events. The connection holds back
// the ack of the newest event, and retries once from one event earlier.
func TestCaughtUpResumeRefusedIsRetried(t *testing.T) {
	d := dialectOf(t, "ts-sdk")
	d.LoseRunningJobsOnResume = false
	srv := runtimeServer(t, arcpruntime.Options{Dialect: d})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "x")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, acc.JobID); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rt.DropTransports()
		waitFor(ctx, t, "the resume", func() bool {
			return c.Status().Generation == uint64(i+2) && c.Status().State == upstream.StateReady
		})
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil {
		t.Fatalf("session after caught-up resumes: %v", err)
	}
	if cfgCounters(c).DuplicateEvents.Load() == 0 {
		t.Fatal("no event was replayed: the retry from one event earlier did not happen")
	}
}

// Numbers from the runtime are clamped: heartbeat_interval_sec 1e10 would
// overflow to a negative interval (and ~860 pings a second).
func TestWelcomeNumbersClamped(t *testing.T) {
	for _, tc := range []struct {
		name string
		ext  string
		sec  int
		want time.Duration
	}{
		{"huge seconds", "", 1e10, time.Hour},
		{"huge ms", "1e18", 0, time.Hour},
		{"tiny ms", "0.001", 0, 10 * time.Millisecond},
		{"normal", "", 30, 30 * time.Second},
		{"ms wins", "250", 30, 250 * time.Millisecond},
	} {
		if got := upstream.HeartbeatIntervalOf(tc.ext, tc.sec); got != tc.want {
			t.Errorf("%s: interval %v, want %v", tc.name, got, tc.want)
		}
	}
}
