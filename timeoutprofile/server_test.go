package timeoutprofile_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

const (
	svcName   = "sessiongate.v1.SessionGateway"
	watchJob  = sessiongatev1.SessionGateway_WatchJob_FullMethodName
	getStatus = sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName
)

// gateway is a test SessionGateway whose methods run the functions set.
type gateway struct {
	sessiongatev1.UnimplementedSessionGatewayServer
	runJob    func(context.Context, *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error)
	getStatus func(context.Context, *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error)
	watchJob  func(*sessiongatev1.WatchJobRequest, grpc.ServerStreamingServer[sessiongatev1.WatchJobResponse]) error
}

func (g *gateway) RunJob(ctx context.Context, r *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
	return g.runJob(ctx, r)
}

func (g *gateway) GetSessionStatus(ctx context.Context, r *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error) {
	return g.getStatus(ctx, r)
}

func (g *gateway) WatchJob(r *sessiongatev1.WatchJobRequest, s grpc.ServerStreamingServer[sessiongatev1.WatchJobResponse]) error {
	return g.watchJob(r, s)
}

// serve runs gw and the TimeoutProfileService behind e's server
// interceptors on a loopback TCP port and returns a client connection
// (with clientOpts, e.g. client interceptors). Everything stops at cleanup.
func serve(t testing.TB, e *timeoutprofile.Enforcer, gw *gateway, clientOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	return serveWith(t, e, gw, nil, clientOpts...)
}

// serveWith is serve with server options, such as interceptors in front of
// e's.
func serveWith(t testing.TB, e *timeoutprofile.Enforcer, gw *gateway, serverOpts []grpc.ServerOption, clientOpts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(append(serverOpts,
		grpc.ChainUnaryInterceptor(e.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(e.StreamServerInterceptor()))...)
	sessiongatev1.RegisterSessionGatewayServer(srv, gw)
	timeoutprofilev1.RegisterTimeoutProfileServiceServer(srv, timeoutprofile.NewService(e))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(),
		append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, clientOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
		<-served
	})
	return conn
}

// testCtx is a test context with a 10 s deadline, which gRPC sends.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// noDeadlineCtx is cancelled after 10 s but has no deadline, so gRPC sends
// none: a caller that did not set one.
func noDeadlineCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(10*time.Second, cancel)
	t.Cleanup(func() { stop.Stop(); cancel() })
	return ctx
}

