package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// startCluster starts redis-server, `gateway runtime` and three replicas
// (real processes); without redis-server the test is skipped, unless
// CI=true, where it fails.
func startCluster(t *testing.T, ctx context.Context, args ...string) (*clustertest.Cluster, []sessiongatev1.SessionGatewayClient) {
	t.Helper()
	return startClusterWith(t, ctx, clustertest.Options{Replicas: 3, LeaseTTL: time.Second, Args: args})
}

func startClusterWith(t *testing.T, ctx context.Context, o clustertest.Options) (*clustertest.Cluster, []sessiongatev1.SessionGatewayClient) {
	t.Helper()
	c, err := clustertest.Start(ctx, o)
	if errors.Is(err, clustertest.ErrNoBinary) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: apt-get install -y redis-server)", err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, r := range c.Replicas {
				t.Logf("--- %s log (tail):\n%s", r.Instance, tail(r.Log(), 4000))
			}
		}
		c.Close()
	})
	var clients []sessiongatev1.SessionGatewayClient
	for _, r := range c.Replicas {
		// Reconnect quickly to a restarted replica (grpc-go's default
		// backoff grows to two minutes).
		clients = append(clients, sessiongatev1.NewSessionGatewayClient(dial(t, r.Addr, grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond}, MinConnectTimeout: time.Second}))))
	}
	return c, clients
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func openOn(t *testing.T, ctx context.Context, gw sessiongatev1.SessionGatewayClient) string {
	t.Helper()
	resp, err := gw.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "cluster-test"})
	if err != nil {
		t.Fatal(err)
	}
	return resp.GetSessionId()
}

func echo(ctx context.Context, gw sessiongatev1.SessionGatewayClient, sid string, opts ...grpc.CallOption) (*sessiongatev1.RunJobResponse, error) {
	in, _ := structpb.NewValue(map[string]any{"hello": "cluster"})
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return gw.RunJob(cctx, &sessiongatev1.RunJobRequest{SessionId: sid, Agent: "echo", Input: in}, opts...)
}

func streamInput(count, intervalMS int) *structpb.Value {
	v, _ := structpb.NewValue(map[string]any{"count": count, "interval_ms": intervalMS})
	return v
}

// eventIndex is the "i" of a stream agent's event body.
func eventIndex(item *sessiongatev1.WatchJobResponse) (int, bool) {
	ev := item.GetEvent()
	if ev == nil {
		return 0, false
	}
	v, ok := ev.GetBody().GetStructValue().GetFields()["i"]
	if !ok {
		return 0, false
	}
	return int(v.GetNumberValue()), true
}

