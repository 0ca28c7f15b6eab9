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
	"github.com/sessiongate/sessiongate/gateway/peerauth/peertls"
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
	// peer asserts the caller's identity with a one-time proof keyed by it
	// (gateway/peerauth). Every replica has the same secret (required, at
	// least 16 bytes).
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
	// whose owner is gone or that were handed off (default 250 ms; a
	// sweep costs two read scripts, O(replicas), plus O(orphans)).
	SweepEvery time.Duration
	// HandoffGrace bounds how long Shutdown lets in-flight unary calls
	// finish before it hands the sessions off (default 5 s, and never past
	// half of Shutdown's deadline).
	HandoffGrace time.Duration
	// RebalancePerSecond bounds how many idle sessions a replica hands
	// off per second to the replica that the rendezvous hash prefers
	// (default 50; negative: never). RebalanceMinStay: a session is not
	// moved within this time of arriving (default 5 s).
	RebalancePerSecond float64
	RebalanceMinStay   time.Duration
	// OwnerCacheTTL is how long a replica remembers the owner of a session
	// it forwarded a call for, instead of reading the directory for every
	// call (default 2 s; negative: off). A stale entry is safe: see
	// cluster.OwnerCache.
	OwnerCacheTTL time.Duration
	// LameDuck is how long a draining replica goes on serving after it has
	// handed its sessions off: health NOT_SERVING, it accepts calls and
	// forwards them to the replicas that adopted the sessions, while
	// peers' owner caches (OwnerCacheTTL) and balancers' health checks
	// move away from it; then streams it relays are cut (UNAVAILABLE
	// DRAINING with the cursor to resume from), and gRPC stops gracefully
	// (GOAWAY) and closes its listener. Default 3 s; negative: none.
	LameDuck time.Duration
	// OwnerWait bounds how long a call whose owner did not answer (or is
	// not yet judged gone) waits, within its deadline, for the directory
	// to name a live owner before it is answered UNAVAILABLE (retryable).
	// It must stay under the read timeout of a balancer in front (the
	// nginx recipe's grpc_read_timeout is 1.5 s), or the balancer counts
	// the waiting replica as failed and ejects it: with a 2 × LeaseTTL
	// wait, gateway-chaos -short failed 58 calls through nginx in the kill
	// scenario, with 1 s none (the client's retries cover the rest of the
	// lease). Default 1 s; negative: no wait.
	OwnerWait time.Duration

	// routeHook, when set (tests only), decides each routing of a call
	// instead of route, which it is given: a test scripts outcomes.
	routeHook func(route routeFunc, ctx context.Context, id string, cached, write bool) (cluster.Action, string, string, error)

	// PeerFirstByte bounds how long a forward waits for the owner's
	// response header (sent before the owner runs the handler): past it
	// the forward is abandoned and the call routed again, so that a frozen
	// or silent owner holds a call about this long, not to its deadline.
	// It also bounds a peer connection's handshake (default 1 s; negative:
	// no bound on the header, 20 s on the handshake).
	PeerFirstByte time.Duration
	// PeerKeepalive: while forwards that the owner has taken (its header
	// came) are in flight to a peer, a watchdog calls the peer's
	// grpc.health.v1 Check this often, each bounded by as long; a peer
	// that does not answer (frozen) has its connection closed, and the
	// forwards on it end with UNAVAILABLE OWNER_UNREACHABLE (default 1 s;
	// negative: off). grpc-go's own keepalive cannot ping more often than
	// every 10 s.
	PeerKeepalive time.Duration
	// PeerDialOptions replace the default options of peer connections
	// (plaintext, or PeerTLS): give transport credentials for TLS between
	// replicas.
	PeerDialOptions []grpc.DialOption
	// PeerTLS turns on mutual TLS between replicas (gateway/peerauth/
	// peertls): peers are dialled over TLS with this replica's certificate,
	// the gRPC port accepts TLS beside plaintext, and forwarded calls are
	// accepted only over TLS with a client certificate of the cluster's CA.
	PeerTLS *peertls.TLS

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
	def(&c.SweepEvery, 250*time.Millisecond)
	def(&c.HandoffGrace, 5*time.Second)
	def(&c.OwnerCacheTTL, 2*time.Second)
	def(&c.RebalanceMinStay, 5*time.Second)
	def(&c.PeerFirstByte, time.Second)
	def(&c.LameDuck, 3*time.Second)
	def(&c.OwnerWait, time.Second)
	def(&c.PeerKeepalive, time.Second)
	if c.RebalancePerSecond == 0 {
		c.RebalancePerSecond = 50
	}
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
	silent    silentPeers         // peers a forward got no first byte from (cluster_forward.go)
	proofs    *peerProofs         // forwarding proofs, made and verified (set by New)

	relays     sync.Map     // relayKey → metadata.MD (see relayHints)
	relayCount atomic.Int64 // entries stored in relays since it was last cleared

	healthy  atomic.Bool  // the last directory operation worked
	inflight atomic.Int64 // unary session calls served here
	draining atomic.Bool  // handoff begun: no takeovers, no claims
	// handingOff: the hand-off detaches the sessions now; unary calls on
	// them are routed again instead of served (see clusterUnary).
	handingOff atomic.Bool
	// moving: session ids the rebalancer is about to detach (see
	// movingSession).
	moving sync.Map

	peersMu   sync.Mutex
	peers     map[string]*grpc.ClientConn // guarded by peersMu; by address
	watchdogs map[string]*watchdog        // guarded by peersMu; by address
	dogs      sync.WaitGroup              // watchdog goroutines; waited for by close

	mu      sync.Mutex
	owned   map[string]*owned          // guarded by mu; by session id
	pending map[*upstream.Conn]*owned  // guarded by mu: dialled by OpenSession, not yet claimed
	flights map[string]*takeoverFlight // guarded by mu: takeovers in progress, by session id
	// resuming: sessions a sweep has claimed in the directory (TakeoverMany)
	// and not yet resumed upstream, by session id; resumed in the
	// background, bounded (resumeSem), or at once by a call that needs
	// one (it jumps the queue).
	resuming map[string]*pendingResume // guarded by mu
	// claimedNow: sessions a call's takeover has claimed and is resuming
	// (held, like resuming's), by session id.
	claimedNow map[string]*owned // guarded by mu
	resumeSem  chan struct{}
	resumeWG   sync.WaitGroup     // background resume goroutines
	resumed    resumeSum          // guarded by mu: resumes since the queue was last empty
	stop       context.CancelFunc // guarded by mu: ends the loop
	loop       chan struct{}      // guarded by mu: closed when the loop has returned
	ctx        context.Context    // lifetime of takeover dials; cancelled by Shutdown
	cancel     context.CancelFunc

	// relaysEnd is cancelled when the lame duck ends: streams this
	// replica relays to other owners are cut then (see lameDuck).
	relaysEnd context.Context
	endRelays context.CancelFunc

	// The ownership core (cluster.Ownership): every ownership decision —
	// lease, grace, lapse, flush restore, takeover, resume hold — is its.
	coreMu sync.Mutex
	core   *cluster.Ownership // guarded by coreMu

	leaseFailures uint64    // guarded by coreMu: directory lease failures fed to the core
	leaseUntil    time.Time // guarded by coreMu: LeaseValidUntil last fed to the core

	// Owned by the loop goroutine.
	statsSeen       cluster.Stats        // core stats already exported
	selfSweeps      int                  // sweeps that looked up this instance's own index
	orphanSeen      map[string]time.Time // orphans of the last sweep, by session id: when first seen
	rebalanceCredit float64              // hand-offs the rebalancer may make now
	walked          time.Time            // last keyspace walk (Orphans)
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
	since   time.Time  // immutable once in clusterState.owned: when this replica got it
	win     cluster.AckWindow
	// from is, while the session is claimed by a takeover and not yet
	// resumed (conn nil, guarded by mu), what the directory recorded of
	// it, with the latest token a welcome gave: what a restore writes
	// back after a flush.
	from *directory.Session
}