func withMD(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// short profiles so the tests run in milliseconds.
var (
	shortToolCall  = timeoutprofile.Profile{Name: "tool_call", Default: 100 * time.Millisecond, Min: 10 * time.Millisecond, Max: 300 * time.Millisecond, AllowInfinite: true}
	shortHeartbeat = timeoutprofile.Profile{Name: "heartbeat", Default: 50 * time.Millisecond, Min: 10 * time.Millisecond, Max: time.Second}
)

// waitForBudget is a handler body that blocks until its context ends.
func waitForBudget(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// checkTimeout checks that err is the timeout status of the given profile,
// limit and configured budget, with both details.
func checkTimeout(t *testing.T, err error, profile, method, limit string, configuredMS uint32) *timeoutprofilev1.TimeoutExceeded {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.DeadlineExceeded {
		t.Fatalf("status %v, want DEADLINE_EXCEEDED", err)
	}
	te, ok := timeoutprofile.FromError(err)
	if !ok {
		t.Fatalf("no TimeoutExceeded detail in %v", err)
	}
	if te.GetProfileName() != profile || te.GetConfiguredTimeoutMs() != configuredMS || te.GetLimit() != limit ||
		te.GetService() != svcName || te.GetMethod() != method {
		t.Errorf("detail = %v; want profile %q configured %d limit %q method %q", te, profile, configuredMS, limit, method)
	}
	if te.GetElapsedMs() < configuredMS || te.GetElapsedMs() > configuredMS+5000 {
		t.Errorf("elapsed %d ms for a %d ms budget", te.GetElapsedMs(), configuredMS)
	}
	re := regexp.MustCompile(fmt.Sprintf(`^timeout profile %q exceeded: %dms configured, \d+ms elapsed \(%s\)$`, profile, configuredMS, limit))
	if !re.MatchString(st.Message()) {
		t.Errorf("message %q", st.Message())
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil {
		t.Fatal("no ErrorInfo detail")
	}
	want := map[string]string{
		"profile_name": profile, "configured_timeout_ms": strconv.Itoa(int(configuredMS)),
		"elapsed_ms": strconv.Itoa(int(te.GetElapsedMs())), "limit": limit, "service": svcName, "method": method,
	}
	if info.GetReason() != "TIMEOUT_PROFILE_EXCEEDED" || info.GetDomain() != "timeoutprofile" || fmt.Sprint(info.GetMetadata()) != fmt.Sprint(want) {
		t.Errorf("ErrorInfo = %v, want metadata %v", info, want)
	}
	return te
}

func TestUnaryTimeoutOverLoopback(t *testing.T) {
	obs := newTestObserver()
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall), timeoutprofile.WithObserver(obs))
	causes := make(chan error, 1)
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		err := waitForBudget(ctx)
		causes <- context.Cause(ctx)
		return nil, err
	}})
	client := sessiongatev1.NewSessionGatewayClient(conn)

	// A caller without a deadline gets the profile default.
	_, err := client.RunJob(noDeadlineCtx(t), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 100)
	cause := <-causes
	var te *timeoutprofile.TimeoutError
	if !errors.As(cause, &te) || te.Profile != "tool_call" || te.Configured != 100*time.Millisecond || te.Limit != "unary" {
		t.Errorf("handler's context.Cause = %#v", cause)
	}
	if st, ok := status.FromError(cause); !ok || st.Code() != codes.DeadlineExceeded {
		t.Errorf("cause's GRPCStatus = %v", st)
	}
	if n := obs.timeoutsOf("tool_call"); n != 1 {
		t.Errorf("%d timeouts counted", n)
	}

	// x-timeout-ms is the request; the caller's 10 s deadline bounds it.
	_, err = client.RunJob(withMD(testCtx(t), "x-timeout-ms", "50"), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 50)
	<-causes

	// The caller's 10 s deadline is clamped to the profile's 300 ms maximum.
	_, err = client.RunJob(testCtx(t), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 300)
	<-causes
	if n := obs.clamps(timeoutprofile.RuleAboveMax); n != 1 {
		t.Errorf("above_max counted %d times", n)
	}
}

func TestHandlerSucceedingLateGetsTimeout(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		<-ctx.Done()
		return &sessiongatev1.RunJobResponse{JobId: "late"}, nil // success, after the budget ran out
	}})
	resp, err := sessiongatev1.NewSessionGatewayClient(conn).RunJob(withMD(noDeadlineCtx(t), "x-timeout-ms", "30"), &sessiongatev1.RunJobRequest{})
	if resp != nil {
		t.Errorf("got response %v", resp)
	}
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 30)
}

func TestMethodOptionOverLoopback(t *testing.T) {
	// GetSessionStatus declares (timeoutprofile.v1.profile) = "heartbeat";
	// the fallback is made long so only the option can explain a 50 ms budget.
	e := mustNew(t, timeoutprofile.WithProfile(shortHeartbeat),
		timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "default", Default: 10 * time.Second, Min: time.Second, Max: time.Minute}))
	conn := serve(t, e, &gateway{getStatus: func(ctx context.Context, _ *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error) {
		return nil, waitForBudget(ctx)
	}})
	_, err := sessiongatev1.NewSessionGatewayClient(conn).GetSessionStatus(noDeadlineCtx(t), &sessiongatev1.GetSessionStatusRequest{})
	checkTimeout(t, err, "heartbeat", "GetSessionStatus", "unary", 50)

	r, err := timeoutprofilev1.NewTimeoutProfileServiceClient(conn).ResolveProfile(testCtx(t), &timeoutprofilev1.ResolveProfileRequest{FullMethod: getStatus})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetProfile().GetProfileName() != "heartbeat" || r.GetSource() != srcOption || r.GetProfile().GetDefaultTimeoutMs() != 50 {
		t.Errorf("ResolveProfile = %v", r)
	}
}

