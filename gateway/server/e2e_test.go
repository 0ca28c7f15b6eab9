package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/session"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

func mustValue(t *testing.T, v any) *structpb.Value {
	t.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

func errorInfo(err error) *errdetails.ErrorInfo {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return ei
		}
	}
	return nil
}

func TestOpenRunCloseAndStatus(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	open, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "test", Features: []string{"heartbeat", "ack", "subscribe"}})
	if err != nil {
		t.Fatal(err)
	}
	id := open.GetSessionId()
	if !strings.HasPrefix(id, "s1.gw-test.") || open.GetInstanceId() != "gw-test" || open.GetRuntime().GetName() != "default" {
		t.Fatalf("open = %v", open)
	}
	var names []string
	for _, a := range open.GetAgents() {
		names = append(names, a.GetName())
	}
	for _, want := range []string{"echo", "sleep", "stream", "fail"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("agents %v lack %s", names, want)
		}
	}
	if got := strings.Join(open.GetFeatures(), ","); strings.Contains(got, "list_jobs") || !strings.Contains(got, "heartbeat") {
		t.Errorf("features %q: want the requested subset only", got)
	}

	in := mustValue(t, map[string]any{"hello": "world", "n": 3.0})
	run, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	if run.GetResult().GetStructValue().GetFields()["hello"].GetStringValue() != "world" || run.GetJobId() == "" {
		t.Fatalf("RunJob(echo) = %v", run)
	}

	st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE || st.GetPhase() != sessiongatev1.SessionPhase_SESSION_PHASE_READY ||
		st.GetGeneration() == 0 || st.GetLastEventSeq() == 0 || st.GetRuntime() != "default" {
		t.Fatalf("status = %v", st)
	}
	if len(st.GetFeatures()) == 0 {
		t.Fatalf("the default (FULL) view has no features: %v", st)
	}
	basic, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id, View: sessiongatev1.SessionStatusView_SESSION_STATUS_VIEW_BASIC})
	if err != nil {
		t.Fatal(err)
	}
	if basic.GetStatus() != st.GetStatus() || basic.GetPhase() != st.GetPhase() || basic.GetGeneration() != st.GetGeneration() ||
		basic.GetLastEventSeq() != st.GetLastEventSeq() || basic.GetInstanceId() != st.GetInstanceId() ||
		basic.GetRuntime() != "" || len(basic.GetFeatures()) != 0 {
		t.Fatalf("BASIC view = %v; FULL = %v", basic, st)
	}
	code, body := h.httpStatus(t, id, "")
	if code != 200 || !strings.Contains(body, `"status":"SESSION_STATUS_LIVE"`) || !strings.Contains(body, `"phase":"SESSION_PHASE_READY"`) {
		t.Fatalf("HTTP status = %d %s", code, body)
	}

	list, err := h.client.ListSessions(ctx, &sessiongatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetSessionId() != id {
		t.Fatalf("ListSessions = %v, %v", list, err)
	}

	if _, err := h.client.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	st, err = h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if err != nil || st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatalf("status after close = %v, %v", st, err)
	}
	if code, body := h.httpStatus(t, id, ""); code != 404 || !strings.Contains(body, `"status":"SESSION_STATUS_NOT_FOUND"`) {
		t.Fatalf("HTTP status after close = %d %s", code, body)
	}
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"}); status.Code(err) != codes.NotFound {
		t.Fatalf("RunJob on closed session: %v", err)
	}
}

// TestTimeoutProfileOnRunJob: x-timeout-ms: 100 asks for less than tool_call's
// minimum, so the call gets 1000 ms, ends DEADLINE_EXCEEDED with the profile's
// details, and the job is cancelled upstream.
func TestTimeoutProfileOnRunJob(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	before := h.rt.Runtime().Stats().JobsCancelled
	start := time.Now()
	_, err := h.client.RunJob(metadata.AppendToOutgoingContext(ctx, "x-timeout-ms", "100"),
		&sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, map[string]any{"ms": 3000.0})})
	elapsed := time.Since(start)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if elapsed < 950*time.Millisecond || elapsed > 2500*time.Millisecond {
		t.Fatalf("returned after %v, want ≈1s (tool_call's minimum)", elapsed)
	}
	st, _ := status.FromError(err)
	var te *timeoutprofilev1.TimeoutExceeded
	for _, d := range st.Details() {
		if v, ok := d.(*timeoutprofilev1.TimeoutExceeded); ok {
			te = v
		}
	}
	if te == nil || te.GetProfileName() != "tool_call" || te.GetConfiguredTimeoutMs() != 1000 || te.GetElapsedMs() < 1000 ||
		te.GetMethod() != "RunJob" || te.GetService() != "sessiongate.v1.SessionGateway" {
		t.Fatalf("details = %v", st.Details())
	}
	ei := errorInfo(err)
	if ei == nil || ei.GetReason() != "TIMEOUT_PROFILE_EXCEEDED" || ei.GetMetadata()["configured_timeout_ms"] != "1000" {
		t.Fatalf("ErrorInfo = %v", ei)
	}
	if got := h.rt.Runtime().Stats().JobsCancelled; got != before+1 {
		t.Fatalf("runtime cancelled %d jobs, want %d: the abandoned job was not cancelled upstream", got, before+1)
	}
}

