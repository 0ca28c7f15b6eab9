package timeoutprofile

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// CallTimeout is a per-call override (SW4-002 §2.3, per-call level) for the
// client interceptors: the call asks for timeout d, which the profile
// clamps. The interceptor sends the clamped value as x-timeout-ms and sets
// it as the call's deadline (never later than a deadline the caller's
// context already has). CallTimeout(0) asks for no timeout: on a profile
// with allow_infinite it sends x-timeout-ms: 0 and sets no deadline; on
// others it gets the default. Without the interceptor the option does
// nothing. Durations are rounded up to whole milliseconds.
func CallTimeout(d time.Duration) grpc.CallOption {
	if r := d % time.Millisecond; r > 0 {
		d += time.Millisecond - r
	}
	return callTimeout{d: d}
}

type callTimeout struct {
	grpc.EmptyCallOption
	d time.Duration
}

// splitCallOptions removes this package's options; the last CallTimeout wins.
// It allocates only when one is present.
func splitCallOptions(opts []grpc.CallOption) ([]grpc.CallOption, *callTimeout) {
	found := -1
	for i, o := range opts {
		if _, ok := o.(callTimeout); ok {
			found = i
		}
	}
	if found < 0 {
		return opts, nil
	}
	ct := opts[found].(callTimeout)
	rest := make([]grpc.CallOption, 0, len(opts)-1)
	for _, o := range opts {
		if _, ok := o.(callTimeout); !ok {
			rest = append(rest, o)
		}
	}
	return rest, &ct
}

// UnaryClientInterceptor applies each method's profile on the client side
// (SW4-002 §2.1). A call whose context has no deadline gets the profile's
// default as its deadline. A deadline the caller set is the request: it is
// shortened to the profile's maximum if longer, and kept (with a warning)
// if clamping would extend it. A CallTimeout option is an explicit request:
// the clamped value is sent as x-timeout-ms and becomes the deadline.
func (e *Enforcer) UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		opts, ct := splitCallOptions(opts)
		ctx, cancel := e.clientContext(ctx, e.method(method), ct, false)
		if cancel != nil {
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams, except
// that a method with a streaming policy gets no default deadline — the
// server enforces its limits — and a deadline the caller set is left
// alone; a CallTimeout still sends x-timeout-ms and, unless infinite, sets
// the deadline. A deadline the interceptor sets is released when the
// stream ends (RecvMsg returns an error, io.EOF included).
func (e *Enforcer) StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		opts, ct := splitCallOptions(opts)
		m := e.method(method)
		ctx, cancel := e.clientContext(ctx, m, ct, m.streaming != nil)
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if cancel == nil {
			return cs, err
		}
		if err != nil {
			cancel()
			return nil, err
		}
		return &clientStream{ClientStream: cs, cancel: cancel}, nil
	}
}

// clientContext returns the context a client call runs under, and its
// cancel func if it made one.
func (e *Enforcer) clientContext(ctx context.Context, m *method, ct *callTimeout, policyStream bool) (context.Context, context.CancelFunc) {
	if ct == nil && policyStream {
		return ctx, nil
	}
	p := m.profile
	now := time.Now()
	dl, hasDL := ctx.Deadline()
	var b budget
	if ct != nil {
		b = computeBudget(p, now, dl, hasDL, ct.d, true)
	} else {
		b = computeBudget(p, now, dl, hasDL, 0, false)
	}
	if b.rule != RuleNone {
		e.clamped(ctx, m, p, b)
	}
	if ct != nil {
		// The clamped request; 0 only for an allowed infinite request.
		var v uint32
		if d, _ := p.Clamp(ct.d); d > 0 {
			v = msOf(d)
		}
		ctx = metadata.AppendToOutgoingContext(ctx, MetadataKey, strconv.FormatUint(uint64(v), 10))
	}
	if b.own {
		return context.WithDeadline(ctx, b.deadline)
	}
	return ctx, nil
}

// clientStream releases the interceptor's deadline when the stream ends.
type clientStream struct {
	grpc.ClientStream
	cancel context.CancelFunc
}

func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.cancel()
	}
	return err
}
