package server

import (
	"context"
	"time"

	"google.golang.org/grpc"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// The unary interceptors. Every call but the status probe goes through
// the general chain, outermost first:
//
//	metrics → access log → recovery → auth (all but grpc.health.v1) →
//	cluster routing → timeout profile (profiled methods)
//
// The probe (GetSessionStatus), which balancers call at high rates, takes
// probeCall instead: the same steps that apply to it, written out in one
// function — its metrics series resolved in advance, recovery, auth, the
// x-sessiongate-session check (all that cluster routing does for a
// read-only method) and its timeout profile — without the general chain's
// per-call closures, selectors and lookups. The access log skips the probe
// in both. TestProbeFastPath checks that a probe is counted, refused and
// bounded as the chain would.

// unaryChain composes interceptors into one, the first outermost, as
// grpc.ChainUnaryInterceptor does.
func unaryChain(ics ...grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) (any, error) {
		var next func(i int) grpc.UnaryHandler
		next = func(i int) grpc.UnaryHandler {
			if i == len(ics) {
				return final
			}
			return func(ctx context.Context, req any) (any, error) { return ics[i](ctx, req, info, next(i+1)) }
		}
		return ics[0](ctx, req, info, next(1))
	}
}

// unaryEntry is the server's one unary interceptor.
type unaryEntry struct {
	chain     grpc.UnaryServerInterceptor
	probe     *methodMetrics // GetSessionStatus's series
	auth      func(context.Context) (context.Context, error)
	enforce   grpc.UnaryServerInterceptor
	recovered func(ctx context.Context, p any) error // a handler's panic → the call's error
}

func (e *unaryEntry) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if info.FullMethod == sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName {
		return e.probeCall(ctx, req, info, handler)
	}
	return e.chain(ctx, req, info, handler)
}

func (e *unaryEntry) probeCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	mm := e.probe
	mm.started.Inc()
	mm.received.Inc()
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, e.recovered(ctx, p)
		}
		mm.sent.Inc()
		mm.done(err, time.Since(start))
	}()
	actx, err := e.auth(ctx)
	if err != nil {
		return nil, err
	}
	r, _ := req.(*sessiongatev1.GetSessionStatusRequest)
	if err := checkSessionHeader(actx, r.GetSessionId()); err != nil {
		return nil, err
	}
	return e.enforce(actx, req, info, handler)
}
