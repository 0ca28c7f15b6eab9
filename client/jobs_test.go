package client_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

const (
	testTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	testTraceparent = "00-" + testTraceID + "-00f067aa0ba902b7-01"
)

func wantErrCode(t *testing.T, what string, err error, code codes.Code) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	return e
}

// TestSubmitExtras: agent version, lease request and expiry, extensions and
// an explicit traceparent go to the gateway; the resolved agent, trace id,
// granted lease, expiry, budget and extensions come back in the answer.
func TestSubmitExtras(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	s := openSession(t, newClient(t))
	expires := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	job, err := s.Submit(ctx, "sleep", map[string]any{"ms": 50},
		client.AgentVersion("1.0.0"),
		client.LeaseRequest(client.Lease{"fs.read": {"/workspace/**"}, "cost.budget": {"USD:5.00"}}),
		client.LeaseExpiresAt(expires),
		client.Extensions(map[string]any{"x-vendor.acme.tag": "blue", "x-vendor.acme.n": 3}),
		client.Traceparent(testTraceparent))
	if err != nil {
		t.Fatal(err)
	}
	if job.ID == "" || job.AcceptedAt.IsZero() || job.Agent != "sleep@1.0.0" || job.TraceID != testTraceID {
		t.Errorf("job %+v", job)
	}
	if !slices.Equal(job.Lease["fs.read"], []string{"/workspace/**"}) || !job.LeaseExpiresAt.Equal(expires) || job.Budget["USD"] != 5 {
		t.Errorf("lease %v expires %v (want %v) budget %v", job.Lease, job.LeaseExpiresAt, expires, job.Budget)
	}
	if job.Extensions["x-vendor.acme.tag"] != "blue" {
		t.Errorf("extensions %v", job.Extensions)
	}
	var progress int
	for item, err := range s.Watch(ctx, job.ID) {
		if err != nil {
			t.Fatal(err)
		}
		if item.Event != nil && item.Event.Progress != nil && item.Event.Progress.Total != nil {
			progress++
		}
	}
	if progress == 0 {
		t.Error("no typed progress event from the sleep agent")
	}

	// Run: the same extras, and a streamed result's id and size.
	res, err := s.Run(ctx, "chunked", map[string]any{"size": 100, "chunk_bytes": 40}, client.Traceparent(testTraceparent))
	if err != nil {
		t.Fatal(err)
	}
	if res.TraceID != testTraceID || !strings.HasPrefix(res.Agent, "chunked@") || res.ResultID == "" || res.ResultSize != 100 {
		t.Errorf("run %+v", res)
	}

	// Refusals are typed errors: a lease beyond the runtime's limits, an
	// expiry in the past, an extension outside x-vendor.
	_, err = s.Run(ctx, "echo", nil, client.LeaseRequest(client.Lease{"cost.budget": {"USD:1000"}}))
	wantErrCode(t, "budget beyond the limit", err, codes.PermissionDenied)
	_, err = s.Submit(ctx, "echo", nil, client.LeaseExpiresAt(time.Now().Add(-time.Minute)))
	wantErrCode(t, "expiry in the past", err, codes.InvalidArgument)
	_, err = s.Submit(ctx, "echo", nil, client.Extensions(map[string]any{"acme": true}))
	wantErrCode(t, "extension outside x-vendor", err, codes.InvalidArgument)
	_, err = s.Submit(ctx, "echo", nil, client.AgentVersion("9.9.9"))
	wantErrCode(t, "unknown version", err, codes.NotFound)
}

