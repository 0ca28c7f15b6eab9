package client_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// startCluster starts three replicas (1 s lease) for a test, or skips
// without the binary outside CI.
func startCluster(t *testing.T, ctx context.Context) (*clustertest.Cluster, []string) {
	t.Helper()
	c, err := clustertest.Start(ctx, clustertest.Options{})
	if errors.Is(err, clustertest.ErrNoBinary) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var addrs []string
	for _, r := range c.Replicas {
		addrs = append(addrs, r.Addr)
	}
	return c, addrs
}

// TestSilenceBoundFrozenReplica: a client with its defaults over the three
// replicas of a cluster, one of them frozen (SIGSTOP, never thawed during
// the test): every session, those the frozen replica owned included,
// answers Run again within the lease's TTL + 1 s of the freeze (plus a
// margin for a loaded machine), far from the calls' 20 s deadline, and the
// frozen replica is held silent. Without the bound, a call the round robin
// sends to the frozen replica waits for its deadline.
func TestSilenceBoundFrozenReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c, addrs := startCluster(t, ctx)
	cl, err := client.New("", client.WithReplicas(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var sessions []*client.Session
	owned := map[string]int{}
	for range 6 {
		s, err := cl.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "silence"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		owned[st.GetInstanceId()]++
		sessions = append(sessions, s)
	}
	victim := 0
	for i, r := range c.Replicas {
		if owned[r.Instance] > owned[c.Replicas[victim].Instance] {
			victim = i
		}
	}
	t.Logf("sessions per owner %v; freezing %s", owned, c.Replicas[victim].Instance)
	c.Freeze(victim)
	t.Cleanup(func() { c.Thaw(victim) })
	frozenAt := time.Now()

	// Each session runs calls until one succeeds after the freeze, and
	// then three more, so that the round robin sends some to the frozen one.
	const bound = 5 * time.Second // TTL + 1 s = 2 s, with room for two CPU hogs
	var wg sync.WaitGroup
	answered := make([]time.Duration, len(sessions))
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Go(func() {
			ok := 0
			for ok < 4 && ctx.Err() == nil {
				cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				start := time.Now()
				_, err := s.Run(cctx, "echo", map[string]any{"n": ok})
				cancel()
				if err != nil {
					if time.Since(frozenAt) > bound {
						errs[i] = err
						return
					}
					continue
				}
				if ok == 0 {
					answered[i] = time.Since(frozenAt)
				}
				if d := time.Since(start); d > bound {
					errs[i] = errors.New("a call took " + d.String())
					return
				}
				ok++
			}
		})
	}
	wg.Wait()
	for i := range sessions {
		if errs[i] != nil {
			t.Errorf("session %d: %v", i, errs[i])
		}
		if answered[i] > bound {
			t.Errorf("session %d answered %v after the freeze, want within %v", i, answered[i], bound)
		}
	}
	t.Logf("answered after the freeze: %v", answered)
	if got := client.SilentReplicas(cl); !slices.Contains(got, addrs[victim]) {
		t.Errorf("silent replicas %v, want %s among them", got, addrs[victim])
	}
}

// attempts counts the attempts of each call (a stats.Begin each).
type attempts struct{ n atomic.Int32 }

func (*attempts) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (a *attempts) HandleRPC(_ context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.IsClient() {
		a.n.Add(1)
	}
}
func (*attempts) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*attempts) HandleConn(context.Context, stats.ConnStats)                       {}

// TestSilenceBoundLongJobNotCut: a job that runs for many silence periods
// on live replicas is waited for in its one attempt (the replica answers
// its health checks), and no replica is held silent.
func TestSilenceBoundLongJobNotCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, addrs := startCluster(t, ctx)
	var n attempts
	cl, err := client.New("", client.WithReplicas(addrs...), client.WithSilenceBound(100*time.Millisecond, time.Second),
		client.WithDialOptions(grpc.WithStatsHandler(&n)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "silence"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // over each replica in turn
		before := n.n.Load()
		start := time.Now()
		if _, err := s.Run(ctx, "sleep", map[string]any{"ms": 1500}); err != nil {
			t.Fatal(err)
		}
		if got := n.n.Load() - before; got != 1 {
			t.Errorf("a 1.5 s job took %d attempts (%v), want 1", got, time.Since(start))
		}
	}
	if got := client.SilentReplicas(cl); len(got) != 0 {
		t.Errorf("silent replicas %v, want none", got)
	}
}

