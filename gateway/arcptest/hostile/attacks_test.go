package hostile_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcptest/hostile"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// timedRun runs one RunJob with the given deadline and reports how long it
// took.
func (s *suite) timedRun(ctx context.Context, sid string, in hostile.Input, deadline time.Duration) (*sessiongatev1.RunJobResponse, error, time.Duration) {
	cctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	start := time.Now()
	resp, err := s.run(cctx, sid, in)
	return resp, err, time.Since(start)
}

// TestGarbageAnswers: a runtime that answers every submit with garbage
// (invalid JSON, job_id as a number, an accept without job_id). The caller
// gets a definite UNAVAILABLE or INTERNAL naming the runtime's fault after a
// few unreadable answers, long before its deadline, and the gateway does
// not churn through resumes for the whole deadline.
func TestGarbageAnswers(t *testing.T) {
	s := getSuite(t)
	for _, m := range []hostile.Mode{hostile.ModeGarbageJSON, hostile.ModeGarbageJobIDNumber, hostile.ModeGarbageNoJobID} {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 60*time.Second)
			sid := s.open(t, ctx, m)
			const deadline = 20 * time.Second
			resp, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("garbage")}, deadline)
			st := s.hs.Stats(m)
			if err == nil {
				t.Fatalf("RunJob answered only with garbage returned %v", resp)
			}
			ce := describe(err)
			t.Logf("after %v: %v; runtime saw %d hellos, sent %d garbage answers", took.Round(time.Millisecond), ce, st.Hellos, st.Garbage)
			if ce.code != codes.Unavailable && ce.code != codes.Internal {
				t.Errorf("code %v, want UNAVAILABLE or INTERNAL naming the runtime's fault: %v", ce.code, ce)
			}
			if ce.reason == "" {
				t.Errorf("no ErrorInfo reason: %v", ce)
			}
			if took > deadline/2 {
				t.Errorf("the caller waited %v (deadline %v): garbage answers must fail the submit after a few tries", took, deadline)
			}
			if st.Garbage > 5 || st.Hellos > 6 {
				t.Errorf("the gateway resent the submit %d times over %d handshakes: churn is not bounded", st.Garbage, st.Hellos)
			}
			// The churn is counted.
			if got := s.counter(t, "unreadable_answers", m); got < 1 {
				t.Errorf("sessiongate_upstream_unreadable_answers_total{runtime=%q} = %v, want the garbage counted", m, got)
			}
			if got := s.counter(t, "unreadable_failures", m); got < 1 {
				t.Errorf("sessiongate_upstream_unreadable_failures_total{runtime=%q} = %v, want the failed submit counted", m, got)
			}
			s.checkGood(t)
		})
	}
}

// TestRetryableRuntimeErrors: a runtime error marked retryable reaches the
// caller as a retryable gRPC code, with the runtime's code as the
// ErrorInfo reason, retryable=true, and the runtime's message.
func TestRetryableRuntimeErrors(t *testing.T) {
	s := getSuite(t)
	for _, c := range []struct {
		mode hostile.Mode
		msg  string
	}{{hostile.ModeRetryableReject, hostile.RetryableMessage}, {hostile.ModeRetryableJobError, hostile.RetryableJobMessage}} {
		m := c.mode
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 30*time.Second)
			sid := s.open(t, ctx, m)
			_, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("retryable")}, 10*time.Second)
			ce := describe(err)
			t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
			if ce.code != codes.Unavailable && ce.code != codes.Aborted {
				t.Errorf("code %v, want a retryable code (UNAVAILABLE or ABORTED): %v", ce.code, ce)
			}
			if ce.reason != arcp.CodeInternalError || ce.md["retryable"] != "true" {
				t.Errorf("ErrorInfo reason %q retryable %q, want INTERNAL_ERROR, true", ce.reason, ce.md["retryable"])
			}
			if !ce.mentions(c.msg) {
				t.Errorf("the runtime's message %q is lost: %v", c.msg, ce)
			}
			if took > 5*time.Second {
				t.Errorf("took %v", took)
			}
			s.checkGood(t) // by now the call's log line is written
			if lines := s.gw.errorsMentioning(c.msg); len(lines) > 0 {
				t.Errorf("a retryable runtime error was logged at ERROR: %s", lines[0])
			}
		})
	}
}

