package server

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// TestTracingSpans: with a TracerProvider the RPC gets a server span whose
// parent is the caller's traceparent, the submit an "arcp job.submit" child
// span, and a job without traceparent joins the RPC's own trace.
func TestTracingSpans(t *testing.T) {
	rec := newEndedSpans()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	h := newHarness(t, harnessOpts{config: func(c *Config) { c.TracerProvider = tp }})
	ctx := ctxT(t, 10*time.Second)
	sid := h.open(t, ctx)
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp, err := h.client.SubmitJob(withTraceparent(ctx, "00-"+trace+"-00f067aa0ba902b7-01"), &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo"})
	if err != nil || resp.GetTraceId() != trace {
		t.Fatalf("SubmitJob: %v, %v", resp, err)
	}
	fresh, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	var server, upstream, freshServer bool
	found := func(spans []sdktrace.ReadOnlySpan) bool {
		server, upstream, freshServer = false, false, false
		for _, s := range spans {
			tid := s.SpanContext().TraceID().String()
			switch s.Name() {
			case "sessiongate.v1.SessionGateway/SubmitJob":
				server = server || tid == trace
				freshServer = freshServer || tid == fresh.GetTraceId()
			case "arcp job.submit":
				upstream = upstream || tid == trace && s.Parent().IsValid()
			}
		}
		return server && upstream && freshServer
	}
	// Server spans end after the answer is sent: wait for them, at most 5 s.
	spans := rec.wait(ctx, 5*time.Second, found)
	if !server || !upstream || !freshServer {
		t.Fatalf("server span in the caller's trace %v, upstream child span %v, fresh job in the RPC's trace %v; spans %d",
			server, upstream, freshServer, len(spans))
	}
}
