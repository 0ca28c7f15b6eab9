package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// The silence bound's defaults (WithSilenceBound).
const (
	// DefaultSilenceAfter is how long an attempt waits for its answer
	// before the client asks whether the replica it went to is alive.
	DefaultSilenceAfter = 500 * time.Millisecond
	// DefaultSilenceTimeout is how long that health check may go unanswered
	// before the replica counts as silent (frozen: a SIGSTOP, a VM pause).
	DefaultSilenceTimeout = time.Second
)

// maxSilentAttempts bounds the attempts of one call that end on a silent
// replica; the call then fails UNAVAILABLE REPLICA_SILENT.
const maxSilentAttempts = 4

// ReasonReplicaSilent is the ErrorInfo reason of a call given up because
// every replica it was sent to was silent.
const ReasonReplicaSilent = "REPLICA_SILENT"

// WithSilenceBound sets the silence bound (defaults DefaultSilenceAfter and
// DefaultSilenceTimeout): a unary call that is safe to send again (Run and
// Submit, whose attempts all carry the call's idempotency key;
// GetSessionStatus, ListSessions, ListJobs) and has waited after for its
// answer makes the client health-check the replica the attempt went to,
// on a connection of its own, at most once per after per replica. A replica
// that does not answer within timeout is silent: the attempt is abandoned
// and sent again to another replica, and no call is sent to the silent one
// until it answers a health check again (re-checked every after). A replica
// that answers, even NOT_SERVING, is alive: a long job is never cut. A call
// on a replica found silent maxSilentAttempts times fails UNAVAILABLE with
// reason REPLICA_SILENT. The bound only helps a client that knows several
// replicas (WithReplicas, a DNS name with several addresses); grpc-go does
// not let a client send HTTP/2 keepalive pings more often than every 10 s.
// WatchJob streams are bounded too (see watchdog.stream).
func WithSilenceBound(after, timeout time.Duration) Option {
	return func(o *options) { o.silenceAfter, o.silenceTimeout = after, timeout }
}

// WithoutSilenceBound turns the silence bound off: an attempt sent to a
// frozen replica waits for the thaw or for its deadline.
func WithoutSilenceBound() Option {
	return func(o *options) { o.silenceAfter = -1 }
}

// attemptKey is the context key of the *attempt the picker notes its
// choice in.
type attemptKey struct{}

// attempt is one attempt of a call under the silence bound: the watchdog
// it runs under (whose silent replicas the picker avoids) and the address
// the picker chose last (grpc-go's own retries pick again).
type attempt struct {
	w *watchdog // immutable

	mu   sync.Mutex
	addr string // guarded by mu
}

func (a *attempt) picked(addr string) {
	a.mu.Lock()
	a.addr = addr
	a.mu.Unlock()
}

func (a *attempt) address() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.addr
}

// attemptOf is the attempt of a pick's context, or nil.
func attemptOf(ctx context.Context) *attempt {
	a, _ := ctx.Value(attemptKey{}).(*attempt)
	return a
}

// retrySafe: an attempt of method with req may be abandoned and sent again.
func retrySafe(method string, req any) bool {
	switch method {
	case gatewayv1.SessionGateway_GetSessionStatus_FullMethodName,
		gatewayv1.SessionGateway_ListSessions_FullMethodName,
		gatewayv1.SessionGateway_ListJobs_FullMethodName:
		return true
	case gatewayv1.SessionGateway_RunJob_FullMethodName, gatewayv1.SessionGateway_SubmitJob_FullMethodName:
		k, ok := req.(interface{ GetIdempotencyKey() string })
		return ok && k.GetIdempotencyKey() != ""
	}
	return false
}

// watchdog is a Client's silence bound: its health checks, on connections
// of its own (one per replica address), and the replicas found silent.
// Its methods may be called concurrently.
type watchdog struct {
	// immutable
	after, timeout time.Duration
	dial           []grpc.DialOption
	ctx            context.Context // ends at close
	stop           context.CancelFunc

	wg sync.WaitGroup // the checks' goroutines

	mu     sync.Mutex
	closed bool                        // guarded by mu
	conns  map[string]*grpc.ClientConn // guarded by mu
	checks map[string]*check           // guarded by mu: the latest check of each address
	silent map[string]bool             // guarded by mu
}

