package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/tombstone"
	"github.com/sessiongate/sessiongate/gateway/upstream/internal/correlate"
)

// HeartbeatIntervalMSExtension is the welcome extension carrying the exact
// heartbeat interval in milliseconds; it is preferred over
// heartbeat_interval_sec when present.
const HeartbeatIntervalMSExtension = "x-vendor.sessiongate.heartbeat_interval_ms"

// Status is a snapshot of a connection, taken without locks or side effects.
type Status struct {
	State        State
	Generation   uint64 // bumped on every successful (re)initialisation; 1 after Dial
	LastEventSeq uint64
	SessionID    string
	Features     []string // negotiated; shared and immutable, do not modify
	Runtime      arcp.RuntimeInfo
}

// Conn is one ARCP session over one WebSocket at a time, resumed across
// transport drops. See the package documentation for its goroutines, its
// correlation rules and its concurrency contract. All exported methods are
// safe for concurrent use.
type Conn struct {
	// Immutable after Dial.
	cfg        Config
	log        *slog.Logger
	ctr        *Counters
	sessionID  string
	features   []string
	feat       featureSet
	welcome    arcp.Welcome // the first welcome
	defaultTTL time.Duration
	keyNS      string // prefix of callers' idempotency keys on the wire
	seqCfg     correlate.SeqConfig
	adopt      bool   // taken over (Config.Resume): unknown jobs are the session's
	adoptFrom  uint64 // the takeover's last_event_seq: adopted jobs' history starts after it
	detachCh   chan struct{}
	detachOnce sync.Once
	epoch      time.Time // origin of the monotonic clock readings below

	// Lifetime. ctx is the parent of every transport context; cancel is the
	// hard stop. closeCtx is cancelled by the first Close.
	ctx         context.Context
	cancel      context.CancelFunc
	closeCtx    context.Context
	closeCancel context.CancelFunc
	closeOnce   sync.Once
	done        chan struct{} // closed when the session has ended
	runDone     chan struct{} // closed when the supervisor goroutine has returned
	closedRecv  chan struct{} // closed when session.closed/bye arrives during Close
	kick        chan struct{} // cap 1: the supervisor should arm the ack timer

	// Lock-free, for Status and the heartbeat.
	state    atomic.Int32
	gen      atomic.Uint64
	lastSeq  atomic.Uint64 // written under mu, read anywhere
	runtime  atomic.Pointer[arcp.RuntimeInfo]
	active   atomic.Int64 // live jobs, mirrors liveJobs
	lastRecv atomic.Int64 // c.mono() of the last frame received
	lastSend atomic.Int64 // c.mono() of the last frame written (or ping queued)

	mu sync.Mutex
	// Guarded by mu.
	ended        bool
	err          error      // why the session ended; set before done closes
	fatal        error      // set by the reader when the runtime ends the session
	closeResult  error      // what the first Close returns
	tr           *transport // current transport; nil while reconnecting or after a drop decision
	resumeToken  string
	resumeWindow time.Duration
	hbInterval   time.Duration
	tokens       []string // resume tokens seen, newest last (bounded; for tests)
	out          outbox
	spaceCh      chan struct{}                  // closed and replaced when the outbox frees space
	ctrl         [][]byte                       // own frames for the current transport
	core         *correlate.Core                // who every answer belongs to (see package correlate)
	seqr         *correlate.Sequencer[seqFrame] // event_seq order with a bounded reorder window
	subs         map[correlate.ID]*request      // submits the core may still deliver or fail
	nextCID      correlate.ID
	curAccept    *arcp.Accepted      // the job.accepted being handed to the core
	ackLimit     uint64              // Config.AckLimited: acks never pass it
	reserved     int64               // bytes reserved in cfg.RetainedBytes
	budgetCap    int64               // byte cap while the retained-bytes budget refuses more; -1 none
	coreSeen     correlate.Counters  // the core's counters when last added to ctr
	echoSeen     int8                // the core's Echo when last stored in cfg.Traits
	pending      map[string]*request // sent, unanswered requests other than submits, by envelope id
	jobs         map[string]*job     // live and finished (until JobRetention) jobs
	live         map[*job]struct{}   // the live ones
	finished     jobQueue            // the finished ones, oldest first
	liveJobs     int
	inflight     int // submits queued or sent, neither answered nor abandoned
	bufEvents    int
	bufBytes     int64
	tombs        *tombstone.Store
	lastAcked    uint64
	ackWanted    bool   // the writer should send an ack
	houseIdle    bool   // housekeeping runs at idleHousekeeping: the next state to look after kicks the supervisor
	houseRuns    uint64 // housekeeping passes (tests)
	ackPaused    bool   // back-pressure: do not ack
	pausedAt     time.Time
	progressless int // consecutive gap/oversize drops without a new event
	lastDropSeq  uint64
	orphans      []string      // orphan job ids cancelled, newest last (bounded; for tests)
	byeQueued    bool          // closing: session.close was refused, session.bye queued
	closeReason  string        // reason sent with session.close / session.bye
	flushCh      chan struct{} // closed when the writer finds nothing left to send
	hbLost       []heartbeatLoss
	reat         *correlate.Reattach // which live jobs the runtime stopped streaming after a resume (reattach.go)
	reatReqs     map[string]reatReq  // connection-owned probes and re-attachments in flight, by envelope id
	probeLive    map[string]bool     // jobs the probe in progress found live
	probePages   int                 // pages the probe in progress has asked for
	probeN       uint64              // the number of the probe in progress
	foreignRetry []string            // other sessions' jobs to attach again after the resume
	known        map[string]struct{} // the callers' jobs, also forgotten ones (Knows; bounded)
	knownOrder   []string            // known, oldest first
	adoptL       *adoptList          // this generation's listing for AdoptJob (taken-over sessions)
}