func TestStatusIsolationAndNoSideEffects(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-alice": "alice", "tok-bob": "bob"}
		c.IdleTimeout = time.Hour
	}})
	ctx := ctxT(t, 20*time.Second)
	alice, bob := bearer(ctx, "tok-alice"), bearer(ctx, "tok-bob")

	if _, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("OpenSession without token: %v", err)
	}
	open, err := h.client.OpenSession(alice, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	id := open.GetSessionId()
	get := func(ctx context.Context, id string) sessiongatev1.SessionStatus {
		t.Helper()
		st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		if err != nil {
			t.Fatalf("GetSessionStatus: %v", err)
		}
		return st.GetStatus()
	}
	if get(alice, id) != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
		t.Fatal("alice's own session is not LIVE")
	}
	if get(bob, id) != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatal("bob sees alice's session")
	}
	if get(alice, "s1.gw-test.AAAAAAAAAAAAAAAAAAAAAA") != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatal("unknown id is not NOT_FOUND")
	}
	if code, _ := h.httpStatus(t, id, "tok-bob"); code != 404 {
		t.Fatalf("HTTP probe as bob: %d", code)
	}
	if code, _ := h.httpStatus(t, id, ""); code != 401 {
		t.Fatalf("HTTP probe without token: %d", code)
	}
	if code, _ := h.httpStatus(t, id, "tok-alice"); code != 200 {
		t.Fatalf("HTTP probe as alice: %d", code)
	}
	for _, call := range []func() error{
		func() error {
			_, err := h.client.RunJob(bob, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"})
			return err
		},
		func() error {
			_, err := h.client.CloseSession(bob, &sessiongatev1.CloseSessionRequest{SessionId: id})
			return err
		},
	} {
		if err := call(); status.Code(err) != codes.NotFound {
			t.Fatalf("bob's call on alice's session: %v", err)
		}
	}

	// No side effects: a burst of probes sends nothing upstream. The idle
	// timeout is long here, so that no timer races the burst however slow
	// the machine; TestProbesDoNotResetIdleClock covers the idle clock.
	framesBefore := h.rt.Runtime().Stats().FramesReceived
	for range 500 {
		if get(alice, id) != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
			t.Fatal("session went away during the probe burst")
		}
	}
	if got := h.rt.Runtime().Stats().FramesReceived; got != framesBefore {
		t.Fatalf("500 status probes caused %d upstream frames", got-framesBefore)
	}
}

// TestProbesDoNotResetIdleClock: probing a session without pause does not
// keep it open. Were the idle clock reset by probes, the session would
// never close; the bound is generous because only "closes at all, and not
// before one idle period" is the property, and a loaded machine delays the
// idle timer.
func TestProbesDoNotResetIdleClock(t *testing.T) {
	const idle = 300 * time.Millisecond
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.IdleTimeout = idle }})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)
	// The server stamps the last use when the call ends there, which is
	// after it was sent and before its answer arrives here: measuring from
	// the send is the bound that cannot be early.
	lastCall := time.Now()
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: structpb.NewNullValue()}); err != nil {
		t.Fatal(err)
	}
	for probes := 0; ; probes++ {
		st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		if err != nil {
			t.Fatalf("after %d probes (%v): %v; probes reset the idle clock", probes, time.Since(lastCall), err)
		}
		if st.GetStatus() == sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
			if after := time.Since(lastCall); after < idle {
				t.Fatalf("session closed %v after the last call, before its idle timeout %v", after, idle)
			}
			t.Logf("closed after %d probes, %v after the last call", probes, time.Since(lastCall))
			return
		}
	}
}

