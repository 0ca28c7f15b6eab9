package server

import (
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestReconnectingPhase: while the upstream cannot be resumed yet the session
// is LIVE in phase RECONNECTING; once the runtime answers again it is READY
// with a higher generation.
func TestReconnectingPhase(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	id := h.open(t, ctx)
	status := func() *sessiongatev1.GetSessionStatusResponse {
		t.Helper()
		st, err := h.client.GetSessionStatus(ctx, &sessiongatev1.GetSessionStatusRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	gen0 := status().GetGeneration()
	rt := h.rt.Runtime()
	rt.SetHandshakeSilence(true) // resume attempts get no welcome
	if rt.DropTransports() != 1 {
		t.Fatal("no transport to drop")
	}
	waitFor(t, 5*time.Second, "phase RECONNECTING", func() bool {
		st := status()
		return st.GetStatus() == sessiongatev1.SessionStatus_SESSION_STATUS_LIVE &&
			st.GetPhase() == sessiongatev1.SessionPhase_SESSION_PHASE_RECONNECTING
	})
	list, err := h.client.ListSessions(ctx, &sessiongatev1.ListSessionsRequest{})
	if err != nil || len(list.GetSessions()) != 1 || list.GetSessions()[0].GetPhase() != sessiongatev1.SessionPhase_SESSION_PHASE_RECONNECTING {
		t.Fatalf("ListSessions while reconnecting = %v, %v", list, err)
	}
	rt.SetHandshakeSilence(false)
	waitFor(t, 8*time.Second, "phase READY after resume", func() bool {
		st := status()
		return st.GetPhase() == sessiongatev1.SessionPhase_SESSION_PHASE_READY && st.GetGeneration() > gen0
	})
	if _, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo"}); err != nil {
		t.Fatalf("RunJob after resume: %v", err)
	}
}

// TestHealthNotServingWhileDraining: a health watcher sees NOT_SERVING when
// shutdown begins, before the server goes away.
func TestHealthNotServingWhileDraining(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := ctxT(t, 10*time.Second)
	hc := healthpb.NewHealthClient(h.conn)
	w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "sessiongate.v1.SessionGateway"})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("first health status = %v, %v", first, err)
	}
	go h.stop()
	next, err := w.Recv()
	if err != nil || next.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health during drain = %v, %v; want NOT_SERVING", next, err)
	}
}

// waitFor polls cond until it holds or the timeout passes: for states that
// change asynchronously upstream, which the test can observe but not await.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}