type featureSet struct{ heartbeat, ack, listJobs, subscribe bool }

type heartbeatLoss struct{ lastRecv, detected time.Time }

// Dial validates cfg, dials cfg.URL and performs the handshake within
// cfg.InitTimeout (and ctx). A session.error during the handshake is returned
// as *arcp.Error; a takeover (cfg.Resume) welcomed into another session is a
// *LostError wrapping ErrResumeMismatch, as a resume's is. On success the connection's goroutines are running; Close
// (or the end of the session) stops them.
func Dial(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := newConn(cfg)
	var resume *arcp.Resume
	if r := cfg.Resume; r != nil {
		resume = &arcp.Resume{SessionID: r.SessionID, ResumeToken: r.ResumeToken, LastEventSeq: r.LastEventSeq}
		c.adopt, c.adoptFrom, c.ackLimit = true, r.LastEventSeq, r.LastEventSeq
		c.lastSeq.Store(r.LastEventSeq)
		c.lastAcked = r.LastEventSeq
		c.seqr = correlate.NewSequencer[seqFrame](c.seqCfg, r.LastEventSeq)
	}
	hs, err := c.handshake(ctx, resume)
	if err == nil && resume != nil && hs.sessionID != resume.SessionID {
		// As the supervisor's resume (reconnect) reports it: the session
		// is lost because the runtime welcomed another one, not because
		// a resume window expired.
		hs.ws.CloseNow()
		c.ctr.ResumeFailures.Add(1)
		err = &LostError{Code: arcp.CodeInternalError,
			Err: fmt.Errorf("%w: took over %q, welcomed %.64q", ErrResumeMismatch, resume.SessionID, hs.sessionID)}
	}
	if err != nil {
		c.state.Store(int32(StateClosed))
		c.cancel()
		c.closeCancel()
		return nil, err
	}
	c.sessionID = hs.sessionID
	c.setFeatures(arcp.Intersect(cfg.Features, hs.welcome.Capabilities.Features))
	c.welcome = hs.welcome

	c.mu.Lock()
	c.recordWelcomeLocked(hs)
	c.core.Connected()
	c.reattachFeaturesLocked()
	t := c.newTransportLocked(hs)
	c.mu.Unlock()
	if cfg.OnWelcome != nil {
		cfg.OnWelcome(c.sessionID, hs.welcome.ResumeToken)
	}
	c.moveTo(StateReady)
	c.log.Debug("upstream session ready", "session_id", c.sessionID, "features", c.features)
	go c.run(t)
	return c, nil
}

