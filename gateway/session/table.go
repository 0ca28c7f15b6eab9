package session

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiongate/sessiongate/gateway/budget"
)

// Conn is what the table needs of an upstream connection.
type Conn interface {
	// ActiveJobs reports the jobs that have not ended.
	ActiveJobs() int
	// Close ends the session gracefully upstream.
	Close(ctx context.Context) error
	// Done is closed when the session has ended (closed or lost).
	Done() <-chan struct{}
	// Err says why the session ended, once Done is closed.
	Err() error
}

// Errors returned by the table.
var (
	// ErrNotFound: no such session for this caller.
	ErrNotFound = errors.New("session not found")
	// ErrDraining: the gateway is shutting down and opens no sessions.
	ErrDraining = errors.New("gateway is draining: no new sessions")
)

// LostError is returned by Acquire for a session whose upstream was lost.
type LostError struct{ Err error }

func (e *LostError) Error() string { return fmt.Sprintf("session lost: %v", e.Err) }
func (e *LostError) Unwrap() error { return e.Err }

// Config is the table's configuration.
type Config struct {
	// InstanceID names this gateway instance in every session id:
	// 1 to 32 characters of [a-z0-9-].
	InstanceID string
	// MaxSessions caps the sessions of all callers together (default 100,000).
	MaxSessions int
	// MaxPerCaller caps the sessions of one caller (default 1,000).
	MaxPerCaller int
	// IdleTimeout closes a session with no call in progress and no running
	// job for this long (default 30 min).
	IdleTimeout time.Duration
	// CloseTimeout bounds the graceful upstream close of an idle session
	// (default 5 s).
	CloseTimeout time.Duration
	// Logger receives session lifecycle logs (default: discard).
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.MaxSessions == 0 {
		c.MaxSessions = 100_000
	}
	if c.MaxPerCaller == 0 {
		c.MaxPerCaller = 1_000
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = 30 * time.Minute
	}
	if c.CloseTimeout == 0 {
		c.CloseTimeout = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case !validInstance(c.InstanceID):
		return fmt.Errorf("session: InstanceID %q: want 1-32 characters of [a-z0-9-]", c.InstanceID)
	case c.MaxSessions < 0:
		return fmt.Errorf("session: MaxSessions %d is negative", c.MaxSessions)
	case c.MaxPerCaller < 0:
		return fmt.Errorf("session: MaxPerCaller %d is negative", c.MaxPerCaller)
	case c.IdleTimeout < 0:
		return fmt.Errorf("session: IdleTimeout %v is negative", c.IdleTimeout)
	}
	return nil
}

// Session is one gateway session.
type Session[C Conn] struct {
	// Immutable after Open.
	ID       string
	Caller   string
	Runtime  string
	OpenedAt time.Time
	Conn     C

	table    *Table[C]
	busy     atomic.Int32 // calls in progress
	lastUsed atomic.Int64 // monotonic nanoseconds since table.epoch
	closing  atomic.Bool
	idle     *time.Timer // guarded by table.mu for creation; Reset from the timer's own callback
}

// Closing reports whether the session is being closed.
func (s *Session[C]) Closing() bool { return s.closing.Load() }

// Busy reports whether calls are in progress on the session (Acquire).
func (s *Session[C]) Busy() bool { return s.busy.Load() > 0 }

// Lost reports whether the upstream session has ended.
func (s *Session[C]) Lost() bool {
	select {
	case <-s.Conn.Done():
		return true
	default:
		return false
	}
}

// Table is the session table. All methods are safe for concurrent use.
type Table[C Conn] struct {
	cfg   Config
	epoch time.Time

	// sessions counts registered sessions and Opens in progress, gateway
	// wide and per caller. A unit is taken by reserve and given back when
	// the session leaves byID (removeLocked) or its Open fails.
	sessions *budget.Budget

	mu        sync.RWMutex
	byID      map[string]*Session[C]              // guarded by mu
	byCaller  map[string]map[*Session[C]]struct{} // guarded by mu
	draining  bool                                // guarded by mu
	prunedAll int64                               // guarded by mu: t.now() of the last scan of every session (0: none)
	drained   atomic.Bool                         // set with draining; read without mu

	closers sync.WaitGroup

	// idleChecked, when set (by tests, before any Open), runs after every
	// idle check with whether it closed the session.
	idleChecked func(id string, closed bool)
}

// New returns an empty table.
func New[C Conn](cfg Config) (*Table[C], error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	sessions, err := budget.New("sessions", int64(cfg.MaxSessions), int64(cfg.MaxPerCaller))
	if err != nil {
		return nil, err
	}
	return &Table[C]{
		cfg:      cfg,
		epoch:    time.Now(),
		sessions: sessions,
		byID:     make(map[string]*Session[C]),
		byCaller: make(map[string]map[*Session[C]]struct{}),
	}, nil
}

// InstanceID returns the instance id embedded in every session id.
func (t *Table[C]) InstanceID() string { return t.cfg.InstanceID }

func (t *Table[C]) now() int64 { return int64(time.Since(t.epoch)) }