// TestClusterAnyReplicaAnswers: a session opened on replica 1 is used
// through replicas 2 and 3 (RunJob, WatchJob, status over gRPC and HTTP),
// responses name the owner; x-sessiongate-session is checked against the
// body; forged forwarding metadata is refused.
func TestClusterAnyReplicaAnswers(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	c, gws := startCluster(t, ctx)
	sid := openOn(t, ctx, gws[0])

	for i, gw := range gws {
		var hdr metadata.MD
		resp, err := echo(ctx, gw, sid, grpc.Header(&hdr))
		if err != nil {
			t.Fatalf("RunJob through %s: %v", c.Replicas[i].Instance, err)
		}
		if got := resp.GetResult().GetStructValue().GetFields()["hello"].GetStringValue(); got != "cluster" {
			t.Fatalf("RunJob through %s: result %v", c.Replicas[i].Instance, resp.GetResult())
		}
		if got := hdr.Get("x-sessiongate-owner"); len(got) != 1 || got[0] != "gw-1" {
			t.Fatalf("owner hint through %s = %v, want gw-1", c.Replicas[i].Instance, got)
		}
		if got := hdr.Get("x-sessiongate-owner-addr"); len(got) != 1 || got[0] != c.Replicas[0].Addr {
			t.Fatalf("owner addr hint = %v, want %s", got, c.Replicas[0].Addr)
		}
	}

	// WatchJob through replicas 2 and 3 (both watching while the job
	// streams): each sees every event once, then the result, and names
	// the owner.
	sub, err := gws[1].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: streamInput(5, 20)})
	if err != nil {
		t.Fatal(err)
	}
	streams := make([]grpc.ServerStreamingClient[sessiongatev1.WatchJobResponse], len(gws))
	for i := 1; i < len(gws); i++ {
		streams[i], err = gws[i].WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
		if err != nil {
			t.Fatalf("WatchJob through %s: %v", c.Replicas[i].Instance, err)
		}
	}
	for i := 1; i < len(gws); i++ {
		inst := c.Replicas[i].Instance
		hdr, err := streams[i].Header()
		if err != nil {
			t.Fatalf("WatchJob through %s: header: %v", inst, err)
		}
		if got := hdr.Get("x-sessiongate-owner"); len(got) != 1 || got[0] != "gw-1" {
			t.Fatalf("owner hint of WatchJob through %s = %v, want gw-1", inst, got)
		}
		if got := hdr.Get("x-sessiongate-served-by"); len(got) != 1 || got[0] != inst {
			t.Fatalf("WatchJob through %s served by %v", inst, got)
		}
		var got []int
		var result bool
		for {
			item, err := streams[i].Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("WatchJob through %s: %v", inst, err)
			}
			if n, ok := eventIndex(item); ok {
				got = append(got, n)
			}
			result = result || item.GetResult() != nil
		}
		if fmt.Sprint(got) != "[0 1 2 3 4]" || !result {
			t.Fatalf("forwarded watch through %s saw %v (result %v)", inst, got, result)
		}
	}

	// Status from any replica names the owner; over HTTP too.
	for i, gw := range gws {
		st, err := gw.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE || st.GetInstanceId() != "gw-1" {
			t.Fatalf("status through %s: %v", c.Replicas[i].Instance, st)
		}
	}
	res, err := http.Get("http://" + c.Replicas[2].Admin + "/v1/sessions/" + sid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(body), `"instanceId":"gw-1"`) {
		t.Fatalf("HTTP probe on gw-3: %d %s", res.StatusCode, body)
	}

	// The session header must match the body.
	md := metadata.Pairs("x-sessiongate-session", "s1.gw-2.AAAAAAAAAAAAAAAAAAAAAA")
	if _, err := echo(metadata.NewOutgoingContext(ctx, md), gws[1], sid); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("mismatched x-sessiongate-session: %v, want INVALID_ARGUMENT", err)
	}

	// A client posing as a forwarding peer is refused, signature or not.
	for _, forged := range []metadata.MD{
		metadata.Pairs("x-sessiongate-forwarded-by", "gw-1", "x-sessiongate-forwarded-caller", "mallory"),
		metadata.Pairs("x-sessiongate-forwarded-by", "gw-1", "x-sessiongate-forwarded-caller", "anonymous",
			"x-sessiongate-forward-auth", fmt.Sprintf("%d.%064x", time.Now().UnixMilli(), 7)),
	} {
		_, err := echo(metadata.NewOutgoingContext(ctx, forged), gws[1], sid)
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("forged forwarding metadata %v: %v, want UNAUTHENTICATED", forged, err)
		}
	}

	// CloseSession through replica 2 closes it everywhere.
	if _, err := gws[1].CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	st, err := gws[2].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
	if err != nil || st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND {
		t.Fatalf("status after close: %v %v", st, err)
	}
}

// watchFrom collects a job's events from cursor on through gw until the
// job's result; it returns the events' indexes, the last seq and the error
// that ended the stream early (nil at the result).
func watchFrom(ctx context.Context, gw sessiongatev1.SessionGatewayClient, sid, job string, from uint64, each func(int)) (uint64, bool, error) {
	stream, err := gw.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: job, FromEventSeq: from})
	if err != nil {
		return from, false, err
	}
	for {
		item, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return from, false, nil
		}
		if err != nil {
			return from, false, err
		}
		from = item.GetEventSeq()
		if i, ok := eventIndex(item); ok {
			each(i)
		}
		if item.GetResult() != nil || item.GetError() != nil {
			return from, true, nil
		}
	}
}

