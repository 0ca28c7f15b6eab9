package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/cluster"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// owners maps each session to the instance its status names, read through
// gw.
func owners(t *testing.T, ctx context.Context, gw sessiongatev1.SessionGatewayClient, sids []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(sids))
	for _, sid := range sids {
		st, err := gw.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
		if err != nil {
			t.Fatalf("status of %s: %v", sid, err)
		}
		out[sid] = st.GetInstanceId()
	}
	return out
}

// TestClusterRedisStallMovesNothing: redis-server is SIGSTOPped for twice
// the lease TTL (the default 5 s, so that the sweeps, every 250 ms, run
// well before the leases' refreshes, every 1.67 s, as in the issue's
// reproduction) while a caller watches a streaming job; when it continues,
// no session changes owner (the replicas re-establish their leases and wait
// out a grace before judging each other's) and the watch is never cut.
func TestClusterRedisStallMovesNothing(t *testing.T) {
	ctx := testContext(t, 150*time.Second)
	c, gws := startClusterWith(t, ctx, clustertest.Options{Replicas: 3, LeaseTTL: 5 * time.Second})
	// Sessions that sit on their preferred replica already, so that the
	// rebalancer moves none of them: any move is the stall's doing.
	sids := placedSessions(t, ctx, c, gws, 6)
	before := owners(t, ctx, gws[0], sids)
	sub, err := gws[0].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sids[0], Agent: "stream", Input: streamInput(80, 250)})
	if err != nil {
		t.Fatal(err)
	}
	watched := make(chan error, 1)
	var seen []int
	go func() {
		_, got, err := watchFrom(ctx, gws[0], sids[0], sub.GetJobId(), 0, func(i int) { seen = append(seen, i) })
		if err == nil && !got {
			err = status.Error(codes.Aborted, "watch ended without the result")
		}
		watched <- err
	}()
	c.FreezeRedis()
	stall := time.NewTimer(2 * c.LeaseTTL)
	select {
	case <-stall.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	c.ThawRedis()
	// Let the sweepers run several times past the point where, without
	// the grace, they took everything over (the leases expired during the
	// stall).
	settle := time.NewTimer(2 * c.LeaseTTL)
	select {
	case <-settle.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	if err := <-watched; err != nil {
		t.Fatalf("the watch was cut by the stall after %d events: %v", len(seen), err)
	}
	if len(seen) != 80 {
		t.Fatalf("the watch saw %d events, want 80", len(seen))
	}
	after := owners(t, ctx, gws[1], sids)
	changes := 0
	for _, sid := range sids {
		if before[sid] != after[sid] {
			changes++
			t.Errorf("session %s moved from %s to %s", sid, before[sid], after[sid])
		}
	}
	t.Logf("Redis stalled %v (2 × lease TTL): %d ownership changes, watch uncut (%d events)", 2*c.LeaseTTL, changes, len(seen))
	for _, sid := range sids {
		if _, err := echo(ctx, gws[2], sid); err != nil {
			t.Errorf("RunJob through gw-3 after the stall: %v", err)
		}
	}
}

// TestClusterFlushRestored: after FLUSHALL, and after a restart of
// redis-server without its data, every session is visible again on every
// replica within 2 s (owners detect the loss by the directory's marker and
// restore their records at once; meanwhile a lookup answers UNAVAILABLE
// DIRECTORY_RECOVERING, never NOT_FOUND).
func TestClusterFlushRestored(t *testing.T) {
	ctx := testContext(t, 120*time.Second)
	c, gws := startCluster(t, ctx)
	var sids []string
	for i := range 9 {
		sids = append(sids, openOn(t, ctx, gws[i%3]))
	}
	for _, how := range []string{"FLUSHALL", "restart without data"} {
		if how == "FLUSHALL" {
			if r, err := c.RedisCommand(ctx, "FLUSHALL"); err != nil || r != "+OK" {
				t.Fatalf("FLUSHALL: %q %v", r, err)
			}
		} else {
			c.StopRedis()
			if err := c.StartRedis(ctx); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		for pending := true; pending; {
			pending = false
			for _, gw := range gws {
				for _, sid := range sids {
					st, err := gw.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
					if status.Code(err) == codes.NotFound || (err == nil && st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE) {
						t.Fatalf("after %s: a live session was answered NOT_FOUND: %v %v", how, st.GetStatus(), err)
					}
					if err != nil || st.GetInstanceId() == "" {
						pending = true
					}
				}
			}
			if !pending {
				break
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("after %s: sessions not visible on every replica within 2 s", how)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-tick.C:
			}
		}
		tick.Stop()
		t.Logf("after %s: every session visible on every replica after %v", how, time.Since(start).Round(time.Millisecond))
	}
}

// TestClusterDuplicateInstanceRefused: a second process started with the
// instance id of a live replica refuses to start (it would steal its
// records).
func TestClusterDuplicateInstanceRefused(t *testing.T) {
	ctx := testContext(t, 60*time.Second)
	c, _ := startCluster(t, ctx)
	args := c.ReplicaArgs(0)
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--listen" || args[i] == "--admin" {
			args[i+1] = "127.0.0.1:0" // its own ports: only the instance id is shared
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.Bin, args...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("a second gw-1 started: %s", out)
	}
	if !strings.Contains(string(out), "held by a live process") {
		t.Fatalf("a second gw-1 failed, but not because the instance id is live: %v\n%s", err, tail(string(out), 2000))
	}
}

var flagTakeoverSessions = flag.Int("cluster.takeover-sessions", 300, "sessions opened on the SIGKILLed replica in TestClusterKillTakeoverAtScale (the issue's figure: 3000; the rebalancer moves a few away before the kill)")

// TestClusterKillTakeoverAtScale: the owner of N sessions is SIGKILLed; the
// survivors claim them all in the directory as soon as its lease has been
// gone a full TTL (a sweep at that moment, batched claims: one script call
// per few hundred sessions), resume them upstream in the background, and a
// call for a session not yet resumed resumes it at once. It prints the time
// to all claimed, to all resumed, the caller-felt time (the last of a
// sample of sessions answering a RunJob, retried from the kill on), each
// survivor's resume rate and the Redis commands per orphan; it requires
// all claimed and every probed session usable within lease TTL + 1 s.
func TestClusterKillTakeoverAtScale(t *testing.T) {
	n := *flagTakeoverSessions
	ctx := testContext(t, 300*time.Second)
	c, gws := startCluster(t, ctx, "--max-sessions-per-caller", strconv.Itoa(2*n), "--max-sessions", strconv.Itoa(2*n))
	sids := openMany(t, ctx, gws[0], n)
	// Every session recorded; the orphans are those gw-1 holds at the
	// kill (the rebalancer moves idle sessions toward their preferred
	// replica, at most 50 a second, after 5 s).
	waitOwners(t, ctx, gws[1], sids, func(inst string, live bool) bool { return inst != "" && live }, time.Minute)
	var orphans []string
	for _, sid := range sids {
		st, err := gws[1].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
		if err != nil {
			t.Fatal(err)
		}
		if st.GetInstanceId() == "gw-1" {
			orphans = append(orphans, sid)
		}
	}
	if len(orphans) < n*8/10 {
		t.Fatalf("only %d of %d sessions on gw-1 before the kill", len(orphans), n)
	}
	sample := sampleOf(orphans, 20)
	var probe atomic.Int64
	fig, err := c.MeasureTakeover(ctx, 0, sample, func(ctx context.Context, sid string) error {
		// Through either survivor: forwarded to the new owner, or
		// served where it lands.
		_, err := echo(ctx, gws[1+int(probe.Add(1)%2)], sid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL: %v", fig)
	for _, r := range c.Replicas[1:] {
		for _, l := range strings.Split(r.Log(), "\n") {
			if strings.Contains(l, `"msg":"sweep"`) || strings.Contains(l, "claimed sessions resumed") {
				t.Logf("%s: %s", r.Instance, l)
			}
		}
	}
	// The operators' view of the same moment: each survivor's last wave
	// (first claim → last resume) fits within SIGKILL → all resumed.
	for i := 1; i < len(c.Replicas); i++ {
		wave, err := c.Metric(ctx, i, "sessiongate_cluster_takeover_wave_seconds")
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.Metric(ctx, i, "sessiongate_cluster_claim_resume_seconds_count")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: takeover wave %.2fs (claim → last resume), %v claim → resume observations", c.Replicas[i].Instance, wave, n)
		if wave <= 0 || wave > fig.Resumed.Seconds() || n == 0 {
			t.Errorf("%s: takeover wave %.2fs with %v observations; want within (0, %.2fs], the SIGKILL → all resumed measured", c.Replicas[i].Instance, wave, n, fig.Resumed.Seconds())
		}
	}
	bound := c.LeaseTTL + time.Second
	if fig.Claimed > bound {
		t.Errorf("the last of %d sessions was claimed %v after the kill, want ≤ lease TTL + 1 s (%v)", fig.Orphans, fig.Claimed, bound)
	}
	if fig.CallerFelt > bound {
		t.Errorf("the last probed session answered %v after the kill, want ≤ lease TTL + 1 s (%v)", fig.CallerFelt, bound)
	}
	// Redis work proportional to the orphans: a claim (a share of a
	// batch script), a token write after the welcome, an ack or two; the
	// probes' calls add a little.
	if per := fig.PerOrphan(); per > 40 {
		t.Errorf("%.1f Redis commands per orphan, want ≤ 40 (O(orphans), not O(records))", per)
	}
	// Every orphan is held by a survivor, resumed (READY), and works.
	waitOwners(t, ctx, gws[1], orphans, func(inst string, live bool) bool { return inst != "gw-1" && inst != "" && live }, 30*time.Second)
	for _, sid := range sampleOf(orphans, 20) {
		if _, err := echo(ctx, gws[2], sid); err != nil {
			t.Errorf("RunJob after the takeover: %v", err)
		}
	}
}

// sampleOf returns up to k of ids, spread over them.
func sampleOf(ids []string, k int) []string {
	if len(ids) <= k {
		return ids
	}
	out := make([]string, 0, k)
	for i := range k {
		out = append(out, ids[i*len(ids)/k])
	}
	return out
}

var statusProbes atomic.Int64

// waitOwners polls the status of every session through gw until ok holds
// for each; it returns how long that took.
func waitOwners(t *testing.T, ctx context.Context, gw sessiongatev1.SessionGatewayClient, sids []string, ok func(string, bool) bool, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	pending := slices.Clone(sids)
	for len(pending) > 0 {
		var still []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		ch := make(chan string, len(pending))
		for _, s := range pending {
			ch <- s
		}
		close(ch)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for sid := range ch {
					st, err := gw.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
					statusProbes.Add(1)
					if err != nil || !ok(st.GetInstanceId(), st.GetPhase() == sessiongatev1.SessionPhase_SESSION_PHASE_READY) {
						mu.Lock()
						still = append(still, sid)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Since(start) > limit {
			t.Fatalf("%d of %d sessions not there after %v", len(pending), len(sids), limit)
		}
		// A pause between rounds: the probes must not starve the
		// replicas they measure (2 cores).
		pause := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-pause.C:
		}
	}
	return time.Since(start)
}

// directoryOps reads sessiongate_directory_ops_total (or 0) from replica i's
// admin /metrics.
func directoryOps(t *testing.T, ctx context.Context, c *clustertest.Cluster, i int) float64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Replicas[i].Admin+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "sessiongate_directory_ops_total ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, "sessiongate_directory_ops_total ")), 64)
			return v
		}
	}
	return 0
}

// TestClusterRollingRestartSpread: after a rolling restart (each replica
// SIGTERMed, which hands its sessions off, and started again), the
// sessions spread back over the replicas — toward each one's preferred
// replica, the rendezvous hash of its id over the live replicas — within
// 20 % of even.
func TestClusterRollingRestartSpread(t *testing.T) {
	const n = 300
	ctx := testContext(t, 240*time.Second)
	c, gws := startCluster(t, ctx)
	sids := make([]string, n)
	for i := range sids {
		sids[i] = openOn(t, ctx, gws[i%3])
	}
	for i := range c.Replicas {
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := c.Term(tctx, i)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StartReplica(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	restarted := time.Now()
	even := n / len(c.Replicas)
	var spread map[string]int
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		spread = map[string]int{}
		for _, owner := range owners(t, ctx, gws[0], sids) {
			spread[owner]++
		}
		within := len(spread) == len(c.Replicas)
		for _, k := range spread {
			if float64(k) < 0.8*float64(even) || float64(k) > 1.2*float64(even) {
				within = false
			}
		}
		if within {
			break
		}
		if time.Since(restarted) > 60*time.Second {
			t.Fatalf("60 s after a rolling restart the %d sessions sit %v, not within 20 %% of %d each", n, spread, even)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
	t.Logf("rolling restart: %d sessions spread %v (even: %d) %v after the last replica came back",
		n, spread, even, time.Since(restarted).Round(100*time.Millisecond))
	for _, sid := range sids[:10] {
		if _, err := echo(ctx, gws[1], sid); err != nil {
			t.Errorf("RunJob after the rebalance: %v", err)
		}
	}
}

// placedSessions opens n sessions, round robin over the replicas, keeping
// only those opened on their rendezvous-preferred replica (the others are
// closed), so that the rebalancer leaves them where they are.
func placedSessions(t *testing.T, ctx context.Context, c *clustertest.Cluster, gws []sessiongatev1.SessionGatewayClient, n int) []string {
	t.Helper()
	var names []string
	for _, r := range c.Replicas {
		names = append(names, r.Instance)
	}
	var sids []string
	for i := 0; len(sids) < n; i++ {
		if i > 50*n {
			t.Fatal("could not open sessions on their preferred replicas")
		}
		gw := gws[len(sids)%len(gws)]
		sid := openOn(t, ctx, gw)
		if cluster.Preferred(sid, names) == names[len(sids)%len(gws)] {
			sids = append(sids, sid)
			continue
		}
		if _, err := gw.CloseSession(ctx, &sessiongatev1.CloseSessionRequest{SessionId: sid}); err != nil {
			t.Fatal(err)
		}
	}
	return sids
}
