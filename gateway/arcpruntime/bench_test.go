package arcpruntime

import (
	"testing"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// BenchmarkEchoRoundTrip measures submit → accepted → result over loopback.
func BenchmarkEchoRoundTrip(b *testing.B) {
	srv := NewTestServer(b, Options{})
	c := open(b, srv, "ack")
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		c.submit("echo", map[string]int{"n": 1})
		id := c.accepted()
		c.untilTerminal(id, &seq)
		if seq%512 == 0 {
			c.send(arcp.TypeAck, "", arcp.Ack{LastProcessedSeq: seq})
		}
	}
}

// BenchmarkStreamEvents measures event delivery: one op is one job.event.
func BenchmarkStreamEvents(b *testing.B) {
	srv := NewTestServer(b, Options{})
	c := open(b, srv, "ack")
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		// One op per event; batches of 1000.
		b.StopTimer()
		c.submit("stream", map[string]int{"count": 1000})
		id := c.accepted()
		b.StartTimer()
		c.untilTerminal(id, &seq)
		c.send(arcp.TypeAck, "", arcp.Ack{LastProcessedSeq: seq})
	}
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "events/s")
}