type takeoverFlight struct {
	done chan struct{}
	err  error
}

// pendingResume is a session claimed by a sweep's batch (the directory
// names this replica at rec.Epoch) whose upstream session is not resumed
// yet. Whoever starts it first — a background worker or a call for the
// session — resumes it; the others wait for done.
type pendingResume struct {
	rec     directory.Record
	why     cluster.TakeReason
	claimed time.Time
	o       *owned // the session as held: no conn until resumed (the core: held)

	mu      sync.Mutex
	started bool // guarded by mu
	done    chan struct{}
	caller  string // set before done is closed
	res     *owned // the resumed session, set before done is closed
	err     error
}

// resumeSum sums the resumes of claimed sessions between two moments the
// queue was empty (logged then).
type resumeSum struct {
	n, failed int
	first     time.Time // earliest claim
}

// errLookAgain: a flight ended with the session claimed by a sweep's batch:
// look it up again (it is resuming now).
var errLookAgain = errors.New("cluster: claimed by a sweep; look again")

func newClusterState(cfg ClusterConfig, self string, table *session.Table[*upstream.Conn], runtimes map[string]Runtime,
	tmpl upstream.Config, features []string, retained *budget.Budget, log *slog.Logger, m *clusterMetrics) *clusterState {
	c := &clusterState{
		cfg: cfg, dir: cfg.Directory, self: self, secret: []byte(cfg.Secret), table: table, runtimes: runtimes,
		tmpl: tmpl, features: features, retained: retained, log: log.With("component", "cluster"), m: m,
		peers: make(map[string]*grpc.ClientConn), watchdogs: make(map[string]*watchdog), owned: make(map[string]*owned),
		pending: make(map[*upstream.Conn]*owned), flights: make(map[string]*takeoverFlight),
		resuming: make(map[string]*pendingResume), resumeSem: make(chan struct{}, resumeParallel), claimedNow: make(map[string]*owned),
		owners: cluster.NewOwnerCache(cfg.OwnerCacheTTL, 0), codec: wirecodec.NewCodec(),
	}
	c.selfHints = c.hints(self, "")
	c.core = cluster.NewOwnership(cluster.OwnershipConfig{Self: self, LeaseTTL: cfg.Directory.LeaseTTL()})
	// The directory's marker as Open read it: any other one later is a
	// flush, even one that happens before the loop's first tick.
	c.core.MarkerSeen(time.Now(), cfg.Directory.LastMarker())
	c.healthy.Store(true)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.relaysEnd, c.endRelays = context.WithCancel(context.Background())
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
	uc.ResumeGate = func() bool { return c.mayResume(o) }
	return o
}

// withCore runs f with the ownership core, once the core knows what the
// lease loop did last.
func (c *clusterState) withCore(f func(*cluster.Ownership)) {
	c.coreMu.Lock()
	defer c.coreMu.Unlock()
	c.feedLeaseLocked(time.Now())
	f(c.core)
}

// mayResume is the upstream connection's resume gate (cluster.Ownership
// MayResume): no resume while the directory lacks the token or the epoch
// is unconfirmed.
func (c *clusterState) mayResume(o *owned) bool {
	if o.id == "" {
		return true // not registered yet: nobody else knows the session
	}
	var ok bool
	c.withCore(func(core *cluster.Ownership) { ok = core.MayResume(o.id, time.Now()) })
	return ok
}

// mayServe says whether a write for session id may be served here now.
func (c *clusterState) mayServe(id string) bool {
	var ok bool
	c.withCore(func(core *cluster.Ownership) { ok = !core.Owned(id) || core.MayServe(id, time.Now()) })
	return ok
}

// result maps a directory write's error for the core.
func result(err error) cluster.Result {
	switch {
	case err == nil:
		return cluster.OK
	case errors.Is(err, directory.ErrFenced), errors.Is(err, directory.ErrExists):
		return cluster.Fenced
	case errors.Is(err, directory.ErrNotFound):
		return cluster.Missing
	}
	return cluster.Unreachable
}

