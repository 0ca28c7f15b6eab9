package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/cluster"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
)

// ClusterConfig turns cluster mode on (Config.Cluster): the replica records
// the sessions it owns in a Redis directory, forwards calls for sessions
// owned elsewhere to their owner, takes sessions over when their owner is
// lost, and hands its sessions off when it drains. See doc.go, "Cluster".
type ClusterConfig struct {
	// Directory is opened by the caller, which also runs its lease loop
	// (Directory.Run) and stops it only after Shutdown has returned, so
	// that the sessions are released before the lease goes (required).
	Directory *directory.Directory
	// Advertise is the host:port peers use to reach this replica's gRPC
	// port; it must be what the directory publishes (required).
	Advertise string
	// Secret authenticates forwarded calls between replicas: a forwarding
	// peer asserts the caller's identity with an HMAC of it. Every replica
	// has the same secret (required, at least 16 bytes).
	Secret string

	// AckEvery is the period of the directory loop: acked seqs, tokens that
	// could not be written at once, claims that failed while Redis was down
	// (default 250 ms).
	AckEvery time.Duration
	// AckLag: the owner acks (and records) what it had received AckLag ago,
	// so a watcher lagging by less continues across a takeover with no gap
	// (default 2 s; see cluster.AckWindow).
	AckLag time.Duration
	// RefreshEvery: an idle session's record is rewritten this often
	// (default 60 s). A pass of the loop rewrites at most about twice its
	// share of the records due (refreshBudget), so that sessions opened
	// together are not all rewritten at once; none waits past twice
	// RefreshEvery, which must therefore be under half the directory's
	// SessionTTL.
	RefreshEvery time.Duration
	// SweepEvery is the period of the orphan sweep that adopts sessions
	// whose owner is gone or that were handed off (default 1 s).
	SweepEvery time.Duration
	// HandoffGrace bounds how long Shutdown lets in-flight unary calls
	// finish before it hands the sessions off (default 5 s, and never past
	// half of Shutdown's deadline).
	HandoffGrace time.Duration
	// OwnerCacheTTL is how long a replica remembers the owner of a session
	// it forwarded a call for, instead of reading the directory for every
	// call (default 2 s; negative: off). A stale entry is safe: see
	// cluster.OwnerCache.
	OwnerCacheTTL time.Duration
	// PeerDialOptions replace the default options of peer connections
	// (plaintext): give transport credentials for TLS between replicas.
	PeerDialOptions []grpc.DialOption

	tracer trace.TracerProvider // Config.TracerProvider (set by New)
	window int32                // Config.WindowBytes (set by New)
}

func (c *ClusterConfig) setDefaults() {
	def := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.AckEvery, 250*time.Millisecond)
	def(&c.AckLag, 2*time.Second)
	def(&c.RefreshEvery, 60*time.Second)
	def(&c.SweepEvery, time.Second)
	def(&c.HandoffGrace, 5*time.Second)
	def(&c.OwnerCacheTTL, 2*time.Second)
}

func (c *ClusterConfig) validate() error {
	switch {
	case c.Directory == nil:
		return errors.New("cluster: a Directory is required")
	case c.Advertise == "":
		return errors.New("cluster: Advertise (host:port of this replica for its peers) is required")
	case len(c.Secret) < 16:
		return errors.New("cluster: Secret must be at least 16 bytes (it authenticates forwarding peers)")
	case c.AckEvery < 0 || c.AckLag < 0 || c.SweepEvery < 0 || c.HandoffGrace < 0 || c.RefreshEvery < 0:
		return errors.New("cluster: durations must not be negative")
	case 2*c.RefreshEvery >= c.Directory.SessionTTL():
		// A record may wait up to twice RefreshEvery (refreshBudget).
		return fmt.Errorf("cluster: RefreshEvery %v must be under half the directory's SessionTTL %v, or an idle session's record could expire", c.RefreshEvery, c.Directory.SessionTTL())
	}
	return nil
}

