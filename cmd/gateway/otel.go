package main

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// setupTracing returns a tracer provider exporting spans over OTLP/gRPC to
// endpoint (host:port, or a URL: http:// means no TLS), and its shutdown,
// which flushes what is batched. An empty endpoint means no tracing: a nil
// provider, no exporter, no cost.
func setupTracing(ctx context.Context, endpoint string, log *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	if endpoint == "" {
		return nil, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpointURL(endpoint)))
	if err != nil {
		return nil, nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("sessiongate"))),
	)
	log.Info("tracing: exporting spans over OTLP", "endpoint", endpoint)
	return tp, tp.Shutdown, nil
}

// endpointURL accepts "host:port" (plain gRPC, as collectors on loopback
// or a sidecar usually listen) or a full URL.
func endpointURL(e string) string {
	for _, p := range []string{"http://", "https://"} {
		if len(e) >= len(p) && e[:len(p)] == p {
			return e
		}
	}
	return "http://" + e
}
