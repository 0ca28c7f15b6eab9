package tpprom

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// defaultBuckets are the duration histogram's buckets, in milliseconds:
// from 1 ms to one hour, the longest standard profile maximum.
var defaultBuckets = []float64{
	1, 5, 10, 25, 50, 100, 250, 500,
	1000, 2500, 5000, 10000, 30000, 60000,
	120000, 300000, 600000, 1800000, 3600000,
}

// An Option configures New.
type Option func(*options)

type options struct {
	buckets []float64
}

// WithBuckets replaces the duration histogram's buckets (milliseconds,
// increasing). The default is 1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
// 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000, 3600000.
func WithBuckets(b []float64) Option {
	return func(o *options) { o.buckets = b }
}

// Observer is a timeoutprofile.Observer backed by Prometheus metrics.
type Observer struct {
	timeouts *prometheus.CounterVec
	duration *prometheus.HistogramVec
	clamped  *prometheus.CounterVec
}

var _ timeoutprofile.Observer = (*Observer)(nil)

// New creates the metrics and registers them on reg. It fails, registering
// nothing, if any of them is already registered there.
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	if reg == nil {
		return nil, errors.New("tpprom: nil Registerer")
	}
	o := options{buckets: defaultBuckets}
	for _, opt := range opts {
		opt(&o)
	}
	for i := 1; i < len(o.buckets); i++ {
		if !(o.buckets[i] > o.buckets[i-1]) {
			return nil, errors.New("tpprom: WithBuckets: buckets must increase")
		}
	}
	labels := []string{"profile", "service", "method"}
	obs := &Observer{
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sw4rm_rpc_timeout_total",
			Help: "RPCs that ended because their timeout profile's budget ran out (SW4-002).",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sw4rm_rpc_duration_ms",
			Help:    "Duration of RPCs in milliseconds, by timeout profile (SW4-002).",
			Buckets: o.buckets,
		}, labels),
		clamped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sw4rm_rpc_timeout_clamped_total",
			Help: "Requested timeouts changed by a SW4-002 override rule, or caller deadlines kept instead of being extended.",
		}, append(labels, "rule")),
	}
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{obs.timeouts, obs.duration, obs.clamped} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, fmt.Errorf("tpprom: %w", err)
		}
		done = append(done, c)
	}
	return obs, nil
}

// rules are the rules ForMethod pre-creates children for.
var rules = []timeoutprofile.Rule{
	timeoutprofile.RuleBelowMin,
	timeoutprofile.RuleAboveMax,
	timeoutprofile.RuleZeroNotInfinite,
	timeoutprofile.RuleKeptCallerDeadline,
}

// ForMethod implements timeoutprofile.Observer.
func (o *Observer) ForMethod(profile, service, method string) timeoutprofile.MethodObserver {
	m := &methodObserver{
		parent:   o,
		labels:   [3]string{profile, service, method},
		timeouts: o.timeouts.WithLabelValues(profile, service, method),
		duration: o.duration.WithLabelValues(profile, service, method),
	}
	for _, r := range rules {
		if int(r) < len(m.clamped) {
			m.clamped[r] = o.clamped.WithLabelValues(profile, service, method, r.String())
		}
	}
	return m
}

type methodObserver struct {
	parent   *Observer
	labels   [3]string
	timeouts prometheus.Counter
	duration prometheus.Observer
	clamped  [8]prometheus.Counter // indexed by Rule
}

func (m *methodObserver) Duration(d time.Duration) {
	m.duration.Observe(float64(d) / float64(time.Millisecond))
}

func (m *methodObserver) Timeout() { m.timeouts.Inc() }

func (m *methodObserver) Clamped(r timeoutprofile.Rule) {
	if int(r) < len(m.clamped) && m.clamped[r] != nil {
		m.clamped[r].Inc()
		return
	}
	m.parent.clamped.WithLabelValues(m.labels[0], m.labels[1], m.labels[2], r.String()).Inc()
}
