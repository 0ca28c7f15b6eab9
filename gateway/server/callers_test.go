package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// TestPerCallerProfiles: the timeout profile's client level on the server is
// the authenticated caller, so an interactive caller and a batch caller get
// different tool_call budgets for the same method.
func TestPerCallerProfiles(t *testing.T) {
	global, err := timeoutprofile.ParseConfig([]byte(`{
		"profiles": {"tool_call": {"default_timeout_ms": 300, "min_timeout_ms": 100}},
		"callers": {"batch": {"tool_call": {"default_timeout_ms": 5000}}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessOpts{config: func(c *Config) {
		c.ClientTokens = map[string]string{"tok-ui": "interactive", "tok-batch": "batch"}
		c.TimeoutProfiles = global
	}})
	ctx := ctxT(t, 20*time.Second)
	for _, tc := range []struct {
		token      string
		wantCode   codes.Code
		configured uint32
	}{
		{"tok-ui", codes.DeadlineExceeded, 300},
		{"tok-batch", codes.OK, 0},
	} {
		cctx := bearer(ctx, tc.token)
		open, err := h.client.OpenSession(cctx, &sessiongatev1.OpenSessionRequest{})
		if err != nil {
			t.Fatal(err)
		}
		// No deadline on the call: a caller's deadline is its requested
		// timeout, and this test is about the profile default it gets
		// without one.
		noDeadline, cancel := context.WithCancel(bearer(context.Background(), tc.token))
		_, err = h.client.RunJob(noDeadline, &sessiongatev1.RunJobRequest{SessionId: open.GetSessionId(), Agent: "sleep",
			Input: mustValue(t, map[string]any{"ms": 700.0})})
		if status.Code(err) != tc.wantCode {
			t.Fatalf("%s: RunJob(sleep 700ms) = %v, want %v", tc.token, err, tc.wantCode)
		}
		cancel()
		if tc.wantCode == codes.DeadlineExceeded {
			te, ok := timeoutprofile.FromError(err)
			if !ok || te.GetConfiguredTimeoutMs() != tc.configured || te.GetProfileName() != "tool_call" {
				t.Fatalf("%s: details %v", tc.token, te)
			}
		}
	}
}