// TestClusterOwnerKilledMidStream: the owner is SIGKILLed while a caller
// watches a job; the caller continues through replica 2 from its cursor and
// sees every event exactly once, after the lease expired and replica 2 (or
// the sweeper of replica 3) took the session over.
func TestClusterOwnerKilledMidStream(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	c, gws := startCluster(t, ctx)
	sid := openOn(t, ctx, gws[0])
	const count = 60
	sub, err := gws[0].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: streamInput(count, 50)})
	if err != nil {
		t.Fatal(err)
	}
	var seen []int
	wctx, stopWatch := context.WithCancel(ctx)
	var cursor uint64
	var once sync.Once
	killed := make(chan time.Time, 1)
	cursor, _, _ = watchFrom(wctx, gws[0], sid, sub.GetJobId(), 0, func(i int) {
		seen = append(seen, i)
		if len(seen) == 15 {
			once.Do(func() {
				c.Kill(0) // SIGKILL mid-stream
				killed <- time.Now()
			})
		}
	})
	stopWatch()
	if len(seen) < 15 {
		t.Fatalf("saw %d events before the kill", len(seen))
	}
	killedAt := <-killed
	var firstOK time.Duration
	for done := false; !done; {
		var err error
		var got bool
		cursor, got, err = watchFrom(ctx, gws[1], sid, sub.GetJobId(), cursor, func(i int) {
			if firstOK == 0 {
				firstOK = time.Since(killedAt)
			}
			seen = append(seen, i)
		})
		switch {
		case err == nil && got:
			done = true
		case status.Code(err) == codes.Unavailable:
			select { // the owner's lease has not expired yet: retry
			case <-ctx.Done():
				t.Fatalf("no takeover: %v", err)
			case <-time.After(100 * time.Millisecond):
			}
		case err != nil:
			t.Fatalf("watch through gw-2 after the kill: %v", err)
		default:
			t.Fatal("stream ended without a result")
		}
	}
	if len(seen) != count {
		t.Fatalf("saw %d events, want %d: %v", len(seen), count, seen)
	}
	for i, v := range seen {
		if v != i {
			t.Fatalf("event %d is i=%d: gap or duplicate across the takeover: %v", i, v, seen)
		}
	}
	t.Logf("first event through gw-2 %v after SIGKILL (lease TTL %v)", firstOK, c.LeaseTTL)
	if _, err := echo(ctx, gws[2], sid); err != nil {
		t.Fatalf("RunJob through gw-3 after the takeover: %v", err)
	}
}

// errorReason is the reason of err's ErrorInfo detail, "" without one.
func errorReason(err error) string {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.GetReason()
		}
	}
	return ""
}