func TestCallerDeadlineNeverExtended(t *testing.T) {
	var logs syncBuffer
	obs := newTestObserver()
	minTwoSeconds := timeoutprofile.Profile{Name: "tool_call", Default: 5 * time.Second, Min: 2 * time.Second, Max: time.Minute}
	// Without the deadline margin, which could leave a 150 ms caller no time
	// at all on a loaded machine; TestDeadlineMarginUnary covers this rule
	// with it.
	e := mustNew(t, timeoutprofile.WithProfile(minTwoSeconds), timeoutprofile.WithObserver(obs),
		timeoutprofile.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), timeoutprofile.WithDeadlineMargin(0))
	left := make(chan time.Duration, 1)
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			left <- -1
		} else {
			left <- time.Until(dl)
		}
		return nil, waitForBudget(ctx)
	}})
	client := sessiongatev1.NewSessionGatewayClient(conn)
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"deadline below min", testCtx(t)},
		{"x-timeout-ms below min", withMD(testCtx(t), "x-timeout-ms", "100")},
		{"x-timeout-ms 0 on a non-infinite profile", withMD(testCtx(t), "x-timeout-ms", "0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(tc.ctx, 150*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := client.RunJob(ctx, &sessiongatev1.RunJobRequest{})
			if status.Code(err) != codes.DeadlineExceeded {
				t.Errorf("err = %v", err)
			}
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Errorf("call took %v: the 150 ms deadline was extended", d)
			}
			if l := <-left; l < 0 || l > 150*time.Millisecond+50*time.Millisecond {
				t.Errorf("handler's deadline was %v away, want at most the caller's 150 ms", l)
			}
		})
	}
	if n := obs.clamps(timeoutprofile.RuleKeptCallerDeadline); n != 3 {
		t.Errorf("kept_caller_deadline counted %d times, want 3", n)
	}
	if got := strings.Count(logs.String(), "rule=kept_caller_deadline"); got != 1 {
		t.Errorf("%d kept_caller_deadline warnings logged, want 1 (rate-limited):\n%s", got, logs.String())
	}
}

func TestInfiniteOverride(t *testing.T) {
	obs := newTestObserver()
	heartbeat := timeoutprofile.Profile{Name: "heartbeat", Default: 5 * time.Second, Min: 10 * time.Millisecond, Max: time.Minute}
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall), timeoutprofile.WithProfile(heartbeat), timeoutprofile.WithObserver(obs))
	report := func(ctx context.Context) string {
		dl, ok := ctx.Deadline()
		if !ok {
			return "none"
		}
		return time.Until(dl).String()
	}
	conn := serve(t, e, &gateway{
		runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			return &sessiongatev1.RunJobResponse{Summary: report(ctx)}, nil
		},
		getStatus: func(ctx context.Context, _ *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error) {
			return &sessiongatev1.GetSessionStatusResponse{InstanceId: report(ctx)}, nil
		},
	})
	client := sessiongatev1.NewSessionGatewayClient(conn)

	// tool_call allows infinite: x-timeout-ms 0 and no caller deadline → none.
	r, err := client.RunJob(withMD(noDeadlineCtx(t), "x-timeout-ms", "0"), &sessiongatev1.RunJobRequest{})
	if err != nil || r.GetSummary() != "none" {
		t.Errorf("RunJob with x-timeout-ms 0: deadline %q, err %v; want none", r.GetSummary(), err)
	}
	// heartbeat does not: the default.
	s, err := client.GetSessionStatus(withMD(noDeadlineCtx(t), "x-timeout-ms", "0"), &sessiongatev1.GetSessionStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := time.ParseDuration(s.GetInstanceId()); err != nil || d > 5*time.Second || d < 4*time.Second {
		t.Errorf("GetSessionStatus with x-timeout-ms 0: deadline %q away, want the 5 s default", s.GetInstanceId())
	}
	if n := obs.clamps(timeoutprofile.RuleZeroNotInfinite); n != 1 {
		t.Errorf("zero_not_infinite counted %d times", n)
	}
	// Without x-timeout-ms nobody gets "no timeout".
	r, err = client.RunJob(noDeadlineCtx(t), &sessiongatev1.RunJobRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := time.ParseDuration(r.GetSummary()); err != nil || d > 100*time.Millisecond {
		t.Errorf("RunJob without a request: deadline %q away, want the 100 ms default", r.GetSummary())
	}
}

func TestInvalidOverride(t *testing.T) {
	called := false
	e := mustNew(t)
	conn := serve(t, e, &gateway{
		runJob: func(context.Context, *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
			called = true
			return &sessiongatev1.RunJobResponse{}, nil
		},
		watchJob: func(*sessiongatev1.WatchJobRequest, grpc.ServerStreamingServer[sessiongatev1.WatchJobResponse]) error {
			called = true
			return nil
		},
	})
	client := sessiongatev1.NewSessionGatewayClient(conn)
	for _, v := range [][]string{{"abc"}, {"-1"}, {"+5"}, {"1.5"}, {" 10"}, {"10ms"}, {"99999999999"}, {"4294967296"}, {""}, {"10", "20"}} {
		kv := []string{}
		for _, x := range v {
			kv = append(kv, "x-timeout-ms", x)
		}
		_, err := client.RunJob(withMD(testCtx(t), kv...), &sessiongatev1.RunJobRequest{})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "x-timeout-ms") {
			t.Errorf("x-timeout-ms %q: %v", v, err)
		}
		stream, err := client.WatchJob(withMD(testCtx(t), kv...), &sessiongatev1.WatchJobRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("stream, x-timeout-ms %q: %v", v, err)
		}
	}
	if called {
		t.Error("a handler ran despite an invalid x-timeout-ms")
	}
}

