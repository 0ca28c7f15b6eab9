package client

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxResetResends bounds the re-sends of one unary call after transport
// stream resets (see transportReset).
const maxResetResends = 2

// transportReset reports whether st is a stream the transport reset with
// RST_STREAM INTERNAL_ERROR (a balancer whose upstream died mid-response):
// INTERNAL, no ErrorInfo (the gateway's own INTERNAL always has one), and
// the reset's text (rstInternal).
func transportReset(st *status.Status) bool {
	if st.Code() != codes.Internal || !rstInternal.MatchString(st.Message()) {
		return false
	}
	for _, d := range st.Details() {
		if _, ok := d.(*errdetails.ErrorInfo); ok {
			return false
		}
	}
	return true
}

// resetResend is New's unary interceptor (unless WithoutRetry) that sends a
// call again after a transport stream reset, at most maxResetResends times
// with a short backoff, within the call's context, and only a call that is
// safe to send again (retrySafe: Run and Submit carry the call's idempotency
// key; GetSessionStatus, ListSessions, ListJobs read). grpc-go's retry
// policy does not cover it: INTERNAL is not retried, and must not be for the
// gateway's own INTERNAL errors.
func resetResend(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if err == nil || !retrySafe(method, req) {
		return err
	}
	for i := range maxResetResends {
		st, ok := status.FromError(err)
		if !ok || !transportReset(st) {
			return err
		}
		t := time.NewTimer(50 * time.Millisecond << i)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		err = invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			return nil
		}
	}
	return err
}
