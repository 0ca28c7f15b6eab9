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
	m := e.forRequest(ctx, e.method(info.FullMethod), req)
	p := e.profileFor(ctx, m)
	override, hasOverride, err := overrideFromIncoming(ctx)
	if err != nil {
		return nil, err
	}
	dl, hasDL := ctx.Deadline()
	b := computeBudget(p, start, dl, hasDL, override, hasOverride).withMargin(start, dl, hasDL, e.marginOf(m), e.stallFloor(m, start))
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
		e.noteLate(te, b.deadline, end)
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
	override, hasOverride, err := overrideFromIncoming(ctx)
	if err != nil {
		return err
	}
	if m.subs != nil {
		return e.streamSubKeyed(srv, ss, handler, m, start, override, hasOverride)
	}
	p, b, err := e.streamBudget(ctx, m, start, override, hasOverride)
	if err != nil {
		return err
	}
	dl, hasDL := ctx.Deadline()
	if !b.own && (m.streaming == nil || m.streaming.Initial == 0 && m.streaming.Gap == 0) {
		err := handler(srv, ss)
		return e.streamEnded(ctx, m, p, nil, start, b, dl, hasDL, err)
	}

	c := newCallCtx(ctx, m, p, start, b, LimitTotal, m.streaming)
	c.arm(start)
	err = handler(srv, &serverStream{ServerStream: ss, c: c})
	return e.streamEnded(ctx, m, p, c, start, b, dl, hasDL, err)
}

// streamBudget selects the profile of a stream of m for its caller and
// computes its budget; a stream that arrived past its caller's deadline
// gets the timeout status instead.
func (e *Enforcer) streamBudget(ctx context.Context, m *method, start time.Time, override time.Duration, hasOverride bool) (*Profile, budget, error) {
	p := e.profileFor(ctx, m)
	dl, hasDL := ctx.Deadline()
	var b budget
	if m.streaming != nil {
		b = computeStreamBudget(p, *m.streaming, start, dl, hasDL, override, hasOverride)
	} else {
		b = computeBudget(p, start, dl, hasDL, override, hasOverride)
	}
	b = b.withMargin(start, dl, hasDL, e.marginOf(m), e.stallFloor(m, start))
	if b.rule != RuleNone {
		e.clamped(ctx, m, p, b)
	}
	if b.callerBound && b.timeout <= 0 {
		return p, b, e.tooLate(ctx, m, p, start)
	}
	return p, b, nil
}

// streamEnded is the end of a stream: the handler returned err; c is its
// enforcing context, nil when the caller's deadline governed alone.
func (e *Enforcer) streamEnded(ctx context.Context, m *method, p *Profile, c *callCtx, start time.Time, b budget, dl time.Time, hasDL bool, err error) error {
	end := time.Now()
	if c != nil {
		if te := c.finish(end); te != nil {
			e.noteLate(te, b.deadline, end)
			m.obs.Duration(end.Sub(start))
			return e.timedOut(ctx, m, te)
		}
	}
	m.obs.Duration(end.Sub(start))
	if hasDL && ctx.Err() == context.DeadlineExceeded {
		// The caller's own deadline passed first.
		configured := b.timeout
		if c != nil {
			configured = dl.Sub(start)
		}
		return e.timedOut(ctx, m, &TimeoutError{
			Profile: p.Name, Configured: configured, Elapsed: end.Sub(start),
			Service: m.service, Method: m.name, Limit: LimitTotal,
		})
	}
	return err
}

// streamSubKeyed runs a stream of a method whose calls carry sub-keys: the
// sub-key comes from the first message the handler receives, so the
// profile, its budget and its timers are chosen then (measured from the
// start of the call); until then the handler sees the incoming context.
func (e *Enforcer) streamSubKeyed(srv any, ss grpc.ServerStream, handler grpc.StreamHandler, base *method, start time.Time, override time.Duration, hasOverride bool) error {
	ctx := ss.Context()
	ls := &lazyStream{ServerStream: ss, e: e, m: base, start: start, override: override, hasOverride: hasOverride}
	ls.p = e.profileFor(ctx, base)
	err := handler(srv, ls)
	if ls.refused != nil {
		return ls.refused
	}
	dl, hasDL := ctx.Deadline()
	return e.streamEnded(ctx, ls.m, ls.p, ls.c, start, ls.b, dl, hasDL, err)
}

// lazyStream is streamSubKeyed's stream. Its fields are used by the
// handler's goroutine only (RecvMsg, SendMsg and Context are not called
// concurrently with the first RecvMsg by generated handlers).
type lazyStream struct {
	grpc.ServerStream
	e           *Enforcer
	start       time.Time
	override    time.Duration
	hasOverride bool

	resolved bool
	m        *method
	p        *Profile
	b        budget
	c        *callCtx // nil: the caller's deadline governs alone
	refused  error    // the stream arrived past its deadline
}

func (s *lazyStream) RecvMsg(msg any) error {
	if err := s.ServerStream.RecvMsg(msg); err != nil || s.resolved {
		return err
	}
	s.resolved = true
	ctx := s.ServerStream.Context()
	s.m = s.e.forRequest(ctx, s.m, msg)
	p, b, err := s.e.streamBudget(ctx, s.m, s.start, s.override, s.hasOverride)
	s.p, s.b = p, b
	if err != nil {
		s.refused = err
		return err
	}
	if b.own || s.m.streaming != nil && (s.m.streaming.Initial != 0 || s.m.streaming.Gap != 0) {
		s.c = newCallCtx(ctx, s.m, p, s.start, b, LimitTotal, s.m.streaming)
		s.c.arm(s.start)
	}
	return nil
}

func (s *lazyStream) Context() context.Context {
	if s.c != nil {
		return s.c
	}
	return s.ServerStream.Context()
}

func (s *lazyStream) SendMsg(msg any) error {
	if s.c != nil {
		if te := s.c.sending(); te != nil {
			return te.GRPCStatus().Err()
		}
	}
	return s.ServerStream.SendMsg(msg)
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
