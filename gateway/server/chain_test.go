package server

import (
	"context"
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

// series returns the value of the counter (or the sample count of the
// histogram) name whose labels include want, summed over matches.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	var sum float64
	for _, m := range matching(t, reg, name, want) {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
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
	// A caller deadline inside the profile's margin (100 ms) ends the call
	// at once with the profile's details.
	short, cancel := context.WithTimeout(ctx, 90*time.Millisecond)
	defer cancel()
	err := probe(short, id)
	if te, ok := timeoutprofile.FromError(err); !ok || te.GetProfileName() == "" || te.GetMethod() != "GetSessionStatus" {
		t.Errorf("deadline inside the margin: %v (details %v), want DEADLINE_EXCEEDED with the profile", err, te)
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
		{"grpc_server_started_total", status, 7},
		{"grpc_server_msg_received_total", status, 7},
		{"grpc_server_msg_sent_total", status, 7},
		{"grpc_server_handling_seconds", status, 7},
		{"grpc_server_handled_total", with("grpc_code", "OK"), 3},
		{"grpc_server_handled_total", with("grpc_code", "InvalidArgument"), 2},
		{"grpc_server_handled_total", with("grpc_code", "Unauthenticated"), 1},
		{"grpc_server_handled_total", with("grpc_code", "DeadlineExceeded"), 1},
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