// TestTraceparentFromSpan: without Traceparent the client sends the
// context's OpenTelemetry span as traceparent; Traceparent wins over it; a
// malformed traceparent gets the job a fresh trace id.
func TestTraceparentFromSpan(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	var sent atomic.Value
	c := newClient(t, client.WithDialOptions(grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			md, _ := metadata.FromOutgoingContext(ctx)
			sent.Store(md.Get(client.TraceparentMetadataKey))
			return invoker(ctx, method, req, reply, cc, opts...)
		})))
	s := openSession(t, c)
	tid, _ := trace.TraceIDFromHex("0af7651916cd43dd8448eb211c80319c")
	sid, _ := trace.SpanIDFromHex("b7ad6b7169203331")
	sctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))

	res, err := s.Run(sctx, "echo", "x")
	if err != nil {
		t.Fatal(err)
	}
	if res.TraceID != tid.String() {
		t.Errorf("trace id %q, want the span's %s", res.TraceID, tid)
	}
	if got := sent.Load().([]string); !slices.Equal(got, []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}) {
		t.Errorf("sent traceparent %q", got)
	}

	job, err := s.Submit(sctx, "echo", "x", client.Traceparent(testTraceparent))
	if err != nil {
		t.Fatal(err)
	}
	if job.TraceID != testTraceID || !slices.Equal(sent.Load().([]string), []string{testTraceparent}) {
		t.Errorf("explicit traceparent: trace id %q, sent %q", job.TraceID, sent.Load())
	}

	res, err = s.Run(ctx, "echo", "x", client.Traceparent("00-not-a-traceparent"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.TraceID) != 32 || res.TraceID == testTraceID || strings.Contains(res.TraceID, "not") {
		t.Errorf("malformed traceparent: trace id %q, want a fresh one", res.TraceID)
	}

	// Without a span or an option no traceparent is sent, and the job still
	// gets a trace id.
	res, err = s.Run(ctx, "echo", "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := sent.Load().([]string); len(got) != 0 || len(res.TraceID) != 32 {
		t.Errorf("no trace context: sent %q, trace id %q", got, res.TraceID)
	}
}

// TestListJobsFollowsPages: ListJobs yields every matching job across
// pages, one call per page, and stops calling when the loop stops.
func TestListJobsFollowsPages(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	var calls atomic.Int32
	c := newClient(t, client.WithDialOptions(grpc.WithUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			if method == gatewayv1.SessionGateway_ListJobs_FullMethodName {
				calls.Add(1)
			}
			return invoker(ctx, method, req, reply, cc, opts...)
		})))
	s := openSession(t, c)
	want := map[string]bool{}
	for range 3 {
		res, err := s.Run(ctx, "echo", "x")
		if err != nil {
			t.Fatal(err)
		}
		want[res.JobID] = true
	}
	if _, err := s.Run(ctx, "sleep", map[string]any{"ms": 1}); err != nil {
		t.Fatal(err)
	}

	got := map[string]bool{}
	for j, err := range s.ListJobs(ctx, `state = SUCCEEDED AND agent = "echo"`, client.PageSize(1)) {
		if err != nil {
			t.Fatal(err)
		}
		if j.GetState() != gatewayv1.JobState_JOB_STATE_SUCCEEDED || !strings.HasPrefix(j.GetAgent(), "echo") ||
			j.GetCreateTime() == nil || len(j.GetTraceId()) != 32 {
			t.Errorf("job %v", j)
		}
		got[j.GetJobId()] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	if n := calls.Load(); n < 3 {
		t.Errorf("%d ListJobs calls for 3 jobs one per page", n)
	}

	calls.Store(0)
	for range s.ListJobs(ctx, "", client.PageSize(1)) {
		break
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d calls after breaking out of the first page", n)
	}

	for _, err := range s.ListJobs(ctx, `owner = "me"`) {
		wantErrCode(t, "unknown filter field", err, codes.InvalidArgument)
	}
}

// TestSubscribe: a second session of the caller attaches to a job with its
// history, watches it to the end, and may not cancel it.
func TestSubscribe(t *testing.T) {
	ctx := testContext(t, 20*time.Second)
	c := newClient(t)
	a, b := openSession(t, c), openSession(t, c)
	job, err := a.Submit(ctx, "stream", map[string]any{"count": 4, "interval_ms": 50},
		client.LeaseRequest(client.Lease{"cost.budget": {"USD:2.50"}}), client.Traceparent(testTraceparent))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := b.Subscribe(ctx, job.ID, client.WithHistory(0))
	if err != nil {
		t.Fatal(err)
	}
	d := sub.GetJob()
	if d.GetJobId() != job.ID || d.GetAgent() != job.Agent || d.GetTraceId() != testTraceID || d.GetBudget()["USD"] != 2.5 ||
		!slices.Equal(client.LeaseOf(d.GetLease())["cost.budget"], []string{"USD:2.50"}) {
		t.Errorf("subscribed %v", sub)
	}
	err = b.Cancel(ctx, job.ID, "not mine")
	wantErrCode(t, "subscriber cancels", err, codes.PermissionDenied)
	items := collect(t, b.Watch(ctx, job.ID))
	if len(items) == 0 || items[len(items)-1].Result == nil {
		t.Errorf("watch from the subscriber: %v", items)
	}
	_, err = b.Subscribe(ctx, "job_nope")
	wantErrCode(t, "unknown job", err, codes.NotFound)
}
