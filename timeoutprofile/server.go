package timeoutprofile

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// UnaryServerInterceptor enforces each method's profile on unary calls.
//
// The request is the x-timeout-ms metadata if present, else the time left
// on the caller's deadline; it is clamped by the profile (SW4-002 §2.2) and
// a call with no request gets the profile's default. The result never ends
// after the caller's own deadline. When it ends more than the deadline
// margin (WithDeadlineMargin) before that deadline, the handler runs under
// a context with that deadline, cancelled with a *TimeoutError cause.
// Otherwise the caller's deadline is the budget: the handler runs under a
// context whose deadline is the caller's less the margin, cancelled the
// same way with limit "caller_deadline", so that the status leaves before
// the caller's own timer fires. The margin is a third of the time left, at
// most WithDeadlineMargin, so a call with any time left runs; one that
// arrives already past its deadline ends at once, with the same status,
// without running the handler. With a margin of 0 (or for the methods of
// WithoutDeadlineMargin) the handler gets the incoming context unchanged
// instead. In
// every case a call whose budget ran out before the handler returned —
// whatever the handler returned — ends with DEADLINE_EXCEEDED carrying
// TimeoutExceeded and ErrorInfo details. A malformed x-timeout-ms ends the
// call with INVALID_ARGUMENT before the handler runs.
func (e *Enforcer) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return e.unaryServer
}

func (e *Enforcer) unaryServer(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	m := e.method(info.FullMethod)
	p := e.profileFor(ctx, m)
	override, hasOverride, err := overrideFromIncoming(ctx)
	if err != nil {
		return nil, err
	}
	dl, hasDL := ctx.Deadline()
	b := computeBudget(p, start, dl, hasDL, override, hasOverride).withMargin(start, dl, hasDL, e.marginOf(m))
	if b.rule != RuleNone {
		e.clamped(ctx, m, p, b)
	}
	if b.callerBound && b.timeout <= 0 {
		return nil, e.tooLate(ctx, m, p, start)
	}

	if !b.own {
		resp, err := handler(ctx, req)
		end := time.Now()
		m.obs.Duration(end.Sub(start))
		if hasDL && ctx.Err() == context.DeadlineExceeded {
			// The caller's own deadline governed and passed.
			return nil, e.timedOut(ctx, m, &TimeoutError{
				Profile: p.Name, Configured: b.timeout, Elapsed: end.Sub(start),
				Service: m.service, Method: m.name, Limit: LimitUnary,
			})
		}
		return resp, err
	}

	c := newCallCtx(ctx, m, p, start, b, LimitUnary, nil)
	c.arm(start)
	resp, err := handler(c, req)
	end := time.Now()
	te := c.finish(end)
	m.obs.Duration(end.Sub(start))
	if te != nil {
		return nil, e.timedOut(ctx, m, te)
	}
	return resp, err
}

// StreamServerInterceptor enforces each method's profile on streaming calls.
//
// A method with a streaming policy (configuration, WithStreamingPolicy or
// the (timeoutprofile.v1.streaming) option) is bounded by its limits,
// measured on the messages the handler sends (the moment SendMsg is
// called): Initial from the start of the call to the first message, Gap
// between two messages, and a total. The total is the clamped x-timeout-ms
// if the caller sent one (none for an allowed 0), else the policy's Total
// (0 = none); the caller's deadline only bounds the stream and is not
// clamped. A method without a policy is bounded as a whole, like a unary
// call, with limit "total". As for unary calls, when the caller's deadline
// comes before the total (or there is none) the stream ends the deadline
// margin before it, with limit "caller_deadline", or at once when it
// arrives past its deadline.
//
// When a limit fires the stream's context is cancelled with a
// *TimeoutError cause, further SendMsg calls fail with the timeout status,
// and the call ends with DEADLINE_EXCEEDED whatever the handler returns.
// No goroutine is started: one timer per stream is reset on each send.
func (e *Enforcer) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return e.streamServer
}

