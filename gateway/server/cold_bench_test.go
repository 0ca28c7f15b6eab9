package server

import (
	"context"
	"testing"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// BenchmarkRunJobColdSessions: one RunJob at a time, each on the next of
// 4000 idle sessions in turn (as gateway-bench's section 6 with the most
// sessions open), so that every call finds its session's state cold: its
// goroutines' stacks shrunk by the collector, its memory out of the
// caches. Compare with BenchmarkRunJobEcho, one warm session.
func BenchmarkRunJobColdSessions(b *testing.B) {
	h, first := benchHarness(b, func(c *Config) { c.MaxSessionsPerCaller = 10000 })
	ids := []string{first}
	for len(ids) < 4000 {
		resp, err := h.client.OpenSession(context.Background(), &sessiongatev1.OpenSessionRequest{})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, resp.GetSessionId())
	}
	in := mustValueTB(b, map[string]any{"hello": "world"})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		req := &sessiongatev1.RunJobRequest{SessionId: ids[i%len(ids)], Agent: "echo", Input: in}
		i++
		if _, err := h.client.RunJob(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
