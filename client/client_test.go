package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/client/gatewaytest"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// gw is the real gateway binary every test talks to.
var gw *gatewaytest.Process

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	p, err := gatewaytest.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gw = p
	code := m.Run()
	if err := p.Stop(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t testing.TB, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(gw.Addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func openSession(t testing.TB, c *client.Client) *client.Session {
	t.Helper()
	s, err := c.OpenSession(testContext(t, 10*time.Second), &gatewayv1.OpenSessionRequest{ClientName: "go-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func collect(t testing.TB, seq func(func(*client.WatchItem, error) bool)) []*client.WatchItem {
	t.Helper()
	var items []*client.WatchItem
	for item, err := range seq {
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, item)
	}
	return items
}

func TestOpenSession(t *testing.T) {
	c := newClient(t)
	s := openSession(t, c)
	if s.ID() == "" || s.Opened.GetRuntime().GetName() != "default" {
		t.Fatalf("session %q opened %v", s.ID(), s.Opened)
	}
	list, err := c.ListSessions(testContext(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(i *gatewayv1.SessionInfo) bool { return i.GetSessionId() == s.ID() }) {
		t.Errorf("ListSessions lacks %s", s.ID())
	}
}

func TestRunEchoNestedExact(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 10*time.Second)
	input := map[string]any{
		"hello":  "world",
		"ints":   []any{0, 3, -7, int64(1) << 53, -(int64(1) << 53)},
		"floats": []any{1.5, -0.25, 1e300},
		"nested": map[string]any{"list": []any{nil, true, false, map[string]any{"deep": []any{1, []any{2, []any{3}}}}}, "empty": map[string]any{}},
	}
	res, err := s.Run(ctx, "echo", input)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"hello":  "world",
		"ints":   []any{0.0, 3.0, -7.0, float64(1 << 53), -float64(1 << 53)},
		"floats": []any{1.5, -0.25, 1e300},
		"nested": map[string]any{"list": []any{nil, true, false, map[string]any{"deep": []any{1.0, []any{2.0, []any{3.0}}}}}, "empty": map[string]any{}},
	}
	if !reflect.DeepEqual(res.Result, want) {
		t.Errorf("result\n got %#v\nwant %#v", res.Result, want)
	}
	// Decode into a type of one's own: integers arrive exact.
	var typed struct {
		Ints []int64 `json:"ints"`
	}
	if err := res.Decode(&typed); err != nil {
		t.Fatal(err)
	}
	if typed.Ints[3] != 1<<53 {
		t.Errorf("2^53 came back as %d", typed.Ints[3])
	}
	// Structs go through encoding/json.
	type in struct {
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	res, err = s.Run(ctx, "echo", in{"x", 3})
	if err != nil {
		t.Fatal(err)
	}
	var out in
	if err := res.Decode(&out); err != nil || out != (in{"x", 3}) {
		t.Errorf("struct round trip: %+v, %v", out, err)
	}
}

func TestInputRefused(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 10*time.Second)
	for _, in := range []any{
		int64(1)<<53 + 1,
		map[string]any{"n": uint64(math.MaxUint64)},
		math.NaN(),
		struct{ N int64 }{1<<53 + 1},
	} {
		if _, err := s.Run(ctx, "echo", in); err == nil {
			t.Errorf("input %v: no error", in)
		}
	}
}

func TestWatchStream(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 30*time.Second)
	if _, err := s.Run(ctx, "echo", "before"); err != nil { // events before the job
		t.Fatal(err)
	}
	job, err := s.Submit(ctx, "stream", map[string]any{"count": 5, "interval_ms": 20})
	if err != nil {
		t.Fatal(err)
	}
	items := collect(t, s.Watch(ctx, job.ID))
	if len(items) != 6 {
		t.Fatalf("%d items: %v", len(items), items)
	}
	for i, it := range items[:5] {
		if it.Event == nil || it.Event.Kind != "log" || it.Event.Body.(map[string]any)["i"] != float64(i) {
			t.Errorf("item %d: %+v", i, it)
		}
		if it.Event != nil && it.Event.TS.IsZero() {
			t.Errorf("item %d has no time", i)
		}
		if i > 0 && it.EventSeq <= items[i-1].EventSeq {
			t.Errorf("event_seq not increasing at %d", i)
		}
	}
	if got := items[5].Result; got == nil || !reflect.DeepEqual(got.Result, map[string]any{"count": 5.0}) {
		t.Errorf("result %+v", got)
	}
	var typed struct{ Count int }
	if err := items[5].Result.Decode(&typed); err != nil || typed.Count != 5 {
		t.Errorf("Decode: %+v, %v", typed, err)
	}
	replay := collect(t, s.Watch(ctx, job.ID, client.FromEventSeq(items[2].EventSeq)))
	if len(replay) != 3 || replay[0].EventSeq != items[3].EventSeq {
		t.Errorf("replay from %d: %v", items[2].EventSeq, replay)
	}
	// From the job's AfterEventSeq: the same items as from 0.
	if job.AfterEventSeq == 0 || job.AfterEventSeq >= items[0].EventSeq {
		t.Errorf("AfterEventSeq %d, want above 0 (the session's earlier jobs) and below the first event %d", job.AfterEventSeq, items[0].EventSeq)
	}
	if fromAccept := collect(t, s.Watch(ctx, job.ID, client.FromEventSeq(job.AfterEventSeq))); len(fromAccept) != 6 || fromAccept[0].EventSeq != items[0].EventSeq {
		t.Errorf("watch from AfterEventSeq %d: %v, want the 6 items from 0", job.AfterEventSeq, fromAccept)
	}
	// Breaking out of the loop ends the stream (goleak checks in TestMain).
	for it, err := range s.Watch(ctx, job.ID) {
		if err != nil || it.Event == nil {
			t.Fatalf("first item %v, %v", it, err)
		}
		break
	}
}

func TestCancel(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 30*time.Second)
	job, err := s.Submit(ctx, "sleep", map[string]any{"ms": 30000})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx, job.ID, "test"); err != nil {
		t.Fatal(err)
	}
	items := collect(t, s.Watch(ctx, job.ID))
	last := items[len(items)-1].Error
	if last == nil || last.FinalStatus != "cancelled" || last.Code != "CANCELLED" {
		t.Errorf("last item %v", items[len(items)-1])
	}
}