// wrote feeds a write's result to the core; it fences the session when the
// core says it is no longer this replica's.
func (c *clusterState) wrote(o *owned, w cluster.Work, err error, epoch uint64) {
	var detach bool
	c.withCore(func(core *cluster.Ownership) { detach = core.Wrote(o.id, w, result(err), epoch) })
	if detach {
		o.fenced.Store(true)
	}
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
		o.id, o.since = id, time.Now()
		c.owned[id] = o
	}
	c.mu.Unlock()
	if o == nil {
		return
	}
	c.withCore(func(core *cluster.Ownership) { core.Opened(id) })
	if !c.healthy.Load() {
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
	var w cluster.Work
	c.withCore(func(core *cluster.Ownership) { w = core.ClaimWork(o.id) })
	s := o.sessionLocked()
	epoch, err := c.dir.Claim(c.ctx, s)
	if errors.Is(err, directory.ErrExists) {
		// A claim whose reply was lost, made again? Then the record is
		// ours: write the current token into it.
		if rec, gerr := c.dir.Get(c.ctx, o.id); gerr == nil && rec.Owner == c.self {
			epoch = rec.Epoch
			err = c.dir.Update(c.ctx, o.id, epoch, directory.Change{ResumeToken: s.ResumeToken, AckedSeq: o.acked})
		}
	}
	c.observe(err)
	c.wrote(o, w, err, epoch)
	switch {
	case err == nil:
		o.epoch, o.token, o.written = epoch, "", time.Now()
	case errors.Is(err, directory.ErrExists), errors.Is(err, directory.ErrFenced):
		// The record is somebody else's: drop the session.
		o.fenced.Store(true)
	default:
		c.m.dirErrors.WithLabelValues("claim").Inc()
	}
}

// sessionLocked is what the directory records of the session now.
func (o *owned) sessionLocked() directory.Session {
	if o.conn == nil {
		return *o.from // claimed, not yet resumed
	}
	tok, _ := o.conn.ResumePoint()
	return directory.Session{
		ID: o.id, Caller: o.caller, Runtime: o.runtime, UpstreamSessionID: o.conn.Status().SessionID,
		ResumeToken: tok, AckedSeq: o.acked,
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
	c.withCore(func(core *cluster.Ownership) { core.Welcome(o.id) })
	o.token = token
	if o.conn == nil && o.from != nil {
		// The resume of a claimed session: the runtime spent the
		// stored token; a restore writes this one.
		o.from.ResumeToken = token
	}
	c.writeTokenLocked(o)
}

func (c *clusterState) writeTokenLocked(o *owned) {
	var w cluster.Work
	c.withCore(func(core *cluster.Ownership) { w = core.TokenWork(o.id) })
	err := c.dir.Update(c.ctx, o.id, o.epoch, directory.Change{ResumeToken: o.token})
	c.observe(err)
	c.wrote(o, w, err, 0)
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
		// Redis lost the record: the core restores it once the
		// directory's marker shows a flush, else detaches it.
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
// acked seqs, tokens and claims; every SweepEvery the orphan sweep, and
// one more the moment a peer seen live would be judged gone if it has not
// refreshed its lease (cluster.Ownership.NextJudgement), so that a dead
// replica's sessions are claimed as soon as the rules allow, not up to a
// SweepEvery later.
func (c *clusterState) run(ctx context.Context) {
	tick := time.NewTicker(c.cfg.AckEvery)
	defer tick.Stop()
	sweep := time.NewTicker(c.cfg.SweepEvery)
	defer sweep.Stop()
	judge := time.NewTimer(time.Hour)
	defer judge.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.tick()
			continue
		case <-sweep.C:
		case <-judge.C:
		}
		c.sweep(ctx)
		var next time.Time
		c.withCore(func(core *cluster.Ownership) { next = core.NextJudgement() })
		wait := time.Hour
		if d := time.Until(next); !next.IsZero() && d > 0 {
			// A few ms late: the lease's expiry in Redis, measured
			// from a reply that took a moment to arrive. (A moment
			// already past means this sweep did not read the
			// leases: the periodic sweep is next.)
			wait = d + judgeLate
		}
		judge.Reset(wait)
	}
}

// judgeLate is how long after NextJudgement the judging sweep runs.
const judgeLate = 3 * time.Millisecond

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
	mine := c.owned[o.id] == o
	if mine {
		delete(c.owned, o.id)
	}
	c.mu.Unlock()
	if mine {
		c.withCore(func(core *cluster.Ownership) { core.Gone(o.id) })
	}
}