func (e *Enforcer) streamServer(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	ctx := ss.Context()
	m := e.method(info.FullMethod)
	p := e.profileFor(ctx, m)
	override, hasOverride, err := overrideFromIncoming(ctx)
	if err != nil {
		return err
	}
	dl, hasDL := ctx.Deadline()
	var b budget
	if m.streaming != nil {
		b = computeStreamBudget(p, *m.streaming, start, dl, hasDL, override, hasOverride)
	} else {
		b = computeBudget(p, start, dl, hasDL, override, hasOverride)
	}
	b = b.withMargin(start, dl, hasDL, e.marginOf(m))
	if b.rule != RuleNone {
		e.clamped(ctx, m, p, b)
	}
	if b.callerBound && b.timeout <= 0 {
		return e.tooLate(ctx, m, p, start)
	}

	if !b.own && (m.streaming == nil || m.streaming.Initial == 0 && m.streaming.Gap == 0) {
		err := handler(srv, ss)
		end := time.Now()
		m.obs.Duration(end.Sub(start))
		if hasDL && ctx.Err() == context.DeadlineExceeded {
			return e.timedOut(ctx, m, &TimeoutError{
				Profile: p.Name, Configured: b.timeout, Elapsed: end.Sub(start),
				Service: m.service, Method: m.name, Limit: LimitTotal,
			})
		}
		return err
	}

	c := newCallCtx(ctx, m, p, start, b, LimitTotal, m.streaming)
	c.arm(start)
	err = handler(srv, &serverStream{ServerStream: ss, c: c})
	end := time.Now()
	te := c.finish(end)
	m.obs.Duration(end.Sub(start))
	if te != nil {
		return e.timedOut(ctx, m, te)
	}
	if hasDL && ctx.Err() == context.DeadlineExceeded {
		// The caller's own deadline passed first.
		return e.timedOut(ctx, m, &TimeoutError{
			Profile: p.Name, Configured: dl.Sub(start), Elapsed: end.Sub(start),
			Service: m.service, Method: m.name, Limit: LimitTotal,
		})
	}
	return err
}

// serverStream gives the handler the enforcing context and watches sends.
type serverStream struct {
	grpc.ServerStream
	c *callCtx
}

func (s *serverStream) Context() context.Context { return s.c }

func (s *serverStream) SendMsg(msg any) error {
	if te := s.c.sending(); te != nil {
		return te.GRPCStatus().Err()
	}
	return s.ServerStream.SendMsg(msg)
}

// PushbackKey is the trailer every TimeoutExceeded answer carries with the
// value "-1": gRPC's retry machinery (grpc-go, grpcio, grpc-js) then does
// not retry the call, whatever its retry policy says.
const PushbackKey = "grpc-retry-pushback-ms"

// timedOut counts and logs a timeout and returns its status error.
func (e *Enforcer) timedOut(ctx context.Context, m *method, te *TimeoutError) error {
	m.obs.Timeout()
	if n, ok := e.warn.allow(ctx, warnKey{m.full, warnTimeout}); ok {
		e.log.LogAttrs(ctx, slog.LevelWarn, "timeoutprofile: timeout",
			slog.String("profile", te.Profile),
			slog.String("service", te.Service),
			slog.String("method", te.Method),
			slog.String("limit", te.Limit),
			slog.Int64("configured_ms", int64(msOf(te.Configured))),
			slog.Int64("elapsed_ms", int64(msOf(te.Elapsed))),
			slog.Int("suppressed", n))
	}
	// The budget is spent: a retry would get the same budget (or, for
	// the caller's own deadline, none at all) and run the work again, and
	// a retry inside the caller's deadline ends as a bare deadline,
	// losing these details. Tell every gRPC client's retry machinery not
	// to retry (grpc-go, grpcio and grpc-js honour a negative pushback).
	_ = grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "-1"))
	return te.GRPCStatus().Err()
}

// tooLate ends a call that arrived already past the caller's deadline,
// without running its handler: nobody waits for its answer.
func (e *Enforcer) tooLate(ctx context.Context, m *method, p *Profile, start time.Time) error {
	elapsed := time.Since(start)
	m.obs.Duration(elapsed)
	return e.timedOut(ctx, m, &TimeoutError{
		Profile: p.Name, Elapsed: elapsed,
		Service: m.service, Method: m.name, Limit: LimitCallerDeadline,
	})
}

// clamped counts and logs an override rule applied to a call.
func (e *Enforcer) clamped(ctx context.Context, m *method, p *Profile, b budget) {
	m.obs.Clamped(b.rule)
	n, ok := e.warn.allow(ctx, warnKey{m.full, uint8(b.rule)})
	if !ok {
		return
	}
	source := "deadline"
	if b.explicit {
		source = MetadataKey
	}
	msg := "timeoutprofile: requested timeout clamped to the profile's bounds"
	if b.rule == RuleKeptCallerDeadline {
		msg = "timeoutprofile: clamping would extend the caller's deadline; kept the caller's deadline"
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, msg,
		slog.String("rule", b.rule.String()),
		slog.String("profile", p.Name),
		slog.String("service", m.service),
		slog.String("method", m.name),
		slog.String("request_from", source),
		slog.Int64("requested_ms", int64(msOf(b.requested))),
		slog.Int64("effective_ms", int64(msOf(b.timeout))),
		slog.Int64("min_ms", int64(msOf(p.Min))),
		slog.Int64("max_ms", int64(msOf(p.Max))),
		slog.Bool("allow_infinite", p.AllowInfinite),
		slog.Int("suppressed", n))
}
