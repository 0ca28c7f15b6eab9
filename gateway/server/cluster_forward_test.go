package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/cluster"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// forwardRig is in-process replicas over real sockets, sharing a real
// redis-server and one reference runtime; each replica can be shut down
// on its own.
type forwardRig struct {
	t     *testing.T
	redis string
	rt    *arcpruntime.Server
	key   string
	reps  map[string]*forwardReplica
}

type forwardReplica struct {
	gw     *Gateway
	dir    *directory.Directory
	lease  *leaseLoop
	client sessiongatev1.SessionGatewayClient
	addr   string
	down   func() // Shutdown (once), then the lease and directory
}

func newForwardRig(t *testing.T) *forwardRig {
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
	return &forwardRig{t: t, redis: rd.URL, rt: arcpruntime.NewTestServer(t, arcpruntime.Options{}), key: testDirectoryKey(),
		reps: map[string]*forwardReplica{}}
}

// start starts replica inst (lease TTL 1 s, no rebalancing) with cc
// applied to its cluster config.
func (r *forwardRig) start(inst string, cc func(*ClusterConfig)) *forwardReplica {
	t := r.t
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	d, err := directory.Open(ctx, r.redis, directory.Config{Instance: inst, Advertise: addr, Keys: []string{r.key}, LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	lease := &leaseLoop{d: d}
	lease.start()
	for d.LeaseValidUntil().IsZero() {
		select {
		case <-ctx.Done():
			t.Fatal("no lease:", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	ccfg := &ClusterConfig{Directory: d, Advertise: addr, Secret: "cluster-forward-test-secret", RebalancePerSecond: -1}
	if cc != nil {
		cc(ccfg)
	}
	gw, err := New(Config{
		InstanceID: inst, Runtimes: []Runtime{{Name: "default", URL: r.rt.URL()}},
		Upstream: upstream.Config{BackoffInitial: 5 * time.Millisecond, BackoffMax: 50 * time.Millisecond, InitTimeout: 2 * time.Second},
		Registry: prometheus.NewRegistry(),
		Cluster:  ccfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gw.Serve(lis) }()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	rep := &forwardReplica{gw: gw, dir: d, lease: lease, client: sessiongatev1.NewSessionGatewayClient(conn), addr: addr}
	stopped := false
	rep.down = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := gw.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown %s: %v", inst, err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve %s: %v", inst, err)
		}
		lease.halt()
		_ = d.Close()
	}
	t.Cleanup(func() {
		conn.Close()
		rep.down()
	})
	r.reps[inst] = rep
	return rep
}

// echoOn runs RunJob(echo) on sid through rep and returns the owner the
// answer names.
func echoOn(ctx context.Context, rep *forwardReplica, sid string, timeout time.Duration) (string, error) {
	in, _ := structpb.NewValue(map[string]any{"hello": "forward"})
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var hdr metadata.MD
	_, err := rep.client.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: in}, grpc.Header(&hdr))
	if v := hdr.Get(MetadataOwner); len(v) > 0 {
		return v[0], err
	}
	return "", err
}

// waitOwner waits until the directory names owner, live, for sid.
func waitOwner(t *testing.T, ctx context.Context, d *directory.Directory, sid, owner string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := d.Get(ctx, sid)
		if err == nil && rec.Owner == owner && rec.OwnerLive {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the directory never named %s for %s (last %+v, %v)", owner, sid, rec, err)
		case <-tick.C:
		}
	}
}

// TestForwardNotSentGoesToAdopter: gw-b forwarded a call for a session of
// gw-a and remembers gw-a as its owner; gw-a shuts down (its listener
// closes) and gw-c adopts the session. The next call through gw-b finds
// gw-a's port closed: the forward was never sent, so gw-b drops its cached
// owner, reads the directory and sends the call to gw-c, which serves it —
// the caller sees no error. (Before, the refused dial was classed as a
// failed forward and the caller got UNAVAILABLE OWNER_UNREACHABLE.)
func TestForwardNotSentGoesToAdopter(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	r := newForwardRig(t)
	noLameDuck := func(cc *ClusterConfig) { cc.LameDuck = -1 }
	a := r.start("gw-a", noLameDuck)
	// gw-b never adopts (its sweep is off for the test's length) and
	// remembers owners for a minute, so its cache still names gw-a.
	b := r.start("gw-b", func(cc *ClusterConfig) { cc.SweepEvery, cc.OwnerCacheTTL = time.Hour, time.Minute })
	c := r.start("gw-c", func(cc *ClusterConfig) { cc.SweepEvery = 20 * time.Millisecond })

	open, err := a.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "forward-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	waitOwner(t, ctx, b.dir, sid, "gw-a")
	if owner, err := echoOn(ctx, b, sid, 5*time.Second); err != nil || owner != "gw-a" {
		t.Fatalf("RunJob through gw-b before the shutdown: owner %q, %v", owner, err)
	}
	a.down() // hands the session off; gw-a's listener is closed
	waitOwner(t, ctx, b.dir, sid, "gw-c")
	if _, err := net.DialTimeout("tcp", a.addr, time.Second); err == nil {
		t.Fatal("gw-a's port still accepts connections")
	}
	owner, err := echoOn(ctx, b, sid, 5*time.Second)
	if err != nil {
		t.Fatalf("RunJob through gw-b after gw-a closed its port (gw-b's cache named gw-a): %v", err)
	}
	if owner != "gw-c" {
		t.Fatalf("served by %q, want the adopter gw-c", owner)
	}
	if n := counterOf(b.gw.cluster.m.forwardRetries.WithLabelValues("not_sent")); n < 1 {
		t.Fatalf("forward_retries{why=not_sent} = %v: the call did not go through the unsent-forward path", n)
	}
	_ = c
}

