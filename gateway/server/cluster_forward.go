package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// A forward's fate, as the forwarder can know it.
//
// A forward that was never sent (the peer's listener is closed, the dial
// failed, the connection broke before the request's headers were written)
// cannot have run anything: it is routed again from the directory, which
// by then may name the replica that adopted the session. A forward that
// was sent but got no response header within the peer's first-byte bound
// (ClusterConfig.PeerFirstByte) is abandoned the same way: an owner sends
// its response header before it runs the handler of a forwarded call
// (sendOwnerHeader), so no header means the handler had not started; the
// owner is frozen, overloaded or gone. Either way the forwarder waits,
// within the caller's deadline, for the directory to name a live owner —
// the session is taken over once the silent owner's lease lapses — and
// finishes the call there (OwnerWait, paced by cluster.CallWait). A
// forward that broke after the owner's header came is not sent again: its
// outcome is unknown.

// sentKey carries a forward's *attempt to the peer stats handler.
type sentKey struct{}

// sentMark is set once a forward's request headers were handed to a live
// peer transport (stats.OutHeader): from then on the peer may have it.
type sentMark struct{ sent atomic.Bool }

// peerStats is the stats handler of peer connections: it sets a forward's
// sentMark, and reports the owner's response header (stats.InHeader) to a
// unary forward, whose goroutine does not wait for it (attempt.answered).
type peerStats struct{}

func (peerStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (peerStats) HandleRPC(ctx context.Context, s stats.RPCStats) {
	switch s.(type) {
	case *stats.OutHeader:
		if a, ok := ctx.Value(sentKey{}).(*attempt); ok {
			a.mark.sent.Store(true)
		}
	case *stats.InHeader:
		if a, ok := ctx.Value(sentKey{}).(*attempt); ok && a.c != nil {
			a.answered()
		}
	}
}
func (peerStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (peerStats) HandleConn(context.Context, stats.ConnStats)                       {}

// silentPeers are the peer addresses a forward from this replica got no
// response header from within the first-byte bound, with none answered
// since (cluster.Facts.OwnerSilent): the router then reads a silent
// owner's lease instead of its cached address, and waits for the lease's
// end rather than forward into it (cluster.Await). n makes the check free
// while no peer is silent.
type silentPeers struct {
	n  atomic.Int32
	mu sync.Mutex
	m  map[string]time.Time // addr → when it was marked
}

// silentKeep bounds how long a peer nobody forwards to again stays marked.
const silentKeep = time.Minute

func (s *silentPeers) mark(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if s.m == nil {
		s.m = make(map[string]time.Time)
	}
	for a, at := range s.m {
		if now.Sub(at) > silentKeep {
			delete(s.m, a)
		}
	}
	s.m[addr] = now
	s.n.Store(int32(len(s.m)))
}

func (s *silentPeers) clear(addr string) {
	if s.n.Load() == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, addr)
	s.n.Store(int32(len(s.m)))
}

func (s *silentPeers) has(addr string) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.m[addr]
	return ok && time.Since(at) <= silentKeep
}

// errNoFirstByte is the cause of a forward abandoned for want of the
// owner's response header.
var errNoFirstByte = errors.New("cluster: the session's owner sent no response header within the first-byte bound")

// attempt bounds one forward: until its response header comes, a timer
// of PeerFirstByte may cancel it. ctx is what the forward runs in;
// answered (once the header came or the forward ended) says what happened.
//
// A stream forward calls answered itself once Header returns. A unary
// forward (c set) does not wait for the header: the peer transport's
// reader reports it (peerStats), which saves the forward's goroutine a
// wake-up per call, and answered then starts watching the peer
// (watchPeer), which end stops. state orders the timer, the header and
// the end.
type attempt struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	mark   sentMark
	// addr is the peer's address: silent marks it when the bound passes
	// and clears it when the header comes.
	addr   string
	silent *silentPeers
	// A unary forward's peer connection, watched from the header on
	// (watchPeer); c is nil for a stream forward, which watches the peer
	// itself.
	c  *clusterState
	cc *grpc.ClientConn

	mu      sync.Mutex
	state   attemptState // guarded by mu
	unwatch func()       // guarded by mu: watchPeer's done
}

// attemptState is where a forward stands against its first-byte bound.
type attemptState uint8