// TestFatalSessionError: the runtime ends the session with a session.error
// without request_id (not retryable), closes the socket and refuses every
// resume with the same error, while a RunJob waits for its result. The
// caller learns promptly, with the runtime's code and message, whatever the
// code: one that ends sessions (UNAUTHENTICATED), the generic one
// (INTERNAL_ERROR), one that also rejects submits (PERMISSION_DENIED).
func TestFatalSessionError(t *testing.T) {
	s := getSuite(t)
	for _, code := range []string{arcp.CodeUnauthenticated, arcp.CodeInternalError, arcp.CodePermissionDenied} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 40*time.Second)
			sid := s.open(t, ctx, hostile.ModeFatal)
			_, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("fatal"), FatalCode: code}, 20*time.Second)
			ce := describe(err)
			t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
			if err == nil || ce.code == codes.DeadlineExceeded || took > 10*time.Second {
				t.Fatalf("after %v: %v; want a prompt definite error", took, ce)
			}
			if !ce.mentions(code) {
				t.Errorf("the runtime's code %s is lost: %v", code, ce)
			}
			if !ce.mentions(hostile.FatalMessage) {
				t.Errorf("the runtime's message %q is lost: %v", hostile.FatalMessage, ce)
			}
			s.checkGood(t)
		})
	}
}

// TestBadResumes: the transport drops right after the accept; the resume is
// answered badly. Refused (UNAUTHENTICATED with a message): the waiting
// caller gets the runtime's code and message. Welcomed into another
// session: the caller is told the session was lost because the runtime
// resumed another one, not that the resume window expired.
func TestBadResumes(t *testing.T) {
	s := getSuite(t)
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 40*time.Second)
		sid := s.open(t, ctx, hostile.ModeResumeRefused)
		_, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("resume")}, 20*time.Second)
		ce := describe(err)
		t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
		if err == nil || ce.code == codes.DeadlineExceeded || took > 10*time.Second {
			t.Fatalf("after %v: %v; want a prompt definite error", took, ce)
		}
		if !ce.mentions(arcp.CodeUnauthenticated) {
			t.Errorf("the runtime's code UNAUTHENTICATED is lost: %v", ce)
		}
		if !ce.mentions(hostile.ResumeRefusedMessage) {
			t.Errorf("the runtime's message %q is lost: %v", hostile.ResumeRefusedMessage, ce)
		}
		s.checkGood(t)
	})
	t.Run("other-session", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 40*time.Second)
		sid := s.open(t, ctx, hostile.ModeResumeOther)
		_, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("resume")}, 20*time.Second)
		ce := describe(err)
		t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
		if err == nil || ce.code == codes.DeadlineExceeded || took > 10*time.Second {
			t.Fatalf("after %v: %v; want a prompt definite error", took, ce)
		}
		if ce.code != codes.Unavailable {
			t.Errorf("code %v, want UNAVAILABLE", ce.code)
		}
		if ce.reason == arcp.CodeResumeWindowExpired || ce.reason == "" {
			t.Errorf("a welcome for another session reads as %q: %v", ce.reason, ce)
		}
		s.checkGood(t)
	})
}