// clusterState is a replica's part of the cluster: the sessions it owns in
// the directory, its peer connections, its loops.
//
// Goroutines: Serve starts one loop goroutine (acks, claims, tokens,
// sweeps); Shutdown stops it and waits before the handoff. Peer connections
// are closed by Shutdown. Every other piece of work runs on the goroutine
// of a call.
type clusterState struct {
	// Immutable after construction.
	cfg    ClusterConfig
	dir    *directory.Directory
	self   string
	secret []byte
	codec  wirecodec.Codec // of forwarded unary calls: the reply as raw bytes
	// selfHints are the owner hints of a call served here (hints(self)),
	// made once: SetHeader and SetTrailer copy what they are given.
	selfHints metadata.MD
	table     *session.Table[*upstream.Conn]
	runtimes  map[string]Runtime
	tmpl      upstream.Config
	features  []string
	retained  *budget.Budget
	log       *slog.Logger
	m         *clusterMetrics
	owners    *cluster.OwnerCache // owners of sessions held elsewhere, as last read
	sigs      signatures          // forwarding signatures, made and verified

	relays     sync.Map     // relayKey → metadata.MD (see relayHints)
	relayCount atomic.Int64 // entries stored in relays since it was last cleared

	healthy  atomic.Bool  // the last directory operation worked
	inflight atomic.Int64 // unary session calls served here
	draining atomic.Bool  // handoff begun: no takeovers, no claims

	peersMu sync.Mutex
	peers   map[string]*grpc.ClientConn // guarded by peersMu; by address

	mu      sync.Mutex
	owned   map[string]*owned          // guarded by mu; by session id
	pending map[*upstream.Conn]*owned  // guarded by mu: dialled by OpenSession, not yet claimed
	flights map[string]*takeoverFlight // guarded by mu: takeovers in progress, by session id
	stop    context.CancelFunc         // guarded by mu: ends the loop
	loop    chan struct{}              // guarded by mu: closed when the loop has returned
	ctx     context.Context            // lifetime of takeover dials; cancelled by Shutdown
	cancel  context.CancelFunc

	// Owned by the loop goroutine.
	leaseFailures uint64 // directory lease failures seen so far
	recheck       bool   // Redis was in trouble: rewrite every record (it may have lost them)
}

// owned is a session this replica owns (or is about to claim).
type owned struct {
	// Immutable once in clusterState.owned.
	id, caller, runtime string
	conn                *upstream.Conn
	adopted             bool // taken over: jobs must be adopted before they are watched

	fenced atomic.Bool // a write was refused: detach at the next tick

	mu      sync.Mutex // serialises this session's directory writes
	epoch   uint64     // guarded by mu; 0 = not claimed (yet)
	token   string     // guarded by mu; a welcome's token not yet written
	acked   uint64     // guarded by mu; the seq recorded (and allowed upstream)
	written time.Time  // guarded by mu; last successful write
	win     cluster.AckWindow
}

type takeoverFlight struct {
	done chan struct{}
	err  error
}

func newClusterState(cfg ClusterConfig, self string, table *session.Table[*upstream.Conn], runtimes map[string]Runtime,
	tmpl upstream.Config, features []string, retained *budget.Budget, log *slog.Logger, m *clusterMetrics) *clusterState {
	c := &clusterState{
		cfg: cfg, dir: cfg.Directory, self: self, secret: []byte(cfg.Secret), table: table, runtimes: runtimes,
		tmpl: tmpl, features: features, retained: retained, log: log.With("component", "cluster"), m: m,
		peers: make(map[string]*grpc.ClientConn), owned: make(map[string]*owned),
		pending: make(map[*upstream.Conn]*owned), flights: make(map[string]*takeoverFlight),
		owners: cluster.NewOwnerCache(cfg.OwnerCacheTTL, 0), codec: wirecodec.NewCodec(),
	}
	c.selfHints = c.hints(self, "")
	c.healthy.Store(true)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c
}

// observe notes whether the directory answered.
func (c *clusterState) observe(err error) {
	if errors.Is(err, directory.ErrUnavailable) {
		if c.healthy.Swap(false) {
			c.log.Warn("directory unavailable: local sessions keep working; calls for sessions held elsewhere get UNAVAILABLE", "err", err)
		}
		return
	}
	if !c.healthy.Swap(true) {
		c.log.Info("directory available again")
	}
}

