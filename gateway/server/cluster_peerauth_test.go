package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/peerauth"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// wiretap records the hop headers of the calls a replica forwards, as they
// leave it (a peer dial option): what anyone on the peer link would see.
type wiretap struct {
	mu  sync.Mutex
	got map[string][]metadata.MD // by method
}

func (w *wiretap) record(ctx context.Context, method string) {
	md, _ := metadata.FromOutgoingContext(ctx)
	hop := metadata.MD{}
	for _, k := range []string{mdForwardedBy, mdForwardCaller, mdForwardAuth} {
		hop[k] = md.Get(k)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.got == nil {
		w.got = map[string][]metadata.MD{}
	}
	w.got[method] = append(w.got[method], hop)
}

func (w *wiretap) last(t *testing.T, method string) metadata.MD {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.got[method]
	if len(l) == 0 {
		t.Fatalf("no forwarded %s seen on the peer link", method)
	}
	return l[len(l)-1]
}

func (w *wiretap) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			w.record(ctx, method)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			w.record(ctx, method)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// TestForwardProofReplays: a forwarding header taken off the peer link (a
// RunJob and a WatchJob gw-b forwarded to gw-a) is refused when sent again
// to the owner — as it was, for another session, with another body, to
// another replica, naming the owner as sender, and later — and every
// refusal is counted by reason. Before this proof the same header was
// accepted again for five minutes, for any session of the caller.
func TestForwardProofReplays(t *testing.T) {
	tap := &wiretap{}
	var regs []*prometheus.Registry
	var addrs []string
	gws, _ := startReplicaGateways(t, 3, func(c *Config) {
		c.Cluster.PeerDialOptions = tap.dialOptions()
		regs = append(regs, c.Registry)
		addrs = append(addrs, c.Cluster.Advertise)
	})
	ctx := ctxT(t, 30*time.Second)
	open := func() string {
		r, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "replay-test"})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetSessionId()
	}
	s1, s2 := open(), open()
	input := func(v string) *structpb.Value { x, _ := structpb.NewValue(map[string]any{"v": v}); return x }
	run := func(s, v string) *sessiongatev1.RunJobRequest {
		return &sessiongatev1.RunJobRequest{SessionId: s, Agent: "echo", Input: input(v)}
	}
	var hdr metadata.MD
	if _, err := gws[1].RunJob(ctx, run(s1, "genuine"), grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(MetadataServedBy); len(got) != 1 || got[0] != "gw-b" {
		t.Fatalf("served by %v, want gw-b (forwarded to gw-a)", got)
	}
	hop := tap.last(t, sessiongatev1.SessionGateway_RunJob_FullMethodName)
	if len(hop.Get(mdForwardAuth)) != 1 || hop.Get(mdForwardedBy)[0] != "gw-b" {
		t.Fatalf("hop headers %v", hop)
	}

	// Direct connections to each replica, as an attacker on the network.
	direct := make([]sessiongatev1.SessionGatewayClient, len(addrs))
	for i, a := range addrs {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		direct[i] = sessiongatev1.NewSessionGatewayClient(cc)
	}
	with := func(md metadata.MD) context.Context { return metadata.NewOutgoingContext(ctx, md) }
	refused := func(name string, err error, want string) {
		t.Helper()
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("%s: %v, want UNAUTHENTICATED", name, err)
		}
		if want == "" {
			return
		}
		for _, d := range status.Convert(err).Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "FORWARD_REFUSED" && info.GetMetadata()["reason"] == want {
				return
			}
		}
		t.Fatalf("%s: %v, want ErrorInfo FORWARD_REFUSED reason %s", name, err, want)
	}
	selfNamed := hop.Copy()
	selfNamed.Set(mdForwardedBy, "gw-a")
	_, err := direct[0].RunJob(with(hop), run(s1, "genuine"))
	refused("same call again", err, peerauth.ReasonReplay)
	_, err = direct[0].RunJob(with(hop), run(s2, "genuine"))
	refused("other session", err, peerauth.ReasonMismatch)
	_, err = direct[0].RunJob(with(hop), run(s1, "rm -rf /"))
	refused("other body", err, peerauth.ReasonMismatch)
	_, err = direct[2].RunJob(with(hop), run(s1, "genuine"))
	refused("other destination (gw-c)", err, peerauth.ReasonMismatch)
	_, err = direct[0].RunJob(with(selfNamed), run(s1, "genuine"))
	refused("naming the owner as sender", err, peerauth.ReasonSelf)
	_, err = direct[0].CloseSession(with(hop), &sessiongatev1.CloseSessionRequest{SessionId: s1})
	refused("other method", err, peerauth.ReasonMismatch)
	_, err = direct[0].GetSessionStatus(with(hop), &sessiongatev1.GetSessionStatusRequest{SessionId: s1})
	refused("a method peers never forward", err, "")

	// A forwarded stream's header, replayed.
	sub, err := gws[0].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: s1, Agent: "echo", Input: input("w")})
	if err != nil {
		t.Fatal(err)
	}
	watch := &sessiongatev1.WatchJobRequest{SessionId: s1, JobId: sub.GetJobId()}
	ws, err := gws[1].WatchJob(ctx, watch)
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := ws.Recv(); err != nil {
			if status.Code(err) != codes.OK && err.Error() != "EOF" {
				t.Fatalf("forwarded WatchJob: %v", err)
			}
			break
		}
	}
	whop := tap.last(t, sessiongatev1.SessionGateway_WatchJob_FullMethodName)
	rs, err := direct[0].WatchJob(with(whop), watch)
	if err == nil {
		_, err = rs.Recv()
	}
	refused("WatchJob again", err, peerauth.ReasonReplay)

	// Later: once its proof has expired, the header is refused as such.
	late := hop.Copy()
	tmr := time.NewTimer(peerauth.DefaultTTL + peerauth.DefaultSkew + 100*time.Millisecond)
	select {
	case <-tmr.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	_, err = direct[0].RunJob(with(late), run(s1, "genuine"))
	refused("same call, later", err, peerauth.ReasonExpired)

	want := map[string]float64{peerauth.ReasonReplay: 2, peerauth.ReasonMismatch: 3, peerauth.ReasonSelf: 1, peerauth.ReasonExpired: 1, peerauth.ReasonMalformed: 1}
	for r, n := range want {
		if got := series(t, regs[0], "sessiongate_cluster_forward_proofs_refused_total", map[string]string{"reason": r}); got != n {
			t.Errorf("gw-a refused_total{reason=%q} = %v, want %v", r, got, n)
		}
	}
	if got := series(t, regs[2], "sessiongate_cluster_forward_proofs_refused_total", map[string]string{"reason": peerauth.ReasonMismatch}); got != 1 {
		t.Errorf("gw-c refused_total{reason=mismatch} = %v, want 1", got)
	}
	// The genuine call still works after all this.
	if _, err := gws[1].RunJob(ctx, run(s1, "again")); err != nil {
		t.Fatalf("a genuine forward after the replays: %v", err)
	}
}