// callerFromMD is a test caller identity: the x-caller metadata.
func callerFromMD(ctx context.Context) string {
	if v := metadata.ValueFromIncomingContext(ctx, "x-caller"); len(v) == 1 {
		return v[0]
	}
	return ""
}

func TestPerCallerOverLoopback(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(shortToolCall),
		timeoutprofile.WithCallerIdentity(callerFromMD),
		timeoutprofile.WithCallerProfile("batch", timeoutprofile.Profile{Name: "tool_call", Default: 200 * time.Millisecond, Min: 10 * time.Millisecond, Max: 2 * time.Second}))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		return nil, waitForBudget(ctx)
	}})
	client := sessiongatev1.NewSessionGatewayClient(conn)
	_, err := client.RunJob(withMD(noDeadlineCtx(t), "x-caller", "interactive"), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 100)
	_, err = client.RunJob(withMD(noDeadlineCtx(t), "x-caller", "batch"), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 200)
	// The caller's bounds clamp its requests.
	_, err = client.RunJob(withMD(testCtx(t), "x-caller", "batch", "x-timeout-ms", "1"), &sessiongatev1.RunJobRequest{})
	checkTimeout(t, err, "tool_call", "RunJob", "unary", 10)
}

func TestGoClientOverLoopback(t *testing.T) {
	// Budgets long enough for the calls to succeed on a loaded machine.
	e := mustNew(t, timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "tool_call", Default: 2 * time.Second, Min: 10 * time.Millisecond, Max: 5 * time.Second, AllowInfinite: true}))
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		md := metadata.ValueFromIncomingContext(ctx, "x-timeout-ms")
		dl := "none"
		if d, ok := ctx.Deadline(); ok {
			dl = strconv.FormatBool(time.Until(d) <= 5*time.Second)
		}
		return &sessiongatev1.RunJobResponse{Summary: fmt.Sprintf("md=%v deadline=%s", md, dl)}, nil
	}}, grpc.WithChainUnaryInterceptor(e.UnaryClientInterceptor()), grpc.WithChainStreamInterceptor(e.StreamClientInterceptor()))
	client := sessiongatev1.NewSessionGatewayClient(conn)
	for _, tc := range []struct {
		opts []grpc.CallOption
		want string
	}{
		{nil, "md=[] deadline=true"}, // the default, 2 s
		{[]grpc.CallOption{timeoutprofile.CallTimeout(3 * time.Second)}, "md=[3000] deadline=true"},
		{[]grpc.CallOption{timeoutprofile.CallTimeout(time.Hour)}, "md=[5000] deadline=true"}, // clamped
		{[]grpc.CallOption{timeoutprofile.CallTimeout(0)}, "md=[0] deadline=none"},
	} {
		r, err := client.RunJob(noDeadlineCtx(t), &sessiongatev1.RunJobRequest{}, tc.opts...)
		if err != nil || r.GetSummary() != tc.want {
			t.Errorf("opts %v: %q, %v; want %q", tc.opts, r.GetSummary(), err, tc.want)
		}
	}
}