func TestBadInput(t *testing.T) {
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.MaxInputBytes = 1024
		c.MaxSessionsPerCaller = 1
		c.Upstream.MaxLiveJobs = 1
	}})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	big := mustValue(t, strings.Repeat("x", 4096))
	cases := []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"status empty id", func() error {
			_, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{})
			return err
		}, codes.InvalidArgument, "session_id is required"},
		{"status malformed id", func() error {
			_, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: "nope"})
			return err
		}, codes.InvalidArgument, "malformed"},
		{"status unknown view", func() error {
			_, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id, View: 9})
			return err
		}, codes.InvalidArgument, "view 9 is unknown"},
		{"open unknown runtime", func() error {
			_, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Runtime: "mars"})
			return err
		}, codes.NotFound, `runtime "mars" is not configured`},
		{"open unknown feature", func() error {
			_, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{Features: []string{"teleport"}})
			return err
		}, codes.InvalidArgument, `feature "teleport"`},
		{"close empty id", func() error {
			_, err := h.client.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{})
			return err
		}, codes.InvalidArgument, "session_id is required"},
		{"submit no agent", func() error {
			_, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id})
			return err
		}, codes.InvalidArgument, "agent is required"},
		{"submit unknown agent", func() error {
			_, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "nosuch"})
			return err
		}, codes.NotFound, "AGENT_NOT_AVAILABLE"},
		{"run huge input", func() error {
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: big})
			return err
		}, codes.ResourceExhausted, "max_input_bytes=1024"},
		{"run input of many small numbers", func() error {
			nums := make([]any, 500) // [0,1,…,499]: 1,891 bytes of JSON
			for i := range nums {
				nums[i] = float64(i)
			}
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValue(t, nums)})
			return err
		}, codes.ResourceExhausted, "input is more than 1024 bytes of JSON; cap max_input_bytes=1024"},
		{"run bad agent input", func() error {
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep", Input: mustValue(t, "soon")})
			return err
		}, codes.InvalidArgument, "INVALID_REQUEST"},
		{"run malformed id", func() error {
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: "s1.gw-test.zz", Agent: "echo"})
			return err
		}, codes.InvalidArgument, "malformed"},
		{"cancel no job", func() error {
			_, err := h.client.CancelJob(ctx, &sessiongatev1.CancelJobRequest{SessionId: id})
			return err
		}, codes.InvalidArgument, "job_id is required"},
		{"cancel unknown job", func() error {
			_, err := h.client.CancelJob(ctx, &sessiongatev1.CancelJobRequest{SessionId: id, JobId: "job-nope"})
			return err
		}, codes.NotFound, ""},
		{"watch unknown job", func() error {
			s, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: "job-nope"})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.NotFound, ""},
		{"watch no job id", func() error {
			s, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, codes.InvalidArgument, "job_id is required"},
		{"failing job", func() error {
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "fail",
				Input: mustValue(t, map[string]any{"code": "PERMISSION_DENIED", "message": "no"})})
			return err
		}, codes.PermissionDenied, "PERMISSION_DENIED"},
		{"sessions per caller cap", func() error {
			_, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
			return err
		}, codes.ResourceExhausted, "sessions_per_caller=1"},
		{"live jobs cap", func() error {
			if _, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "sleep",
				Input: mustValue(t, map[string]any{"ms": 300.0})}); err != nil {
				return err
			}
			_, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "echo"})
			return err
		}, codes.ResourceExhausted, "live_jobs_per_session=1"},
		{"bad x-timeout-ms", func() error {
			_, err := h.client.RunJob(metadata.AppendToOutgoingContext(ctx, "x-timeout-ms", "-5"),
				&sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"})
			return err
		}, codes.InvalidArgument, "x-timeout-ms"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.msg)
			}
		})
	}
	// The session survived all of it (once the capped sleep job has ended).
	waitFor(t, 5*time.Second, "the session to run jobs again", func() bool {
		_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"})
		if err != nil && status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("session unusable after bad input: %v", err)
		}
		return err == nil
	})
}

func TestJobErrorCarriesARCPInfo(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "fail",
		Input: mustValue(t, map[string]any{"code": "BUDGET_EXHAUSTED", "message": "out of tokens"})})
	ei := errorInfo(err)
	if status.Code(err) != codes.ResourceExhausted || ei == nil || ei.GetDomain() != "arcp" ||
		ei.GetReason() != "BUDGET_EXHAUSTED" || ei.GetMetadata()["retryable"] == "" {
		t.Fatalf("err = %v, info = %v", err, ei)
	}
}