// tick brings the directory up to date for every owned session: it feeds
// the core the lease's and the marker's news, carries out the writes the
// core says are due (claims, restores, tokens, confirmations), then the
// acked seqs and refreshes by age.
func (c *clusterState) tick() {
	now := time.Now()
	c.prunePending()
	m, merr := c.dir.Marker(c.ctx)
	c.observe(merr)
	var work []cluster.Work
	var detach []string
	c.withCore(func(core *cluster.Ownership) {
		if merr != nil {
			core.DirectoryFailed(now)
			return
		}
		core.MarkerSeen(now, m)
		work, detach = core.Due(now)
	})
	c.mu.Lock()
	byID := func(id string) *owned { return c.owned[id] }
	var gone []*owned
	for _, id := range detach {
		if o := byID(id); o != nil {
			gone = append(gone, o)
		}
	}
	c.mu.Unlock()
	for _, o := range gone {
		c.log.Warn("session detached: its directory record vanished and no flush explains it", "session_id", o.id)
		c.fence(o)
	}
	c.doWork(work)
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
		if o.epoch != 0 && c.mayServe(o.id) {
			o.win.Observe(now, o.conn.Status().LastEventSeq)
			target := o.win.Target(now)
			write := target > o.acked
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
				var w cluster.Work
				c.withCore(func(core *cluster.Ownership) { w = core.ConfirmWork(o.id) })
				err := c.dir.Update(c.ctx, o.id, o.epoch, directory.Change{AckedSeq: target})
				c.observe(err)
				c.wrote(o, w, err, 0)
				c.afterWriteLocked(o, err)
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
	c.mu.Lock()
	c.m.owned.Set(float64(len(c.owned)))
	c.mu.Unlock()
	c.exportStats()
}

// feedLeaseLocked tells the core what the directory's lease loop did
// since it last looked: refreshed (LeaseValidUntil moved) or failed.
func (c *clusterState) feedLeaseLocked(now time.Time) {
	until := c.dir.LeaseValidUntil()
	lf := c.dir.Counters().LeaseFailures.Load()
	if lf != c.leaseFailures {
		c.leaseFailures = lf
		c.core.LeaseFailed(now)
	}
	if !until.IsZero() && !until.Equal(c.leaseUntil) {
		c.leaseUntil = until
		c.core.LeaseRefreshed(until.Add(-c.dir.LeaseTTL()), now, "")
	}
}

// doWork carries out the core's due writes; bounded parallelism, so that
// a flush's restore of thousands of records takes a few round trips' time.
func (c *clusterState) doWork(work []cluster.Work) {
	if len(work) == 0 {
		return
	}
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for _, w := range work {
		c.mu.Lock()
		o := c.owned[w.ID]
		if p := c.resuming[w.ID]; o == nil && p != nil {
			o = p.o // claimed, its resume queued: held all the same
		}
		if o == nil {
			o = c.claimedNow[w.ID]
		}
		c.mu.Unlock()
		if o == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			o.mu.Lock()
			defer o.mu.Unlock()
			switch w.Kind {
			case cluster.Claim:
				c.claimLocked(o)
			case cluster.WriteToken:
				if o.token == "" && o.conn != nil {
					o.token, _ = o.conn.ResumePoint()
				}
				if o.token != "" {
					c.writeTokenLocked(o)
				}
			case cluster.Confirm:
				err := c.dir.Update(c.ctx, o.id, w.Epoch, directory.Change{})
				c.observe(err)
				c.wrote(o, w, err, 0)
				c.afterWriteLocked(o, err)
			case cluster.Restore:
				err := c.restoreLocked(c.ctx, o, w)
				c.observe(err)
				c.wrote(o, w, err, 0)
				c.afterWriteLocked(o, err)
			}
		}()
	}
	wg.Wait()
}

// restoreLocked re-creates o's record as the core's Restore w says.
func (c *clusterState) restoreLocked(ctx context.Context, o *owned, w cluster.Work) error {
	if w.IfAbsent {
		return c.dir.RestoreIfAbsent(ctx, o.sessionLocked(), w.Epoch)
	}
	return c.dir.Restore(ctx, o.sessionLocked(), w.Epoch)
}

// exportStats adds the core's decisions since the last tick to the
// metrics.
func (c *clusterState) exportStats() {
	var st cluster.Stats
	c.withCore(func(core *cluster.Ownership) { st = core.Stats() })
	old := c.statsSeen
	c.statsSeen = st
	add := func(name string, now, before uint64) {
		if now > before {
			c.m.decisions.WithLabelValues(name).Add(float64(now - before))
		}
	}
	add("lease_lapse", st.Lapses, old.Lapses)
	add("outage", st.Outages, old.Outages)
	add("grace_wait", st.GraceWaits, old.GraceWaits)
	add("flush_detected", st.Flushes, old.Flushes)
	add("takeover_not_yet", st.NotYet, old.NotYet)
	add("fenced", st.Fenced, old.Fenced)
	add("vanished", st.Vanished, old.Vanished)
	add("confirm", st.Confirms, old.Confirms)
	add("restore", st.Restores, old.Restores)
	add("resume_hold", st.ResumeHolds, old.ResumeHolds)
	add("claim_resumed", st.Resumed, old.Resumed)
	add("claim_lost", st.ResumeLost, old.ResumeLost)
	add("claim_given_back", st.ResumeGiven, old.ResumeGiven)
	for r := range st.Takeovers {
		add("takeover_"+cluster.TakeReason(r).String(), st.Takeovers[r], old.Takeovers[r])
	}
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
	peers, err := c.dir.Peers(ctx)
	c.observe(err)
	if err != nil {
		c.m.dirErrors.WithLabelValues("peers").Inc()
		return
	}
	now := time.Now()
	leases := make([]cluster.PeerLease, len(peers))
	for i, p := range peers {
		leases[i] = cluster.PeerLease{Instance: p.Instance, Live: p.Live, TTLLeft: p.TTLLeft}
	}
	var dead []string
	c.withCore(func(core *cluster.Ownership) {
		core.PeersSeen(now, leases)
		dead = core.Dead(now)
	})
	// The owner index: the released sessions and those of the replicas
	// judged gone (and, in the first sweeps after the start, this
	// instance's own: records a previous process with this id left).
	look := dead
	if c.selfSweeps < selfSweeps {
		c.selfSweeps++
		look = append(slices.Clone(dead), c.self)
	}
	orphans, err := c.dir.OrphansOf(ctx, look)
	c.observe(err)
	if err != nil {
		c.m.dirErrors.WithLabelValues("orphans").Inc()
		return
	}
	if now.Sub(c.walked) >= c.dir.OrphanScanEvery() {
		// The safety net: a walk of the keyspace for records the index
		// does not have (written by an older version).
		c.walked = now
		more, err := c.dir.Orphans(ctx, 0)
		c.observe(err)
		orphans = append(orphans, more...)
	}
	// Placement: an orphan goes to its preferred replica (rendezvous hash
	// over the live replicas); the others leave it to that one for two
	// sweeps, then take it too (the preferred one may be slow or failing).
	live := []string{c.self}
	for _, p := range peers {
		if p.Live && p.Instance != c.self {
			live = append(live, p.Instance)
		}
	}
	seen := make(map[string]time.Time, len(orphans))
	var todo []directory.Orphan
	for _, o := range orphans {
		if o.Owner != "" && o.Owner != c.self && !slices.Contains(dead, o.Owner) {
			continue
		}
		first, ok := c.orphanSeen[o.SessionID]
		if !ok {
			first = now
		}
		seen[o.SessionID] = first
		if cluster.Preferred(o.SessionID, live) != c.self && now.Sub(first) < 2*c.cfg.SweepEvery {
			continue
		}
		todo = append(todo, o)
	}
	c.orphanSeen = seen
	claimed := c.claimOrphans(ctx, todo)
	if len(todo) > 0 {
		c.log.Info("sweep", "orphans", len(todo), "claimed", claimed, "dead", dead, "took", time.Since(now))
	}
	c.rebalance(ctx, live, now)
}

