package server

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// startReplicas starts n in-process cluster replicas (instances gw-a, gw-b,
// …) on a real redis-server and one reference runtime, with cfg applied to
// each Config. Without redis-server the test is skipped, unless CI=true.
func startReplicas(t testing.TB, n int, cfg func(*Config)) []sessiongatev1.SessionGatewayClient {
	t.Helper()
	clients, _ := startReplicaGateways(t, n, cfg)
	return clients
}

// startReplicaGateways is startReplicas, with the replicas' gateways.
func startReplicaGateways(t testing.TB, n int, cfg func(*Config)) ([]sessiongatev1.SessionGatewayClient, []*Gateway) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	rd, err := clustertest.StartRedis(ctx)
	if errors.Is(err, clustertest.ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	rt := arcpruntime.NewTestServer(t, arcpruntime.Options{})
	key := testDirectoryKey()
	clients := make([]sessiongatev1.SessionGatewayClient, n)
	gateways := make([]*Gateway, n)
	for i := range n {
		inst := "gw-" + string(rune('a'+i))
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		d, err := directory.Open(ctx, rd.URL, directory.Config{Instance: inst, Advertise: addr, Keys: []string{key}, LeaseTTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lease := &leaseLoop{d: d}
		lease.start()
		// The lease is written before the replica serves: a session whose
		// owner has no lease yet is not forwarded to it (OWNER_SUSPECT).
		for d.LeaseValidUntil().IsZero() {
			select {
			case <-ctx.Done():
				t.Fatal("no lease:", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
		c := Config{
			InstanceID: inst, Runtimes: []Runtime{{Name: "default", URL: rt.URL()}},
			Upstream: upstream.Config{BackoffInitial: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, InitTimeout: 2 * time.Second},
			Registry: prometheus.NewRegistry(),
			Cluster:  &ClusterConfig{Directory: d, Advertise: addr, Secret: "cluster-trace-test-secret"},
		}
		if cfg != nil {
			cfg(&c)
		}
		gw, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		conn := serveReplica(t, inst, gw, lis, func() {
			lease.halt()
			_ = d.Close()
		})
		clients[i], gateways[i] = sessiongatev1.NewSessionGatewayClient(conn), gw
	}
	return clients, gateways
}

// TestClusterForwardTrace: with a TracerProvider, a RunJob forwarded by
// gw-b to the session's owner gw-a stays in the caller's trace (the job's
// trace_id is the caller's traceparent trace id), and the owner's server
// span is a child of the forwarder's client span, itself a child of the
// forwarder's server span.
func TestClusterForwardTrace(t *testing.T) {
	rec := newEndedSpans()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	gws := startReplicas(t, 2, func(c *Config) { c.TracerProvider = tp })
	ctx := ctxT(t, 20*time.Second)
	opened, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "test"})
	if err != nil {
		t.Fatal(err)
	}
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	var hdr metadata.MD
	resp, err := gws[1].RunJob(withTraceparent(ctx, "00-"+trace+"-00f067aa0ba902b7-01"),
		&sessiongatev1.RunJobRequest{SessionId: opened.GetSessionId(), Agent: "echo"}, grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(MetadataServedBy); len(got) != 1 || got[0] != "gw-b" {
		t.Fatalf("served by %v, want gw-b (the call must be forwarded)", got)
	}
	if got := hdr.Get(MetadataOwner); len(got) != 1 || got[0] != "gw-a" {
		t.Fatalf("owner %v, want gw-a", got)
	}
	if resp.GetTraceId() != trace {
		t.Fatalf("RunJob trace_id %q, want the caller's %q", resp.GetTraceId(), trace)
	}
	const name = "sessiongate.v1.SessionGateway/RunJob"
	var servers, clients []sdktrace.ReadOnlySpan
	split := func(spans []sdktrace.ReadOnlySpan) bool {
		servers, clients = servers[:0], clients[:0]
		for _, s := range spans {
			if s.Name() != name || s.SpanContext().TraceID().String() != trace {
				continue
			}
			switch s.SpanKind() {
			case oteltrace.SpanKindServer:
				servers = append(servers, s)
			case oteltrace.SpanKindClient:
				clients = append(clients, s)
			}
		}
		return len(servers) >= 2 && len(clients) >= 1
	}
	// The servers' spans end after their answers are sent: wait for them
	// (at most 5 s), then check there are exactly as many as wanted.
	rec.wait(ctx, 5*time.Second, split)
	if len(servers) != 2 || len(clients) != 1 {
		t.Fatalf("%d server and %d client RunJob spans in the caller's trace, want 2 and 1", len(servers), len(clients))
	}
	client := clients[0]
	var forwarder, owner bool
	for _, s := range servers {
		forwarder = forwarder || s.Parent().SpanID().String() == "00f067aa0ba902b7" && client.Parent().SpanID() == s.SpanContext().SpanID()
		owner = owner || s.Parent().SpanID() == client.SpanContext().SpanID()
	}
	if !forwarder || !owner {
		t.Fatalf("forwarder's server span under the caller's %v, owner's server span under the forwarder's client span %v", forwarder, owner)
	}
}