// prepare fills in an OpenSession's upstream config: acks limited by what
// the directory holds, the token written after every welcome.
func (c *clusterState) prepare(uc *upstream.Config) *owned {
	o := &owned{}
	o.win.Lag = c.cfg.AckLag
	uc.AckLimited = true
	uc.OnWelcome = func(_, token string) { c.onWelcome(o, token) }
	return o
}

// dialled links a new connection to its owned record until the session id
// is known (see claimOpened).
func (c *clusterState) dialled(conn *upstream.Conn, o *owned, caller, runtime string) {
	o.conn, o.caller, o.runtime = conn, caller, runtime
	c.mu.Lock()
	c.pending[conn] = o
	c.mu.Unlock()
}

// claimOpened records a session OpenSession has just registered: it claims
// it in the directory at once when Redis is healthy, else the loop claims it
// when Redis is back (the session works locally meanwhile).
func (c *clusterState) claimOpened(id, caller string) {
	sess, ok := c.table.Get(id, caller)
	if !ok {
		return
	}
	c.mu.Lock()
	o := c.pending[sess.Conn]
	delete(c.pending, sess.Conn)
	if o != nil {
		o.id = id
		c.owned[id] = o
	}
	c.mu.Unlock()
	if o == nil || !c.healthy.Load() {
		return
	}
	o.mu.Lock()
	c.claimLocked(o)
	o.mu.Unlock()
}

// prunePending drops the records of dials whose connection ended before
// its session made it into the table (OpenSession refused after the dial,
// its caller gone): without this each such dial's record, and its Conn,
// would be kept for the replica's life.
func (c *clusterState) prunePending() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.pending {
		select {
		case <-conn.Done():
			delete(c.pending, conn)
		default:
		}
	}
}

func (c *clusterState) claimLocked(o *owned) {
	if o.epoch != 0 || c.draining.Load() {
		return
	}
	tok, _ := o.conn.ResumePoint()
	epoch, err := c.dir.Claim(c.ctx, directory.Session{
		ID: o.id, Caller: o.caller, Runtime: o.runtime, UpstreamSessionID: o.conn.Status().SessionID,
		ResumeToken: tok, AckedSeq: o.acked,
	})
	c.observe(err)
	switch {
	case err == nil:
		o.epoch, o.token, o.written = epoch, "", time.Now()
	case errors.Is(err, directory.ErrExists):
		// The record is somebody else's (it was taken over while Redis
		// had lost it and we re-claim): drop the session.
		o.fenced.Store(true)
	default:
		c.m.dirErrors.WithLabelValues("claim").Inc()
	}
}

// onWelcome writes a welcome's new resume token before the transport is
// served (it runs on the connection's supervisor).
func (c *clusterState) onWelcome(o *owned, token string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch == 0 {
		return // not claimed yet: the claim reads the latest token
	}
	o.token = token
	c.writeTokenLocked(o)
}

func (c *clusterState) writeTokenLocked(o *owned) {
	err := c.dir.Update(c.ctx, o.id, o.epoch, directory.Change{ResumeToken: o.token})
	c.observe(err)
	c.afterWriteLocked(o, err)
	if err == nil {
		o.token = ""
	}
}

// afterWriteLocked reacts to a refused or failed write.
func (c *clusterState) afterWriteLocked(o *owned, err error) {
	switch {
	case err == nil:
		o.written = time.Now()
	case errors.Is(err, directory.ErrFenced):
		o.fenced.Store(true)
	case errors.Is(err, directory.ErrNotFound):
		// Redis lost the record (a restart without persistence): claim
		// it again at the next tick.
		o.epoch = 0
	default:
		c.m.dirErrors.WithLabelValues("update").Inc()
	}
}

// start starts the loop; Serve calls it.
func (c *clusterState) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loop != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.stop, c.loop = cancel, make(chan struct{})
	go func() {
		defer close(c.loop)
		c.run(ctx)
	}()
}

// stopLoop ends the loop and waits for it.
func (c *clusterState) stopLoop() {
	c.mu.Lock()
	stop, loop := c.stop, c.loop
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-loop
	}
}

// run is the replica's directory loop: every AckEvery the owned sessions'
// acked seqs, tokens and claims; every SweepEvery the orphan sweep.
func (c *clusterState) run(ctx context.Context) {
	tick := time.NewTicker(c.cfg.AckEvery)
	defer tick.Stop()
	sweep := time.NewTicker(c.cfg.SweepEvery)
	defer sweep.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.tick()
		case <-sweep.C:
			c.sweep(ctx)
		}
	}
}