// rebalance hands off, at most RebalancePerSecond a second, idle sessions
// whose preferred replica (cluster.Preferred over the live replicas) is
// another: released in the directory, the preferred one adopts them at its
// next sweep. A session is moved only when no call is in progress on it,
// no job of it is live, and it has been here for RebalanceMinStay, so a
// move cuts nothing and a session does not bounce.
func (c *clusterState) rebalance(ctx context.Context, live []string, now time.Time) {
	if c.cfg.RebalancePerSecond <= 0 || len(live) < 2 {
		return
	}
	c.rebalanceCredit = min(c.rebalanceCredit+c.cfg.RebalancePerSecond*c.cfg.SweepEvery.Seconds(), max(c.cfg.RebalancePerSecond, 1))
	for _, o := range c.snapshot() {
		if c.rebalanceCredit < 1 || ctx.Err() != nil || c.draining.Load() {
			return
		}
		if cluster.Preferred(o.id, live) == c.self || now.Sub(o.since) < c.cfg.RebalanceMinStay {
			continue
		}
		c.moving.Store(o.id, struct{}{}) // before Busy: see movingSession
		sess, ok := c.table.Get(o.id, o.caller)
		if !ok || sess.Busy() || o.conn.ActiveJobs() > 0 || !c.mayServe(o.id) {
			c.moving.Delete(o.id)
			continue
		}
		o.mu.Lock()
		if o.epoch == 0 || o.token != "" {
			o.mu.Unlock()
			c.moving.Delete(o.id)
			continue
		}
		o.conn.Detach()
		c.moving.Delete(o.id)
		err := c.dir.Release(c.ctx, o.id, o.epoch)
		o.mu.Unlock()
		c.observe(err)
		c.remove(o)
		c.rebalanceCredit--
		if err != nil {
			c.log.Warn("rebalance: release failed; the session is adopted once this replica's lease expires, or taken back by a call", "session_id", o.id, "err", err)
			continue
		}
		c.m.decisions.WithLabelValues("rebalance_move").Inc()
	}
}

// selfSweeps is how many sweeps after the start look up this instance's
// own index (records of a previous process with the same instance id).
const selfSweeps = 5

// takeoverBatch is how many sessions one TakeoverMany script call claims:
// a few hundred keep Redis's other clients waiting a millisecond or two.
const takeoverBatch = 256

// resumeParallel bounds the upstream resumes of claimed sessions made in
// the background at once (a call that needs one makes it beside them).
const resumeParallel = 64

// claimOrphans claims the sweep's orphans in the directory, a batch per
// script call, and queues their upstream resumes (bounded, in the
// background): a session is this replica's — and any call for it is
// served here, resuming it first if the queue has not reached it — as soon
// as its batch is answered. It returns how many were claimed.
func (c *clusterState) claimOrphans(ctx context.Context, todo []directory.Orphan) (claimed int) {
	if len(todo) == 0 {
		return 0
	}
	// The core's verdict, once per owner; sessions held, resuming or in
	// a takeover here already are left out.
	type verdict struct {
		v   cluster.Verdict
		why cluster.TakeReason
	}
	verdicts := make(map[string]verdict)
	whys := make(map[string]cluster.TakeReason)
	var ids []string
	flights := make(map[string]*takeoverFlight)
	now := time.Now()
	c.withCore(func(core *cluster.Ownership) {
		for _, o := range todo {
			if _, ok := verdicts[o.Owner]; !ok {
				v, why := core.MayTakeOver(o.Owner, false, now)
				verdicts[o.Owner] = verdict{v, why}
			}
		}
	})
	c.mu.Lock()
	for _, o := range todo {
		vd := verdicts[o.Owner]
		if vd.v != cluster.Take || c.resuming[o.SessionID] != nil || c.flights[o.SessionID] != nil {
			continue
		}
		if cur := c.owned[o.SessionID]; cur != nil {
			if sess, ok := c.table.Get(o.SessionID, cur.caller); ok && !sess.Lost() {
				continue
			}
		}
		// A flight, so that a call for the session meanwhile waits for
		// the batch instead of taking it over (twice) on its own.
		f := &takeoverFlight{done: make(chan struct{}), err: errLookAgain}
		c.flights[o.SessionID], flights[o.SessionID] = f, f
		ids = append(ids, o.SessionID)
		whys[o.SessionID] = vd.why
	}
	c.mu.Unlock()
	var queue []*pendingResume
	land := func(id string) {
		c.mu.Lock()
		f := flights[id]
		if c.flights[id] == f {
			delete(c.flights, id)
		}
		c.mu.Unlock()
		close(f.done)
	}
	for len(ids) > 0 {
		batch := ids[:min(len(ids), takeoverBatch)]
		ids = ids[len(batch):]
		if ctx.Err() != nil || c.draining.Load() {
			for _, id := range append(batch, ids...) {
				land(id)
			}
			break
		}
		res, err := c.dir.TakeoverMany(c.ctx, batch)
		c.observe(err)
		if err != nil {
			if errors.Is(err, directory.ErrFlushed) {
				// The directory lost its data since the marker was
				// read: learn it now (the core restores and waits a
				// grace); nothing is taken over meanwhile.
				if m, merr := c.dir.Marker(c.ctx); merr == nil {
					c.withCore(func(core *cluster.Ownership) { core.MarkerSeen(time.Now(), m) })
				}
			} else {
				c.m.dirErrors.WithLabelValues("takeover").Inc()
			}
			for _, id := range append(batch, ids...) {
				land(id)
			}
			break
		}
		at := time.Now()
		for i, id := range batch {
			r := res[i]
			var keyErr *directory.KeyError
			switch {
			case errors.As(r.Err, &keyErr):
				// Ours now, but the token cannot be read: the session
				// is lost.
				_ = c.dir.Delete(c.ctx, id, r.Record.Epoch)
				c.m.takeovers.WithLabelValues(sweepReason(whys[id]), "error").Inc()
				c.log.Warn("takeover: the resume token cannot be decrypted; session lost", "session_id", id, "err", r.Err)
			case errors.Is(r.Err, directory.ErrOwned):
				c.m.takeovers.WithLabelValues(sweepReason(whys[id]), "owned").Inc()
			case errors.Is(r.Err, directory.ErrNotFound):
				c.m.takeovers.WithLabelValues(sweepReason(whys[id]), "not_found").Inc()
			case r.Err != nil:
				c.m.takeovers.WithLabelValues(sweepReason(whys[id]), "error").Inc()
			default:
				claimed++
				p := &pendingResume{rec: r.Record, why: whys[id], claimed: at, o: c.heldOwned(r.Record), done: make(chan struct{})}
				// The core learns the claim now (held, not serving), so
				// that a flush before the resume restores its record.
				c.withCore(func(core *cluster.Ownership) { core.Claimed(id, r.Record.Epoch, p.why, r.Record.Marker, at) })
				c.mu.Lock()
				c.resuming[id] = p
				c.mu.Unlock()
				c.m.resumesPending.WithLabelValues(sweepReason(p.why)).Inc()
				queue = append(queue, p)
			}
			land(id)
		}
	}
	// The resumes start once every batch is claimed: they compete for the
	// CPU, and a claimed session is served anyway (a call resumes it).
	for _, p := range queue {
		c.queueResume(p)
	}
	return claimed
}