// TestClusterRollingRestart: every replica in turn gets SIGTERM and is
// started again while callers run jobs on sessions opened across the
// cluster through all replicas; no session is lost.
func TestClusterRollingRestart(t *testing.T) {
	ctx := testContext(t, 150*time.Second)
	c, gws := startCluster(t, ctx)
	var sids []string
	for i := range 6 {
		sids = append(sids, openOn(t, ctx, gws[i%3]))
	}
	var failures sync.Map // code → *atomic.Int64
	var sample sync.Map   // code → first message
	var ok atomic.Int64
	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for w, sid := range sids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := w; lctx.Err() == nil; n++ {
				_, err := echo(lctx, gws[n%3], sid)
				if lctx.Err() != nil {
					return
				}
				if err != nil {
					sample.LoadOrStore(status.Code(err).String(), status.Convert(err).Message())
					v, _ := failures.LoadOrStore(status.Code(err).String(), new(atomic.Int64))
					v.(*atomic.Int64).Add(1)
					if status.Code(err) == codes.NotFound || errorReason(err) == "SESSION_LOST" {
						t.Errorf("session %s lost: %v", sid, err)
						return
					}
					select { // retry (on the next replica) after a pause
					case <-lctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				ok.Add(1)
			}
		}()
	}
	progress := func() { // the load runs: wait for 30 more calls to succeed
		t.Helper()
		want := ok.Load() + 30
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for ok.Load() < want {
			select {
			case <-ctx.Done():
				t.Fatalf("no progress under load: %d calls ok", ok.Load())
			case <-tick.C:
			}
		}
	}
	for i := range c.Replicas {
		progress()
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.Term(tctx, i)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Replicas[i].Log(), "shutdown complete") {
			t.Fatalf("%s did not shut down cleanly", c.Replicas[i].Instance)
		}
		if err := c.StartReplica(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	progress()
	stopLoad()
	wg.Wait()
	sample.Range(func(k, v any) bool { t.Logf("%s, e.g.: %s", k, v); return true })
	report := []string{}
	failures.Range(func(k, v any) bool {
		report = append(report, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("rolling restart: %d calls ok, failed by code: %v", ok.Load(), report)
	for _, sid := range sids {
		for i, gw := range gws {
			if _, err := echo(ctx, gw, sid, grpc.WaitForReady(true)); err != nil {
				t.Errorf("session %s through %s after the restart: %v", sid, c.Replicas[i].Instance, err)
			}
		}
	}
}

// TestClusterRedisDownAndBack: while Redis is down, a session works on its
// owner and through a replica that forwarded for it moments ago (it caches
// the owner), a call through another replica gets UNAVAILABLE naming the
// directory, and status says so; once Redis is back (empty), the owner
// records its sessions again and every replica serves them.
func TestClusterRedisDownAndBack(t *testing.T) {
	ctx := testContext(t, 90*time.Second)
	c, gws := startCluster(t, ctx)
	sid := openOn(t, ctx, gws[0])
	if _, err := echo(ctx, gws[1], sid); err != nil {
		t.Fatal(err)
	}
	c.StopRedis()
	if _, err := echo(ctx, gws[0], sid); err != nil {
		t.Fatalf("local call while Redis is down: %v", err)
	}
	// gw-3 never forwarded a call for the session: it must read the
	// directory, and says it cannot. gw-2 forwarded one a moment ago and
	// knows the owner for ClusterConfig.OwnerCacheTTL (2 s) after that: the
	// owner decides, so it serves the call — or, on a machine slow enough
	// for the entry to have expired, it reads the directory like gw-3.
	_, err := echo(ctx, gws[2], sid)
	if status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "directory") {
		t.Fatalf("cross-replica call while Redis is down: %v, want UNAVAILABLE naming the directory", err)
	}
	if _, err := echo(ctx, gws[1], sid); err != nil && (status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "directory")) {
		t.Fatalf("call through a replica that knew the owner while Redis is down: %v", err)
	}
	if _, err := gws[2].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid}); status.Code(err) != codes.Unavailable {
		t.Fatalf("status on a non-owner while Redis is down: %v", err)
	}
	if st, err := gws[0].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid}); err != nil || st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
		t.Fatalf("status on the owner while Redis is down: %v %v", st, err)
	}
	if err := c.StartRedis(ctx); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		// Through gw-3, which knows the owner only from the directory:
		// served once gw-1 has recorded the session again.
		_, err := echo(ctx, gws[2], sid)
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.NotFound {
			t.Fatalf("after Redis came back: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session not served through gw-3 after Redis came back: %v", err)
		case <-tick.C:
		}
	}
	st, err := gws[2].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
	if err != nil || st.GetInstanceId() != "gw-1" {
		t.Fatalf("status after Redis came back: %v %v", st, err)
	}
	if _, err := echo(ctx, gws[1], sid); err != nil {
		t.Fatalf("through gw-2 after Redis came back: %v", err)
	}
}