// newConn returns a connection in StateConnecting for a validated cfg.
func newConn(cfg Config) *Conn {
	c := &Conn{
		cfg:        cfg,
		log:        cfg.Logger,
		ctr:        cfg.Counters,
		epoch:      time.Now(),
		done:       make(chan struct{}),
		runDone:    make(chan struct{}),
		closedRecv: make(chan struct{}),
		kick:       make(chan struct{}, 1),
		detachCh:   make(chan struct{}),
		pending:    make(map[string]*request),
		jobs:       make(map[string]*job),
		live:       make(map[*job]struct{}),
		subs:       make(map[correlate.ID]*request),
		budgetCap:  -1,
		reatReqs:   make(map[string]reatReq),
		probeLive:  make(map[string]bool),
	}
	c.reat = correlate.NewReattach(correlate.ReattachConfig{ProbeAfter: cfg.knobs.reattachProbe})
	c.defaultTTL = cfg.tombstoneTTL(0)
	if c.cfg.Traits == nil {
		c.cfg.Traits = &Traits{}
	}
	c.echoSeen = c.cfg.Traits.Echo()
	c.core = correlate.New(correlate.Config{
		BarrierTimeout: cfg.RequestTimeout,
		TraceTTL:       c.defaultTTL,
		MaxUnclaimed:   cfg.MaxTombstones,
		Echo:           c.echoSeen,
	})
	c.seqCfg = correlate.SeqConfig{
		Window:      cfg.knobs.reorderWindow,
		WindowBytes: int(min(cfg.MaxBufferedBytes, 4<<20)),
		MaxHold:     cfg.knobs.reorderHold,
	}
	c.seqr = correlate.NewSequencer[seqFrame](c.seqCfg, 0)
	if cfg.KeyNamespace != "" {
		sum := sha256.Sum256([]byte(cfg.KeyNamespace))
		c.keyNS = "sg1." + base64.RawURLEncoding.EncodeToString(sum[:12]) + "."
	}
	c.tombs = tombstone.New(cfg.MaxTombstones,
		tombstone.WithResolution(min(max(c.defaultTTL/64, time.Millisecond), time.Second)))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.closeCtx, c.closeCancel = context.WithCancel(context.Background())
	c.state.Store(int32(StateConnecting))
	return c
}

func (c *Conn) setFeatures(f []string) {
	c.features = f
	c.feat = featureSet{
		heartbeat: slices.Contains(f, arcp.FeatureHeartbeat),
		ack:       slices.Contains(f, arcp.FeatureAck),
		listJobs:  slices.Contains(f, arcp.FeatureListJobs),
		subscribe: slices.Contains(f, arcp.FeatureSubscribe),
	}
}

// recordWelcomeLocked stores what every welcome (first or resumed) carries.
func (c *Conn) recordWelcomeLocked(hs *handshakeResult) {
	c.resumeToken = hs.welcome.ResumeToken
	c.tokens = append(c.tokens, hs.welcome.ResumeToken)
	if len(c.tokens) > 256 {
		c.tokens = slices.Delete(c.tokens, 0, len(c.tokens)-256)
	}
	c.resumeWindow = 600 * time.Second
	if hs.welcome.ResumeWindowSec > 0 {
		c.resumeWindow = clampDuration(hs.welcome.ResumeWindowSec, time.Second, minResumeWindow, maxResumeWindow)
	}
	c.hbInterval = hs.heartbeat
	rt := hs.welcome.Runtime
	c.runtime.Store(&rt)
}

// heartbeatInterval reads the welcome's interval: the millisecond extension
// when present, else heartbeat_interval_sec, else the protocol's default 30 s.
func heartbeatInterval(env *arcp.Envelope, w *arcp.Welcome) time.Duration {
	// Numbers from the runtime are clamped: 1e10 seconds must not
	// overflow into a negative interval (and a ping storm).
	if raw, ok := env.Extensions[HeartbeatIntervalMSExtension]; ok {
		var ms float64
		if json.Unmarshal(raw, &ms) == nil && ms > 0 {
			return clampDuration(ms, time.Millisecond, minHeartbeat, maxHeartbeat)
		}
	}
	if w.HeartbeatIntervalSec > 0 {
		return clampDuration(w.HeartbeatIntervalSec, time.Second, minHeartbeat, maxHeartbeat)
	}
	return 30 * time.Second
}

// Bounds on the numbers a welcome may set.
const (
	minHeartbeat    = 10 * time.Millisecond
	maxHeartbeat    = time.Hour
	minResumeWindow = time.Second
	maxResumeWindow = 24 * time.Hour
)

// clampDuration returns n units clamped to [lo, hi] without overflowing.
func clampDuration(n float64, unit, lo, hi time.Duration) time.Duration {
	if n != n || n*float64(unit) >= float64(hi) {
		return hi
	}
	return max(time.Duration(n*float64(unit)), lo)
}

// Status returns a snapshot: atomic loads only, no lock, no traffic.
func (c *Conn) Status() Status {
	st := Status{
		State:        State(c.state.Load()),
		Generation:   c.gen.Load(),
		LastEventSeq: c.lastSeq.Load(),
		SessionID:    c.sessionID,
		Features:     c.features,
	}
	if rt := c.runtime.Load(); rt != nil {
		st.Runtime = *rt
	}
	return st
}

// Welcome returns the first welcome (runtime, agents, features offered).
func (c *Conn) Welcome() arcp.Welcome { return c.welcome }

// ActiveJobs returns the number of live (non-terminal) jobs.
func (c *Conn) ActiveJobs() int { return int(c.active.Load()) }