// sweepReason is the reason label of a sweep's takeover: "handoff" for
// a session released by its owner (draining, rebalancing), "sweep" for
// one whose owner is gone (or a previous process with this instance id).
func sweepReason(why cluster.TakeReason) string {
	if why == cluster.ReasonReleased {
		return "handoff"
	}
	return "sweep"
}

// queueResume starts the background resume of a claimed session (in
// c.resuming), bounded by resumeSem.
func (c *clusterState) queueResume(p *pendingResume) {
	c.resumeWG.Add(1)
	go func() {
		defer c.resumeWG.Done()
		select {
		case c.resumeSem <- struct{}{}:
		case <-c.ctx.Done():
			c.runResume(p, false)
			return
		}
		defer func() { <-c.resumeSem }()
		c.runResume(p, false)
	}()
}

// runResume resumes a claimed session upstream, once: the first caller
// (a background worker, or a call that jumps the queue) does it, later
// ones wait for its result.
func (c *clusterState) runResume(p *pendingResume, jump bool) (string, *owned, error) {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		<-p.done
		return p.caller, p.res, p.err
	}
	p.started = true
	p.mu.Unlock()
	if jump {
		c.m.resumeJumps.Inc()
	}
	var err error
	switch {
	case c.ctx.Err() != nil, c.draining.Load():
		// Shutting down: give it back, for another replica to adopt.
		c.giveBack(p.o, "draining")
		err = session.ErrDraining
	default:
		p.caller, p.res, err = c.resumeClaimed(p.o, p.rec, p.why, sweepReason(p.why), p.claimed)
	}
	p.err = err
	c.mu.Lock()
	if c.resuming[p.rec.ID] == p {
		delete(c.resuming, p.rec.ID)
	}
	c.resumed.n++
	if err != nil {
		c.resumed.failed++
	}
	if c.resumed.first.IsZero() || p.claimed.Before(c.resumed.first) {
		c.resumed.first = p.claimed
	}
	var sum resumeSum
	if len(c.resuming) == 0 {
		sum, c.resumed = c.resumed, resumeSum{}
	}
	c.mu.Unlock()
	if err == nil {
		c.m.claimResume.WithLabelValues(sweepReason(p.why)).Observe(time.Since(p.claimed).Seconds())
	}
	if sum.n > 0 {
		took := time.Since(sum.first)
		c.m.waveResumed.Set(took.Seconds())
		c.log.Info("takeover: claimed sessions resumed", "sessions", sum.n, "failed", sum.failed,
			"took", took, "per_second", math.Round(float64(sum.n)/max(took.Seconds(), 1e-3)))
	}
	result := "ok"
	switch {
	case errors.Is(err, session.ErrDraining), errors.Is(err, errGivenBack):
		result = "released"
	case errors.Is(err, errClaimGone):
		result = "fenced"
	case err != nil:
		result = "error"
	}
	// Counted before it leaves the pending gauge: a scrape between the
	// two sees it twice, never not at all.
	c.m.takeovers.WithLabelValues(sweepReason(p.why), result).Inc()
	c.m.resumesPending.WithLabelValues(sweepReason(p.why)).Dec()
	close(p.done)
	return p.caller, p.res, err
}

// releaseResuming is the handoff's part for claimed sessions not yet
// resumed: each is released in the directory (another replica adopts it);
// resumes already under way are waited for (their sessions are then owned
// and handed off with the others).
func (c *clusterState) releaseResuming() {
	c.mu.Lock()
	ps := make([]*pendingResume, 0, len(c.resuming))
	for _, p := range c.resuming {
		ps = append(ps, p)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, p := range ps {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c.runResume(p, false) // draining: releases, or waits
		}()
	}
	wg.Wait()
}