// TestHandshakeAttacks: OpenSession against runtimes that answer the hello
// wrongly, slowly or never. A wrong frame or a session.error fails at once
// with what was wrong; silence and slowloris fail at the init timeout with
// RUNTIME_UNREACHABLE, and the gateway lets go of the socket.
func TestHandshakeAttacks(t *testing.T) {
	s := getSuite(t)
	for _, c := range []struct {
		mode    hostile.Mode
		within  time.Duration
		reason  string // wanted ErrorInfo reason; "" = any
		mention string // wanted in the message or ErrorInfo
	}{
		{hostile.ModeHandshakeWrongFrame, initTimeout / 2, "", arcp.TypeAccepted},
		{hostile.ModeHandshakeError, initTimeout / 2, arcp.CodeUnauthenticated, hostile.HandshakeErrorMessage},
		{hostile.ModeHandshakeUnknownType, initTimeout + 2*time.Second, "", ""},
		{hostile.ModeHandshakeGarbage, initTimeout + 2*time.Second, "", ""},
		{hostile.ModeSilent, initTimeout + 2*time.Second, "RUNTIME_UNREACHABLE", ""},
		{hostile.ModeSlowUpgrade, initTimeout + 2*time.Second, "RUNTIME_UNREACHABLE", ""},
		{hostile.ModeSlowWelcome, initTimeout + 2*time.Second, "RUNTIME_UNREACHABLE", ""},
	} {
		t.Run(string(c.mode), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 30*time.Second)
			start := time.Now()
			resp, err := s.cli.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Runtime: string(c.mode), ClientName: "hostile"})
			took := time.Since(start)
			if err == nil {
				_, _ = s.cli.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: resp.GetSessionId()})
				t.Fatalf("OpenSession succeeded against %s", c.mode)
			}
			ce := describe(err)
			t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
			if took > c.within {
				t.Errorf("failed after %v, want within %v", took, c.within)
			}
			if c.reason != "" && ce.reason != c.reason {
				t.Errorf("reason %q, want %q", ce.reason, c.reason)
			}
			if c.reason == "" && ce.code != codes.Unavailable {
				t.Errorf("code %v, want UNAVAILABLE", ce.code)
			}
			if c.mention != "" && !ce.mentions(c.mention) {
				t.Errorf("the error does not say what was wrong (%q): %v", c.mention, ce)
			}
			// The gateway closes its end: the runtime sees no connection
			// of this mode left open (polling the count is the check).
			for s.hs.OpenConns(c.mode) > 0 {
				select {
				case <-ctx.Done():
					t.Fatalf("%d connections of %s still open", s.hs.OpenConns(c.mode), c.mode)
				case <-time.After(10 * time.Millisecond):
				}
			}
			s.checkGood(t)
		})
	}
}

// TestSlowButSteady: a runtime that dribbles its upgrade, welcome and
// results a byte at a time but finishes each well inside the timeouts is
// served: OpenSession and RunJob succeed, only slower.
func TestSlowButSteady(t *testing.T) {
	s := getSuite(t)
	t.Parallel()
	ctx := testCtx(t, 40*time.Second)
	start := time.Now()
	sid := s.open(t, ctx, hostile.ModeSlowButSteady)
	if took := time.Since(start); took < 500*time.Millisecond {
		t.Fatalf("the dribbled handshake took only %v: the mode did not dribble", took)
	}
	for i := range 3 {
		tok := newToken("steady")
		resp, err, took := s.timedRun(ctx, sid, hostile.Input{Token: tok}, 15*time.Second)
		if err != nil {
			t.Fatalf("job %d after %v: %v", i, took, describe(err))
		}
		if err := s.own(resp, tok); err != nil {
			t.Fatal(err)
		}
		if took < 300*time.Millisecond {
			t.Fatalf("job %d took only %v: its result was not dribbled", i, took)
		}
	}
	s.checkGood(t)
}

// TestHeartbeatIntervals: odd heartbeat intervals in the welcome are
// clamped, never refused: 0.001 s (to the gateway's least interval), 0 (the
// default), 1e12 s (the greatest). Sessions open and run jobs.
func TestHeartbeatIntervals(t *testing.T) {
	s := getSuite(t)
	for _, m := range []hostile.Mode{hostile.ModeHeartbeatMilli, hostile.ModeHeartbeatZero, hostile.ModeHeartbeatHuge} {
		t.Run(string(m), func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 40*time.Second)
			sid := s.open(t, ctx, m)
			for i := range 20 {
				tok := newToken("hb")
				resp, err, _ := s.timedRun(ctx, sid, hostile.Input{Token: tok}, 10*time.Second)
				if err != nil {
					t.Fatalf("job %d: %v", i, describe(err))
				}
				if err := s.own(resp, tok); err != nil {
					t.Fatal(err)
				}
			}
			s.checkGood(t)
		})
	}
}

