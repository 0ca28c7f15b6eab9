package main

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestProxyWaitsForAConnection: with every connection busy, a call waits
// for one and, when its caller gives up first, ends with the caller's
// code instead of hanging or taking a connection it does not hold.
func TestProxyWaitsForAConnection(t *testing.T) {
	p := &proxyServer{pool: make(chan *upstream.Conn, 1)} // its one connection is out
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want codes.Code
	}{
		{"canceled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, codes.Canceled},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 0)
		}, codes.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			out, err := p.forward(ctx, &wrapperspb.BytesValue{Value: []byte(echoInput)})
			if got := status.Code(err); got != tc.want || out != nil {
				t.Fatalf("forward = %v, %v (code %v), want no answer and %v", out, err, got, tc.want)
			}
			if len(p.pool) != 0 {
				t.Fatalf("a call that held no connection gave one back: pool has %d", len(p.pool))
			}
		})
	}
	if _, err := startProxy(nil); err == nil {
		t.Fatal("startProxy with no connection did not fail")
	}
}
