package server

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/gateway/directory"
)

// clusterMetrics are cluster mode's metrics (sessiongate_cluster_*).
type clusterMetrics struct {
	forwards       *prometheus.CounterVec // method, code
	forwardSeconds prometheus.Histogram
	forwardRetries *prometheus.CounterVec // why (not_sent, no_first_byte, refused)
	takeovers      *prometheus.CounterVec // reason (call, sweep), result
	decisions      *prometheus.CounterVec // the ownership core's decisions, by kind
	handoffs       *prometheus.CounterVec // result
	fenced         prometheus.Counter
	forgedForwards prometheus.Counter
	dirErrors      *prometheus.CounterVec // op
	owned          prometheus.Gauge
	resumesPending *prometheus.GaugeVec     // reason (sweep, handoff): claimed by a sweep, not yet resumed upstream
	resumeJumps    prometheus.Counter       // of those, resumed at once for a call
	claimResume    *prometheus.HistogramVec // reason: a sweep's claim → resumed upstream
	waveResumed    prometheus.Gauge         // the last wave of claims: first claim → last resume
	ownerCache     *prometheus.CounterVec   // result (hit, miss)
	cacheHit       prometheus.Counter       // ownerCache{result="hit"}
	cacheMiss      prometheus.Counter       // ownerCache{result="miss"}
	awaits         prometheus.Counter       // calls that waited for a silent owner's lease end (cluster.Await)
}

func newClusterMetrics(reg prometheus.Registerer, d *directory.Directory) (*clusterMetrics, error) {
	m := &clusterMetrics{
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_forwards_total",
			Help: "Calls forwarded to the replica that owns their session, by method and gRPC code."}, []string{"method", "code"}),
		forwardSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "sessiongate_cluster_forward_seconds",
			Help: "Latency of forwarded unary calls, as seen by the forwarding replica.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		forwardRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_forward_retries_total",
			Help: "Forwards routed again, by why: not_sent (the owner could not be reached), no_first_byte (no response header within --peer-first-byte), refused (the owner's routing refused it: NOT_OWNER, DRAINING, OWNER_SUSPECT, LEASE_LAPSED)."}, []string{"why"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_ownership_decisions_total",
			Help: "Decisions of the ownership core: lease_lapse, outage, grace_wait, flush_detected, takeover_not_yet, takeover_{released,dead,self}, fenced, vanished, confirm, restore, resume_hold, claim_resumed, claim_given_back, claim_lost."}, []string{"decision"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_takeovers_total",
			Help: "Takeovers of sessions whose owner was gone or released them, by reason (call; sweep: owner gone; handoff: released, adopted by a sweep) and result (ok, owned, not_found, error, released: claimed, then given back (draining, or its resume failed), fenced: claimed, then fenced or its record vanished before the resume)."}, []string{"reason", "result"}),
		handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_handoffs_total",
			Help: "Sessions handed off (detached and released in the directory) while draining, by result."}, []string{"result"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiongate_cluster_fenced_total",
			Help: "Sessions dropped (detached silently) because another replica took them over."}),
		forgedForwards: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiongate_cluster_forged_forwards_total",
			Help: "Calls refused because their forwarding metadata had no valid cluster-secret signature."}),
		dirErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_directory_errors_total",
			Help: "Directory operations of the cluster layer that failed (Redis unreachable or slow), by operation."}, []string{"op"}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessiongate_cluster_owned_sessions",
			Help: "Sessions this replica owns in the directory."}),
		resumesPending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sessiongate_cluster_resumes_pending",
			Help: "Sessions a sweep has claimed in the directory and not yet resumed upstream (resumed in the background; a call for one resumes it at once), by reason (sweep: owner gone; handoff: released)."}, []string{"reason"}),
		resumeJumps: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiongate_cluster_resume_jumps_total",
			Help: "Claimed sessions resumed ahead of the background queue because a call needed one."}),
		claimResume: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sessiongate_cluster_claim_resume_seconds",
			Help:    "Time from a sweep's claim of a session (owner gone, or released) to its upstream resume here, by reason (sweep, handoff); the slowest of a wave is when the last orphan became usable without a call resuming it.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}, []string{"reason"}),
		waveResumed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sessiongate_cluster_takeover_wave_seconds",
			Help: "The last wave of claimed sessions (claims until the resume queue was empty again): seconds from its first claim to its last resume (also logged, \"takeover: claimed sessions resumed\")."}),
		ownerCache: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sessiongate_cluster_owner_cache_total",
			Help: "Lookups of the owner cache by calls for sessions held elsewhere, by result (hit: forwarded without reading the directory)."}, []string{"result"}),
		awaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "sessiongate_cluster_owner_awaits_total",
			Help: "Routings of a call that waited for the end of a silent owner's lease (a forward to it got no first byte, none answered since, and its lease ends within --peer-first-byte) instead of forwarding to it."}),
	}
	m.cacheHit, m.cacheMiss = m.ownerCache.WithLabelValues("hit"), m.ownerCache.WithLabelValues("miss")
	for _, c := range []prometheus.Collector{m.forwards, m.forwardSeconds, m.forwardRetries, m.takeovers, m.decisions, m.handoffs, m.fenced, m.forgedForwards, m.dirErrors, m.owned, m.resumesPending, m.resumeJumps, m.claimResume, m.waveResumed, m.ownerCache, m.awaits} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("gateway: register cluster metrics: %w", err)
		}
	}
	// The directory's own counters, as sessiongate_directory_<field>_total.
	ctr := reflect.ValueOf(d.Counters()).Elem()
	for i := 0; i < ctr.NumField(); i++ {
		f := ctr.Type().Field(i)
		p, ok := ctr.Field(i).Addr().Interface().(*atomic.Uint64)
		if !ok {
			continue
		}
		name := "sessiongate_directory_" + snake(f.Name) + "_total"
		if f.Name == "LatencyNanos" {
			name = "sessiongate_directory_latency_seconds_total"
			if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name,
				Help: "Sum of the latency of directory operations (divide by sessiongate_directory_ops_total for the mean)."},
				func() float64 { return float64(p.Load()) / 1e9 })); err != nil {
				return nil, err
			}
			continue
		}
		if err := reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name,
			Help: "Directory counter " + f.Name + " (see gateway/directory Counters)."},
			func() float64 { return float64(p.Load()) })); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// DirectoryObserver is a directory.Observer exporting the latency of every
// Redis operation as sessiongate_directory_op_seconds{op,result}. Pass it
// in directory.Config.Observer.
type DirectoryObserver struct{ h *prometheus.HistogramVec }

// NewDirectoryObserver registers the histogram on reg.
func NewDirectoryObserver(reg prometheus.Registerer) (*DirectoryObserver, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sessiongate_directory_op_seconds",
		Help:    "Latency of directory (Redis) operations, by operation and result (ok, error).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"op", "result"})
	if err := reg.Register(h); err != nil {
		return nil, fmt.Errorf("gateway: register directory metrics: %w", err)
	}
	return &DirectoryObserver{h: h}, nil
}

// ObserveOp implements directory.Observer.
func (o *DirectoryObserver) ObserveOp(op string, took time.Duration, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	o.h.WithLabelValues(op, r).Observe(took.Seconds())
}

var _ directory.Observer = (*DirectoryObserver)(nil)
