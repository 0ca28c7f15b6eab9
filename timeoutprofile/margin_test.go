package timeoutprofile_test

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// The margin tests use margins and deadlines in hundreds of milliseconds so
// that they hold on a loaded machine: what they assert is the kind of
// outcome and exact deadline arithmetic, not how fast anything ran.
const testMargin = 250 * time.Millisecond

// longToolCall never shortens the deadlines of these tests.
var longToolCall = timeoutprofile.Profile{Name: "tool_call", Default: 10 * time.Second, Min: 10 * time.Millisecond, Max: time.Minute}

// incomingDeadlines returns server options with an interceptor, in front of
// the Enforcer's, that reports the deadline each call arrived with (zero if
// none) on ch.
func incomingDeadlines(ch chan<- time.Time) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			dl, _ := ctx.Deadline()
			ch <- dl
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			dl, _ := ss.Context().Deadline()
			ch <- dl
			return handler(srv, ss)
		}),
	}
}

// deadlineOf returns ctx's deadline, zero if none.
func deadlineOf(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// checkCallerDeadline checks that err is the timeout status of a call whose
// caller's deadline, less the margin, fired: DEADLINE_EXCEEDED with both
// details and limit "caller_deadline".
func checkCallerDeadline(t *testing.T, err error, method string) *timeoutprofilev1.TimeoutExceeded {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded {
		t.Fatalf("status %v, want DEADLINE_EXCEEDED", err)
	}
	te, ok := timeoutprofile.FromError(err)
	if !ok {
		t.Fatalf("no TimeoutExceeded detail in %v: the caller's own timer fired first", err)
	}
	if te.GetProfileName() != "tool_call" || te.GetLimit() != timeoutprofile.LimitCallerDeadline ||
		te.GetService() != svcName || te.GetMethod() != method || te.GetElapsedMs() < te.GetConfiguredTimeoutMs() {
		t.Errorf("detail = %v; want profile tool_call, limit caller_deadline, method %s, elapsed >= configured", te, method)
	}
	re := regexp.MustCompile(`^timeout profile "tool_call" exceeded: \d+ms configured, \d+ms elapsed \(caller_deadline\)$`)
	if !re.MatchString(st.Message()) {
		t.Errorf("message %q", st.Message())
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != timeoutprofile.ErrorReason || info.GetDomain() != timeoutprofile.ErrorDomain ||
		info.GetMetadata()["limit"] != "caller_deadline" ||
		info.GetMetadata()["configured_timeout_ms"] != fmt.Sprint(te.GetConfiguredTimeoutMs()) {
		t.Errorf("ErrorInfo = %v", info)
	}
	return te
}

// TestDeadlineMarginUnary: when the caller's own deadline is the effective
// budget, the call ends the margin before it, with the details, so they
// reach the caller before its own timer fires.
func TestDeadlineMarginUnary(t *testing.T) {
	minTwoSeconds := timeoutprofile.Profile{Name: "tool_call", Default: 5 * time.Second, Min: 2 * time.Second, Max: time.Minute}
	cases := []struct {
		name     string
		profile  timeoutprofile.Profile
		deadline time.Duration
		md       []string
		callOpts []grpc.CallOption
	}{
		{name: "deadline only", profile: longToolCall, deadline: 1500 * time.Millisecond},
		{name: "x-timeout-ms longer than the deadline", profile: longToolCall, deadline: 1500 * time.Millisecond, md: []string{"x-timeout-ms", "5000"}},
		// Go's CallTimeout sends x-timeout-ms equal to its deadline: the
		// profile's budget would end just after the caller's deadline.
		{name: "CallTimeout", profile: longToolCall, callOpts: []grpc.CallOption{timeoutprofile.CallTimeout(1500 * time.Millisecond)}},
		// Clamping to the 2 s minimum would extend the deadline: kept,
		// and shortened by the margin, never extended.
		{name: "deadline below the profile's minimum", profile: minTwoSeconds, deadline: time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obs := newTestObserver()
			e := mustNew(t, timeoutprofile.WithProfile(tc.profile), timeoutprofile.WithDeadlineMargin(testMargin), timeoutprofile.WithObserver(obs))
			incoming := make(chan time.Time, 1)
			handler := make(chan time.Time, 1)
			var dialOpts []grpc.DialOption
			if tc.callOpts != nil {
				dialOpts = append(dialOpts, grpc.WithChainUnaryInterceptor(e.UnaryClientInterceptor()))
			}
			conn := serveWith(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
				handler <- deadlineOf(ctx)
				return nil, waitForBudget(ctx)
			}}, incomingDeadlines(incoming), dialOpts...)
			ctx := noDeadlineCtx(t)
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(testCtx(t), tc.deadline)
				defer cancel()
			}
			if tc.md != nil {
				ctx = withMD(ctx, tc.md...)
			}
			start := time.Now()
			var trailer metadata.MD
			_, err := sessiongatev1.NewSessionGatewayClient(conn).RunJob(ctx, &sessiongatev1.RunJobRequest{}, append(tc.callOpts, grpc.Trailer(&trailer))...)
			elapsed := time.Since(start)
			te := checkCallerDeadline(t, err, "RunJob")
			// Retry policies must not retry inside the caller's own
			// deadline: that would replace these details by a bare one.
			if got := trailer.Get("grpc-retry-pushback-ms"); len(got) != 1 || got[0] != "-1" {
				t.Errorf("trailer grpc-retry-pushback-ms = %q, want [-1]", got)
			}

			in, hd := <-incoming, <-handler
			if in.IsZero() || !hd.Equal(in.Add(-testMargin)) {
				t.Errorf("handler's deadline %v, want exactly the caller's %v less the %v margin", hd, in, testMargin)
			}
			budget := tc.deadline
			if budget == 0 {
				budget = 1500 * time.Millisecond
			}
			// The server's view of the deadline is never earlier than the
			// client's, so the call cannot end before budget-margin.
			if elapsed < budget-testMargin {
				t.Errorf("call ended after %v, before its %v budget less the %v margin", elapsed, budget, testMargin)
			}
			if c := time.Duration(te.GetConfiguredTimeoutMs()) * time.Millisecond; c > budget-testMargin || c < budget-testMargin-time.Second {
				t.Errorf("configured %v, want the %v budget less the %v margin, less transit", c, budget, testMargin)
			}
			if obs.timeoutsOf("tool_call") != 1 {
				t.Errorf("%d timeouts counted, want 1", obs.timeoutsOf("tool_call"))
			}
			if tc.profile.Min == 2*time.Second && obs.clamps(timeoutprofile.RuleKeptCallerDeadline) != 1 {
				t.Errorf("kept_caller_deadline counted %d times, want 1", obs.clamps(timeoutprofile.RuleKeptCallerDeadline))
			}
		})
	}
}