// streamAddrs records the replica address each WatchJob stream went to.
type streamAddrs struct {
	mu    sync.Mutex
	addrs []string
}

func (*streamAddrs) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (s *streamAddrs) HandleRPC(_ context.Context, st stats.RPCStats) {
	if h, ok := st.(*stats.OutHeader); ok && h.IsClient() && h.FullMethod == gatewayv1.SessionGateway_WatchJob_FullMethodName {
		s.mu.Lock()
		s.addrs = append(s.addrs, h.RemoteAddr.String())
		s.mu.Unlock()
	}
}
func (*streamAddrs) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (*streamAddrs) HandleConn(context.Context, stats.ConnStats)                       {}

func (s *streamAddrs) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.addrs) == 0 {
		return ""
	}
	return s.addrs[len(s.addrs)-1]
}

// TestSilenceBoundWatchLeavesFrozenReplica: a watch whose stream runs
// through a replica (not the session's owner) that freezes mid-stream is
// cut REPLICA_SILENT by the client and resumes on another replica from its
// cursor: every event once, in order, then the result, long before the
// freeze ends (never, in this test). Without the bound the stream waits for
// the thaw.
func TestSilenceBoundWatchLeavesFrozenReplica(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, addrs := startCluster(t, ctx)
	var rec streamAddrs
	cl, err := client.New("", client.WithReplicas(addrs...), client.WithDialOptions(grpc.WithStatsHandler(&rec)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s, err := cl.OpenSession(ctx, &gatewayv1.OpenSessionRequest{ClientName: "silence-watch"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owner := ""
	for _, r := range c.Replicas {
		if r.Instance == st.GetInstanceId() {
			owner = r.Addr
		}
	}
	const count = 80 // 50 ms apart: 4 s
	for try := 0; ; try++ {
		job, err := s.Submit(ctx, "stream", map[string]any{"count": count, "interval_ms": 50})
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		var seen []int
		frozen := -1
		var frozenAt time.Time
		result := false
		for item, err := range s.Watch(wctx, job.ID, client.WithResumePolicy(client.ResumePolicy{MaxAttempts: 20, MaxBackoff: 200 * time.Millisecond})) {
			if err != nil {
				wcancel()
				t.Fatalf("watch: %v (events %d; frozen %d)", err, len(seen), frozen)
			}
			if item.Result != nil {
				result = true
				break
			}
			if item.Event == nil {
				continue
			}
			seen = append(seen, int(item.Event.Body.(map[string]any)["i"].(float64)))
			if len(seen) == 5 && frozen < 0 {
				a := rec.last()
				if a == owner {
					break // the stream is on the owner: watch another job
				}
				for i, r := range c.Replicas {
					if r.Addr == a {
						frozen = i
					}
				}
				if frozen < 0 {
					t.Fatalf("stream address %q is no replica's", a)
				}
				c.Freeze(frozen)
				t.Cleanup(func() { c.Thaw(frozen) })
				frozenAt = time.Now()
			}
		}
		wcancel()
		if frozen < 0 {
			if try >= 8 {
				t.Fatal("every watch stream went to the session's owner")
			}
			continue
		}
		took := time.Since(frozenAt)
		if !result {
			t.Fatalf("no result; events %v", seen)
		}
		want := make([]int, count)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(seen, want) {
			t.Fatalf("events %v, want 0..%d once, in order", seen, count-1)
		}
		if got := client.SilentReplicas(cl); !slices.Contains(got, addrs[frozen]) {
			t.Errorf("silent replicas %v, want %s among them", got, addrs[frozen])
		}
		t.Logf("watch ended %v after its replica froze (job 4 s)", took)
		return
	}
}
