package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiongate/sessiongate/gateway/budget"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeConn struct {
	active  atomic.Int32
	closed  atomic.Int32
	done    chan struct{}
	once    sync.Once
	lostErr error
}

func newFake() *fakeConn { return &fakeConn{done: make(chan struct{})} }

func (f *fakeConn) ActiveJobs() int { return int(f.active.Load()) }
func (f *fakeConn) Close(context.Context) error {
	f.closed.Add(1)
	f.once.Do(func() { close(f.done) })
	return nil
}
func (f *fakeConn) Done() <-chan struct{} { return f.done }
func (f *fakeConn) Err() error            { return f.lostErr }
func (f *fakeConn) lose(err error) {
	f.lostErr = err
	f.once.Do(func() { close(f.done) })
}

func newTable(t *testing.T, cfg Config) *Table[*fakeConn] {
	t.Helper()
	return newTableOf[*fakeConn](t, cfg)
}

// newTableOf is newTable for any Conn type, drained when the test ends.
func newTableOf[C Conn](t *testing.T, cfg Config) *Table[C] {
	t.Helper()
	if cfg.InstanceID == "" {
		cfg.InstanceID = "gw-test"
	}
	tb, err := New[C](cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tb.Drain(ctx)
		tb.Wait()
	})
	return tb
}

func open(t *testing.T, tb *Table[*fakeConn], caller string) (*Session[*fakeConn], *fakeConn) {
	t.Helper()
	fc := newFake()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := tb.Open(ctx, caller, "default", func(context.Context) (*fakeConn, error) { return fc, nil })
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s, fc
}