func (c *clusterState) snapshot() []*owned {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*owned, 0, len(c.owned))
	for _, o := range c.owned {
		out = append(out, o)
	}
	return out
}

func (c *clusterState) remove(o *owned) {
	c.mu.Lock()
	if c.owned[o.id] == o {
		delete(c.owned, o.id)
	}
	c.mu.Unlock()
}

// tick brings the directory up to date for every owned session.
func (c *clusterState) tick() {
	now := time.Now()
	c.prunePending()
	if lf := c.dir.Counters().LeaseFailures.Load(); lf != c.leaseFailures {
		// Redis was unreachable: when it is back it may have restarted
		// empty, so every record is rewritten (ErrNotFound → claim again).
		c.leaseFailures, c.recheck = lf, true
	}
	force, rechecked := c.recheck, true
	owned := c.snapshot()
	due := refreshBudget(len(owned), c.cfg.AckEvery, c.cfg.RefreshEvery)
	for _, o := range owned {
		select {
		case <-o.conn.Done():
			c.ended(o)
			continue
		default:
		}
		if o.fenced.Load() {
			c.fence(o)
			continue
		}
		o.mu.Lock()
		c.claimLocked(o)
		if o.epoch != 0 && o.token != "" {
			c.writeTokenLocked(o)
		}
		if o.epoch != 0 {
			o.win.Observe(now, o.conn.Status().LastEventSeq)
			target := o.win.Target(now)
			write := target > o.acked || force
			if age := now.Sub(o.written); !write && age >= c.cfg.RefreshEvery {
				// Due only by age: within this pass's share, or
				// unconditionally once twice overdue.
				switch {
				case due > 0:
					due, write = due-1, true
				case age >= 2*c.cfg.RefreshEvery:
					write = true
				}
			}
			if write {
				err := c.dir.Update(c.ctx, o.id, o.epoch, directory.Change{AckedSeq: target})
				c.observe(err)
				c.afterWriteLocked(o, err)
				if errors.Is(err, directory.ErrUnavailable) {
					rechecked = false
				}
				if err == nil && target > o.acked {
					o.acked = target
					// Recorded: the runtime may discard up to here.
					o.conn.SetAckLimit(target)
				}
			}
		}
		o.mu.Unlock()
		if o.fenced.Load() {
			c.fence(o)
		}
	}
	if force && rechecked {
		c.recheck = false
	}
	c.mu.Lock()
	c.m.owned.Set(float64(len(c.owned)))
	c.mu.Unlock()
}

// refreshBudget is how many records a pass of the directory loop over n
// owned sessions rewrites only because RefreshEvery has passed since their
// last write: twice its share (n × AckEvery ÷ RefreshEvery, rounded up),
// plus one. Sessions opened together fall due together; written all in
// one pass, each a round trip to Redis (70 - 90 µs, BenchmarkClusterTick),
// 19,000 of them held the loop, and every session's acks and claims behind
// it, for over a second every RefreshEvery. Within the budget they spread
// over half a RefreshEvery and stay spread; a record twice overdue is
// rewritten whatever the budget, so none waits past 2 × RefreshEvery
// (120 s by default, against the directory's 600 s SessionTTL).
func refreshBudget(n int, pass, refresh time.Duration) int {
	if refresh <= 0 || pass <= 0 {
		return n
	}
	share := float64(n) * float64(pass) / float64(refresh)
	if share >= float64(n) {
		return n
	}
	return 2*int(math.Ceil(share)) + 1
}

// ended handles a session whose upstream ended here: closed (CloseSession,
// idle) or lost, its record goes; detached (fenced or handed off), the
// record is somebody else's.
func (c *clusterState) ended(o *owned) {
	c.remove(o)
	if errors.Is(o.conn.Err(), upstream.ErrDetached) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.epoch != 0 {
		err := c.dir.Delete(c.ctx, o.id, o.epoch)
		c.observe(err)
		o.epoch = 0
	}
}