// errNotYet: the owner's lease is absent but not (yet) judged gone.
var errNotYet = errors.New("cluster: the session's owner is not yet judged gone")

// takeOver claims a session by epoch and resumes its upstream session here.
// Concurrent takeovers of one session in this replica share one attempt; a
// session a sweep has claimed and not yet resumed is resumed at once by
// the caller (it jumps the background queue).
// It returns the session's caller and owner address when the session turned
// out to be owned by a live replica (an *directory.OwnedError).
func (c *clusterState) takeOver(id, owner string, ownerLive bool, reason string) (caller string, o *owned, err error) {
	c.mu.Lock()
	for {
		if cur := c.owned[id]; cur != nil {
			if sess, ok := c.table.Get(id, cur.caller); ok && !sess.Lost() {
				c.mu.Unlock()
				return cur.caller, cur, nil
			}
		}
		if p := c.resuming[id]; p != nil {
			c.mu.Unlock()
			return c.runResume(p, true)
		}
		f := c.flights[id]
		if f == nil {
			break
		}
		c.mu.Unlock()
		<-f.done
		if !errors.Is(f.err, errLookAgain) {
			return "", nil, f.err
		}
		c.mu.Lock()
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
	var verdict cluster.Verdict
	var why cluster.TakeReason
	c.withCore(func(core *cluster.Ownership) { verdict, why = core.MayTakeOver(owner, ownerLive, time.Now()) })
	if verdict != cluster.Take {
		return "", nil, errNotYet
	}
	start := time.Now()
	rec, err := c.dir.Takeover(c.ctx, id)
	c.observe(err)
	if errors.Is(err, directory.ErrFlushed) {
		// The directory lost its data since the marker was read: learn
		// it now (the core restores and waits a grace).
		if m, merr := c.dir.Marker(c.ctx); merr == nil {
			c.withCore(func(core *cluster.Ownership) { core.MarkerSeen(time.Now(), m) })
		}
		return "", nil, errNotYet
	}
	var keyErr *directory.KeyError
	switch {
	case errors.As(err, &keyErr):
		// Ours now, but the token cannot be read: the session is lost.
		_ = c.dir.Delete(c.ctx, id, rec.Epoch)
		return "", nil, &session.LostError{Err: err}
	case err != nil:
		return "", nil, err
	}
	o = c.heldOwned(rec)
	c.withCore(func(core *cluster.Ownership) { core.Claimed(id, rec.Epoch, why, rec.Marker, time.Now()) })
	// Findable by the loop (a restore after a flush) while it resumes.
	c.mu.Lock()
	c.claimedNow[id] = o
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if c.claimedNow[id] == o {
			delete(c.claimedNow, id)
		}
		c.mu.Unlock()
	}()
	return c.resumeClaimed(o, rec, why, reason, start)
}

// heldOwned is the owned record of a session claimed by a takeover and
// not yet resumed (no conn: the core's "held").
func (c *clusterState) heldOwned(rec directory.Record) *owned {
	from := rec.Session
	o := &owned{id: rec.ID, caller: rec.Caller, runtime: rec.Runtime, adopted: true, epoch: rec.Epoch, acked: rec.AckedSeq,
		written: time.Now(), since: time.Now(), from: &from}
	o.win.Lag = c.cfg.AckLag
	return o
}

// errGivenBack: a claimed session's resume failed; it was released for
// another replica. errClaimGone: the claim was fenced, or its record
// vanished, before the resume: the session is not this replica's.
var (
	errGivenBack = errors.New("cluster: the claimed session could not be resumed here; released for another replica")
	errClaimGone = errors.New("cluster: the claimed session is no longer this replica's")
)

// resumeClaimed resumes upstream a session this replica has claimed in
// the directory (rec, at rec.Epoch; o as heldOwned made it, the core told
// Claimed), and makes it a session of the table. It resumes only when the
// core allows (its record present and confirmed: after a flush, once
// restored); it gives the session back (released) when that does not come
// within awaitResume's bound, or the resume fails; the runtime refusing
// the token loses it.
func (c *clusterState) resumeClaimed(o *owned, rec directory.Record, why cluster.TakeReason, reason string, start time.Time) (caller string, _ *owned, err error) {
	id := rec.ID
	switch c.awaitResume(o) {
	case resumeGone:
		return "", nil, fmt.Errorf("%w: %w", errNotYet, errClaimGone)
	case resumeGiveUp:
		c.giveBack(o, "held back")
		return "", nil, fmt.Errorf("%w: %w", errNotYet, errGivenBack)
	}
	rt, ok := c.runtimes[rec.Runtime]
	if !ok {
		c.giveBack(o, "runtime not configured")
		return "", nil, fmt.Errorf("cluster: session %s is on runtime %q, which this replica does not configure: %w", id, rec.Runtime, errGivenBack)
	}
	uc := c.upstreamConfig(rt, rec.Caller)
	uc.Resume = &upstream.ResumeFrom{SessionID: rec.UpstreamSessionID, ResumeToken: rec.ResumeToken, LastEventSeq: rec.AckedSeq}
	uc.AckLimited = true
	uc.OnWelcome = func(_, token string) { c.onWelcome(o, token) }
	uc.ResumeGate = func() bool { return c.mayResume(o) }
	conn, err := upstream.Dial(c.ctx, uc)
	if err != nil {
		var ae *arcp.Error
		var lost *upstream.LostError
		if errors.As(err, &ae) || errors.As(err, &lost) {
			// The runtime refused the resume (token used, window
			// expired) or welcomed it into another session
			// (upstream.ErrResumeMismatch): the session is lost, with
			// a definite error.
			c.withCore(func(core *cluster.Ownership) { core.ResumeFailed(id, true) })
			_ = c.dir.Delete(c.ctx, id, rec.Epoch)
			c.log.Warn("takeover: the runtime refused the resume; session lost", "session_id", id, "err", err)
			return "", nil, &session.LostError{Err: err}
		}
		c.giveBack(o, "resume failed")
		return "", nil, fmt.Errorf("cluster: resume session %s upstream: %w (%w)", id, err, errGivenBack)
	}
	o.mu.Lock()
	o.conn = conn
	o.mu.Unlock()
	var mine bool
	c.withCore(func(core *cluster.Ownership) { mine = core.Resumed(id) })
	if !mine || o.fenced.Load() {
		// Fenced, or its record vanished, while it resumed: somebody
		// else's. Silently (never close it upstream).
		conn.Detach()
		c.log.Info("takeover: the claim was fenced while it resumed; detached", "session_id", id)
		return "", nil, fmt.Errorf("%w: %w", errNotYet, errClaimGone)
	}
	if _, err := c.table.Adopt(id, rec.Caller, rec.Runtime, conn); err != nil {
		conn.Detach()
		c.giveBack(o, "adopt failed")
		return "", nil, err
	}
	c.mu.Lock()
	c.owned[id] = o
	c.mu.Unlock()
	lvl := slog.LevelInfo
	if reason != "call" {
		lvl = slog.LevelDebug // thousands at once: the sweep logs the sum
	}
	c.log.Log(c.ctx, lvl, "session taken over", "session_id", id, "previous_owner", rec.PreviousOwner, "epoch", rec.Epoch,
		"reason", reason, "from_seq", rec.AckedSeq, "took", time.Since(start))
	return rec.Caller, o, nil
}

