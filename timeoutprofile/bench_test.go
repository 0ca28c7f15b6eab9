package timeoutprofile_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// BenchmarkUnaryServerInterceptor measures the server interceptor's cost
// per call over a bare handler, calling it directly with a context that
// carries incoming metadata as gRPC's would. Compare each case with "bare"
// (and "bare/cancellable-parent" with its own baseline).
func BenchmarkUnaryServerInterceptor(b *testing.B) {
	e := mustNew(b)
	unary := e.UnaryServerInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: runJob} // tool_call, via the method option
	resp := &sessiongatev1.RunJobResponse{}
	req := &sessiongatev1.RunJobRequest{}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	usesDone := func(ctx context.Context, _ any) (any, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
			return resp, nil
		}
	}
	md := metadata.Pairs("authorization", "Bearer token", "user-agent", "grpc-go/1.85", "content-type", "application/grpc")
	plain := metadata.NewIncomingContext(context.Background(), md)
	withOverride := metadata.NewIncomingContext(context.Background(), metadata.Join(md, metadata.Pairs("x-timeout-ms", "5000")))
	withDeadline, cancel := context.WithTimeout(plain, 10*time.Minute) // inside tool_call's bounds
	defer cancel()

	run := func(name string, ctx context.Context, h grpc.UnaryHandler, intercept bool) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if intercept {
					_, err = unary(ctx, req, info, h)
				} else {
					_, err = h(ctx, req)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	run("bare", plain, handler, false)
	run("default-budget", plain, handler, true)            // no deadline, no override: own timer
	run("x-timeout-ms", withOverride, handler, true)       // explicit override: own timer
	run("caller-deadline", withDeadline, handler, true)    // caller's deadline less the margin: own timer
	b.Run("caller-deadline/margin-0", func(b *testing.B) { // caller's deadline governs: pass-through
		unary := mustNew(b, timeoutprofile.WithDeadlineMargin(0)).UnaryServerInterceptor()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unary(withDeadline, req, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
	run("bare/handler-uses-Done", plain, usesDone, false)
	run("default-budget/handler-uses-Done", plain, usesDone, true)

	// gRPC gives each call a fresh cancellable context; registering with it
	// is part of the real cost when the handler calls Done.
	b.Run("bare/cancellable-parent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(plain)
			_, _ = usesDone(ctx, req)
			cancel()
		}
	})
	b.Run("default-budget/cancellable-parent/handler-uses-Done", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(plain)
			_, _ = unary(ctx, req, info, usesDone)
			cancel()
		}
	})
	b.Run("default-budget/parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = unary(plain, req, info, handler)
			}
		})
	})
}

// BenchmarkContextWithTimeoutCause is the standard library's equivalent of
// what the interceptor does on the default-budget path, for comparison.
func BenchmarkContextWithTimeoutCause(b *testing.B) {
	plain := metadata.NewIncomingContext(context.Background(), metadata.Pairs("user-agent", "grpc-go"))
	cause := &timeoutprofile.TimeoutError{}
	b.Run("background-parent", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeoutCause(plain, 30*time.Second, cause)
			_ = ctx
			cancel()
		}
	})
	b.Run("cancellable-parent/uses-Done", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			parent, cancelParent := context.WithCancel(plain)
			ctx, cancel := context.WithTimeoutCause(parent, 30*time.Second, cause)
			select {
			case <-ctx.Done():
			default:
			}
			cancel()
			cancelParent()
		}
	})
}