// fence drops a session whose directory epoch moved: another replica owns
// it now. Silently: never session.close a session somebody else holds.
func (c *clusterState) fence(o *owned) {
	c.remove(o)
	o.conn.Detach()
	c.m.fenced.Inc()
	c.log.Info("session fenced: another replica took it over; detached", "session_id", o.id)
}

// closedByCaller deletes the record of a session CloseSession closed here.
func (c *clusterState) closedByCaller(id string) {
	c.mu.Lock()
	o := c.owned[id]
	c.mu.Unlock()
	if o != nil {
		c.ended(o)
	}
}

// sweep adopts orphans: sessions released by a draining replica, or whose
// owner's lease is gone, well inside the runtime's resume window.
func (c *clusterState) sweep(ctx context.Context) {
	if c.draining.Load() {
		return
	}
	orphans, err := c.dir.Orphans(ctx, 64)
	c.observe(err)
	if err != nil {
		c.m.dirErrors.WithLabelValues("orphans").Inc()
		return
	}
	for _, o := range orphans {
		if ctx.Err() != nil {
			return
		}
		if _, _, err := c.takeOver(o.SessionID, "sweep"); err != nil && !errors.Is(err, directory.ErrOwned) {
			c.log.Debug("sweep: takeover failed", "session_id", o.SessionID, "err", err)
		}
	}
}

// takeOver claims a session by epoch and resumes its upstream session here.
// Concurrent takeovers of one session in this replica share one attempt.
// It returns the session's caller and owner address when the session turned
// out to be owned by a live replica (an *directory.OwnedError).
func (c *clusterState) takeOver(id, reason string) (caller string, o *owned, err error) {
	c.mu.Lock()
	if cur := c.owned[id]; cur != nil {
		if sess, ok := c.table.Get(id, cur.caller); ok && !sess.Lost() {
			c.mu.Unlock()
			return cur.caller, cur, nil
		}
	}
	if f := c.flights[id]; f != nil {
		c.mu.Unlock()
		<-f.done
		return "", nil, f.err
	}
	f := &takeoverFlight{done: make(chan struct{})}
	c.flights[id] = f
	c.mu.Unlock()
	defer func() {
		f.err = err
		c.mu.Lock()
		delete(c.flights, id)
		c.mu.Unlock()
		close(f.done)
		result := "ok"
		switch {
		case errors.Is(err, directory.ErrOwned):
			result = "owned"
		case errors.Is(err, directory.ErrNotFound):
			result = "not_found"
		case err != nil:
			result = "error"
		}
		c.m.takeovers.WithLabelValues(reason, result).Inc()
	}()
	if c.draining.Load() {
		return "", nil, session.ErrDraining
	}
	start := time.Now()
	rec, err := c.dir.Takeover(c.ctx, id)
	c.observe(err)
	var keyErr *directory.KeyError
	switch {
	case errors.As(err, &keyErr):
		// Ours now, but the token cannot be read: the session is lost.
		_ = c.dir.Delete(c.ctx, id, rec.Epoch)
		return "", nil, &session.LostError{Err: err}
	case err != nil:
		return "", nil, err
	}
	rt, ok := c.runtimes[rec.Runtime]
	if !ok {
		_ = c.dir.Release(c.ctx, id, rec.Epoch)
		return "", nil, fmt.Errorf("cluster: session %s is on runtime %q, which this replica does not configure", id, rec.Runtime)
	}
	o = &owned{id: id, caller: rec.Caller, runtime: rec.Runtime, adopted: true, epoch: rec.Epoch, acked: rec.AckedSeq, written: time.Now()}
	o.win.Lag = c.cfg.AckLag
	uc := c.upstreamConfig(rt, rec.Caller)
	uc.Resume = &upstream.ResumeFrom{SessionID: rec.UpstreamSessionID, ResumeToken: rec.ResumeToken, LastEventSeq: rec.AckedSeq}
	uc.AckLimited = true
	uc.OnWelcome = func(_, token string) { c.onWelcome(o, token) }
	conn, err := upstream.Dial(c.ctx, uc)
	if err != nil {
		var ae *arcp.Error
		if errors.As(err, &ae) {
			// The runtime refused the resume (token used, window
			// expired): the session is lost, with a definite error.
			_ = c.dir.Delete(c.ctx, id, rec.Epoch)
			c.log.Warn("takeover: the runtime refused the resume; session lost", "session_id", id, "err", err)
			return "", nil, &session.LostError{Err: err}
		}
		_ = c.dir.Release(c.ctx, id, rec.Epoch)
		return "", nil, fmt.Errorf("cluster: resume session %s upstream: %w", id, err)
	}
	o.conn = conn
	if _, err := c.table.Adopt(id, rec.Caller, rec.Runtime, conn); err != nil {
		conn.Detach()
		_ = c.dir.Release(c.ctx, id, rec.Epoch)
		return "", nil, err
	}
	c.mu.Lock()
	c.owned[id] = o
	c.mu.Unlock()
	c.log.Info("session taken over", "session_id", id, "previous_owner", rec.PreviousOwner, "epoch", rec.Epoch,
		"reason", reason, "from_seq", rec.AckedSeq, "took", time.Since(start))
	return rec.Caller, o, nil
}

