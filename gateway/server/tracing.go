package server

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Tracing: with Config.TracerProvider set, every RPC gets an OpenTelemetry
// server span (otelgrpc's stats handler, W3C traceparent from the caller's
// metadata as its parent) and the calls the gateway makes upstream get
// child spans ("arcp job.submit", "arcp session.list_jobs", "arcp
// job.subscribe"). With it nil there is no stats handler: the span in every
// context is the no-op one and upstream spans cost a context lookup.

// tracingOptions returns the server options for tp (none when nil).
func tracingOptions(tp trace.TracerProvider) []grpc.ServerOption {
	if tp == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler(
		otelgrpc.WithTracerProvider(tp),
		otelgrpc.WithPropagators(propagation.TraceContext{}),
	))}
}

// upstreamSpan starts a client span for an ARCP request under the RPC's
// span, from the RPC span's provider (no-op when tracing is off).
func upstreamSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	tp := trace.SpanFromContext(ctx).TracerProvider()
	return tp.Tracer("github.com/sessiongate/sessiongate/gateway/server").Start(ctx, "arcp "+name,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endSpan records err (if any) and ends span.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "upstream request failed")
	}
	span.End()
}