const (
	attemptPending   attemptState = iota // no header yet, within the bound
	attemptAnswered                      // the header came within the bound
	attemptAbandoned                     // the bound passed first: cancelled
	attemptEnded                         // end was called
)

func (c *clusterState) newAttempt(parent context.Context, addr string) *attempt {
	a := &attempt{silent: &c.silent, addr: addr}
	a.ctx, a.cancel = context.WithCancelCause(context.WithValue(parent, sentKey{}, a))
	if d := c.cfg.PeerFirstByte; d > 0 {
		a.timer = time.AfterFunc(d, a.firstByteLapsed)
	}
	return a
}

// newUnaryAttempt is newAttempt for a unary forward to addr over cc: the
// peer is watched from the owner's header on (see attempt).
func (c *clusterState) newUnaryAttempt(parent context.Context, addr string, cc *grpc.ClientConn) *attempt {
	a := c.newAttempt(parent, addr)
	a.c, a.cc = c, cc
	return a
}

// firstByteLapsed is the timer's: no header within the bound.
func (a *attempt) firstByteLapsed() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state == attemptPending {
		a.state = attemptAbandoned
		a.silent.mark(a.addr)
		a.cancel(errNoFirstByte)
	}
}

// answered stops the first-byte timer: the header came (or the forward
// ended). It reports false when the timer had already cancelled it.
func (a *attempt) answered() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != attemptPending {
		return a.state == attemptAnswered
	}
	a.state = attemptAnswered
	if a.timer != nil {
		a.timer.Stop()
	}
	a.silent.clear(a.addr)
	if a.c != nil {
		a.unwatch = a.c.watchPeer(a.addr, a.cc)
	}
	return true
}

func (a *attempt) end() {
	a.mu.Lock()
	a.state = attemptEnded
	unwatch := a.unwatch
	a.unwatch = nil
	a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
	}
	if unwatch != nil {
		unwatch()
	}
	a.cancel(nil)
}

// unreachable says the forward failed without the owner having run
// anything: never sent, or sent but abandoned before the owner's header.
// Both are routed again (waiting for a new owner when the directory still
// names this one). why is the forward_retries label.
func (a *attempt) unreachable(parent context.Context, err error) (why string, ok bool) {
	if err == nil || parent.Err() != nil {
		return "", false
	}
	if errors.Is(context.Cause(a.ctx), errNoFirstByte) {
		return "no_first_byte", true
	}
	if !a.mark.sent.Load() {
		return "not_sent", true
	}
	if a.droppedBeforeHeader(err) {
		return "peer_silent", true
	}
	return "", false
}

// droppedBeforeHeader says the forward ended CANCELED, before the owner's
// header, while neither the caller nor this forward had cancelled it: its
// connection was closed under it (dropPeer, the watchdog judging the peer
// silent). No header means the owner had not started the call, so it is
// routed again like one abandoned at the first-byte bound.
func (a *attempt) droppedBeforeHeader(err error) bool {
	a.mu.Lock()
	pending := a.state == attemptPending
	a.mu.Unlock()
	return pending && status.Code(err) == codes.Canceled && a.ctx.Err() == nil
}

// peerReady says the connection to addr is up (a forward to it would be
// sent at once).
func (c *clusterState) peerReady(addr string) bool {
	c.peersMu.Lock()
	cc := c.peers[addr]
	c.peersMu.Unlock()
	return cc != nil && cc.GetState() == connectivity.Ready
}

// kick makes a peer connection in backoff dial again now, so that a peer
// back from a restart is used at once.
func kick(cc *grpc.ClientConn) {
	if cc.GetState() == connectivity.TransientFailure {
		cc.ResetConnectBackoff()
	}
}

// sendOwnerHeader sends a forwarded call's response header (the owner
// hints) at once, before the handler runs: it is the forwarder's sign that
// the owner took the call (see PeerFirstByte).
func sendOwnerHeader(ctx context.Context, ss grpc.ServerStream, md metadata.MD) {
	if ss != nil {
		_ = ss.SendHeader(md)
		return
	}
	_ = grpc.SendHeader(ctx, md)
}

// watchdog probes a peer while forwards it has taken are in flight on
// connection cc (see ClusterConfig.PeerKeepalive). n and running are
// guarded by clusterState.peersMu.
type watchdog struct {
	cc      *grpc.ClientConn
	n       int  // forwards in flight
	running bool // its goroutine runs
}