// counterOf is a counter's value.
func counterOf(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// TestLameDuckGoawayFirstListenerLast: SIGTERM's Shutdown of gw-a (lame
// duck 4 s) sends GOAWAY at once to a client connection made before it —
// the connection leaves READY while the lame duck lasts — while gw-a's
// listener still accepts: a new connection made then runs a job on the
// session gw-a owned, which gw-a forwards to the adopter gw-b. Once
// Shutdown has returned the port refuses connections. (grpc-go alone sends
// GOAWAY only when it closes the listener.)
func TestLameDuckGoawayFirstListenerLast(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	r := newForwardRig(t)
	a := r.start("gw-a", func(cc *ClusterConfig) { cc.LameDuck = 4 * time.Second })
	b := r.start("gw-b", func(cc *ClusterConfig) { cc.SweepEvery = 20 * time.Millisecond })
	open, err := a.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "lame-duck-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	before, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	if owner, err := echoOn(ctx, &forwardReplica{client: sessiongatev1.NewSessionGatewayClient(before)}, sid, 5*time.Second); err != nil || owner != "gw-a" {
		t.Fatalf("RunJob on gw-a before the shutdown: owner %q, %v", owner, err)
	}
	downDone := make(chan struct{})
	go func() { defer close(downDone); a.down() }()
	t.Cleanup(func() { <-downDone })

	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if !before.WaitForStateChange(wctx, connectivity.Ready) {
		t.Fatal("the connection made before the shutdown got no GOAWAY within 3 s of it (the lame duck lasts 4 s)")
	}
	select {
	case <-downDone:
		t.Fatal("Shutdown returned before the lame duck ended")
	default:
	}
	waitOwner(t, ctx, b.dir, sid, "gw-b")
	during, err := grpc.NewClient(a.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer during.Close()
	owner, err := echoOn(ctx, &forwardReplica{client: sessiongatev1.NewSessionGatewayClient(during)}, sid, 5*time.Second)
	if err != nil {
		t.Fatalf("RunJob on a new connection to gw-a in its lame duck: %v", err)
	}
	if owner != "gw-b" {
		t.Fatalf("served by %q, want the adopter gw-b (forwarded by gw-a)", owner)
	}
	select {
	case <-downDone:
		t.Fatal("Shutdown returned before the lame duck ended")
	default:
	}
	<-downDone
	if c, err := net.DialTimeout("tcp", a.addr, time.Second); err == nil {
		c.Close()
		t.Fatal("gw-a's port accepts connections after Shutdown")
	}
}

// TestCallForwardedAfterWaits: a call whose routing waited (here twice,
// LEASE_LAPSED, as on a replica whose lease lapsed while Redis stalled)
// until its OwnerWait was all but spent, and is then routed to the
// session's owner, a replica it has not tried, is forwarded and answered
// by the owner, unary and streaming. (Before, such a call was never
// forwarded: the wait being over, the call ended with no error and no
// response, which grpc-go sends as an empty OK message: a RunJob
// "succeeded" with no job and no result, a WatchJob ended OK with no
// event. gateway-chaos's redis-freeze scenario caught the RunJob.)
func TestCallForwardedAfterWaits(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	r := newForwardRig(t)
	var mu sync.Mutex
	lapsed := map[context.Context]int{} // routings of each call (its server context) so far
	// gw-a's routing answers LEASE_LAPSED twice per call (keyed by the
	// call's context), then routes as it would. Pauses 20 and 40 ms: at
	// 60 ms the next pause (80 ms) would pass the 100 ms wait.
	hook := func(route routeFunc, ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error) {
		key := ctx
		mu.Lock()
		n := lapsed[key]
		lapsed[key] = n + 1
		mu.Unlock()
		if n < 2 {
			return cluster.TakeOver, "", "", errLeaseLapsed
		}
		return route(ctx, id, cached, write)
	}
	a := r.start("gw-a", func(cc *ClusterConfig) {
		cc.SweepEvery, cc.OwnerWait, cc.routeHook = time.Hour, 100*time.Millisecond, hook
	})
	b := r.start("gw-b", nil)
	open, err := b.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "wait-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	waitOwner(t, ctx, a.dir, sid, "gw-b")

	in, _ := structpb.NewValue(map[string]any{"token": "after-waits-" + sid})
	var trl metadata.MD
	resp, err := a.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: in}, grpc.Trailer(&trl))
	if err != nil {
		t.Fatalf("RunJob through gw-a: %v", err)
	}
	if resp.GetJobId() == "" || !proto.Equal(resp.GetResult(), in) {
		t.Fatalf("RunJob answered OK with job %q and result %v, want the echo of %v", resp.GetJobId(), resp.GetResult(), in)
	}
	if got := trl.Get(MetadataServedBy); len(got) != 1 || got[0] != "gw-a" || trl.Get(MetadataOwner)[0] != "gw-b" {
		t.Fatalf("trailer %v: want owner gw-b, served by gw-a (forwarded)", trl)
	}

	sub, err := b.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := a.client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	var items int
	for {
		it, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("WatchJob through gw-a after %d items: %v", items, err)
		}
		items++
		if it.GetResult() != nil && !proto.Equal(it.GetResult().GetResult(), in) {
			t.Fatalf("WatchJob's result %v, want %v", it.GetResult().GetResult(), in)
		}
	}
	if items == 0 {
		t.Fatal("WatchJob through gw-a ended OK with no item: the call was never forwarded to the owner")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lapsed) != 2 {
		t.Fatalf("gw-a routed %d calls, want 2", len(lapsed))
	}
	for _, n := range lapsed {
		if n < 3 {
			t.Fatalf("a call was routed %d times: the script's waits did not happen", n)
		}
	}
}

