package upstream_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestBadFramesCountedAndIgnored injects malformed, binary, unknown-type and
// misdirected frames: each is counted, none is trusted, the session keeps
// working on the same transport.
func TestBadFramesCountedAndIgnored(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	sid := c.Status().SessionID
	id := arcp.NewID
	text := []string{
		`not json at all`,
		`[1,2,3]`,
		`{"arcp":"1.0","id":"x","type":"session.ping","session_id":"` + sid + `"}`,                                   // wrong version
		`{"arcp":"1.1","type":"job.event","session_id":"` + sid + `"}`,                                               // no id
		`{"arcp":"1.1","id":"` + id() + `","type":"session.ping"}`,                                                   // no session_id
		`{"arcp":"1.1","id":"` + id() + `","type":"session.ping","session_id":"nope"}`,                               // another session
		`{"arcp":"1.1","id":"` + id() + `","type":"job.event","session_id":"` + sid + `","job_id":"j"}`,              // no event_seq
		`{"arcp":"1.1","id":"` + id() + `","type":"job.accepted","session_id":"` + sid + `","payload":{"job_id":7}}`, // bad payload
	}
	for _, f := range text {
		if err := rt.InjectFrame(sid, []byte(f), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.InjectFrame(sid, []byte{0xde, 0xad, 0xbe, 0xef}, true); err != nil {
		t.Fatal(err)
	}
	unknown := `{"arcp":"1.1","id":"` + id() + `","type":"x-vendor.acme.gossip","session_id":"` + sid + `","payload":{"a":1}}`
	if err := rt.InjectFrame(sid, []byte(unknown), false); err != nil {
		t.Fatal(err)
	}
	// Frames are written in order with the runtime's others: once the answer
	// to list_jobs is in, the injected frames have been read. (A submit
	// waiting while an unreadable frame that might be its answer arrives
	// would cost the transport: see TestUnreadableAcceptDropsTransport.)
	barrier(t, ctx, c)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, "still works")})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || term.Result == nil || string(term.Result.Result) != `"still works"` {
		t.Fatalf("Wait = %+v, %v", term, err)
	}
	ctr := cfgCounters(c)
	if got := ctr.MalformedFrames.Load(); got != uint64(len(text)) {
		t.Fatalf("MalformedFrames = %d, want %d", got, len(text))
	}
	if ctr.BinaryFrames.Load() != 1 || ctr.UnknownTypes.Load() != 1 {
		t.Fatalf("binary %d, unknown %d", ctr.BinaryFrames.Load(), ctr.UnknownTypes.Load())
	}
	if st := c.Status(); st.Generation != 1 || st.State != upstream.StateReady {
		t.Fatalf("status %+v: the bad frames cost the transport", st)
	}
}

// TestOversizeFrameResumes: a frame over the read limit closes the socket
// (coder/websocket's behaviour); it is counted and the session resumes.
func TestOversizeFrameResumes(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	cfg := baseConfig(srv.URL())
	cfg.MaxFrameBytes = 64 << 10
	c := dial(t, cfg)
	ctx := testCtx(t, 10*time.Second)
	sid := c.Status().SessionID
	big := fmt.Sprintf(`{"arcp":"1.1","id":"%s","type":"session.ping","session_id":"%s","payload":{"nonce":"%s"}}`,
		arcp.NewID(), sid, strings.Repeat("x", 100<<10))
	if err := rt.InjectFrame(sid, []byte(big), false); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the resume after the oversize frame", func() bool {
		st := c.Status()
		return st.Generation == 2 && st.State == upstream.StateReady
	})
	if got := cfgCounters(c).OversizeFrames.Load(); got != 1 {
		t.Fatalf("OversizeFrames = %d", got)
	}
	if _, err := c.Submit(ctx, arcp.Submit{Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	// And a submit larger than the cap is refused locally.
	_, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, strings.Repeat("y", 70<<10))})
	var ce *upstream.CapError
	if !errors.As(err, &ce) || ce.Cap != "frame_bytes" {
		t.Fatalf("oversize Submit err = %v", err)
	}
}