// TestMalformedFrames: between a job's accept and its result the runtime
// sends a family of malformed frames, many shaped as a forged result for
// the job. The caller gets its own result; nothing forged reaches it. A
// result that is not UTF-8 arrives as raw_result.
func TestMalformedFrames(t *testing.T) {
	s := getSuite(t)
	t.Parallel()
	ctx := testCtx(t, 60*time.Second)
	sid := s.open(t, ctx, hostile.ModeMalformed)
	for _, fam := range hostile.Families {
		t.Run(fam, func(t *testing.T) {
			tok := newToken(fam)
			resp, err, took := s.timedRun(ctx, sid, hostile.Input{Token: tok, Family: fam}, 15*time.Second)
			if err != nil {
				t.Fatalf("after %v: %v\ngateway log:\n%s", took, describe(err), s.gw.tail())
			}
			if err := s.own(resp, tok); err != nil {
				t.Fatal(err)
			}
			if fam == hostile.FamilyResultInvalidUTF8 && len(resp.GetRawResult()) == 0 {
				t.Errorf("a result that is not UTF-8 came as result=%v, want raw_result", resp.GetResult())
			}
			if took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	if got := s.counter(t, "malformed_frames", hostile.ModeMalformed); got < 10 {
		t.Errorf("sessiongate_upstream_malformed_frames_total{runtime=malformed} = %v: the malformed frames were not counted", got)
	}
	// The session survives every family.
	tok := newToken("after")
	resp, err, _ := s.timedRun(ctx, sid, hostile.Input{Token: tok}, 10*time.Second)
	if err != nil {
		t.Fatalf("after the malformed frames: %v", describe(err))
	}
	if err := s.own(resp, tok); err != nil {
		t.Fatal(err)
	}
	s.checkGood(t)
}

// TestFrameCap: a result frame of exactly the gateway's frame cap is
// delivered; one byte over it (replayed by the runtime on every resume)
// fails the call with a definite error, not at its deadline.
func TestFrameCap(t *testing.T) {
	s := getSuite(t)
	t.Run("at", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 30*time.Second)
		sid := s.open(t, ctx, hostile.ModeFrameCap)
		tok := newToken("cap")
		resp, err, _ := s.timedRun(ctx, sid, hostile.Input{Token: tok, PadTo: frameCap}, 15*time.Second)
		if err != nil {
			t.Fatalf("a %d-byte result frame (the cap): %v", frameCap, describe(err))
		}
		if err := s.own(resp, tok); err != nil {
			t.Fatal(err)
		}
		if pad := resp.GetResult().GetStructValue().GetFields()["pad"].GetStringValue(); len(pad) < frameCap-300 {
			t.Fatalf("pad of %d bytes, want the frame filled to %d", len(pad), frameCap)
		}
		s.checkGood(t)
	})
	t.Run("over", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t, 60*time.Second)
		sid := s.open(t, ctx, hostile.ModeFrameCap)
		before := s.hs.Stats(hostile.ModeFrameCap).Oversize
		_, err, took := s.timedRun(ctx, sid, hostile.Input{Token: newToken("cap"), PadTo: frameCap + 1}, 30*time.Second)
		ce := describe(err)
		t.Logf("after %v: %v", took.Round(time.Millisecond), ce)
		if err == nil || ce.code == codes.DeadlineExceeded || took > 20*time.Second {
			t.Fatalf("after %v: %v; want a definite error before the deadline", took, ce)
		}
		if !slices.Contains([]codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.Internal, codes.DataLoss}, ce.code) || ce.reason == "" {
			t.Errorf("want UNAVAILABLE, RESOURCE_EXHAUSTED, INTERNAL or DATA_LOSS with a reason: %v", ce)
		}
		if got := s.hs.Stats(hostile.ModeFrameCap).Oversize - before; got < 1 {
			t.Fatalf("no oversize frame was sent")
		}
		s.checkGood(t)
	})
}

