package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// matching returns the series of the metric name whose labels include want.
func matching(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range want {
				if !hasLabel(m, k, v) {
					continue next
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// series returns the value of the counter or gauge (or the sample count of
// the histogram) name whose labels include want, summed over matches.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	var sum float64
	for _, m := range matching(t, reg, name, want) {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, k, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == k {
			return l.GetValue() == v
		}
	}
	return false
}

// TestProbeFastPath: the status probe, which skips the general interceptor
// chain, is counted in the grpc_server_* series like every other call,
// refused without a token, checked against x-sessiongate-session and
// bounded by its timeout profile, as the chain would do; a call through the
// chain is counted the same way.
func TestProbeFastPath(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok": "alice"}
		c.Registry = reg
	}})
	ctx := bearer(ctxT(t, 10*time.Second), "tok")
	id := h.open(t, ctx)
	probe := func(ctx context.Context, id string, opts ...grpc.CallOption) error {
		_, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id}, opts...)
		return err
	}
	for range 3 {
		if err := probe(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := probe(ctx, "not-a-session-id"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("malformed id: %v, want INVALID_ARGUMENT", err)
	}
	mismatch := metadata.AppendToOutgoingContext(ctx, MetadataSession, "ses-other")
	if err := probe(mismatch, id); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), MetadataSession) {
		t.Errorf("x-sessiongate-session mismatch: %v, want INVALID_ARGUMENT naming it", err)
	}
	if err := probe(ctxT(t, 10*time.Second), id); status.Code(err) != codes.Unauthenticated {
		t.Errorf("no token: %v, want UNAUTHENTICATED", err)
	}
	// A short caller deadline is not cut by a margin: the probe answers
	// from memory (WithoutDeadlineMargin). Its profile still applies: a
	// malformed x-timeout-ms is refused by the enforcer.
	short, cancel := context.WithTimeout(ctx, 90*time.Millisecond)
	defer cancel()
	if err := probe(short, id); err != nil {
		t.Errorf("90 ms deadline: %v, want the answer", err)
	}
	bad := metadata.AppendToOutgoingContext(ctx, timeoutprofile.MetadataKey, "soon")
	if err := probe(bad, id); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), timeoutprofile.MetadataKey) {
		t.Errorf("malformed x-timeout-ms: %v, want the profile's INVALID_ARGUMENT", err)
	}
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValueTB(t, map[string]any{"a": 1})}); err != nil {
		t.Fatal(err)
	}

	status := map[string]string{"grpc_method": "GetSessionStatus", "grpc_service": "sessiongate.v1.SessionGateway", "grpc_type": "unary"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for k, v := range status {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"grpc_server_started_total", status, 8},
		{"grpc_server_msg_received_total", status, 8},
		{"grpc_server_msg_sent_total", status, 8},
		{"grpc_server_handling_seconds", status, 8},
		{"grpc_server_handled_total", with("grpc_code", "OK"), 4},
		{"grpc_server_handled_total", with("grpc_code", "InvalidArgument"), 3},
		{"grpc_server_handled_total", with("grpc_code", "Unauthenticated"), 1},
		{"grpc_server_handled_total", with("grpc_code", "DeadlineExceeded"), 0},
		{"grpc_server_handled_total", map[string]string{"grpc_method": "RunJob", "grpc_code": "OK"}, 1},
		{"grpc_server_started_total", map[string]string{"grpc_method": "RunJob"}, 1},
		{"grpc_server_handled_total", map[string]string{"grpc_method": "WatchJob", "grpc_type": "server_stream", "grpc_code": "NotFound"}, 0},
	} {
		if got := series(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// Every method's series exist before it is called, at zero.
	if n := len(matching(t, reg, "grpc_server_handled_total", map[string]string{"grpc_method": "WatchJob"})); n != numCodes {
		t.Errorf("WatchJob has %d grpc_server_handled_total series, want one per code (%d)", n, numCodes)
	}
}

// TestServiceCallAgrees: a session-service call through serviceCall (the
// path every method but the probe takes) ends, and is counted, logged,
// authenticated, routed and bounded, as the same call through the general
// chain: the same scenarios run through both, and what the caller, the
// handler, the metrics and the access log see is compared.
func TestServiceCallAgrees(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recordingHandler{}
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok": "alice"}
		c.Registry = reg
		c.Logger = slog.New(rec)
	}})
	e := h.gw.unary
	const full = sessiongatev1.SessionGateway_RunJob_FullMethodName
	m, ok := e.methods[full]
	if !ok {
		t.Fatalf("RunJob has no serviceCall entry")
	}
	if _, ok := e.methods["/grpc.health.v1.Health/Check"]; ok {
		t.Error("health takes serviceCall, not the chain")
	}
	if p := e.methods[sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName]; p.logged || p.mm == nil {
		t.Errorf("the probe's entry: logged %v, series %v; want not logged, with its series", p.logged, p.mm)
	}
	info := &grpc.UnaryServerInfo{FullMethod: full}
	const sid = "ses-00000000000000000000000000"
	incoming := func(ctx context.Context, kv ...string) context.Context {
		return metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
	}
	type seen struct {
		code       codes.Code
		msg        string
		profile    string
		called     bool
		caller     string
		deadline   bool
		started    float64
		handled    float64
		logged     int
		logLevel   slog.Level
		logCode    string
		panicLines int
	}
	labels := map[string]string{"grpc_method": "RunJob"}
	run := func(path string, ctx context.Context, handler func(context.Context) (any, error)) seen {
		var s seen
		started0 := series(t, reg, "grpc_server_started_total", labels)
		rec.mu.Lock()
		logs0 := len(rec.recs)
		rec.mu.Unlock()
		final := func(ctx context.Context, _ any) (any, error) {
			s.called, s.caller = true, callerFrom(ctx)
			_, s.deadline = ctx.Deadline()
			return handler(ctx)
		}
		req := &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo"}
		var err error
		if path == "chain" {
			_, err = e.chain(ctx, req, info, final)
		} else {
			_, err = e.serviceCall(ctx, req, info, final, m)
		}
		st := status.Convert(err)
		s.code, s.msg = st.Code(), st.Message()
		if te, ok := timeoutprofile.FromError(err); ok {
			s.profile, s.msg = te.GetProfileName(), "" // its message has the elapsed time
		}
		s.started = series(t, reg, "grpc_server_started_total", labels) - started0
		s.handled = series(t, reg, "grpc_server_handled_total", map[string]string{"grpc_method": "RunJob", "grpc_code": s.code.String()})
		rec.mu.Lock()
		for _, r := range rec.recs[logs0:] {
			switch r.Message {
			case "finished call":
				s.logged++
				s.logLevel = r.Level
				r.Attrs(func(a slog.Attr) bool {
					if a.Key == "grpc.code" {
						s.logCode = a.Value.String()
					}
					return true
				})
			case "panic in handler":
				s.panicLines++
			}
		}
		rec.mu.Unlock()
		return s
	}
	authed := incoming(context.Background(), "authorization", "Bearer tok")
	ok200 := func(context.Context) (any, error) { return &sessiongatev1.RunJobResponse{}, nil }
	for _, c := range []struct {
		name    string
		ctx     func() (context.Context, context.CancelFunc)
		handler func(context.Context) (any, error)
		want    codes.Code
	}{
		{"ok", func() (context.Context, context.CancelFunc) { return authed, func() {} }, ok200, codes.OK},
		{"handler error", func() (context.Context, context.CancelFunc) { return authed, func() {} },
			func(context.Context) (any, error) { return nil, status.Error(codes.NotFound, "no such job") }, codes.NotFound},
		{"handler panics", func() (context.Context, context.CancelFunc) { return authed, func() {} },
			func(context.Context) (any, error) { panic("boom") }, codes.Internal},
		{"no token", func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }, ok200, codes.Unauthenticated},
		{"wrong token", func() (context.Context, context.CancelFunc) {
			return incoming(context.Background(), "authorization", "Bearer nope"), func() {}
		}, ok200, codes.Unauthenticated},
		{"session header mismatch", func() (context.Context, context.CancelFunc) {
			return incoming(context.Background(), "authorization", "Bearer tok", MetadataSession, "ses-other"), func() {}
		}, ok200, codes.InvalidArgument},
		{"deadline already passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(authed, time.Now().Add(-time.Millisecond))
		}, ok200, codes.DeadlineExceeded},
	} {
		var got [2]seen
		for i, path := range []string{"chain", "serviceCall"} {
			ctx, cancel := c.ctx()
			got[i] = run(path, ctx, c.handler)
			cancel()
		}
		chain, fused := got[0], got[1]
		if chain.code != c.want {
			t.Errorf("%s: the chain answered %v, want %v (the scenario does not test what it says)", c.name, chain.code, c.want)
		}
		// handled is cumulative per code: both runs add one to the same
		// series, so the second sees one more.
		chain.handled++
		if chain != fused {
			t.Errorf("%s:\n chain       %+v\n serviceCall %+v", c.name, chain, fused)
		}
		if fused.started != 1 || fused.logged != 1 {
			t.Errorf("%s: serviceCall counted %v starts and logged %d lines, want 1 and 1", c.name, fused.started, fused.logged)
		}
	}
}