func TestStatusLiveThenNotFound(t *testing.T) {
	c := newClient(t)
	ctx := testContext(t, 10*time.Second)
	s, err := c.OpenSession(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx)
	if err != nil || st.GetStatus() != gatewayv1.SessionStatus_SESSION_STATUS_LIVE || st.GetPhase() != gatewayv1.SessionPhase_SESSION_PHASE_READY {
		t.Fatalf("status %v, %v", st, err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal("second Close:", err)
	}
	st, err = c.Status(ctx, s.ID())
	if err != nil || st.GetStatus() != gatewayv1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatalf("status after close %v, %v", st, err)
	}
	_, err = s.Run(ctx, "echo", 1)
	var e *client.Error
	if !errors.As(err, &e) || e.Code != codes.NotFound || e.Reason != "SESSION_NOT_FOUND" {
		t.Errorf("run after close: %v", err)
	}
}

func TestTimeoutDetailsViaTimeoutMetadata(t *testing.T) {
	// A 1 s server budget (tool_call's minimum) under a 10 s deadline.
	s := openSession(t, newClient(t))
	ctx := metadata.AppendToOutgoingContext(testContext(t, 10*time.Second), client.TimeoutMetadataKey, "1000")
	start := time.Now()
	_, err := s.Run(ctx, "sleep", map[string]any{"ms": 5000})
	var te *client.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want a *TimeoutError", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	if te.Profile != "tool_call" || te.Configured != time.Second || te.Elapsed < time.Second || te.Limit != "unary" ||
		te.Service != "sessiongate.v1.SessionGateway" || te.Method != "RunJob" {
		t.Errorf("details %+v", te)
	}
	if te.Err.Domain != "timeoutprofile" || te.Err.Reason != "TIMEOUT_PROFILE_EXCEEDED" {
		t.Errorf("ErrorInfo %s/%s", te.Err.Domain, te.Err.Reason)
	}
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("errors.Is DeadlineExceeded / status.Code: %v", err)
	}
}

func TestTimeoutDetailsViaOwnDeadline(t *testing.T) {
	// Only the caller's own 300 ms deadline. Retries off: the published
	// policy retries DEADLINE_EXCEEDED, and a retry after the gateway's
	// answer ends as a bare deadline. Five calls, of which one may lose the
	// race on a loaded machine.
	s := openSession(t, newClient(t, client.WithoutRetry()))
	var details int
	for range 5 {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := s.Run(ctx, "sleep", map[string]any{"ms": 5000})
		cancel()
		var te *client.TimeoutError
		switch {
		case errors.As(err, &te):
			details++
			if te.Profile != "tool_call" || te.Limit != "caller_deadline" || te.Elapsed > 300*time.Millisecond {
				t.Errorf("details %+v", te)
			}
		case !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("got %v, want a deadline", err)
		}
	}
	if details < 4 {
		t.Errorf("%d of 5 calls got the details", details)
	}
}