// upstreamConfig is the gateway's upstream template for a session of
// caller on rt (as OpenSession's dial builds it).
func (c *clusterState) upstreamConfig(rt Runtime, caller string) upstream.Config {
	uc := c.tmpl
	uc.URL = rt.URL
	uc.Counters = rt.Counters
	uc.Traits = rt.traits
	uc.Client = arcp.ClientInfo{Name: "sessiongate", Version: "1"}
	uc.Features = c.features
	uc.RetainedBytes = c.retained.Account(caller) // results and events held in memory are reserved there
	uc.KeyNamespace = caller
	return uc
}

// adoptedSession returns the owned record of a taken-over session.
func (c *clusterState) adoptedSession(id string) *owned {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.owned[id]; o != nil && o.adopted {
		return o
	}
	return nil
}

// handoff is the cluster part of Shutdown: stop the loop and takeovers,
// let in-flight unary calls finish (bounded), then detach every owned
// session and release it in the directory, so that another replica resumes
// it at once. Sessions never claimed (Redis was down) are left to the
// table's Drain, which closes them.
func (c *clusterState) handoff(ctx context.Context) {
	c.draining.Store(true)
	c.stopLoop()
	grace := c.cfg.HandoffGrace
	if dl, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(dl)/2)
	}
	wait, cancel := context.WithTimeout(ctx, grace)
	poll := time.NewTicker(10 * time.Millisecond)
	for c.inflight.Load() > 0 && wait.Err() == nil {
		select {
		case <-wait.Done():
		case <-poll.C:
		}
	}
	poll.Stop()
	cancel()
	var wg sync.WaitGroup
	for _, o := range c.snapshot() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.mu.Lock()
			defer o.mu.Unlock()
			if o.epoch == 0 {
				return
			}
			o.conn.Detach()
			err := c.dir.Release(ctx, o.id, o.epoch)
			c.observe(err)
			if err != nil {
				c.m.handoffs.WithLabelValues("error").Inc()
				c.log.Warn("handoff: release failed; the session is adopted once this replica's lease expires", "session_id", o.id, "err", err)
				return
			}
			c.m.handoffs.WithLabelValues("released").Inc()
			c.remove(o)
		}()
	}
	wg.Wait()
}

// close ends takeover dials and closes the peer connections.
func (c *clusterState) close() {
	c.stopLoop()
	c.cancel()
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for addr, cc := range c.peers {
		_ = cc.Close()
		delete(c.peers, addr)
	}
}

// peer returns the connection to a peer replica.
func (c *clusterState) peer(addr string) (*grpc.ClientConn, error) {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	if cc := c.peers[addr]; cc != nil {
		return cc, nil
	}
	opts := slices.Clone(c.cfg.PeerDialOptions)
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		// A restarted peer is back within a second: do not let grpc-go's
		// backoff (up to two minutes) fail calls for it meanwhile.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: 2 * time.Second,
		}))
	opts = append(opts, peerWindowOptions(c.cfg.window)...)
	if tp := c.cfg.tracer; tp != nil {
		// A forwarded call continues the forwarder's trace: a client span
		// here, its traceparent the parent of the owner's server span.
		opts = append(opts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(tp), otelgrpc.WithPropagators(propagation.TraceContext{}))))
	}
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	c.peers[addr] = cc
	return cc, nil
}