// BenchmarkServiceCall: a RunJob request through the unary interceptors
// around a handler that answers at once, by the general chain and by
// serviceCall (compare with benchstat -col /path).
func BenchmarkServiceCall(b *testing.B) {
	h := newHarnessTB(b, harnessOpts{config: func(c *Config) { c.ClientTokens = map[string]string{"tok": "alice"} }})
	e := h.gw.unary
	const full = sessiongatev1.SessionGateway_RunJob_FullMethodName
	m := e.methods[full]
	info := &grpc.UnaryServerInfo{FullMethod: full}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer tok"))
	req := &sessiongatev1.RunJobRequest{SessionId: "ses-00000000000000000000000000", Agent: "echo"}
	resp := &sessiongatev1.RunJobResponse{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	for _, path := range []string{"chain", "serviceCall"} {
		b.Run("path="+path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if path == "chain" {
					_, err = e.chain(ctx, req, info, handler)
				} else {
					_, err = e.serviceCall(ctx, req, info, handler, m)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestServiceCallNeverAnswersEmpty: a session call whose routing or
// handler ends with neither an answer nor an error gets INTERNAL, never
// the empty OK message grpc-go would send for it (a RunJob "succeeded"
// with no job and no result).
func TestServiceCallNeverAnswersEmpty(t *testing.T) {
	access := &accessLog{log: slog.New(slog.DiscardHandler), skip: map[string]bool{}}
	ran := false
	e := &unaryEntry{
		methods: serviceMethods(newGRPCMetrics(), access),
		access:  access,
		auth:    func(ctx context.Context) (context.Context, error) { return ctx, nil },
		route: func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			ran = true
			return nil, nil
		},
	}
	info := &grpc.UnaryServerInfo{FullMethod: sessiongatev1.SessionGateway_RunJob_FullMethodName}
	resp, err := e.intercept(context.Background(), &sessiongatev1.RunJobRequest{}, info, nil)
	if !ran {
		t.Fatal("the call never reached its routing")
	}
	if resp != nil || status.Code(err) != codes.Internal {
		t.Fatalf("got %v, %v; want no answer and INTERNAL", resp, err)
	}
}
