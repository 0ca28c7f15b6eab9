package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestClusterFlushWhileResuming: the owner of many sessions is SIGKILLed;
// the survivors claim its sessions in the directory (batched) and queue
// their upstream resumes, which the runtime — frozen, a runtime slow to
// take resumes — does not answer; Redis is FLUSHed while every one of
// them is claimed and not yet resumed (the survivors' pending-resume
// gauges say so, before and after the FLUSHALL). Every session, claimed
// or not, must be visible again on every survivor within 2 s, LIVE and
// naming the owner it had before the flush (the owners restore the
// records of sessions they hold, claimed-not-yet-resumed ones included);
// and once the runtime continues, every claimed session is resumed by its
// owner and answers a RunJob: none is lost.
func TestClusterFlushWhileResuming(t *testing.T) {
	const n = 150
	ctx := testContext(t, 180*time.Second)
	c, gws := startCluster(t, ctx, "--max-sessions-per-caller", strconv.Itoa(2*n), "--max-sessions", strconv.Itoa(2*n))
	sids := openMany(t, ctx, gws[0], n)
	waitOwners(t, ctx, gws[1], sids, func(inst string, live bool) bool { return inst != "" && live }, time.Minute)
	var orphans []string
	for sid, inst := range owners(t, ctx, gws[1], sids) {
		if inst == "gw-1" {
			orphans = append(orphans, sid)
		}
	}
	if len(orphans) < n/2 {
		t.Fatalf("only %d of %d sessions on gw-1 before the kill", len(orphans), n)
	}
	survivors := []int{1, 2}
	pending := func() float64 {
		t.Helper()
		var sum float64
		for _, i := range survivors {
			v, err := c.Metric(ctx, i, "sessiongate_cluster_resumes_pending")
			if err != nil {
				t.Fatal(err)
			}
			sum += v
		}
		return sum
	}

	c.FreezeRuntime()
	t.Cleanup(c.ThawRuntime)
	c.Kill(0)
	// Every orphan claimed by a survivor (its record names it), none
	// resumed: the runtime answers nothing.
	waitOwners(t, ctx, gws[1], orphans, func(inst string, live bool) bool { return (inst == "gw-2" || inst == "gw-3") && live }, 30*time.Second)
	before := owners(t, ctx, gws[1], sids)
	if p := pending(); p < float64(len(orphans)) {
		t.Fatalf("%v resumes pending on the survivors with %d orphans claimed and the runtime frozen, want ≥ %d", p, len(orphans), len(orphans))
	}
	if r, err := c.RedisCommand(ctx, "FLUSHALL"); err != nil || r != "+OK" {
		t.Fatalf("FLUSHALL: %q %v", r, err)
	}
	flushed := time.Now()
	if p := pending(); p < float64(len(orphans)) {
		t.Fatalf("%v resumes pending just after the FLUSHALL, want ≥ %d: the flush did not land between claim and resume", p, len(orphans))
	}

	// Visible on every survivor within 2 s, LIVE, the owner unchanged.
	// 100 ms between rounds: the probes (300 calls a round) must not
	// starve the replicas they measure (2 cores).
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := 0
		var sample []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, i := range survivors {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, sid := range sids {
					st, err := gws[i].GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: sid})
					if status.Code(err) == codes.NotFound || (err == nil && st.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE) {
						t.Errorf("after the FLUSHALL: session %s answered %v %v by %s: lost", sid, st.GetStatus(), err, c.Replicas[i].Instance)
						return
					}
					if err != nil || st.GetInstanceId() != before[sid] {
						mu.Lock()
						missing++
						if len(sample) < 5 {
							sample = append(sample, fmt.Sprintf("%s on %s: owner %q (was %q), %v", sid, c.Replicas[i].Instance, st.GetInstanceId(), before[sid], err))
						}
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		if missing == 0 {
			break
		}
		if time.Since(flushed) > 2*time.Second {
			for _, i := range survivors {
				for _, l := range strings.Split(c.Replicas[i].Log(), "\n") {
					if strings.Contains(l, "flush") || strings.Contains(l, "lapse") || strings.Contains(l, "given back") || strings.Contains(l, "fenced") || strings.Contains(l, "vanished") {
						t.Logf("%s: %.300s", c.Replicas[i].Instance, l)
					}
				}
			}
			t.Fatalf("%d (session, survivor) pairs not visible with their owner 2 s after the FLUSHALL (%d orphans claimed, not resumed); e.g. %s", missing, len(orphans), strings.Join(sample, "; "))
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
	visible := time.Since(flushed)
	if p := pending(); p == 0 {
		t.Fatal("every claimed session resumed with the runtime frozen: the test measured nothing")
	}

	// The runtime continues: every claimed session resumed by its owner,
	// every session works.
	c.ThawRuntime()
	for pending() > 0 {
		if time.Since(flushed) > 60*time.Second {
			t.Fatalf("%v resumes still pending 60 s after the FLUSHALL", pending())
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
	var ok, other float64
	for _, i := range survivors {
		m, err := c.Metrics(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		ok += m.Sum("sessiongate_cluster_takeovers_total", `result="ok"`)
		other += m.Sum("sessiongate_cluster_takeovers_total") - m.Sum("sessiongate_cluster_takeovers_total", `result="ok"`)
	}
	if ok < float64(len(orphans)) || other > 0 {
		t.Errorf("takeovers: %v ok, %v otherwise; want ≥ %d ok and no other result", ok, other, len(orphans))
	}
	after := owners(t, ctx, gws[2], sids)
	for _, sid := range sids {
		if after[sid] != before[sid] {
			t.Errorf("session %s moved from %s to %s", sid, before[sid], after[sid])
		}
	}
	var wg sync.WaitGroup
	next := make(chan string, len(sids))
	for _, sid := range sids {
		next <- sid
	}
	close(next)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sid := range next {
				if _, err := echo(ctx, gws[1+w%2], sid); err != nil {
					t.Errorf("RunJob on %s after the flush and resume: %v", sid, err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("SIGKILL of the owner of %d of %d sessions, FLUSHALL with all %d claimed and not resumed: every session visible with its owner on both survivors %v after the flush; all resumed and answering once the runtime continued",
		len(orphans), n, len(orphans), visible.Round(time.Millisecond))
}

// openMany opens n sessions through gw, 16 at a time (the scale and flush
// tests).
func openMany(t *testing.T, ctx context.Context, gw sessiongatev1.SessionGatewayClient, n int) []string {
	t.Helper()
	sids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				resp, err := gw.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "many"})
				if err != nil {
					errs <- err
					return
				}
				sids[i] = resp.GetSessionId()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return sids
}
