package client_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestRetryRunsJobOnce: a server budget (x-timeout-ms: 1000) shorter than
// the job (2.5 s), with the published retry policy on: the call ends with
// the timeout details, and the runtime's own count shows one submit and
// one job — the gateway's answer tells the policy not to retry, and
// an attempt that did would carry the same idempotency key.
func TestRetryRunsJobOnce(t *testing.T) {
	s := openSession(t, newClient(t))
	ctx := testContext(t, 30*time.Second)
	sub0, acc0, err := gw.RuntimeJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Run(metadata.AppendToOutgoingContext(ctx, client.TimeoutMetadataKey, "1000"), "sleep", map[string]any{"ms": 2500})
	var te *client.TimeoutError
	if !errors.As(err, &te) || te.Limit != "unary" {
		t.Fatalf("Run: %v; want a *TimeoutError with limit unary", err)
	}
	sub1, acc1, err := gw.RuntimeJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if acc1-acc0 != 1 || sub1-sub0 != 1 {
		t.Errorf("the runtime received %d submits and created %d jobs for one call; want 1 and 1", sub1-sub0, acc1-acc0)
	}
}

// keyServer is a SessionGateway that fails the first attempt of every call
// with UNAVAILABLE and records the idempotency key of each attempt.
type keyServer struct {
	gatewayv1.UnimplementedSessionGatewayServer
	mu   sync.Mutex
	keys []string
}

func (k *keyServer) attempt(key string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, key)
	if len(k.keys)%2 == 1 {
		return status.Error(codes.Unavailable, "first attempt fails")
	}
	return nil
}

func (k *keyServer) RunJob(_ context.Context, r *gatewayv1.RunJobRequest) (*gatewayv1.RunJobResponse, error) {
	return &gatewayv1.RunJobResponse{JobId: "j"}, k.attempt(r.GetIdempotencyKey())
}

func (k *keyServer) SubmitJob(_ context.Context, r *gatewayv1.SubmitJobRequest) (*gatewayv1.SubmitJobResponse, error) {
	return &gatewayv1.SubmitJobResponse{JobId: "j"}, k.attempt(r.GetIdempotencyKey())
}

// TestIdempotencyKeyPerLogicalCall: every attempt of one Run or Submit
// carries the same idempotency key — a fresh one per call when the caller
// gave none, the caller's otherwise — so a retried attempt finds the job
// the first one created.
func TestIdempotencyKeyPerLogicalCall(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ks := &keyServer{}
	srv := grpc.NewServer()
	gatewayv1.RegisterSessionGatewayServer(srv, ks)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Stop(); <-done })
	c, err := client.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := c.Session("s1.test")
	ctx := testContext(t, 10*time.Second)
	calls := []func() error{
		func() error { _, err := s.Run(ctx, "echo", 1); return err },
		func() error { _, err := s.Run(ctx, "echo", 1); return err },
		func() error { _, err := s.Submit(ctx, "echo", 1); return err },
		func() error { _, err := s.Run(ctx, "echo", 1, client.IdempotencyKey("mine")); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if len(ks.keys) != 2*len(calls) {
		t.Fatalf("%d attempts for %d calls, want two each: %q", len(ks.keys), len(calls), ks.keys)
	}
	seen := map[string]bool{}
	for i := 0; i < len(ks.keys); i += 2 {
		a, b := ks.keys[i], ks.keys[i+1]
		if a == "" || a != b {
			t.Errorf("call %d: attempts carried keys %q and %q; want one non-empty key", i/2, a, b)
		}
		if seen[a] {
			t.Errorf("call %d reused key %q of an earlier call", i/2, a)
		}
		seen[a] = true
	}
	if ks.keys[6] != "mine" {
		t.Errorf("the caller's key became %q", ks.keys[6])
	}
}