// Done is closed when the session has ended (closed or lost).
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the session ended: ErrClosed (possibly wrapped) or a
// *LostError. It is nil while the session is live.
func (c *Conn) Err() error {
	select {
	case <-c.done:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the session gracefully: it sends session.close, waits for
// session.closed or session.bye (bounded by ctx and by InitTimeout), closes
// the transport, fails every waiter with ErrClosed and waits for the
// connection's goroutines. When ctx ends first the transport is closed at
// once. Close is idempotent; only the first call reports an unclean close.
func (c *Conn) Close(ctx context.Context) error {
	return c.CloseWithReason(ctx, "")
}

// CloseWithReason is Close, with the reason sent to the runtime in
// session.close (and session.bye).
func (c *Conn) CloseWithReason(ctx context.Context, reason string) error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		if reason == "" {
			reason = "client closing"
		}
		c.mu.Lock()
		c.closeReason = reason
		c.mu.Unlock()
		c.closeCancel()
	})
	stop := context.AfterFunc(ctx, c.cancel)
	<-c.runDone
	stop()
	if !first {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeResult
}

// Detach lets go of the session without closing it upstream: the socket is
// closed, every waiter fails with ErrDetached, and the runtime keeps the
// session for its resume window, so another gateway instance can take it
// over with the latest resume token. A replica whose directory epoch moved
// detaches (it must never session.close a session another owns), and a
// draining replica detaches to hand its sessions off. Detach waits for the
// connection's goroutines. It is idempotent and a no-op after the end.
func (c *Conn) Detach() {
	c.mu.Lock()
	if !c.ended && c.fatal == nil {
		c.fatal = ErrDetached
	}
	if t := c.tr; t != nil {
		c.dropLocked(t, errDetach, false)
	}
	c.mu.Unlock()
	c.detachOnce.Do(func() { close(c.detachCh) })
	<-c.runDone
}

// SetAckLimit raises the highest event_seq the connection may acknowledge
// (with Config.AckLimited): the caller has recorded it durably.
func (c *Conn) SetAckLimit(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq > c.ackLimit {
		c.ackLimit = seq
		if c.feat.ack && c.lastSeq.Load() > c.lastAcked {
			c.ackWanted = true
			c.wakeWriter()
		}
	}
}

// ResumePoint returns the session's latest resume token and the highest
// event_seq delivered (what a takeover would present).
func (c *Conn) ResumePoint() (token string, lastSeq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.resumeToken, c.lastSeq.Load()
}

// moveTo enters state to, if the state machine allows it from the current
// state. A refused transition is a bug; it is logged and ignored.
func (c *Conn) moveTo(to State) bool {
	for {
		from := State(c.state.Load())
		if from == to {
			return true
		}
		if !canTransition(from, to) {
			c.log.Error("upstream: refused state transition", "from", from, "to", to)
			return false
		}
		if c.state.CompareAndSwap(int32(from), int32(to)) {
			return true
		}
	}
}

// mono returns the monotonic time since the connection's epoch.
func (c *Conn) mono() int64 { return int64(time.Since(c.epoch)) }

// wakeWriter makes sure a writer runs for the current transport: the
// running one takes what was queued before it exits, or a new one starts.
// There is never more than one. A writer runs only while there is something
// to send, so an idle connection holds no writer goroutine (nor its stack).
// c.mu must be held.
func (c *Conn) wakeWriter() {
	if t := c.claimWriterLocked(); t != nil {
		go func() {
			defer t.wg.Done()
			c.writeLoop(t)
		}()
	}
}

// claimWriterLocked makes the caller the writer of the current transport
// when none is running (and the transport is live): it returns the
// transport, with t.writing set and t.wg counting the caller, who must run
// writeLoop or writeInline on it. Else nil.
func (c *Conn) claimWriterLocked() *transport {
	t := c.tr
	if t == nil || t.stopped || t.writing {
		return nil
	}
	t.writing = true
	t.wg.Add(1)
	return t
}

func (c *Conn) kickSupervisor() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// busyLocked is called when the connection takes on state that housekeeping
// must look after (a request, a tombstone, a held frame): an idle
// connection's supervisor goes back to the short period.
func (c *Conn) busyLocked() {
	if c.houseIdle {
		c.houseIdle = false
		c.kickSupervisor()
	}
}

// insertTombLocked records a tombstone and counts it.
func (c *Conn) insertTombLocked(key string, ttl time.Duration, now time.Time) {
	c.busyLocked()
	if c.tombs.Insert(key, ttl, now) {
		c.ctr.TombstoneOverflow.Add(1)
	}
	c.ctr.TombstonesInserted.Add(1)
}

func errorf(format string, args ...any) error { return fmt.Errorf("upstream: "+format, args...) }
