package server

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// benchHarness is newHarness for benchmarks: a gateway over a reference
// runtime on loopback, with the production interceptor chain.
func benchHarness(b *testing.B, opts ...func(*Config)) (*harness, string) {
	b.Helper()
	h := newHarnessTB(b, harnessOpts{config: func(c *Config) {
		for _, o := range opts {
			o(c)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	return h, resp.GetSessionId()
}

// BenchmarkGetSessionStatus measures the probe end to end over loopback
// gRPC, 64 callers at a time (as gateway-bench's section 4) on one
// connection, in the BASIC view a balancer asks for.
func BenchmarkGetSessionStatus(b *testing.B) {
	h, id := benchHarness(b)
	req := &sessiongatev1.GetSessionStatusRequest{SessionId: id, View: sessiongatev1.SessionStatusView_SESSION_STATUS_VIEW_BASIC}
	b.ReportAllocs()
	b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := h.client.GetSessionStatus(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkRunJobEcho measures RunJob(echo) end to end: gRPC, the gateway,
// ARCP over WebSocket and the reference runtime, all in this process.
func mustValueTB(tb testing.TB, v any) *structpb.Value {
	tb.Helper()
	pv, err := structpb.NewValue(v)
	if err != nil {
		tb.Fatal(err)
	}
	return pv
}

// BenchmarkRunJobEcho: one RunJob at a time over loopback, with the default
// stream workers and with none (a new goroutine per call); compare with
// benchstat -col /workers.
func BenchmarkRunJobEcho(b *testing.B) {
	for _, w := range []struct {
		name string
		n    int
	}{{"default", 0}, {"none", -1}} {
		b.Run("workers="+w.name, func(b *testing.B) { benchRunJobEcho(b, w.n) })
	}
}

func benchRunJobEcho(b *testing.B, workers int) {
	h, id := benchHarness(b, func(c *Config) { c.StreamWorkers = workers })
	req := &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValueTB(b, map[string]any{"hello": "world"})}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.client.RunJob(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRunJobParallel: 64 callers, each on its own session (as
// gateway-bench's concurrent RunJob point), over one gRPC connection. The
// reference runtime runs in this process, so a CPU profile shows both
// sides; its figures are for profiles and before/after comparisons, the
// ratios come from gateway-bench.
func BenchmarkRunJobParallel(b *testing.B) {
	h, first := benchHarness(b)
	const callers = 64
	ids := make(chan string, callers)
	ids <- first
	for range callers - 1 {
		resp, err := h.client.OpenSession(context.Background(), &sessiongatev1.OpenSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ids <- resp.GetSessionId()
	}
	in := mustValueTB(b, map[string]any{"hello": "world"})
	b.ReportAllocs()
	b.SetParallelism(max(callers/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := &sessiongatev1.RunJobRequest{SessionId: <-ids, Agent: "echo", Input: in}
		for pb.Next() {
			if _, err := h.client.RunJob(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkProbeVsHealth compares the status probe (BASIC view) with the
// gateway's own grpc.health.v1 Check, on the same server and connection, 64
// callers at a time: the difference is what the probe itself costs (its
// handler, its larger messages, authentication and the cluster routing
// interceptor, which health skips), apart from the transport and the
// interceptors both run.
func BenchmarkProbeVsHealth(b *testing.B) {
	h, id := benchHarness(b)
	status := &sessiongatev1.GetSessionStatusRequest{SessionId: id, View: sessiongatev1.SessionStatusView_SESSION_STATUS_VIEW_BASIC}
	health := healthpb.NewHealthClient(h.conn)
	bare := bareHealth(b)
	for _, c := range []struct {
		name string
		call func(context.Context) error
	}{
		{"probe=status", func(ctx context.Context) error { _, err := h.client.GetSessionStatus(ctx, status); return err }},
		{"probe=health", func(ctx context.Context) error {
			_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}},
		{"probe=bare-health", func(ctx context.Context) error {
			_, err := bare.Check(ctx, &healthpb.HealthCheckRequest{})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.call(context.Background()); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// bareHealth serves grpc.health.v1 on a bare grpc.Server (bareServer), the
// floor a gateway call is compared with.
func bareHealth(b *testing.B) healthpb.HealthClient {
	return healthpb.NewHealthClient(bareServer(b, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) }))
}

// bareServer serves what register adds on a grpc.Server with no
// interceptors and the gateway's default flow-control window, on loopback,
// and returns a connection to it, made with opts; both end with the
// benchmark.
func bareServer(b *testing.B, register func(*grpc.Server), opts ...grpc.DialOption) *grpc.ClientConn {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer(windowOptions(DefaultWindowBytes)...)
	register(s)
	go func() { _ = s.Serve(lis) }()
	b.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	return cc
}

// BenchmarkClusterRunJob: RunJob(echo), one call at a time, on a session
// owned by replica a, sent to a (local) and to b (forwarded to a); two
// in-process replicas on a real redis-server. For profiles of the forwarding
// hop (gateway-bench's section 9a has the figures).
func BenchmarkClusterRunJob(b *testing.B) {
	gws := startReplicas(b, 2, nil)
	ctx := context.Background()
	open, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		b.Fatal(err)
	}
	req := &sessiongatev1.RunJobRequest{SessionId: open.GetSessionId(), Agent: "echo", Input: mustValueTB(b, map[string]any{"hello": "world"})}
	for _, c := range []struct {
		name string
		gw   sessiongatev1.SessionGatewayClient
	}{{"via=local", gws[0]}, {"via=forwarded", gws[1]}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.gw.RunJob(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBareForwardHop is the floor of a forwarding hop: a bare grpc-go
// service answering an empty message, called directly and through a second
// bare service that forwards each call to it, one call at a time. Compare
// its hop (forwarded − direct) with BenchmarkClusterRunJob's.
func BenchmarkBareForwardHop(b *testing.B) {
	serve := func(h func(ctx context.Context, in *emptypb.Empty) (*emptypb.Empty, error), opts ...grpc.DialOption) *grpc.ClientConn {
		return bareServer(b, func(s *grpc.Server) {
			s.RegisterService(&grpc.ServiceDesc{ServiceName: "bench.Hop", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
				MethodName: "Call",
				Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
					in := new(emptypb.Empty)
					if err := dec(in); err != nil {
						return nil, err
					}
					return h(ctx, in)
				}}}}, struct{}{})
		}, opts...)
	}
	owner := serve(func(_ context.Context, in *emptypb.Empty) (*emptypb.Empty, error) { return in, nil })
	// The forwarder's own connection to the owner, with the window of the
	// gateway's peer connections.
	peer := serve(func(_ context.Context, in *emptypb.Empty) (*emptypb.Empty, error) { return in, nil }, peerWindowOptions(DefaultWindowBytes)...)
	forwarder := serve(func(ctx context.Context, in *emptypb.Empty) (*emptypb.Empty, error) {
		out := new(emptypb.Empty)
		return out, peer.Invoke(ctx, "/bench.Hop/Call", in, out)
	})
	for _, c := range []struct {
		name string
		cc   *grpc.ClientConn
	}{{"via=direct", owner}, {"via=forwarded", forwarder}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.cc.Invoke(context.Background(), "/bench.Hop/Call", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClusterTick is one pass of a replica's directory loop (every
// AckEvery, 250 ms by default) over the idle sessions it owns, on a real
// redis-server: what holding them costs the replica while nothing happens.
// The replica's own loop is stopped, so that the benchmark's passes are the
// only ones. With due=all every record is made RefreshEvery old before each
// pass, as happens to sessions opened together; rewritten/pass says how
// many records the pass wrote.
func BenchmarkClusterTick(b *testing.B) {
	for _, c := range []struct {
		n   int
		due bool
	}{{100, false}, {2000, false}, {2000, true}} {
		name := fmt.Sprintf("sessions=%d", c.n)
		if c.due {
			name += "/due=all"
		}
		b.Run(name, func(b *testing.B) {
			gws, gateways := startReplicaGateways(b, 1, func(cfg *Config) { cfg.MaxSessionsPerCaller = c.n })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for range c.n {
				if _, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{}); err != nil {
					b.Fatal(err)
				}
			}
			cs := gateways[0].cluster
			cs.stopLoop()
			owned := cs.snapshot()
			if len(owned) != c.n {
				b.Fatalf("the replica owns %d sessions, want %d", len(owned), c.n)
			}
			for _, o := range owned {
				o.mu.Lock()
				claimed := o.epoch != 0
				o.mu.Unlock()
				if !claimed {
					b.Fatalf("session %s was never claimed", o.id)
				}
			}
			rewritten := 0
			b.ReportAllocs()
			for b.Loop() {
				if c.due {
					b.StopTimer()
					ageRecords(owned, cs.cfg.RefreshEvery)
					b.StartTimer()
				}
				cs.tick()
				if c.due {
					b.StopTimer()
					for _, o := range owned {
						o.mu.Lock()
						if time.Since(o.written) < cs.cfg.RefreshEvery {
							rewritten++
						}
						o.mu.Unlock()
					}
					b.StartTimer()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.n), "ns/session")
			if c.due {
				b.ReportMetric(float64(rewritten)/float64(b.N), "rewritten/pass")
			}
		})
	}
}
