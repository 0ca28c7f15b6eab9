package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
// the lease TTL while a caller watches a streaming job; when it continues,
// no session changes owner (the replicas re-establish their leases and wait
// out a grace before judging each other's) and the watch is never cut.
func TestClusterRedisStallMovesNothing(t *testing.T) {
	ctx := testContext(t, 120*time.Second)
	c, gws := startCluster(t, ctx)
	var sids []string
	for i := range 6 {
		sids = append(sids, openOn(t, ctx, gws[i%3]))
	}
	before := owners(t, ctx, gws[0], sids)
	sub, err := gws[0].SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sids[0], Agent: "stream", Input: streamInput(80, 50)})
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
	settle := time.NewTimer(3 * c.LeaseTTL)
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
					_, err := gw.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
					if status.Code(err) == codes.NotFound {
						t.Fatalf("after %s: a live session was answered NOT_FOUND: %v", how, err)
					}
					if err != nil {
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