// Open reserves a slot for caller under the caps, dials the upstream session
// with dial, and registers it. dial runs without the table lock held. A cap
// reached is a *budget.ExceededError naming "sessions" or
// "sessions_per_caller".
func (t *Table[C]) Open(ctx context.Context, caller, runtime string, dial func(context.Context) (C, error)) (*Session[C], error) {
	if err := t.reserve(caller); err != nil {
		return nil, err
	}
	conn, err := dial(ctx)
	if err != nil {
		t.unreserve(caller)
		return nil, err
	}
	s := &Session[C]{
		ID: newID(t.cfg.InstanceID), Caller: caller, Runtime: runtime,
		OpenedAt: time.Now(), Conn: conn, table: t,
	}
	s.lastUsed.Store(t.now())
	t.mu.Lock()
	if t.draining {
		t.mu.Unlock()
		t.sessions.Release(caller, 1)
		t.closeSession(s)
		return nil, ErrDraining
	}
	t.byID[s.ID] = s
	set := t.byCaller[caller]
	if set == nil {
		set = make(map[*Session[C]]struct{})
		t.byCaller[caller] = set
	}
	set[s] = struct{}{}
	if t.cfg.IdleTimeout > 0 {
		s.idle = time.AfterFunc(t.cfg.IdleTimeout, s.idleCheck)
	}
	t.mu.Unlock()
	t.cfg.Logger.Info("session opened", "session_id", s.ID, "caller", caller, "runtime", runtime)
	return s, nil
}

func (t *Table[C]) reserve(caller string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return ErrDraining
	}
	switch t.sessions.Fits(caller, 1) {
	case budget.ScopeCaller:
		t.pruneLostLocked(t.byCaller[caller])
	case budget.ScopeGateway:
		if now := t.now(); t.prunedAll == 0 || now-t.prunedAll >= int64(pruneAllEvery) {
			t.prunedAll = now
			for _, set := range t.byCaller {
				t.pruneLostLocked(set)
			}
		}
	}
	return t.sessions.Reserve(caller, 1)
}

func (t *Table[C]) unreserve(caller string) { t.sessions.Release(caller, 1) }

// Sessions returns the session budget: what is held gateway wide and per
// caller (registered sessions plus Opens in progress), for metrics.
func (t *Table[C]) Sessions() *budget.Budget { return t.sessions }

// pruneAllEvery spaces the scans of every session for lost ones that an
// Open at the gateway-wide cap makes: at 100k sessions a scan holds the
// table's lock for milliseconds, which a caller retrying at the cap must
// not be able to repeat at will.
const pruneAllEvery = time.Second

// pruneLostLocked forgets the sessions of set (one caller's) whose upstream
// has ended, so that they stop counting against the caps. Open calls it only
// when a cap would refuse it, so that an Open costs the same with 10 or 100k
// sessions held; until then a lost session stays in the table, reported as
// lost, until a call, its idle timer or such an Open removes it.
func (t *Table[C]) pruneLostLocked(set map[*Session[C]]struct{}) {
	for s := range set {
		if s.Lost() {
			t.removeLocked(s)
		}
	}
}

func (t *Table[C]) removeLocked(s *Session[C]) {
	if t.byID[s.ID] != s {
		return
	}
	delete(t.byID, s.ID)
	t.sessions.Release(s.Caller, 1)
	if set := t.byCaller[s.Caller]; set != nil {
		delete(set, s)
		if len(set) == 0 {
			delete(t.byCaller, s.Caller)
		}
	}
	if s.idle != nil {
		s.idle.Stop()
	}
}

// Get returns caller's live session id, or false. It has no side effects: no
// timer, clock or counter is touched, and nothing is sent upstream. A session
// whose upstream was lost or that is being closed by the caller is reported
// with its state; callers decide how to present it.
func (t *Table[C]) Get(id, caller string) (*Session[C], bool) {
	t.mu.RLock()
	s, ok := t.byID[id]
	t.mu.RUnlock()
	if !ok || s.Caller != caller {
		return nil, false
	}
	return s, true
}

// Acquire returns caller's session for a call and marks it busy; release must
// be called when the call ends, and resets the idle clock. A lost session is
// removed and reported as *LostError; once Drain has begun every Acquire
// reports ErrDraining.
func (t *Table[C]) Acquire(id, caller string) (s *Session[C], release func(), err error) {
	if t.drained.Load() {
		return nil, nil, ErrDraining
	}
	s, ok := t.Get(id, caller)
	if !ok || s.closing.Load() {
		return nil, nil, ErrNotFound
	}
	if s.Lost() {
		t.mu.Lock()
		t.removeLocked(s)
		t.mu.Unlock()
		return nil, nil, &LostError{Err: s.Conn.Err()}
	}
	s.busy.Add(1)
	s.lastUsed.Store(t.now())
	return s, func() {
		s.lastUsed.Store(t.now())
		s.busy.Add(-1)
	}, nil
}

// reasonCloser is a Conn that can tell the runtime why it closes.
type reasonCloser interface {
	CloseWithReason(ctx context.Context, reason string) error
}

