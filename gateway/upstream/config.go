package upstream

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/tombstone"
)

// Config is the data an upstream connection is made of. Zero fields take the
// defaults below; Dial validates the result once.
type Config struct {
	URL    string // ws://host:port/arcp or wss://…
	Token  string // bearer token sent in hello.auth
	Client arcp.ClientInfo
	// Features requested in hello. Nil means DefaultFeatures; an empty
	// non-nil slice requests none. Only the intersection with the welcome's
	// list is ever used.
	Features []string

	InitTimeout    time.Duration // handshake timeout (dial + hello + welcome), default 10s
	RequestTimeout time.Duration // default 30s: a tombstone TTL term, and the wait of a call whose ctx has no deadline
	BackoffInitial time.Duration // first reconnect delay, default 1s; doubles per attempt
	BackoffMax     time.Duration // default 30s; each delay gets ±20% jitter

	MaxLiveJobs       int           // live (non-terminal) jobs plus unanswered submits per session, default 100
	MaxBufferedEvents int           // retained job log items per session, default 10,000
	MaxBufferedBytes  int64         // retained job log bytes per session, default 16 MiB
	MaxFrameBytes     int64         // WebSocket read limit and largest frame sent, default 16 MiB
	MaxTombstones     int           // tombstones per connection, default 100,000; beyond it the soonest-expiring is evicted and counted
	JobRetention      time.Duration // how long a finished job stays watchable, default 5 min
	MaxResultBytes    int64         // largest streamed result (§8.4) assembled for Wait, default 16 MiB

	// ReattachSilence bounds, on a runtime that did not negotiate
	// session.list_jobs, how long a live job may stay silent after a
	// resume before it is re-attached (job.subscribe) or, without
	// subscribe, ended for its callers with the terminal job.error
	// JOB_LOST naming it (see correlate.Reattach). Zero: the larger of
	// 30 s and two heartbeat intervals (the runtime's own liveness bound).
	// A job that goes on streaming but stays silent longer than this after
	// a resume is ended too: that is the price of a runtime that cannot
	// say which jobs it still runs.
	ReattachSilence time.Duration

	// OnJobLost, if set, is called with the id of every job the connection
	// ends for its callers as JOB_LOST, on a goroutine of its own (never
	// under the connection's lock). The gateway tells its other sessions
	// of the caller that observe the job to check on it (Recheck): a
	// runtime that loses a job stops sending it to its subscribers too.
	OnJobLost func(jobID string)

	// RetainedBytes is the account of the gateway's retained-bytes budget
	// this session's job logs and results are reserved in (nil: none).
	RetainedBytes budget.Account

	// Resume, when set, makes Dial take over an existing ARCP session (a
	// gateway replica adopting a session whose owner is gone) instead of
	// opening a new one: the handshake presents the stored resume token
	// and last_event_seq. Jobs whose events arrive and that this
	// connection did not submit are the session's: they are adopted, with
	// history from LastEventSeq on (see AdoptJob).
	Resume *ResumeFrom
	// OnWelcome, if set, is called with the session's new resume token
	// after every welcome (the first one included), before the transport
	// is served; a cluster directory stores it there, so a takeover never
	// presents a used token. It runs on the connection's supervisor and
	// must return promptly.
	OnWelcome func(sessionID, resumeToken string)
	// ResumeGate, if set, is asked before every resume of a dropped
	// transport; while it answers false the attempt is put off (by
	// BackoffInitial, within the resume window): a cluster owner does not
	// spend its resume token while the directory lacks it or its epoch is
	// unconfirmed. It must return promptly.
	ResumeGate func() bool
	// AckLimited makes acks never pass the limit set by SetAckLimit
	// (initially the resume's LastEventSeq, else 0): a cluster directory
	// records the acked seq before the runtime may discard the events.
	AckLimited bool

	// KeyNamespace is the identity of the caller the session belongs to.
	// Callers' idempotency keys are sent namespaced by it, so two callers
	// sharing one upstream principal never share a job through a key.
	KeyNamespace string

	Counters *Counters // shared across connections for metrics; nil = private
	// Traits is what connections to the same runtime learned about it
	// (whether it echoes trace ids), shared so that a new session need
	// not learn it again; nil = private.
	Traits    *Traits
	Logger    *slog.Logger
	TLSConfig *tls.Config // for wss:// runtimes; nil = the system roots

	knobs *knobs // test-only overrides, set through export_test.go
}

// Traits is what is known of a runtime's behaviour, learned by its
// connections and shared among them. The zero value knows nothing.
type Traits struct {
	echo atomic.Int32 // 1 accepts echo the submit's trace id, -1 they do not, 0 unknown
}

// Echo reports whether the runtime was seen to echo trace ids on
// job.accepted: 1 yes, -1 no, 0 not yet known.
func (t *Traits) Echo() int8 { return int8(t.echo.Load()) }

// ResumeFrom names an ARCP session to take over.
type ResumeFrom struct {
	SessionID    string
	ResumeToken  string
	LastEventSeq uint64
}

// knobs are internal tuning values that tests shorten.
type knobs struct {
	tombstoneSlack time.Duration // the TTL's 5 s epsilon
	housekeeping   time.Duration // period of the expiry / stall checks
	ackEvery       time.Duration // ack rate limit
	ackBatch       uint64        // ack at once after this many events
	pressureGrace  time.Duration // how long back-pressure may last before the slowest watcher fails
	noTraceIDs     bool          // do not stamp submits with trace ids (tests the pure FIFO)
	noAutoKeys     bool          // do not give keyless submits a key of the gateway's
	reorderWindow  int           // sequenced frames held to restore event_seq order
	reorderHold    time.Duration // longest a hole in event_seq may stay open
	reattachProbe  time.Duration // first re-attach probe after a resume, and its first period
}