// TestFloodDoesNotEvictWaitingResult: a RunJob waits for its result while
// another job of the session floods more events than the session holds
// (10,000 events, 16 MiB). The waiting caller gets its own result whether it
// comes before, amid or after the flood, with the flooding job watched or
// not. A watcher of the flooding job that reads nothing meanwhile is the
// one shed (SLOW_CONSUMER or CAP_EXCEEDED naming that job) or, if it kept
// up, gets every event in order and the job's own result.
func TestFloodDoesNotEvictWaitingResult(t *testing.T) {
	s := getSuite(t)
	for _, v := range []struct {
		name      string
		release   string
		releaseAt int
		flood     int
		size      int
		watch     bool
	}{
		// Watched: 12,000 events, so that a watcher reading nothing
		// falls more than the session's 10,000 behind even after the
		// flow-control windows took their share (it is shed).
		{"result-after-flood", "after", 0, 12000, 200, true},
		{"result-before-flood", "before", 0, 12000, 200, true},
		// The session's buffer is full (by count, by bytes) when the
		// result comes.
		{"result-amid-flood", "", 10500, 12000, 200, true},
		{"result-amid-flood-unwatched", "", 10500, 12000, 200, false},
		{"result-amid-large-flood-unwatched", "", 300, 400, 64 << 10, false},
		{"result-after-flood-unwatched", "after", 0, 11000, 200, false},
	} {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 60*time.Second)
			sid := s.open(t, ctx, hostile.ModeFlood)
			wTok := newToken("waiter")
			type res struct {
				resp *sessiongatev1.RunJobResponse
				err  error
				took time.Duration
			}
			done := make(chan res, 1)
			go func() {
				resp, err, took := s.timedRun(ctx, sid, hostile.Input{Token: wTok, Park: true}, 40*time.Second)
				done <- res{resp, err, took}
			}()
			if err := s.hs.Seen(ctx, wTok); err != nil {
				t.Fatal(err)
			}
			fTok := newToken("flood")
			sub, err := s.cli.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo",
				Input: inputValue(hostile.Input{Token: fTok, Flood: v.flood, EventBytes: v.size, Release: v.release, ReleaseAt: v.releaseAt})})
			if err != nil {
				t.Fatalf("SubmitJob (flood): %v", describe(err))
			}
			if err := s.ownJob(sub.GetJobId(), fTok); err != nil {
				t.Fatal(err)
			}
			var watch sessiongatev1.SessionGateway_WatchJobClient
			if v.watch {
				wctx, stopWatch := context.WithCancel(ctx)
				defer stopWatch()
				// A connection of its own with fixed 64 KiB flow-control
				// windows (no BDP growth): a watcher that reads nothing
				// holds back all but about 200 events.
				conn, err := grpc.NewClient(s.gw.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
					grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close()
				if watch, err = sessiongatev1.NewSessionGatewayClient(conn).WatchJob(wctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()}); err != nil {
					t.Fatalf("WatchJob: %v", err)
				}
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("after %v the waiting RunJob failed while another job (%s) flooded: %v", r.took, sub.GetJobId(), describe(r.err))
			}
			if err := s.own(r.resp, wTok); err != nil {
				t.Fatal(err)
			}
			if watch != nil {
				checkFloodWatch(t, watch, sub.GetJobId(), fTok)
			}
			s.checkGood(t)
		})
	}
}

// checkFloodWatch reads the flooding job's stream to its end.
func checkFloodWatch(t *testing.T, watch sessiongatev1.SessionGateway_WatchJobClient, job, token string) {
	t.Helper()
	var last uint64
	for {
		item, err := watch.Recv()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			ce := describe(err)
			if ce.code != codes.ResourceExhausted || (ce.reason != "SLOW_CONSUMER" && ce.reason != "CAP_EXCEEDED") {
				t.Fatalf("the flooding job's watcher ended with %v, want RESOURCE_EXHAUSTED SLOW_CONSUMER or CAP_EXCEEDED", ce)
			}
			if !ce.mentions(job) {
				t.Errorf("the flooding job's watcher was shed without naming the job %s: %v", job, ce)
			}
			return
		}
		if item.GetEventSeq() <= last {
			t.Fatalf("event_seq %d after %d", item.GetEventSeq(), last)
		}
		last = item.GetEventSeq()
		if res := item.GetResult(); res != nil {
			if got := res.GetResult().GetStructValue().GetFields()["token"].GetStringValue(); got != token {
				t.Fatalf("the flooding job's result carries token %q, want %q", got, token)
			}
		}
		if item.GetError() != nil {
			t.Fatalf("the flooding job ended with %v", item.GetError())
		}
	}
}

// TestModesListed: the package documentation names every mode and family,
// so the note stays the list of what the suite covers.
func TestModesListed(t *testing.T) {
	doc := readDoc(t)
	for _, m := range hostile.Modes {
		if !strings.Contains(doc, "//\t"+string(m)+" ") {
			t.Errorf("doc.go does not list mode %s", m)
		}
	}
	for _, f := range hostile.Families {
		if !strings.Contains(doc, f) {
			t.Errorf("doc.go does not list family %s", f)
		}
	}
}