// TestDeadlineMarginStream: the same for streams, with and without a
// streaming policy; the messages sent before the end are delivered.
func TestDeadlineMarginStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy timeoutprofile.StreamingPolicy
	}{
		{"no policy", timeoutprofile.StreamingPolicy{}},
		{"initial and gap only", timeoutprofile.StreamingPolicy{Initial: 10 * time.Second, Gap: 10 * time.Second}},
		{"total after the deadline", timeoutprofile.StreamingPolicy{Initial: 10 * time.Second, Total: 20 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mustNew(t, timeoutprofile.WithProfile(longToolCall), timeoutprofile.WithDeadlineMargin(testMargin),
				timeoutprofile.WithStreamingPolicy(watchJob, tc.policy))
			incoming := make(chan time.Time, 1)
			handler := make(chan time.Time, 1)
			conn := serveWith(t, e, &gateway{watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
				handler <- deadlineOf(s.Context())
				if err := s.Send(&sessiongatev1.WatchJobResponse{EventSeq: 1}); err != nil {
					return err
				}
				return waitForBudget(s.Context())
			}}, incomingDeadlines(incoming))
			ctx, cancel := context.WithTimeout(testCtx(t), 1500*time.Millisecond)
			defer cancel()
			stream, err := sessiongatev1.NewSessionGatewayClient(conn).WatchJob(ctx, &sessiongatev1.WatchJobRequest{})
			if err != nil {
				t.Fatal(err)
			}
			n, err := recvAll(stream)
			checkCallerDeadline(t, err, "WatchJob")
			if n != 1 {
				t.Errorf("received %d messages, want 1", n)
			}
			if in, hd := <-incoming, <-handler; in.IsZero() || !hd.Equal(in.Add(-testMargin)) {
				t.Errorf("handler's deadline %v, want exactly the caller's %v less the %v margin", hd, in, testMargin)
			}
		})
	}
}

