package server

import (
	"testing"
	"time"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestClusterClaimedSessionJumpsTheQueue: a session a sweep has claimed in
// the directory but not yet resumed upstream (the background resumes are
// all busy) is served at once by a call: the call resumes it ahead of the
// queue. A claimed session not yet resumed when the replica drains is
// released in the directory, for another replica to adopt.
func TestClusterClaimedSessionJumpsTheQueue(t *testing.T) {
	f := startFenceRig(t)
	ctx := ctxT(t, 60*time.Second)
	c := f.gw.cluster

	// gw-a gives a session up as the rebalancer does (detached, released
	// in the directory), with every background resume slot taken: a
	// sweep claims it and can only queue its resume.
	release := func() string {
		t.Helper()
		opened, err := f.client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{ClientName: "jump"})
		if err != nil {
			t.Fatal(err)
		}
		id := opened.GetSessionId()
		c.mu.Lock()
		o := c.owned[id]
		c.mu.Unlock()
		if o == nil {
			t.Fatal("gw-a does not own the session it opened")
		}
		o.mu.Lock()
		o.conn.Detach()
		err = c.dir.Release(ctx, id, o.epoch)
		o.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		c.remove(o)
		return id
	}
	for range cap(c.resumeSem) {
		c.resumeSem <- struct{}{}
	}
	drained := false
	drainSem := func() {
		if drained {
			return
		}
		drained = true
		for range cap(c.resumeSem) {
			<-c.resumeSem
		}
	}
	defer drainSem()

	claim := func(id string) {
		t.Helper()
		waitFor(t, 20*time.Second, "a sweep to claim "+id, func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.resuming[id] != nil
		})
		rec, err := f.other.Get(ctx, id)
		if err != nil || rec.Owner != "gw-a" || rec.Epoch != 2 {
			t.Fatalf("record of the claimed session: %+v %v; want gw-a's at epoch 2", rec, err)
		}
		if got := series(t, f.reg, "sessiongate_cluster_resumes_pending", map[string]string{"reason": "handoff"}); got != 1 {
			t.Fatalf("resumes pending = %v, want 1", got)
		}
	}

	id := release()
	claim(id)
	// A call for it: served, without waiting for the queue.
	resp, err := f.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: mustValue(t, map[string]any{"jumped": "yes"})})
	if err != nil {
		t.Fatalf("RunJob on the claimed session: %v", err)
	}
	if resp.GetResult().GetStructValue().GetFields()["jumped"].GetStringValue() != "yes" {
		t.Fatalf("RunJob result %v", resp.GetResult())
	}
	if got := series(t, f.reg, "sessiongate_cluster_resume_jumps_total", nil); got != 1 {
		t.Fatalf("resume jumps = %v, want 1", got)
	}
	if got := series(t, f.reg, "sessiongate_cluster_takeovers_total", map[string]string{"reason": "handoff", "result": "ok"}); got != 1 {
		t.Fatalf("hand-off takeovers ok = %v, want 1", got)
	}
	if got := series(t, f.reg, "sessiongate_cluster_resumes_pending", map[string]string{"reason": "handoff"}); got != 0 {
		t.Fatalf("resumes pending after the call = %v, want 0", got)
	}
	// The claim → resume time is observed, and the wave (one session)
	// is over: its length is the gauge's.
	if got := series(t, f.reg, "sessiongate_cluster_claim_resume_seconds", map[string]string{"reason": "handoff"}); got != 1 {
		t.Fatalf("claim → resume observations = %v, want 1", got)
	}
	if got := series(t, f.reg, "sessiongate_cluster_takeover_wave_seconds", nil); got <= 0 || got > 60 {
		t.Fatalf("takeover wave seconds = %v, want the claim → resume time (> 0)", got)
	}

	// Draining with a claimed session not yet resumed: released.
	id2 := release()
	claim(id2)
	c.draining.Store(true)
	c.stopLoop()
	c.releaseResuming()
	rec, err := f.other.Get(ctx, id2)
	if err != nil || rec.Owner != "" || rec.Epoch != 2 {
		t.Fatalf("record of a claimed session after the drain: %+v %v; want released at epoch 2", rec, err)
	}
	if got := series(t, f.reg, "sessiongate_cluster_takeovers_total", map[string]string{"reason": "handoff", "result": "released"}); got != 1 {
		t.Fatalf("hand-off takeovers released = %v, want 1", got)
	}
	c.mu.Lock()
	left := len(c.resuming)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d claimed sessions still resuming after the drain", left)
	}
	drainSem()
}