// Close closes caller's session gracefully upstream and forgets it. After
// Close returns the session is NOT_FOUND to every lookup.
func (t *Table[C]) Close(ctx context.Context, id, caller string) error {
	return t.CloseWithReason(ctx, id, caller, "")
}

// CloseWithReason is Close, with the caller's reason forwarded to the
// runtime when the connection can carry it.
func (t *Table[C]) CloseWithReason(ctx context.Context, id, caller, reason string) error {
	t.mu.Lock()
	s, ok := t.byID[id]
	if !ok || s.Caller != caller || !s.closing.CompareAndSwap(false, true) {
		t.mu.Unlock()
		return ErrNotFound
	}
	t.removeLocked(s)
	t.mu.Unlock()
	var err error
	if rc, ok := any(s.Conn).(reasonCloser); ok && reason != "" {
		err = rc.CloseWithReason(ctx, reason)
	} else {
		err = s.Conn.Close(ctx)
	}
	t.cfg.Logger.Info("session closed", "session_id", s.ID, "caller", caller, "reason", "close_session")
	return err
}

// List returns caller's sessions, oldest first, lost ones excluded.
func (t *Table[C]) List(caller string) []*Session[C] {
	t.mu.RLock()
	out := make([]*Session[C], 0, len(t.byCaller[caller]))
	for s := range t.byCaller[caller] {
		if !s.Lost() {
			out = append(out, s)
		}
	}
	t.mu.RUnlock()
	sortByOpened(out)
	return out
}

// Len reports the number of sessions in the table.
func (t *Table[C]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.byID)
}

// Drain refuses every later Open, closes all sessions concurrently, and
// waits until they are closed or ctx ends.
func (t *Table[C]) Drain(ctx context.Context) error {
	t.mu.Lock()
	t.draining = true
	t.drained.Store(true)
	all := make([]*Session[C], 0, len(t.byID))
	for _, s := range t.byID {
		if s.closing.CompareAndSwap(false, true) {
			all = append(all, s)
		}
		t.removeLocked(s)
	}
	t.mu.Unlock()
	for _, s := range all {
		t.closers.Add(1)
		go func() {
			defer t.closers.Done()
			cctx, cancel := context.WithTimeout(ctx, t.cfg.CloseTimeout)
			defer cancel()
			_ = s.Conn.Close(cctx)
		}()
	}
	done := make(chan struct{})
	go func() { t.closers.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		<-done // Close is bounded by cctx, which ctx bounds too.
		return ctx.Err()
	}
}

// idleCheck runs on the session's idle timer.
func (s *Session[C]) idleCheck() {
	closed := s.idleCheckOnce()
	if f := s.table.idleChecked; f != nil {
		f(s.ID, closed)
	}
}

// idleCheckOnce closes the session if it is idle, or re-arms its timer; it
// reports whether it closed (or removed) the session.
func (s *Session[C]) idleCheckOnce() bool {
	t := s.table
	if s.closing.Load() {
		return false
	}
	if s.Lost() {
		t.mu.Lock()
		t.removeLocked(s)
		t.mu.Unlock()
		return true
	}
	idleFor := time.Duration(t.now() - s.lastUsed.Load())
	if s.busy.Load() > 0 || s.Conn.ActiveJobs() > 0 || idleFor < t.cfg.IdleTimeout {
		wait := t.cfg.IdleTimeout - idleFor
		if wait <= 0 {
			wait = t.cfg.IdleTimeout
		}
		t.mu.RLock()
		timer := s.idle // assigned under mu by Open, possibly after this timer fired
		t.mu.RUnlock()
		timer.Reset(wait)
		return false
	}
	t.mu.Lock()
	if t.byID[s.ID] != s || !s.closing.CompareAndSwap(false, true) {
		t.mu.Unlock()
		return false
	}
	t.removeLocked(s)
	t.closers.Add(1)
	t.mu.Unlock()
	defer t.closers.Done()
	t.closeSession(s)
	t.cfg.Logger.Info("session closed", "session_id", s.ID, "caller", s.Caller, "reason", "idle", "idle_for", idleFor)
	return true
}

func (t *Table[C]) closeSession(s *Session[C]) {
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.CloseTimeout)
	defer cancel()
	_ = s.Conn.Close(ctx)
}

// Wait waits for every session close the table started (idle closes and
// Drain) to finish.
func (t *Table[C]) Wait() { t.closers.Wait() }

func newID(instance string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails on supported platforms
	return "s1." + instance + "." + base64.RawURLEncoding.EncodeToString(b[:])
}

// ParseID checks the shape of a session id and returns the instance that owns
// it. It does not say whether the session exists.
func ParseID(id string) (instance string, ok bool) {
	rest, found := strings.CutPrefix(id, "s1.")
	if !found {
		return "", false
	}
	instance, secret, found := strings.Cut(rest, ".")
	if !found || !validInstance(instance) || len(secret) != 22 {
		return "", false
	}
	for i := 0; i < len(secret); i++ {
		c := secret[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return "", false
		}
	}
	return instance, true
}

func validInstance(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
