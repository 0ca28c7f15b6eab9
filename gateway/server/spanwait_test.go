package server

import (
	"context"

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

// wait returns the ended spans once done holds for them, or the spans ended
// so far when ctx ends first (the caller's assertion then says what is
// missing).
func (e *endedSpans) wait(ctx context.Context, done func([]sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	for {
		spans := e.Ended()
		if done(spans) {
			return spans
		}
		select {
		case <-e.ended:
		case <-ctx.Done():
			return e.Ended()
		}
	}
}