func TestIDShape(t *testing.T) {
	tb := newTable(t, Config{InstanceID: "gw-1"})
	s, _ := open(t, tb, "alice")
	inst, ok := ParseID(s.ID)
	if !ok || inst != "gw-1" {
		t.Fatalf("ParseID(%q) = %q, %v", s.ID, inst, ok)
	}
	s2, _ := open(t, tb, "alice")
	if s2.ID == s.ID {
		t.Fatal("two sessions got the same id")
	}
	for _, bad := range []string{"", "s1.", "s1.gw-1", "s1.gw-1.short", "s2.gw-1.AAAAAAAAAAAAAAAAAAAAAA",
		"s1.GW.AAAAAAAAAAAAAAAAAAAAAA", "s1.gw-1.AAAAAAAAAAAAAAAAAAAA==", "s1.gw-1.AAAAAAAAAAAAAAAAAAAAA!"} {
		if _, ok := ParseID(bad); ok {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
	if _, err := New[*fakeConn](Config{InstanceID: "Bad_Instance"}); err == nil {
		t.Error("invalid instance id accepted")
	}
}

func TestCallerIsolation(t *testing.T) {
	tb := newTable(t, Config{})
	s, fc := open(t, tb, "alice")
	if _, ok := tb.Get(s.ID, "bob"); ok {
		t.Fatal("bob sees alice's session")
	}
	if _, _, err := tb.Acquire(s.ID, "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob Acquire: %v", err)
	}
	ctx := context.Background()
	if err := tb.Close(ctx, s.ID, "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("bob Close: %v", err)
	}
	if fc.closed.Load() != 0 {
		t.Fatal("bob's Close reached alice's upstream")
	}
	if got := tb.List("bob"); len(got) != 0 {
		t.Fatalf("bob lists %d sessions", len(got))
	}
	if got := tb.List("alice"); len(got) != 1 || got[0] != s {
		t.Fatalf("alice lists %v", got)
	}
	if err := tb.Close(ctx, s.ID, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.Get(s.ID, "alice"); ok || fc.closed.Load() != 1 {
		t.Fatal("closed session still found, or upstream not closed")
	}
}

func TestCaps(t *testing.T) {
	tb := newTable(t, Config{MaxPerCaller: 2, MaxSessions: 3})
	open(t, tb, "a")
	_, lostConn := open(t, tb, "a")
	var ce *budget.ExceededError
	_, err := tb.Open(context.Background(), "a", "default", func(context.Context) (*fakeConn, error) { return newFake(), nil })
	if !errors.As(err, &ce) || ce.Budget != "sessions_per_caller" || ce.Limit != 2 {
		t.Fatalf("third session for a: %v", err)
	}
	// A lost session stops counting.
	lostConn.lose(errors.New("gone"))
	open(t, tb, "a")
	open(t, tb, "b")
	_, err = tb.Open(context.Background(), "c", "default", func(context.Context) (*fakeConn, error) { return newFake(), nil })
	if !errors.As(err, &ce) || ce.Budget != "sessions" {
		t.Fatalf("fourth session: %v", err)
	}
	// A failed dial releases its reservation.
	tb2 := newTable(t, Config{MaxPerCaller: 1})
	dialErr := errors.New("dial failed")
	if _, err := tb2.Open(context.Background(), "a", "d", func(context.Context) (*fakeConn, error) { return nil, dialErr }); !errors.Is(err, dialErr) {
		t.Fatal(err)
	}
	open(t, tb2, "a")
	if got := tb2.Sessions().Stats().InUse; got != 1 {
		t.Fatalf("session budget holds %d after one failed and one good Open, want 1", got)
	}
}

// TestSessionBudgetReleased: every way a session leaves the table gives its
// unit back, so the caps count exactly the sessions that exist.
func TestSessionBudgetReleased(t *testing.T) {
	tb := newTable(t, Config{MaxPerCaller: 3})
	a, _ := open(t, tb, "a")
	lostS, lost := open(t, tb, "a")
	c, _ := open(t, tb, "a")
	if err := tb.Close(context.Background(), a.ID, "a"); err != nil {
		t.Fatal(err)
	}
	lost.lose(errors.New("gone"))
	if _, _, err := tb.Acquire(c.ID, "a"); err != nil {
		t.Fatal(err)
	}
	open(t, tb, "a") // under the cap: the lost one still counts
	if got := tb.Sessions().InUse("a"); got != 3 {
		t.Fatalf("caller holds %d session units, want 3 (one closed; lost, live, new)", got)
	}
	open(t, tb, "a") // at the cap: prunes the lost one
	if got := tb.Sessions().InUse("a"); got != 3 {
		t.Fatalf("caller holds %d session units, want 3 (the lost one pruned, two new)", got)
	}
	if _, ok := tb.Get(lostS.ID, "a"); ok {
		t.Fatal("the lost session is still in the table after an Open at the cap")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tb.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := tb.Sessions().Stats(); st.InUse != 0 || st.Overreleased != 0 {
		t.Fatalf("after Drain: %+v", st)
	}
}

// countingConn counts the calls of Done, which is how the table asks
// whether a session is lost.
type countingConn struct {
	*fakeConn
	asked *atomic.Int64
}

func (c countingConn) Done() <-chan struct{} { c.asked.Add(1); return c.fakeConn.Done() }

// TestOpenDoesNotScan: an Open under the caps looks at no other session, so
// it costs the same with 10 or 100k held (each Open once scanned every
// session of its caller under the table's write lock: quadratic, 50 s of
// CPU to open 19k); an Open that a cap would refuse scans what that cap
// counts, the gateway-wide set at most once per pruneAllEvery.
func TestOpenDoesNotScan(t *testing.T) {
	tb := newTableOf[countingConn](t, Config{MaxSessions: 6, MaxPerCaller: 4})
	var asked atomic.Int64
	openAs := func(caller string) (countingConn, error) {
		c := countingConn{newFake(), &asked}
		_, err := tb.Open(context.Background(), caller, "default", func(context.Context) (countingConn, error) { return c, nil })
		return c, err
	}
	mustOpen := func(caller string) countingConn {
		t.Helper()
		c, err := openAs(caller)
		if err != nil {
			t.Fatalf("Open for %s: %v", caller, err)
		}
		return c
	}
	a1 := mustOpen("a")
	for range 2 {
		mustOpen("a")
	}
	b1 := mustOpen("b")
	mustOpen("b")
	a1.lose(errors.New("gone"))
	b1.lose(errors.New("gone"))
	if asked.Load() != 0 {
		t.Fatalf("Opens under the caps asked %d sessions whether they were lost, want 0", asked.Load())
	}
	// a's fourth fits its cap (4) and the gateway's (6): no scan.
	mustOpen("a")
	if asked.Load() != 0 {
		t.Fatalf("an Open under the caps asked %d sessions, want 0", asked.Load())
	}
	// a's fifth is over a's cap: a's four sessions are asked, the lost one
	// goes, and the Open succeeds.
	mustOpen("a")
	if got := asked.Load(); got != 4 {
		t.Fatalf("an Open at the caller's cap asked %d sessions, want a's 4", got)
	}
	// c's first is over the gateway's cap (a 4, b 2): every session is
	// asked, b's lost one goes, and the Open succeeds.
	asked.Store(0)
	mustOpen("c")
	if got := asked.Load(); got != 6 {
		t.Fatalf("an Open at the gateway's cap asked %d sessions, want all 6", got)
	}
	// The gateway is full of live sessions; within pruneAllEvery of that
	// scan, a refused Open scans nothing.
	var ee *budget.ExceededError
	if _, err := openAs("d"); !errors.As(err, &ee) || ee.Budget != "sessions" {
		t.Fatalf("Open over the gateway's cap: %v, want the sessions budget exceeded", err)
	}
	if got := asked.Load(); got != 6 {
		t.Fatalf("a second Open at the gateway's cap within %v asked %d more sessions, want 0", pruneAllEvery, got-6)
	}
}

func TestGetHasNoSideEffects(t *testing.T) {
	tb := newTable(t, Config{})
	s, _ := open(t, tb, "alice")
	before := s.lastUsed.Load()
	for range 1000 {
		if _, ok := tb.Get(s.ID, "alice"); !ok {
			t.Fatal("not found")
		}
	}
	if s.lastUsed.Load() != before || s.busy.Load() != 0 {
		t.Fatal("Get changed the session's idle clock or busy count")
	}
	_, release, err := tb.Acquire(s.ID, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if s.busy.Load() != 1 {
		t.Fatal("Acquire did not mark busy")
	}
	release()
	if s.busy.Load() != 0 || s.lastUsed.Load() == before {
		t.Fatal("release did not reset the idle clock")
	}
}

func TestLostSession(t *testing.T) {
	tb := newTable(t, Config{})
	s, fc := open(t, tb, "alice")
	cause := errors.New("RESUME_WINDOW_EXPIRED")
	fc.lose(cause)
	if got, ok := tb.Get(s.ID, "alice"); !ok || !got.Lost() {
		t.Fatal("Get should still return the session, marked lost")
	}
	var le *LostError
	if _, _, err := tb.Acquire(s.ID, "alice"); !errors.As(err, &le) || !errors.Is(err, cause) {
		t.Fatalf("Acquire on lost session: %v", err)
	}
	if _, ok := tb.Get(s.ID, "alice"); ok {
		t.Fatal("lost session not removed by Acquire")
	}
}

func TestIdleClose(t *testing.T) {
	const idle = 50 * time.Millisecond
	checks := make(chan [2]any, 64)
	tb, err := New[*fakeConn](Config{InstanceID: "gw-test", IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	tb.idleChecked = func(id string, closed bool) {
		select {
		case checks <- [2]any{id, closed}:
		default:
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tb.Drain(ctx)
		tb.Wait()
	})
	busy, busyConn := open(t, tb, "a")
	jobs, jobsConn := open(t, tb, "a")
	idleS, idleConn := open(t, tb, "a")
	_, release, err := tb.Acquire(busy.ID, "a")
	if err != nil {
		t.Fatal(err)
	}
	jobsConn.active.Store(1)

	// Wait on the idle checks themselves, not on the clock: the idle
	// session is closed by its first check; the busy one and the one with a
	// running job survive two checks each.
	survived := map[string]int{}
	for closedIdle := false; !closedIdle || survived[busy.ID] < 2 || survived[jobs.ID] < 2; {
		select {
		case c := <-checks:
			id, closed := c[0].(string), c[1].(bool)
			switch {
			case id == idleS.ID && closed:
				closedIdle = true
			case id == idleS.ID:
				t.Fatal("an idle session's check did not close it")
			case closed:
				t.Fatal("a busy session or one with running jobs was closed as idle")
			default:
				survived[id]++
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("idle checks stalled: idle closed, survived %v", survived)
		}
	}
	if _, ok := tb.Get(idleS.ID, "a"); ok || idleConn.closed.Load() != 1 {
		t.Fatal("idle-closed session still in the table, or not closed upstream")
	}
	if busyConn.closed.Load() != 0 || jobsConn.closed.Load() != 0 {
		t.Fatal("a busy session or one with running jobs was closed")
	}
	release()
	jobsConn.active.Store(0)
	for _, c := range []*fakeConn{busyConn, jobsConn} {
		select {
		case <-c.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("session not closed once idle")
		}
	}
}

func TestDrain(t *testing.T) {
	tb := newTable(t, Config{})
	_, c1 := open(t, tb, "a")
	_, c2 := open(t, tb, "b")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := tb.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if c1.closed.Load() != 1 || c2.closed.Load() != 1 || tb.Len() != 0 {
		t.Fatal("Drain did not close every session")
	}
	if _, err := tb.Open(ctx, "a", "d", func(context.Context) (*fakeConn, error) { return newFake(), nil }); !errors.Is(err, ErrDraining) {
		t.Fatalf("Open after Drain: %v", err)
	}
	if _, _, err := tb.Acquire("s1.gw-test.AAAAAAAAAAAAAAAAAAAAAA", "a"); !errors.Is(err, ErrDraining) {
		t.Fatalf("Acquire after Drain: %v", err)
	}
}