// DefaultFeatures are requested when Config.Features is nil.
// result_chunk is assembled for Wait (see Terminal.Assembled).
var DefaultFeatures = []string{arcp.FeatureHeartbeat, arcp.FeatureAck, arcp.FeatureListJobs, arcp.FeatureSubscribe, arcp.FeatureResultChunk}

// Defaults.
const (
	DefaultInitTimeout       = 10 * time.Second
	DefaultRequestTimeout    = 30 * time.Second
	DefaultBackoffInitial    = time.Second
	DefaultBackoffMax        = 30 * time.Second
	DefaultMaxLiveJobs       = 100
	DefaultMaxBufferedEvents = 10_000
	DefaultMaxBufferedBytes  = 16 << 20
	DefaultMaxFrameBytes     = 16 << 20
	DefaultMaxTombstones     = 100_000
	DefaultJobRetention      = 5 * time.Minute
	DefaultMaxResultBytes    = 16 << 20

	// minFrameBytes keeps the read limit large enough for a welcome.
	minFrameBytes = 1 << 10
	// outboxCap bounds the caller frames (submit, cancel, list_jobs,
	// subscribe) waiting for the writer; callers beyond it wait.
	outboxCap = 4096
	// ctrlCap bounds the connection's own frames (pongs, orphan cancels,
	// pings, acks) waiting for the writer; beyond it they are dropped and
	// counted (ControlDrops).
	ctrlCap = 4096
	// maxProgressless is how many consecutive resumes caused by an oversize
	// frame or an event_seq gap, with no new event in between, end the
	// session: the runtime keeps replaying a frame we cannot take.
	maxProgressless = 3
)

func (c Config) withDefaults() Config {
	if c.Features == nil {
		c.Features = DefaultFeatures
	}
	c.Features = append([]string(nil), c.Features...)
	setDur := func(p *time.Duration, d time.Duration) {
		if *p == 0 {
			*p = d
		}
	}
	setDur(&c.InitTimeout, DefaultInitTimeout)
	setDur(&c.RequestTimeout, DefaultRequestTimeout)
	setDur(&c.BackoffInitial, DefaultBackoffInitial)
	setDur(&c.BackoffMax, DefaultBackoffMax)
	setDur(&c.JobRetention, DefaultJobRetention)
	if c.MaxLiveJobs == 0 {
		c.MaxLiveJobs = DefaultMaxLiveJobs
	}
	if c.MaxBufferedEvents == 0 {
		c.MaxBufferedEvents = DefaultMaxBufferedEvents
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.MaxFrameBytes == 0 {
		c.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if c.MaxTombstones == 0 {
		c.MaxTombstones = DefaultMaxTombstones
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = DefaultMaxResultBytes
	}
	if c.Counters == nil {
		c.Counters = &Counters{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	k := knobs{}
	if c.knobs != nil {
		k = *c.knobs
	}
	setDur(&k.tombstoneSlack, tombstone.Epsilon)
	setDur(&k.ackEvery, 250*time.Millisecond)
	setDur(&k.pressureGrace, 5*time.Second)
	if k.ackBatch == 0 {
		k.ackBatch = 32
	}
	if k.reorderWindow == 0 {
		k.reorderWindow = 64
	}
	setDur(&k.reorderHold, time.Second)
	setDur(&k.reattachProbe, time.Second)
	if k.housekeeping == 0 {
		ttl := tombstone.TTLWithSlack(c.RequestTimeout, c.InitTimeout, c.BackoffMax, 0, k.tombstoneSlack)
		k.housekeeping = min(max(ttl/16, 5*time.Millisecond), time.Second)
		k.housekeeping = min(k.housekeeping, max(c.JobRetention/4, 5*time.Millisecond))
	}
	c.knobs = &k
	return c
}

// validate is the one check of a defaulted Config.
func (c Config) validate() error {
	var errs []error
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		errs = append(errs, errors.New("URL is required"))
	case err != nil:
		errs = append(errs, fmt.Errorf("URL: %w", err))
	case u.Scheme != "ws" && u.Scheme != "wss":
		errs = append(errs, fmt.Errorf("URL scheme %q: want ws or wss", u.Scheme))
	case u.Host == "":
		errs = append(errs, errors.New("URL has no host"))
	}
	for _, f := range c.Features {
		if f == "" {
			errs = append(errs, errors.New("empty feature name"))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"InitTimeout", c.InitTimeout}, {"RequestTimeout", c.RequestTimeout},
		{"BackoffInitial", c.BackoffInitial}, {"BackoffMax", c.BackoffMax}, {"JobRetention", c.JobRetention},
	} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v is negative", d.name, d.v))
		}
	}
	if c.BackoffInitial > c.BackoffMax {
		errs = append(errs, fmt.Errorf("BackoffInitial %v exceeds BackoffMax %v", c.BackoffInitial, c.BackoffMax))
	}
	if c.MaxLiveJobs < 0 || c.MaxBufferedEvents < 0 || c.MaxBufferedBytes < 0 || c.MaxTombstones < 0 {
		errs = append(errs, errors.New("caps must not be negative"))
	}
	if c.MaxFrameBytes < minFrameBytes {
		errs = append(errs, fmt.Errorf("MaxFrameBytes %d is below %d", c.MaxFrameBytes, minFrameBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("upstream: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// tombstoneTTL is the lifetime of a tombstone for a call with budget.
func (c *Config) tombstoneTTL(budget time.Duration) time.Duration {
	return tombstone.TTLWithSlack(c.RequestTimeout, c.InitTimeout, c.BackoffMax, budget, c.knobs.tombstoneSlack)
}