// check is one health check of a replica; silent is set before done closes.
type check struct {
	done   chan struct{}
	silent bool
	at     time.Time // when it ended
}

func newWatchdog(after, timeout time.Duration, dial []grpc.DialOption) *watchdog {
	ctx, stop := context.WithCancel(context.Background())
	return &watchdog{after: after, timeout: timeout, dial: dial, ctx: ctx, stop: stop,
		conns: map[string]*grpc.ClientConn{}, checks: map[string]*check{}, silent: map[string]bool{}}
}

// isSilent reports whether addr was found silent and has not answered since.
func (w *watchdog) isSilent(addr string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.silent[addr]
}

// check returns the running or a recent check of addr, or starts one.
func (w *watchdog) check(addr string) *check {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c := w.checks[addr]; c != nil {
		select {
		case <-c.done:
			if c.silent || time.Since(c.at) < w.after {
				return c // silent: its goroutine re-checks until it answers
			}
		default:
			return c
		}
	}
	c := &check{done: make(chan struct{})}
	if w.closed {
		close(c.done)
		return c
	}
	w.checks[addr] = c
	cc, err := w.connLocked(addr)
	w.wg.Go(func() { w.run(addr, cc, err, c) })
	return c
}

func (w *watchdog) connLocked(addr string) (*grpc.ClientConn, error) {
	if cc := w.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, w.dial...)
	if err == nil {
		w.conns[addr] = cc
	}
	return cc, err
}

// run is a check's goroutine: one health check, and for a silent replica
// one every after until it answers or the watchdog closes.
func (w *watchdog) run(addr string, cc *grpc.ClientConn, err error, c *check) {
	c.silent = err == nil && w.probe(cc)
	c.at = time.Now()
	if c.silent {
		w.mu.Lock()
		w.silent[addr] = true
		w.mu.Unlock()
	}
	close(c.done)
	if !c.silent {
		return
	}
	for w.ctx.Err() == nil && w.probe(cc) {
		t := time.NewTimer(w.after)
		select {
		case <-w.ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	w.mu.Lock()
	delete(w.silent, addr)
	if w.checks[addr] == c {
		delete(w.checks, addr)
	}
	w.mu.Unlock()
}

// probe health-checks the replica; true when it did not answer within the
// timeout. Any answer, an error status included, means alive; a refused
// connection is not silence (the call fails by itself).
func (w *watchdog) probe(cc *grpc.ClientConn) bool {
	ctx, cancel := context.WithTimeout(w.ctx, w.timeout)
	defer cancel()
	_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	return status.Code(err) == codes.DeadlineExceeded && w.ctx.Err() == nil
}

// close stops the checks and waits for them, then closes their connections.
func (w *watchdog) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.stop()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cc := range w.conns {
		_ = cc.Close()
	}
	clear(w.conns)
}

// unary is the silence bound's interceptor.
func (w *watchdog) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if !retrySafe(method, req) {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var silent []string
	for {
		a := &attempt{w: w}
		actx, cancel := context.WithCancel(context.WithValue(ctx, attemptKey{}, a))
		errc := make(chan error, 1)
		go func() { errc <- invoker(actx, method, req, reply, cc, opts...) }()
		addr, err := w.wait(a, errc, cancel)
		cancel()
		if addr == "" {
			return err
		}
		silent = append(silent, addr)
		if len(silent) >= maxSilentAttempts || ctx.Err() != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return replicaSilentError(fmt.Sprintf(
				"sessiongate: no answer from the replicas the call was sent to (%v), none answered a health check within %v",
				silent, w.timeout))
		}
	}
}

