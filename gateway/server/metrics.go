package server

import (
	"fmt"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// registerGatewayMetrics exposes the session table and the upstream counters
// shared by all connections. The counters are read at scrape time, so the hot
// path pays one atomic add per event and nothing more.
func registerGatewayMetrics(reg prometheus.Registerer, table *session.Table[*upstream.Conn], c *upstream.Counters) error {
	collectors := []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sessiongate_sessions", Help: "Sessions in the session table.",
		}, func() float64 { return float64(table.Len()) }),
	}
	counter := func(name, help string, v *atomic.Uint64) {
		collectors = append(collectors, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiongate_upstream_" + name + "_total", Help: help,
		}, func() float64 { return float64(v.Load()) }))
	}
	counter("reconnects", "Upstream transport reconnect attempts.", &c.Reconnects)
	counter("resumes", "Successful upstream session resumes.", &c.Resumes)
	counter("resume_failures", "Upstream sessions lost because resume failed.", &c.ResumeFailures)
	counter("heartbeat_lost", "Upstream transports dropped for missing heartbeats.", &c.HeartbeatLost)
	counter("late_answers", "Upstream answers that matched no waiting caller (tombstoned or unknown).", &c.LateAnswers)
	counter("stale_generation", "Upstream answers dropped because they belonged to an older connection generation.", &c.StaleGeneration)
	counter("malformed_frames", "Upstream frames dropped as malformed.", &c.MalformedFrames)
	counter("oversize_frames", "Upstream frames over the frame size cap.", &c.OversizeFrames)
	counter("binary_frames", "Upstream binary frames ignored.", &c.BinaryFrames)
	counter("unknown_types", "Upstream frames of unknown message type ignored.", &c.UnknownTypes)
	counter("tombstones_inserted", "Tombstones recorded for requests whose callers gave up.", &c.TombstonesInserted)
	counter("tombstones_expired", "Tombstones expired by TTL.", &c.TombstonesExpired)
	counter("tombstone_overflow", "Tombstones evicted or refused at the per-connection cap.", &c.TombstoneOverflow)
	counter("orphans_cancelled", "Jobs accepted for callers that had gone, cancelled upstream.", &c.OrphansCancelled)
	counter("slow_consumers", "Watchers failed because they fell behind the session's event buffer.", &c.SlowConsumers)
	for _, col := range collectors {
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("gateway: register metrics: %w", err)
		}
	}
	return nil
}