// TestForwardFirstByteBound: gw-b forwards RunJob calls to gw-a with a
// 200 ms first-byte bound. The first forward gw-a takes is held before its
// routing (an owner frozen before it sent its header): gw-b abandons it
// after the bound (forward_retries{why=no_first_byte}) and sends the call
// again, which gw-a serves. A forward whose owner sent its header at once
// but runs 600 ms (sleep) is not abandoned: gw-b's forward does not wait
// for the header, the peer transport reports it (peerStats), and that
// stops the bound — if the report were lost, the call would be abandoned
// at 200 ms and sent twice.
func TestForwardFirstByteBound(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	r := newForwardRig(t)
	var held, forwarded atomic.Int32
	hook := func(route routeFunc, ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error) {
		if forwardedFrom(ctx) != "" {
			forwarded.Add(1)
			if held.Add(1) == 1 {
				<-ctx.Done() // until gw-b gives the forward up
				return cluster.Unavailable, "", "", ctx.Err()
			}
		}
		return route(ctx, id, cached, write)
	}
	a := r.start("gw-a", func(cc *ClusterConfig) { cc.SweepEvery, cc.routeHook = time.Hour, hook })
	b := r.start("gw-b", func(cc *ClusterConfig) {
		cc.SweepEvery, cc.PeerFirstByte, cc.OwnerWait = time.Hour, 200*time.Millisecond, 5*time.Second
	})
	open, err := a.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "first-byte-test"})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	waitOwner(t, ctx, b.dir, sid, "gw-a")
	noFirstByte := b.gw.cluster.m.forwardRetries.WithLabelValues("no_first_byte")

	owner, err := echoOn(ctx, b, sid, 10*time.Second)
	if err != nil || owner != "gw-a" {
		t.Fatalf("RunJob through gw-b, first forward held by gw-a: owner %q, %v", owner, err)
	}
	if n := counterOf(noFirstByte); n != 1 {
		t.Fatalf("forward_retries{why=no_first_byte} = %v after the held forward, want 1", n)
	}
	if n := forwarded.Load(); n != 2 {
		t.Fatalf("gw-a routed %d forwarded calls, want 2 (the held one, then the one sent again)", n)
	}

	in, _ := structpb.NewValue(map[string]any{"ms": 600})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := b.client.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "sleep", Input: in}); err != nil {
		t.Fatalf("RunJob(sleep 600 ms) through gw-b: %v", err)
	}
	if d := time.Since(start); d < 600*time.Millisecond {
		t.Fatalf("RunJob(sleep 600 ms) answered in %v", d)
	}
	if n := counterOf(noFirstByte); n != 1 {
		t.Fatalf("forward_retries{why=no_first_byte} = %v after a 600 ms call whose owner sent its header at once, want still 1", n)
	}
	if n := forwarded.Load(); n != 3 {
		t.Fatalf("gw-a routed %d forwarded calls, want 3: the 600 ms call was sent more than once", n)
	}
}