// TestWatchJobAcrossDrops: a stream job watched while the upstream transport
// is dropped ten times delivers every event once, in order.
func TestWatchJobAcrossDrops(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)
	const count = 100
	sub, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "stream",
		Input: mustValue(t, map[string]any{"count": float64(count), "interval_ms": 20.0})})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := h.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: id, JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	var (
		seqs     []uint64
		logs     []float64
		result   *sessiongatev1.JobResult
		drops    int
		lastDrop int
	)
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Recv after %d items: %v", len(seqs), err)
		}
		seqs = append(seqs, msg.GetEventSeq())
		switch it := msg.GetItem().(type) {
		case *sessiongatev1.WatchJobResponse_Event:
			if it.Event.GetKind() == "log" {
				logs = append(logs, it.Event.GetBody().GetStructValue().GetFields()["i"].GetNumberValue())
			}
		case *sessiongatev1.WatchJobResponse_Result:
			result = it.Result
		}
		// Drop the upstream transport every fifth log event, ten times.
		if n := len(logs); n > 0 && n%5 == 0 && n != lastDrop && drops < 10 {
			lastDrop = n
			if h.rt.Runtime().DropTransports() > 0 {
				drops++
			}
		}
	}
	if drops < 10 {
		t.Fatalf("only %d drops happened", drops)
	}
	if result == nil {
		t.Fatal("stream ended without the result")
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("event_seq not increasing at %d: %v", i, seqs)
		}
	}
	if len(logs) != count {
		t.Fatalf("got %d log events, want %d", len(logs), count)
	}
	for i, v := range logs {
		if i > 0 && v != logs[i-1]+1 {
			t.Fatalf("log events not contiguous at %d: %v", i, logs)
		}
	}
	st, _ := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if st.GetGeneration() < 11 {
		t.Fatalf("generation %d after 10 drops: want ≥ 11", st.GetGeneration())
	}
}

// TestLostSession: a runtime that forgot the session makes resume fail; the
// session then reports NOT_FOUND and its calls fail with Unavailable.
func TestLostSession(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	sess, ok := h.gw.table.Get(id, Anonymous)
	if !ok {
		t.Fatal("session not in the table")
	}
	h.rt.Runtime().Reset()
	select {
	case <-sess.Conn.Done(): // resume failed: the upstream session ended
	case <-ctx.Done():
		t.Fatal("session still live after the runtime lost it")
	}
	st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
	if err != nil || st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatalf("status of a lost session = %v, %v; want NOT_FOUND", st, err)
	}
	_, err = h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("RunJob on lost session: %v", err)
	}
	if ei := errorInfo(err); ei == nil || ei.GetReason() == "" {
		t.Fatalf("no ErrorInfo on lost session: %v", err)
	}
}

// TestGracefulShutdown: in-flight RunJobs either complete or end with
// UNAVAILABLE; new sessions are refused; nothing leaks (goleak in TestMain).
// The drain starts once the runtime has accepted every job (the RunJob
// calls are past their submit), so no ordering depends on timing.
func TestGracefulShutdown(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 30*time.Second)
	id := h.open(t, ctx)
	sess, ok := h.gw.table.Get(id, Anonymous)
	if !ok {
		t.Fatal("session not in the table")
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "sleep",
				Input: mustValue(t, map[string]any{"ms": float64(200 + 50*i)})})
			errs <- err
		}()
	}
	// The upstream connection counts the jobs as they are submitted.
	waitFor(t, 20*time.Second, "every job submitted upstream", func() bool { return sess.Conn.ActiveJobs() == n })
	h.stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && status.Code(err) != codes.Unavailable {
			t.Errorf("in-flight RunJob ended with %v, want success or Unavailable", err)
		}
	}
	if _, err := h.gw.svc.table.Open(ctx, Anonymous, "default", nil); !errors.Is(err, session.ErrDraining) {
		t.Errorf("Open after shutdown: %v, want ErrDraining", err)
	}
}

func TestMetricsExposeUpstreamCounters(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"}); err != nil {
		t.Fatal(err)
	}
	resp, err := h.admin.Client().Get(h.admin.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		"sessiongate_sessions 1",
		`sessiongate_upstream_late_answers_total{runtime="default"}`,
		`sessiongate_upstream_stale_generation_total{runtime="default"}`,
		`sessiongate_budget_in_use{budget="sessions"} 1`,
		`grpc_server_handled_total{grpc_code="OK",grpc_method="RunJob"`,
		`sw4rm_rpc_duration_ms_bucket{method="RunJob"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

var _ = errors.New
var _ = fmt.Sprint
var _ = json.Marshal
var _ = arcpruntime.Options{}
