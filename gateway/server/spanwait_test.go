package server

import (
	"context"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// endedSpans records ended spans and tells waiters when one ends. grpc's
// stats handler ends a server span after the response is on the wire, so
// the caller may hold its answer before the span it is part of has ended:
// a test waits for the spans it asserts on instead of reading them at once.
type endedSpans struct {
	*tracetest.SpanRecorder
	ended chan struct{}
}

func newEndedSpans() *endedSpans {
	return &endedSpans{SpanRecorder: tracetest.NewSpanRecorder(), ended: make(chan struct{}, 1)}
}

func (e *endedSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	e.SpanRecorder.OnEnd(s)
	select {
	case e.ended <- struct{}{}:
	default:
	}
}

// wait calls done on the ended spans each time one ends, until it holds
// or d has passed (or ctx ended), and returns the spans of done's last
// call: a caller's closure holds what it found in them, and its assertion
// then says what is missing.
func (e *endedSpans) wait(ctx context.Context, d time.Duration, done func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		spans := e.Ended()
		if done(spans) {
			return spans
		}
		select {
		case <-e.ended:
		case <-ctx.Done():
			spans = e.Ended()
			done(spans)
			return spans
		}
	}
}
