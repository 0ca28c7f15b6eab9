package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/client"
)

// TestLimits: a 7 MB result reaches the client (gRPC's default receive
// limit, 4 MiB, lost it after the job ran), and a 10 MB input gets
// RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes.
func TestLimits(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 60*time.Second)
	const n = 7_000_000
	r, err := s.Run(ctx, "echo", strings.Repeat("r", n))
	if err != nil {
		t.Fatalf("7 MB echo: %v", err)
	}
	if got, _ := r.Result.(string); len(got) != n {
		t.Errorf("7 MB echo returned %d bytes", len(got))
	}
	_, err = s.Run(ctx, "echo", strings.Repeat("i", 10_000_000))
	var e *client.Error
	if !errors.As(err, &e) || e.Code != codes.ResourceExhausted || e.Reason != "CAP_EXCEEDED" || e.Metadata["cap"] != "max_input_bytes" {
		t.Errorf("10 MB input: %v; want RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes", err)
	}
}
