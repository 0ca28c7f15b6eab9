package server

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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
	r.t.Helper()
	return r.startVia(inst, r.redis, time.Second, nil, cc)
}

// startVia is start with the replica's directory reached at redisURL
// (a proxy, say), its lease TTL, and the address it advertises to its
// peers: advertise(its listener's address), or that address when nil.
func (r *forwardRig) startVia(inst, redisURL string, leaseTTL time.Duration, advertise func(string) string, cc func(*ClusterConfig)) *forwardReplica {
	t := r.t
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if advertise != nil {
		addr = advertise(addr)
	}
	d, err := directory.Open(ctx, redisURL, directory.Config{Instance: inst, Advertise: addr, Keys: []string{r.key}, LeaseTTL: leaseTTL})
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

	sid := sessionForwarded(t, ctx, a, b, "gw-a", "forward-test")
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

// freezeProxy relays TCP connections to a Redis on a unix socket; freeze
// stops every byte in both directions (the connections stay open), as a
// frozen process's would.
type freezeProxy struct {
	url  string
	gate sync.RWMutex // held for writing while frozen
	mu   sync.Mutex
	cold bool
}

// newRedisProxy is a freezeProxy to the Redis at redisURL (a unix
// socket); its url is a redis:// one.
func newRedisProxy(t *testing.T, redisURL string) *freezeProxy {
	t.Helper()
	p := newFreezeProxy(t, "unix", strings.TrimPrefix(redisURL, "unix://"))
	p.url = "redis://" + p.url
	return p
}

// newFreezeProxy relays to target (network "tcp" or "unix"); its url is
// its host:port.
func newFreezeProxy(t *testing.T, network, target string) *freezeProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{url: lis.Addr().String()}
	var conns sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	relay := func(dst, src net.Conn) {
		defer conns.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.gate.RLock() // blocks while frozen
				_, werr := dst.Write(buf[:n])
				p.gate.RUnlock()
				if werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		_ = dst.Close()
		_ = src.Close()
	}
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial(network, target)
			if err != nil {
				_ = c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, up)
			mu.Unlock()
			conns.Add(2)
			go relay(up, c)
			go relay(c, up)
		}
	}()
	t.Cleanup(func() {
		p.thaw()
		_ = lis.Close()
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		conns.Wait()
	})
	return p
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cold {
		p.cold = true
		p.gate.Lock()
	}
}

func (p *freezeProxy) thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cold {
		p.cold = false
		p.gate.Unlock()
	}
}

// frozenOwner is gw-a seen through proxies: its Redis connection and the
// address its peers reach it at. freeze stops both, as a SIGSTOP of gw-a
// would for everybody else; gw-a itself runs on (its upstream session
// stays attached to the runtime until another replica resumes it).
type frozenOwner struct {
	*forwardReplica
	redis, peer *freezeProxy
}

func (f *frozenOwner) freeze() { f.redis.freeze(); f.peer.freeze() }

func startFreezable(t *testing.T, r *forwardRig, inst string, ttl time.Duration, cc func(*ClusterConfig)) *frozenOwner {
	t.Helper()
	f := &frozenOwner{redis: newRedisProxy(t, r.redis)}
	f.forwardReplica = r.startVia(inst, f.redis.url, ttl, func(addr string) string {
		f.peer = newFreezeProxy(t, "tcp", addr)
		return f.peer.url
	}, cc)
	return f
}

// freezeAfterRefresh freezes a just after it refreshed its lease (as b's
// directory reads it for sid), so that its lease ends about ttl later.
func freezeAfterRefresh(t *testing.T, ctx context.Context, a *frozenOwner, b *forwardReplica, sid string, ttl time.Duration) {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		rec, err := b.dir.Get(ctx, sid)
		if err == nil && rec.OwnerLeaseLeft > ttl-150*time.Millisecond {
			a.freeze()
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("never saw the owner's lease just refreshed (last %+v, %v)", rec, err)
		case <-tick.C:
		}
	}
}

// sessionForwarded opens a session on owner, waits until via's directory
// names it owner, and runs a job on it through via (forwarded, answered by
// owner): the session's id.
func sessionForwarded(t *testing.T, ctx context.Context, owner, via *forwardReplica, inst, client string) string {
	t.Helper()
	open, err := owner.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: client})
	if err != nil {
		t.Fatal(err)
	}
	sid := open.GetSessionId()
	waitOwner(t, ctx, via.dir, sid, inst)
	if got, err := echoOn(ctx, via, sid, 10*time.Second); err != nil || got != inst {
		t.Fatalf("RunJob forwarded to %s: owner %q, %v", inst, got, err)
	}
	return sid
}