// TestSessionFatalErrors: a session.error without request_id and a
// runtime's session.bye end the session with a definite error.
func TestSessionFatalErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame func(sid string) string
		check func(t *testing.T, err error)
	}{
		{"session.error", func(sid string) string {
			return `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"session.error","session_id":"` + sid + `","payload":{"code":"INTERNAL_ERROR","message":"boom","retryable":false}}`
		}, func(t *testing.T, err error) {
			var lost *upstream.LostError
			if !errors.As(err, &lost) || lost.Code != arcp.CodeInternalError {
				t.Fatalf("Err = %v, want *LostError INTERNAL_ERROR", err)
			}
		}},
		{"session.bye", func(sid string) string {
			return `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"session.bye","session_id":"` + sid + `","payload":{"reason":"maintenance"}}`
		}, func(t *testing.T, err error) {
			if !errors.Is(err, upstream.ErrClosed) || !strings.Contains(err.Error(), "maintenance") {
				t.Fatalf("Err = %v, want ErrClosed", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := runtimeServer(t, arcpruntime.Options{})
			c := dial(t, baseConfig(srv.URL()))
			ctx := testCtx(t, 10*time.Second)
			acc, err := c.Submit(ctx, arcp.Submit{Agent: "sleep", Input: mustJSON(t, map[string]int{"ms": 60_000})})
			if err != nil {
				t.Fatal(err)
			}
			// A submit the runtime sits on is waiting when the session ends:
			// it gets the session's end, like every other waiter.
			srv.Runtime().SetAcceptDelay(time.Minute)
			defer srv.Runtime().SetAcceptDelay(0)
			serr := make(chan error, 1)
			go func() {
				_, err := c.Submit(ctx, arcp.Submit{Agent: "echo"})
				serr <- err
			}()
			waitFor(ctx, t, "the submit to be sent", func() bool { return c.FIFOLen() == 1 })
			sid := c.Status().SessionID
			if err := srv.Runtime().InjectFrame(sid, []byte(tc.frame(sid)), false); err != nil {
				t.Fatal(err)
			}
			_, werr := c.Wait(ctx, acc.JobID)
			<-c.Done()
			tc.check(t, c.Err())
			tc.check(t, werr)
			tc.check(t, <-serr)
			if c.Status().State != upstream.StateClosed {
				t.Fatalf("state %s", c.Status().State)
			}
		})
	}
}

// TestBinaryAndGarbageNeverPanic feeds a spread of hostile frames.
func TestHostileFramesNeverPanic(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	rt := srv.Runtime()
	c := dial(t, baseConfig(srv.URL()))
	ctx := testCtx(t, 10*time.Second)
	sid := c.Status().SessionID
	env := func(typ, extra, payload string) string {
		return `{"arcp":"1.1","id":"` + arcp.NewID() + `","type":"` + typ + `","session_id":"` + sid + `"` + extra + `,"payload":` + payload + `}`
	}
	frames := []string{
		env("job.accepted", "", `{}`),                                // no job id
		env("job.accepted", "", `null`),                              // null payload
		env("session.jobs", "", `{"request_id":"nobody","jobs":[]}`), // late answer
		env("job.subscribed", "", `{"job_id":"nobody"}`),             // late answer
		env("job.cancelled", "", `{"job_id":"nobody"}`),              // late answer
		env("session.welcome", "", `{}`),                             // protocol violation
		env("job.submit", "", `{"agent":"x"}`),                       // wrong direction
		env("session.error", "", `{"code":"X","request_id":"nobody"}`),
		env("session.ping", "", `{"nonce":{"deep":[1,2,{"x":null}]}}`), // bad ping payload
	}
	for _, f := range frames {
		if err := rt.InjectFrame(sid, []byte(f), false); err != nil {
			t.Fatal(err)
		}
	}
	barrier(t, ctx, c)
	acc, err := c.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, 1)})
	if err != nil {
		t.Fatal(err)
	}
	term, err := c.Wait(ctx, acc.JobID)
	if err != nil || !bytes.Equal(term.Result.Result, []byte("1")) {
		t.Fatalf("Wait %+v %v", term, err)
	}
	ctr := cfgCounters(c)
	if ctr.LateAnswers.Load() < 4 || ctr.ProtocolViolations.Load() < 2 || ctr.MalformedFrames.Load() < 2 {
		t.Fatalf("late %d, violations %d, malformed %d", ctr.LateAnswers.Load(), ctr.ProtocolViolations.Load(), ctr.MalformedFrames.Load())
	}
	if c.Status().Generation != 1 {
		t.Fatal("transport lost")
	}
}

// barrier round-trips a list_jobs: every frame the runtime queued before its
// answer has been read when it returns.
func barrier(t *testing.T, ctx context.Context, c *upstream.Conn) {
	t.Helper()
	if _, err := c.ListJobs(ctx, arcp.ListJobs{}); err != nil {
		t.Fatalf("ListJobs barrier: %v", err)
	}
}

// TestOversizeReplayLoopEndsSession: a frame the runtime keeps replaying
// that is over our read limit would make the connection resume forever; after
// three such drops without progress the session is lost with a definite
// error naming the frame cap.
func TestOversizeReplayLoopEndsSession(t *testing.T) {
	srv := runtimeServer(t, arcpruntime.Options{})
	ctx := testCtx(t, 20*time.Second)
	big := dial(t, baseConfig(srv.URL()))
	acc, err := big.Submit(ctx, arcp.Submit{Agent: "echo", Input: mustJSON(t, strings.Repeat("z", 100<<10))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.Wait(ctx, acc.JobID); err != nil {
		t.Fatal(err)
	}
	cfg := baseConfig(srv.URL())
	cfg.MaxFrameBytes = 64 << 10
	small := dial(t, cfg)
	// Subscribing with history makes the runtime send the 100 KiB result
	// into small's session, where it stays in the replay buffer.
	if err := small.Subscribe(ctx, acc.JobID, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-small.Done():
	case <-ctx.Done():
		t.Fatal("the session kept resuming")
	}
	var lost *upstream.LostError
	var ce *upstream.CapError
	if !errors.As(small.Err(), &lost) || lost.Code != arcp.CodeResourceExhausted || !errors.As(small.Err(), &ce) || ce.Cap != "frame_bytes" {
		t.Fatalf("Err = %v", small.Err())
	}
	if n := cfgCounters(small).OversizeFrames.Load(); n != 3 {
		t.Fatalf("OversizeFrames = %d, want 3", n)
	}
}