// TestDeadlineMarginLittleTimeLeft: a call that arrives with less time
// left than the margin's ceiling still runs — the margin is a third of the
// time left — and only a call already past its deadline ends at once, with
// the details, without running its handler.
func TestDeadlineMarginLittleTimeLeft(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(longToolCall), timeoutprofile.WithDeadlineMargin(timeoutprofile.MaxDeadlineMargin))
	ran := make(chan time.Duration, 4)
	// expire, when set, makes a call arrive already past its deadline: the
	// interceptor in front of the Enforcer's gives it a deadline in the past.
	var expire atomic.Bool
	front := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			if expire.Load() {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, time.Now().Add(-time.Millisecond))
				defer cancel()
			}
			return handler(ctx, req)
		}),
	}
	conn := serveWith(t, e, &gateway{
		runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			ran <- time.Until(deadlineOf(ctx))
			return &sessiongatev1.RunJobResponse{JobId: "ran"}, nil
		},
		watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
			ran <- time.Until(deadlineOf(s.Context()))
			return s.Send(&sessiongatev1.WatchJobResponse{})
		},
	}, front)
	client := sessiongatev1.NewSessionGatewayClient(conn)
	// 800 ms is below the 1 s ceiling: the margin is a third, the handler
	// gets about two thirds and answers.
	ctx, cancel := context.WithTimeout(testCtx(t), 800*time.Millisecond)
	defer cancel()
	resp, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{})
	if err != nil || resp.GetJobId() != "ran" {
		t.Fatalf("RunJob with 800 ms left under a 1 s ceiling: %v, %v; want the handler's answer", resp, err)
	}
	if left := <-ran; left <= 0 || left > 800*time.Millisecond*2/3 {
		t.Errorf("handler had %v left, want more than 0 and at most two thirds of 800 ms", left)
	}
	stream, err := client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := recvAll(stream); err != nil || n != 1 {
		t.Fatalf("WatchJob with little time left: %d messages, %v; want the handler's one", n, err)
	}
	<-ran

	expire.Store(true)
	_, err = client.RunJob(testCtx(t), &sessiongatev1.RunJobRequest{})
	if te := checkCallerDeadline(t, err, "RunJob"); te.GetConfiguredTimeoutMs() != 0 {
		t.Errorf("configured %d ms, want 0", te.GetConfiguredTimeoutMs())
	}
	if len(ran) != 0 {
		t.Error("the handler ran for a call already past its deadline")
	}
}

// TestDeadlineMarginZero: a margin of 0 turns it off: the handler gets the
// caller's deadline unchanged, and the call still ends DEADLINE_EXCEEDED.
func TestDeadlineMarginZero(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(longToolCall), timeoutprofile.WithDeadlineMargin(0))
	incoming := make(chan time.Time, 2)
	handler := make(chan time.Time, 2)
	conn := serveWith(t, e, &gateway{
		runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			handler <- deadlineOf(ctx)
			return nil, waitForBudget(ctx)
		},
		watchJob: func(_ *sessiongatev1.WatchJobRequest, s watchStream) error {
			handler <- deadlineOf(s.Context())
			return waitForBudget(s.Context())
		},
	}, incomingDeadlines(incoming))
	client := sessiongatev1.NewSessionGatewayClient(conn)
	ctx, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	if _, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("RunJob: %v", err)
	}
	if in, hd := <-incoming, <-handler; in.IsZero() || !hd.Equal(in) {
		t.Errorf("RunJob handler's deadline %v, want the caller's %v", hd, in)
	}
	ctx, cancel = context.WithTimeout(testCtx(t), 300*time.Millisecond)
	defer cancel()
	stream, err := client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{})
	if err == nil {
		_, err = recvAll(stream)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("WatchJob: %v", err)
	}
	if in, hd := <-incoming, <-handler; in.IsZero() || !hd.Equal(in) {
		t.Errorf("WatchJob handler's deadline %v, want the caller's %v", hd, in)
	}
}

// TestDeadlineMarginProfileFirst: a profile budget that ends more than the
// margin before the caller's deadline is the one that fires.
func TestDeadlineMarginProfileFirst(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall), timeoutprofile.WithDeadlineMargin(testMargin))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		return nil, waitForBudget(ctx)
	}})
	// 100 ms default, 10 s deadline.
	_, err := sessiongatev1.NewSessionGatewayClient(conn).RunJob(testCtx(t), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 300)
	_, err = sessiongatev1.NewSessionGatewayClient(conn).RunJob(withMD(testCtx(t), "x-timeout-ms", "100"), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 100)
}

