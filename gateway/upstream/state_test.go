package upstream_test

import (
	"fmt"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestStateTransitions checks every (from, to) pair against the table the
// package documents, written out here independently of the implementation.
func TestStateTransitions(t *testing.T) {
	const (
		conn  = upstream.StateConnecting
		hand  = upstream.StateHandshaking
		ready = upstream.StateReady
		recon = upstream.StateReconnecting
		closi = upstream.StateClosing
		clsd  = upstream.StateClosed
	)
	all := []upstream.State{conn, hand, ready, recon, closi, clsd}
	allowed := map[[2]upstream.State]string{
		{conn, hand}:   "dialed",
		{conn, clsd}:   "dial failed",
		{hand, ready}:  "welcome",
		{hand, recon}:  "resume attempt failed, retrying",
		{hand, closi}:  "Close during a resume handshake",
		{hand, clsd}:   "handshake failed for good",
		{ready, recon}: "transport lost",
		{ready, closi}: "Close",
		{ready, clsd}:  "runtime ended the session",
		{recon, hand}:  "dialed to resume",
		{recon, closi}: "Close while reconnecting",
		{recon, clsd}:  "resume gave up",
		{closi, clsd}:  "closed",
	}
	n := 0
	for _, from := range all {
		for _, to := range all {
			why, want := allowed[[2]upstream.State{from, to}]
			name := fmt.Sprintf("%s->%s", from, to)
			t.Run(name, func(t *testing.T) {
				if got := upstream.CanTransition(from, to); got != want {
					t.Fatalf("CanTransition(%s, %s) = %v, want %v (%s)", from, to, got, want, why)
				}
			})
			n++
		}
	}
	if n != 36 {
		t.Fatalf("checked %d pairs", n)
	}
	// Out-of-range states are refused.
	if upstream.CanTransition(upstream.State(-1), ready) || upstream.CanTransition(ready, upstream.State(99)) {
		t.Fatal("out-of-range state accepted")
	}
	if s := upstream.State(42).String(); s != "State(42)" {
		t.Fatalf("String = %q", s)
	}
	if s := upstream.StateReconnecting.String(); s != "reconnecting" {
		t.Fatalf("String = %q", s)
	}
}
