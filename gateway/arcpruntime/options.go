package arcpruntime

import (
	"errors"
	"log/slog"
	"time"
)

// Options configure a Runtime. The zero value is a working runtime with the
// defaults below.
type Options struct {
	// Name and Version identify the runtime in session.welcome.
	// Defaults "sessiongate-reference-runtime" and "1.1.0".
	Name, Version string
	// Tokens maps bearer token to principal. Nil or empty means no
	// authentication: any token is accepted and the principal is "anonymous".
	Tokens map[string]string
	// Features are the features the runtime offers. Nil means DefaultFeatures.
	Features []string
	// HeartbeatInterval is the interval advertised when the heartbeat feature
	// is negotiated. Default 30s. Sub-second values are allowed; see the
	// package documentation for how they travel on the wire.
	HeartbeatInterval time.Duration
	// ResumeWindow is how long a session without a transport stays
	// resumable. Default 600s.
	ResumeWindow time.Duration
	// CancelGrace bounds the time between job.cancelled and the job's
	// job.error{CANCELLED}. Default 100ms; an agent that stops sooner ends
	// sooner.
	CancelGrace time.Duration
	// MaxConcurrentJobs is the number of live (pending or running) jobs per
	// session. Default 100; beyond it job.submit is rejected with
	// RESOURCE_EXHAUSTED.
	MaxConcurrentJobs int
	// MaxBufferedEvents and MaxBufferedBytes bound a session's replay buffer.
	// Defaults 10000 events and 16 MiB.
	MaxBufferedEvents int
	MaxBufferedBytes  int
	// MaxFrameBytes is the read limit of every WebSocket. Default 16 MiB.
	MaxFrameBytes int64
	// BackPressureThreshold is the number of un-acked events after which a
	// job.event{kind:"status", body{phase:"back_pressure"}} is emitted (only
	// when ack is negotiated). Default 1000.
	BackPressureThreshold int
	// HandshakeTimeout bounds the wait for session.hello. Default 10s.
	HandshakeTimeout time.Duration
	// WriteQueue bounds the number of unsent control frames (answers,
	// pongs) per transport; a transport whose queue overflows is dropped.
	// Default 1024.
	WriteQueue int
	// Logger receives diagnostics. Nil discards them.
	Logger *slog.Logger
	// LeaseLimits bound the leases jobs may request; zero fields take
	// their defaults (see LeaseLimits).
	LeaseLimits LeaseLimits
	// Dialect makes the runtime behave as one of the official SDK runtimes
	// in the ways it lists. The zero value is DialectReference. New panics
	// and Listen fails if it is invalid (see Dialect.Validate).
	Dialect Dialect
}

// DefaultFeatures are offered when Options.Features is nil.
var DefaultFeatures = []string{"heartbeat", "ack", "list_jobs", "subscribe", "progress", "agent_versions", "result_chunk",
	"lease_expires_at", "cost.budget", "model.use"}

// Defaults.
const (
	DefaultName                  = "sessiongate-reference-runtime"
	DefaultVersion               = "1.1.0"
	DefaultHeartbeatInterval     = 30 * time.Second
	DefaultResumeWindow          = 600 * time.Second
	DefaultCancelGrace           = 100 * time.Millisecond
	DefaultMaxConcurrentJobs     = 100
	DefaultMaxBufferedEvents     = 10000
	DefaultMaxBufferedBytes      = 16 << 20
	DefaultMaxFrameBytes         = 16 << 20
	DefaultBackPressureThreshold = 1000
	DefaultHandshakeTimeout      = 10 * time.Second
	DefaultWriteQueue            = 1024
)

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Version == "" {
		o.Version = DefaultVersion
	}
	if o.Features == nil {
		o.Features = DefaultFeatures
	}
	o.Features = append([]string(nil), o.Features...)
	if len(o.Tokens) > 0 {
		tokens := make(map[string]string, len(o.Tokens))
		for k, v := range o.Tokens {
			tokens[k] = v
		}
		o.Tokens = tokens
	} else {
		o.Tokens = nil
	}
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.ResumeWindow <= 0 {
		o.ResumeWindow = DefaultResumeWindow
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	if o.MaxConcurrentJobs <= 0 {
		o.MaxConcurrentJobs = DefaultMaxConcurrentJobs
	}
	if o.MaxBufferedEvents <= 0 {
		o.MaxBufferedEvents = DefaultMaxBufferedEvents
	}
	if o.MaxBufferedBytes <= 0 {
		o.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if o.MaxFrameBytes <= 0 {
		o.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if o.BackPressureThreshold <= 0 {
		o.BackPressureThreshold = DefaultBackPressureThreshold
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.WriteQueue <= 0 {
		o.WriteQueue = DefaultWriteQueue
	}
	o.LeaseLimits = o.LeaseLimits.withDefaults()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

var errClosed = errors.New("arcpruntime: runtime closed")