// watchPeer counts a forward on cc (to addr) whose owner has sent its
// header, until done is called, and makes sure a watchdog probes the peer
// meanwhile: a peer frozen mid-call (a SIGSTOP, a VM pause) answers no
// probe, and its connection is closed, which ends the call.
func (c *clusterState) watchPeer(addr string, cc *grpc.ClientConn) (done func()) {
	if c.cfg.PeerKeepalive <= 0 {
		return func() {}
	}
	c.peersMu.Lock()
	w := c.watchdogs[addr]
	if w == nil || w.cc != cc {
		w = &watchdog{cc: cc}
		c.watchdogs[addr] = w
	}
	w.n++
	start := !w.running
	w.running = true
	if start {
		c.dogs.Add(1)
	}
	c.peersMu.Unlock()
	if start {
		go c.runWatchdog(addr, w)
	}
	return func() {
		c.peersMu.Lock()
		w.n--
		c.peersMu.Unlock()
	}
}

// runWatchdog probes the peer every PeerKeepalive while w has forwards in
// flight; it ends when none is left, when the peer is judged silent (its
// connection then closed), or at close.
func (c *clusterState) runWatchdog(addr string, w *watchdog) {
	defer c.dogs.Done()
	stop := func() {
		c.peersMu.Lock()
		w.running = false
		if c.watchdogs[addr] == w && w.n == 0 {
			delete(c.watchdogs, addr)
		}
		c.peersMu.Unlock()
	}
	hc := healthpb.NewHealthClient(w.cc)
	t := time.NewTicker(c.cfg.PeerKeepalive)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			stop()
			return
		case <-t.C:
		}
		c.peersMu.Lock()
		idle := w.n == 0
		if idle {
			w.running = false
			if c.watchdogs[addr] == w {
				delete(c.watchdogs, addr)
			}
		}
		c.peersMu.Unlock()
		if idle {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.PeerKeepalive)
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		if status.Code(err) == codes.DeadlineExceeded && c.ctx.Err() == nil {
			c.m.forwardRetries.WithLabelValues("peer_silent").Inc()
			c.log.Warn("peer replica did not answer a health check while calls were in flight: closing the connection to it", "peer", addr, "within", c.cfg.PeerKeepalive)
			c.dropPeer(addr, w.cc)
			stop()
			return
		}
	}
}

// dropPeer closes the connection cc to addr (its calls end with
// CANCELED: those the owner had taken are answered OWNER_UNREACHABLE, those
// still waiting for its header are routed again, see attempt.unreachable);
// the next forward dials again. The peer is marked silent.
func (c *clusterState) dropPeer(addr string, cc *grpc.ClientConn) {
	c.silent.mark(addr)
	c.peersMu.Lock()
	if c.peers[addr] == cc {
		delete(c.peers, addr)
	}
	c.peersMu.Unlock()
	_ = cc.Close()
}

// detachKey carries a unary call's *detachMark to the handler's session
// lookup (service.acquire).
type detachKey struct{}

// detachMark is set when the handler's session lookup found the session
// detached (handed off): the handler failed before anything reached the
// runtime, so the call may be routed again.
type detachMark struct{ detached atomic.Bool }

// noteDetached marks ctx's call when err says its session was detached.
func noteDetached(ctx context.Context, err error) {
	if m, ok := ctx.Value(detachKey{}).(*detachMark); ok && errors.Is(err, upstream.ErrDetached) {
		m.detached.Store(true)
	}
}

// movingSession says the rebalancer is moving session id. A call that has
// just looked the session up (Table.Acquire made it busy) gives it back and
// is routed again instead (service.acquire): the rebalancer marks the
// session moving before it checks that it is not busy, a call marks it
// busy before it checks that it is not moving, so one of the two always
// sees the other — a move never detaches a session under a call that got
// past its lookup (which ended UNAVAILABLE SESSION_HANDED_OFF).
// Only a unary call routed by clusterUnary (which carries a detachMark)
// is gated; streams are left as they were.
func (c *clusterState) movingSession(ctx context.Context, id string) bool {
	m, ok := ctx.Value(detachKey{}).(*detachMark)
	if !ok {
		return false
	}
	if _, moving := c.moving.Load(id); !moving {
		return false
	}
	m.detached.Store(true)
	return true
}