// freezablePair starts gw-a (freezable, lease TTL freezeTTL, no sweep) and
// gw-b (lease TTL freezeTTL, cc applied) and a session owned by gw-a that
// gw-b has forwarded a call to.
func freezablePair(t *testing.T, ctx context.Context, cc func(*ClusterConfig)) (*frozenOwner, *forwardReplica, string) {
	t.Helper()
	r := newForwardRig(t)
	a := startFreezable(t, r, "gw-a", freezeTTL, func(cc *ClusterConfig) { cc.SweepEvery = time.Hour })
	b := r.startVia("gw-b", r.redis, freezeTTL, nil, cc)
	return a, b, sessionForwarded(t, ctx, a.forwardReplica, b, "gw-a", t.Name())
}

// freezeTTL is the lease TTL of freezablePair's replicas.
const freezeTTL = 2 * time.Second

// TestForwardAwaitsSilentOwnersLease: gw-a, the owner, freezes just after
// a lease refresh, so its lease ends one TTL (2 s) later. A RunJob through
// gw-b gives its forward up after --peer-first-byte (1.2 s); the directory
// then shows gw-a's lease ending in about 0.8 s, within that bound, so gw-b
// does not forward to the silent owner again (a forward that would hold
// the call until 2.4 s, past the lease's end): it waits for the lease to
// end, takes the session over and answers. The forward given up is the
// only one; before, a second one was sent into the silence.
func TestForwardAwaitsSilentOwnersLease(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	a, b, sid := freezablePair(t, ctx, func(cc *ClusterConfig) {
		cc.PeerFirstByte, cc.OwnerWait = 1200*time.Millisecond, 10*time.Second
	})
	freezeAfterRefresh(t, ctx, a, b, sid, freezeTTL)
	start := time.Now()
	owner, err := echoOn(ctx, b, sid, 10*time.Second)
	took := time.Since(start)
	if err != nil || owner != "gw-b" {
		t.Fatalf("RunJob through gw-b with gw-a frozen: owner %q, %v (after %v)", owner, err, took)
	}
	m := b.gw.cluster.m
	if n := counterOf(m.forwardRetries.WithLabelValues("no_first_byte")); n != 1 {
		t.Fatalf("%v forwards given up for want of a first byte, want 1: a forward went to the silent owner whose lease was ending (answered after %v)", n, took)
	}
	if n := counterOf(m.awaits); n < 1 {
		t.Fatalf("owner_awaits_total = %v: the call never waited for the silent owner's lease", n)
	}
	t.Logf("answered by gw-b %v after the freeze (lease TTL %v, first-byte bound 1.2 s)", took.Round(time.Millisecond), freezeTTL)
}

// TestForwardRoutedAgainWhenWatchdogDropsPeer: gw-b relays a long RunJob
// that gw-a took (its header came), so gw-b's watchdog probes gw-a. gw-a
// freezes; a second RunJob through gw-b is forwarded and waits for gw-a's
// header (the first-byte bound is long here: 20 s). The watchdog finds gw-a
// silent and closes the connection, which ends both forwards CANCELED. The
// one gw-a had taken is answered UNAVAILABLE (its outcome is unknown); the
// one still waiting for the header had not started on gw-a, so it is routed
// again and, once gw-a's lease is gone, served by gw-b. Before, it was
// answered UNAVAILABLE OWNER_UNREACHABLE "the client connection is closing"
// too, a failed call the gateway could have finished.
func TestForwardRoutedAgainWhenWatchdogDropsPeer(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)
	a, b, sid := freezablePair(t, ctx, func(cc *ClusterConfig) {
		cc.PeerFirstByte, cc.OwnerWait, cc.PeerKeepalive = 20*time.Second, 15*time.Second, 300*time.Millisecond
	})
	long := make(chan error, 1)
	go func() {
		in, _ := structpb.NewValue(map[string]any{"ms": 8000})
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err := b.client.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "sleep", Input: in})
		long <- err
	}()
	// The long call is on gw-a once gw-b watches gw-a for it.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for watched := false; !watched; {
		b.gw.cluster.peersMu.Lock()
		w := b.gw.cluster.watchdogs[a.addr]
		watched = w != nil && w.n > 0
		b.gw.cluster.peersMu.Unlock()
		select {
		case <-ctx.Done():
			t.Fatal("gw-b never watched gw-a for the long call")
		case <-tick.C:
		}
	}
	a.freeze()
	owner, err := echoOn(ctx, b, sid, 25*time.Second)
	if err != nil || owner != "gw-b" {
		t.Fatalf("RunJob through gw-b, its forward cut by the watchdog before gw-a's header: owner %q, %v", owner, err)
	}
	if err := <-long; status.Code(err) != codes.Unavailable {
		t.Fatalf("the long call gw-a had taken ended %v, want UNAVAILABLE (its outcome is unknown)", err)
	}
	m := b.gw.cluster.m
	if n := counterOf(m.forwardRetries.WithLabelValues("no_first_byte")); n != 0 {
		t.Fatalf("%v forwards given up at the first-byte bound: the watchdog was to end them", n)
	}
	if n := counterOf(m.forwardRetries.WithLabelValues("peer_silent")); n < 2 {
		t.Fatalf("forward_retries{why=peer_silent} = %v, want the watchdog's close and the forward routed again", n)
	}
}