func TestCallTimeoutWithoutInterceptor(t *testing.T) {
	e := mustNew(t)
	conn := serve(t, e, &gateway{runJob: func(ctx context.Context, _ *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
		return &sessiongatev1.RunJobResponse{Summary: fmt.Sprint(metadata.ValueFromIncomingContext(ctx, "x-timeout-ms"))}, nil
	}})
	r, err := sessiongatev1.NewSessionGatewayClient(conn).RunJob(testCtx(t), &sessiongatev1.RunJobRequest{}, timeoutprofile.CallTimeout(time.Second))
	if err != nil || r.GetSummary() != "[]" {
		t.Errorf("%q, %v", r.GetSummary(), err)
	}
}

func TestProfileServiceOverLoopback(t *testing.T) {
	e := mustNew(t, timeoutprofile.WithProfile(timeoutprofile.Profile{Name: "batch", Default: time.Minute, Min: time.Second, Max: time.Hour}),
		timeoutprofile.WithCallerIdentity(callerFromMD),
		timeoutprofile.WithCallerProfile("ops", shortToolCall))
	conn := serve(t, e, &gateway{})
	client := timeoutprofilev1.NewTimeoutProfileServiceClient(conn)
	list, err := client.ListProfiles(testCtx(t), &timeoutprofilev1.ListProfilesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list.GetProfiles() {
		names = append(names, p.GetProfileName())
	}
	if got := strings.Join(names, ","); got != "batch,default,handoff,heartbeat,hitl_escalate,message_route,negotiation_decision,negotiation_open,negotiation_vote,registration,task_submit,tool_call,workflow_status,workflow_submit" {
		t.Errorf("ListProfiles: %s", got)
	}
	r, err := client.ResolveProfile(withMD(testCtx(t), "x-caller", "ops"), &timeoutprofilev1.ResolveProfileRequest{FullMethod: watchJob, Caller: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if r.GetProfile().GetDefaultTimeoutMs() != 100 || r.GetSource() != srcOption ||
		r.GetStreaming().GetInitialTimeoutMs() != 30000 || r.GetStreaming().GetMessageGapTimeoutMs() != 60000 || !strings.Contains(r.GetReason(), "method option") {
		t.Errorf("ResolveProfile(WatchJob, ops) = %v", r)
	}
	for _, bad := range []*timeoutprofilev1.ResolveProfileRequest{
		{FullMethod: "RunJob"}, {FullMethod: "/x/"}, {FullMethod: ""},
		{FullMethod: runJob, Caller: strings.Repeat("x", 300)},
	} {
		if _, err := client.ResolveProfile(testCtx(t), bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("ResolveProfile(%v): %v", bad, err)
		}
	}
}

func TestWarningsRateLimited(t *testing.T) {
	var logs syncBuffer
	obs := newTestObserver()
	e := mustNew(t, timeoutprofile.WithObserver(obs), timeoutprofile.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for range 50 {
		ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-timeout-ms", "1")))
		if _, _, err := serveUnary(e, ctx, runJob); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	if n := obs.clamps(timeoutprofile.RuleBelowMin); n != 50 {
		t.Errorf("below_min counted %d times, want 50", n)
	}
	if n := strings.Count(logs.String(), "rule=below_min"); n != 1 {
		t.Errorf("%d warnings logged, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "requested_ms=1 effective_ms=1000") {
		t.Errorf("warning lacks the values: %s", logs.String())
	}
}