// TestWithoutDeadlineMargin: a method named by WithoutDeadlineMargin gets
// the caller's deadline unchanged (no margin), while another method of the
// same Enforcer gets it less the margin; a malformed method name is refused.
func TestWithoutDeadlineMargin(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(longToolCall), timeoutprofile.WithDeadlineMargin(testMargin),
		timeoutprofile.WithoutDeadlineMargin(getStatus))
	incoming := make(chan time.Time, 2)
	handler := make(chan time.Time, 2)
	conn := serveWith(t, e, &gateway{
		getStatus: func(ctx context.Context, _ *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error) {
			handler <- deadlineOf(ctx)
			return &sessiongatev1.GetSessionStatusResponse{}, nil
		},
		runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			handler <- deadlineOf(ctx)
			return &sessiongatev1.RunJobResponse{}, nil
		},
	}, incomingDeadlines(incoming))
	client := sessiongatev1.NewSessionGatewayClient(conn)
	ctx, cancel := context.WithTimeout(testCtx(t), 3*time.Second)
	defer cancel()
	if _, err := client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{}); err != nil {
		t.Fatal(err)
	}
	if in, hd := <-incoming, <-handler; in.IsZero() || !hd.Equal(in) {
		t.Errorf("GetSessionStatus handler's deadline %v, want the caller's %v unchanged", hd, in)
	}
	if _, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{}); err != nil {
		t.Fatal(err)
	}
	if in, hd := <-incoming, <-handler; in.IsZero() || !hd.Equal(in.Add(-testMargin)) {
		t.Errorf("RunJob handler's deadline %v, want the caller's %v less the %v margin", hd, in, testMargin)
	}
	if _, err := timeoutprofile.New(timeoutprofile.WithoutDeadlineMargin("Check")); err == nil {
		t.Error("WithoutDeadlineMargin(\"Check\") accepted")
	}
}

// TestStallMarginFollowsLateness: with WithStallMargin(true), a call that
// ends late past its shortened deadline (its handler ignores the
// cancellation for 120 ms, as a stalled process would) raises the margin
// of the next call to 1.5 × that lateness, at most half its time left;
// with the switch off the next call keeps the scaled margin.
func TestStallMarginFollowsLateness(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			e := mustNew(t, timeoutprofile.WithProfile(longToolCall), timeoutprofile.WithDeadlineMargin(100*time.Millisecond),
				timeoutprofile.WithStallMargin(on))
			incoming := make(chan time.Time, 2)
			handler := make(chan time.Time, 2)
			stall := make(chan bool, 2)
			ended := make(chan struct{}, 2)
			conn := serveWith(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
				handler <- deadlineOf(ctx)
				err := waitForBudget(ctx)
				if <-stall {
					time.Sleep(120 * time.Millisecond) // the stall being modelled, not synchronisation
				}
				return nil, err
			}}, append(incomingDeadlines(incoming), grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				resp, err := h(ctx, req)
				ended <- struct{}{} // the Enforcer's interceptor has returned
				return resp, err
			})))
			client := sessiongatev1.NewSessionGatewayClient(conn)
			call := func(d time.Duration, stalled bool) time.Duration {
				stall <- stalled
				ctx, cancel := context.WithTimeout(testCtx(t), d)
				defer cancel()
				_, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{})
				if status.Code(err) != codes.DeadlineExceeded {
					t.Fatalf("RunJob: %v; want DEADLINE_EXCEEDED", err)
				}
				in, hd := <-incoming, <-handler
				<-ended // the caller's answer can come before the server ends the late call
				return in.Sub(hd)
			}
			// First call: 600 ms, margin 100 ms; it ends 120 ms late.
			if m := call(600*time.Millisecond, true); m != 100*time.Millisecond {
				t.Fatalf("first call's margin %v; want 100ms", m)
			}
			// Second: 1 s left. On: at least 1.5 × 120 ms = 180 ms.
			m := call(time.Second, false)
			if on && (m < 180*time.Millisecond || m > 500*time.Millisecond) {
				t.Errorf("margin after a 120 ms late end: %v; want 180 ms or more (1.5 × the lateness), at most 500 ms", m)
			}
			if !on && m != 100*time.Millisecond {
				t.Errorf("margin with the switch off: %v; want the scaled 100ms", m)
			}
		})
	}
}