// giveBack releases a claimed session this replica will not resume (the
// core: ResumeFailed, not lost). The directory's marker is read first, so
// that the core knows of a flush not yet seen: a record a flush erased is
// restored before it is released, or the session would vanish with it.
func (c *clusterState) giveBack(o *owned, why string) {
	ctx := context.WithoutCancel(c.ctx)
	if m, err := c.dir.Marker(ctx); err == nil {
		c.withCore(func(core *cluster.Ownership) { core.MarkerSeen(time.Now(), m) })
	}
	var w cluster.Work
	var restore bool
	c.withCore(func(core *cluster.Ownership) { w, restore = core.ResumeFailed(o.id, false) })
	o.mu.Lock()
	defer o.mu.Unlock()
	if restore {
		if err := c.restoreLocked(ctx, o, w); err != nil {
			c.log.Warn("give back: restore before the release failed", "session_id", o.id, "err", err)
		}
	}
	err := c.dir.Release(ctx, o.id, o.epoch)
	c.observe(err)
	c.log.Info("takeover: claimed session given back (released for another replica)", "session_id", o.id, "why", why, "err", err)
}

type resumeVerdict uint8

const (
	resumeNow resumeVerdict = iota
	resumeGiveUp
	resumeGone
)

// awaitResume waits until the core lets the claimed session o be resumed
// (cluster.Ownership.MayResume: the lease valid, its record present and
// confirmed), for up to two LeaseTTLs, longer while a restore of its
// record is due (giving it back then would lose it). resumeGone: the core
// dropped the claim (fenced, vanished).
func (c *clusterState) awaitResume(o *owned) resumeVerdict {
	deadline := time.Now().Add(2 * c.dir.LeaseTTL())
	for first := true; ; first = false {
		var may, held, restoring bool
		c.withCore(func(core *cluster.Ownership) {
			now := time.Now()
			held, restoring = core.Held(o.id), core.Restoring(o.id)
			if first {
				may = core.MayResume(o.id, now) // a hold counted once
			} else {
				may = core.MayResumeQuiet(o.id, now)
			}
		})
		switch {
		case !held || o.fenced.Load():
			return resumeGone
		case may:
			return resumeNow
		case c.ctx.Err() != nil, time.Now().After(deadline) && !restoring:
			return resumeGiveUp
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
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
	c.releaseResuming()
	grace := c.cfg.HandoffGrace
	if dl, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(dl)/2)
	}
	until := time.Now().Add(grace)
	c.waitIdle(ctx, until)
	// Calls admitted from now on are routed again (clusterUnary); those
	// admitted just before get the rest of the grace (at least 100 ms).
	c.handingOff.Store(true)
	c.waitIdle(ctx, later(until, time.Now().Add(100*time.Millisecond)))
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

// lameDuck is the part of Shutdown after the hand-off: the replica goes on
// serving for LameDuck (bounded by half of what is left of ctx), calls for
// the sessions it handed off forwarded to their adopters; then the streams
// it relays are cut, so that the graceful stop does not wait for them.
func (c *clusterState) lameDuck(ctx context.Context) {
	defer c.endRelays()
	d := c.cfg.LameDuck
	if d <= 0 {
		return
	}
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	c.log.Info("lame duck: serving and forwarding to the adopters before closing the listener", "for", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// waitIdle waits until no unary session call is in progress here, or until.
func (c *clusterState) waitIdle(ctx context.Context, until time.Time) {
	wait, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for c.inflight.Load() > 0 && wait.Err() == nil {
		select {
		case <-wait.Done():
		case <-poll.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// close ends takeover dials and closes the peer connections.
func (c *clusterState) close() {
	c.stopLoop()
	c.endRelays()
	c.cancel()
	c.resumeWG.Wait()
	c.dogs.Wait()
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
	switch {
	case len(opts) > 0:
	case c.cfg.PeerTLS != nil:
		opts = []grpc.DialOption{grpc.WithTransportCredentials(c.cfg.PeerTLS.ClientCredentials())}
	default:
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	connect := 20 * time.Second
	if c.cfg.PeerFirstByte > 0 {
		connect = c.cfg.PeerFirstByte
	}
	opts = append(opts, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		// A restarted peer is back within a second: do not let grpc-go's
		// backoff (up to two minutes) fail calls for it meanwhile.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: connect,
		}),
		// Marks forwards whose request went out (cluster_forward.go).
		grpc.WithStatsHandler(peerStats{}))

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