// wait waits for the attempt's answer, health-checking its replica every
// after. It returns the address when the replica is silent (the attempt
// cancelled and ended), else the attempt's error.
func (w *watchdog) wait(a *attempt, errc <-chan error, cancel context.CancelFunc) (string, error) {
	t := time.NewTimer(w.after)
	defer t.Stop()
	var c *check
	var checked <-chan struct{}
	for {
		select {
		case err := <-errc:
			return "", err
		case <-t.C:
			if addr := a.address(); addr != "" {
				c, checked = w.check(addr), nil
				checked = c.done
			} else {
				t.Reset(w.after)
			}
		case <-checked:
			checked = nil
			if !c.silent || a.address() == "" {
				t.Reset(w.after)
				continue
			}
			addr := a.address()
			if !w.isSilent(addr) {
				// grpc-go's retry moved the attempt to another replica.
				t.Reset(w.after)
				continue
			}
			cancel()
			if err := <-errc; err == nil {
				return "", nil // the answer came as it was given up
			}
			return addr, nil
		}
	}
}

// errReplicaSilent is the cause a watch's stream is cancelled with when its
// replica is found silent.
var errReplicaSilent = errors.New("sessiongate: the replica of the stream is silent")

// replicaSilentError is the UNAVAILABLE REPLICA_SILENT of a call or stream
// given up on a silent replica.
func replicaSilentError(msg string) error {
	st, _ := status.New(codes.Unavailable, msg).WithDetails(&errdetails.ErrorInfo{
		Reason: ReasonReplicaSilent, Domain: "sessiongate", Metadata: map[string]string{"retryable": "true"}})
	return st.Err()
}

// stream is the silence bound's stream interceptor, for WatchJob: a stream
// that has received nothing for after health-checks its replica (as a
// unary attempt does), and one on a silent replica ends UNAVAILABLE
// REPLICA_SILENT, which a watch resumes after from its cursor (on another
// replica: the balancer skips the silent one).
func (w *watchdog) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method != gatewayv1.SessionGateway_WatchJob_FullMethodName {
		return streamer(ctx, desc, cc, method, opts...)
	}
	a := &attempt{w: w}
	sctx, cancel := context.WithCancelCause(context.WithValue(ctx, attemptKey{}, a))
	cs, err := streamer(sctx, desc, cc, method, opts...)
	if err != nil {
		cancel(nil)
		return nil, err
	}
	s := &silentStream{ClientStream: cs, w: w, a: a, ctx: sctx, cancel: cancel}
	s.last.Store(time.Now().UnixNano())
	s.timer = time.AfterFunc(w.after, s.tick)
	return s, nil
}

// silentStream is a WatchJob stream under the silence bound. RecvMsg is
// called by one goroutine (grpc-go's rule); tick runs on the timer's.
type silentStream struct {
	grpc.ClientStream
	w      *watchdog
	a      *attempt
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	last   atomic.Int64 // UnixNano of the last message or of the start
	ended  atomic.Bool
}

func (s *silentStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.last.Store(time.Now().UnixNano())
		return nil
	}
	s.ended.Store(true)
	s.timer.Stop()
	if errors.Is(context.Cause(s.ctx), errReplicaSilent) {
		err = replicaSilentError(fmt.Sprintf("sessiongate: the replica at %s sent nothing for %v and answered no health check within %v: watch again from your last event_seq",
			s.a.address(), s.w.after, s.w.timeout))
	}
	s.cancel(nil)
	return err
}

// tick checks the replica when the stream has been quiet for after, and
// cancels the stream when it is silent.
func (s *silentStream) tick() {
	if s.ended.Load() || s.ctx.Err() != nil {
		return
	}
	quiet := time.Since(time.Unix(0, s.last.Load()))
	if quiet < s.w.after {
		s.timer.Reset(s.w.after - quiet)
		return
	}
	addr := s.a.address()
	if addr == "" {
		s.timer.Reset(s.w.after)
		return
	}
	c := s.w.check(addr)
	select {
	case <-c.done:
	case <-s.ctx.Done():
		return
	}
	if c.silent && time.Since(time.Unix(0, s.last.Load())) >= s.w.after {
		s.cancel(errReplicaSilent)
		return
	}
	s.timer.Reset(s.w.after)
}
