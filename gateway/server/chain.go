package server

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// The unary interceptors. The general chain is, outermost first:
//
//	metrics → access log → recovery → auth (all but grpc.health.v1) →
//	cluster routing → timeout profile (profiled methods)
//
// The session service's own calls do not go through it as a chain: they
// take serviceCall, the same steps written out in one function, without
// the chain's per-call closures (one per layer), selectors and lookups. Each
// method's metrics series, whether the access log records it and its
// innermost steps are resolved when the server is built:
//   - the probe (GetSessionStatus), which balancers call at high rates and
//     the access log skips, takes the x-sessiongate-session check (all that
//     cluster routing does for a read-only method) and its timeout profile
//     (probeInner);
//   - every other method of sessiongate.v1.SessionGateway takes cluster
//     routing, then its timeout profile (routedInner).
//
// Other services (health, reflection, the timeout profile service) take the
// chain. TestProbeFastPath checks that a probe is counted, refused and
// bounded as the chain would; TestServiceCallAgrees runs the same calls
// through serviceCall and the chain and compares what the caller, the
// metrics and the access log see. In process, the general chain cost a
// RunJob about 12 µs of latency at one call at a time
// (BenchmarkRunJobEcho, against no interceptors but the timeout profile).

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
	methods   map[string]serviceMethod // the session service's, probe included
	access    *accessLog
	auth      func(context.Context) (context.Context, error)
	route     grpc.UnaryServerInterceptor // cluster routing
	enforce   grpc.UnaryServerInterceptor
	recovered func(ctx context.Context, p any) error // a handler's panic → the call's error
}

// serviceMethod is what serviceCall needs of a method, resolved once.
type serviceMethod struct {
	mm     *methodMetrics
	logged bool // the access log records its calls
	// inner is the steps after auth: probeInner or routedInner.
	inner func(e *unaryEntry, ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error)
}

// serviceMethods resolves every unary method of the session service.
func serviceMethods(m *grpcMetrics, access *accessLog) map[string]serviceMethod {
	desc := &sessiongatev1.SessionGateway_ServiceDesc
	out := make(map[string]serviceMethod, len(desc.Methods))
	for _, md := range desc.Methods {
		full := "/" + desc.ServiceName + "/" + md.MethodName
		inner := routedInner
		if full == sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName {
			inner = probeInner
		}
		out[full] = serviceMethod{mm: m.method(full, false, false), logged: !access.skip[full], inner: inner}
	}
	return out
}

// routedInner is cluster routing, then the timeout profile.
func routedInner(e *unaryEntry, ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return e.route(ctx, req, info, func(ctx context.Context, req any) (any, error) {
		return e.enforce(ctx, req, info, handler)
	})
}

// probeInner is the probe's x-sessiongate-session check, then its timeout
// profile.
func probeInner(e *unaryEntry, ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r, _ := req.(*sessiongatev1.GetSessionStatusRequest)
	if err := checkSessionHeader(ctx, r.GetSessionId()); err != nil {
		return nil, err
	}
	return e.enforce(ctx, req, info, handler)
}

func (e *unaryEntry) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if m, ok := e.methods[info.FullMethod]; ok {
		return e.serviceCall(ctx, req, info, handler, m)
	}
	return e.chain(ctx, req, info, handler)
}

// serviceCall is the general chain written out for one method of the
// session service: metrics, access log, recovery, auth, then m.inner.
func (e *unaryEntry) serviceCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler, m serviceMethod) (resp any, err error) {
	start := time.Now()
	m.mm.started.Inc()
	m.mm.received.Inc()
	defer func() {
		// The chain's order from the inside out: recovery turns a panic
		// into the call's error, which the access log and the metrics
		// then record.
		if p := recover(); p != nil {
			resp, err = nil, e.recovered(ctx, p)
		}
		if m.logged {
			e.access.finished(ctx, info.FullMethod, "unary", start, err)
		}
		m.mm.sent.Inc()
		m.mm.done(err, time.Since(start))
	}()
	actx, err := e.auth(ctx)
	if err != nil {
		return nil, err
	}
	resp, err = m.inner(e, actx, req, info, handler)
	if resp == nil && err == nil {
		// grpc-go would send an empty message: an OK with no answer in
		// it (a RunJob with no job and no result). A bug, answered as one.
		if e.access != nil {
			e.access.log.ErrorContext(ctx, "a call ended with neither an answer nor an error", "method", info.FullMethod)
		}
		err = status.Error(codes.Internal, "internal error: the call ended without an answer")
	}
	return resp, err
}