func TestBadInputTyped(t *testing.T) {
	c := newClient(t)
	ctx := testContext(t, 10*time.Second)
	_, err := c.Session("").Run(ctx, "echo", map[string]any{"x": 1})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Domain != "sessiongate" || e.Reason != "INVALID_ARGUMENT" {
		t.Fatalf("empty session id: %v", err)
	}
	s := openSession(t, c)
	if _, err := s.Run(ctx, "no-such-agent", 1); status.Code(err) != codes.NotFound {
		t.Errorf("unknown agent: %v", err)
	}
	_, err = s.Run(ctx, "fail", map[string]any{"code": "INVALID_REQUEST", "message": "nope"})
	if !errors.As(err, &e) || e.Code != codes.InvalidArgument || e.Domain != "arcp" || e.Metadata["retryable"] != "false" {
		t.Errorf("failed job: %v", err)
	}
}

// recorder records the outgoing metadata of every call.
type recorder struct {
	mu    sync.Mutex
	calls map[string]metadata.MD
}

func (r *recorder) record(ctx context.Context, method string) {
	md, _ := metadata.FromOutgoingContext(ctx)
	r.mu.Lock()
	r.calls[method] = md
	r.mu.Unlock()
}

func TestMetadataOnEveryCall(t *testing.T) {
	r := &recorder{calls: map[string]metadata.MD{}}
	conn, err := grpc.NewClient(gw.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.record(ctx, method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			r.record(ctx, method)
			return streamer(ctx, desc, cc, method, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := client.NewFromConn(conn)
	s, err := c.OpenSession(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	if _, err := s.Run(ctx, "echo", 1); err != nil {
		t.Fatal(err)
	}
	job, err := s.Submit(context.Background(), "stream", map[string]any{"count": 1, "interval_ms": 1})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, s.Watch(context.Background(), job.ID))
	if _, err := s.Status(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(r.calls) != 6 {
		t.Errorf("calls: %v", r.calls)
	}
	for m, md := range r.calls {
		want := []string{s.ID()}
		if m == gatewayv1.SessionGateway_OpenSession_FullMethodName {
			want = nil
		}
		if got := md.Get(client.SessionMetadataKey); !slices.Equal(got, want) {
			t.Errorf("%s: %s = %q, want %q", m, client.SessionMetadataKey, got, want)
		}
	}
	// 2.5 s, minus the time to get there, rounded up.
	if got := r.calls[gatewayv1.SessionGateway_RunJob_FullMethodName].Get(client.TimeoutMetadataKey); len(got) != 1 {
		t.Errorf("RunJob x-timeout-ms %q", got)
	} else if ms, err := strconv.Atoi(got[0]); err != nil || ms > 2500 || ms < 1500 {
		t.Errorf("RunJob x-timeout-ms %q, want 2500 less the time to get there", got)
	}
	if got := r.calls[gatewayv1.SessionGateway_SubmitJob_FullMethodName].Get(client.TimeoutMetadataKey); got != nil {
		t.Errorf("SubmitJob without deadline sent x-timeout-ms %q", got)
	}
}

func TestRetryServiceConfig(t *testing.T) {
	sc, err := client.RetryServiceConfig()
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MethodConfig []struct {
			RetryPolicy struct{ RetryableStatusCodes []string }
		}
	}
	if err := json.Unmarshal([]byte(sc), &cfg); err != nil {
		t.Fatal(err)
	}
	if got := cfg.MethodConfig[0].RetryPolicy.RetryableStatusCodes; !slices.Equal(got, []string{"DEADLINE_EXCEEDED", "UNAVAILABLE"}) {
		t.Errorf("retryable codes %v", got)
	}
	// The Python and TypeScript clients carry the same policy.
	b, err := os.ReadFile("../clients/python/sessiongate/retry_service_config.json")
	if err != nil {
		t.Fatal(err)
	}
	var a, bb any
	_ = json.Unmarshal([]byte(sc), &a)
	if err := json.Unmarshal(b, &bb); err != nil || !reflect.DeepEqual(a, bb) {
		t.Errorf("clients/python's retry config differs from RetryServiceConfig: run clients/generate.sh")
	}
}
