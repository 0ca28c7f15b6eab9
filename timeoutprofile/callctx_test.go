package timeoutprofile

import (
	"context"
	"errors"
	"testing"
	"time"
)

var testMethod = &method{full: "/pkg.Svc/M", service: "pkg.Svc", name: "M", obs: nopObserver{}}

// newTestCallCtx returns a unary callCtx with budget d under parent.
func newTestCallCtx(t *testing.T, parent context.Context, d time.Duration) *callCtx {
	t.Helper()
	p := &Profile{Name: "p", Default: d, Min: time.Millisecond, Max: time.Hour}
	now := time.Now()
	b := computeBudget(p, now, time.Time{}, false, 0, false)
	c := newCallCtx(parent, testMethod, p, now, b, LimitUnary, nil)
	c.arm(now)
	t.Cleanup(func() { c.finish(time.Now()) })
	return c
}

// wait waits for ch to close, failing the test after 10 s.
func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func TestCallCtxFires(t *testing.T) {
	c := newTestCallCtx(t, context.Background(), 30*time.Millisecond)
	if dl, ok := c.Deadline(); !ok || !dl.Equal(c.deadline) {
		t.Errorf("Deadline() = %v, %v", dl, ok)
	}
	before, cancelBefore := context.WithCancel(c) // derived before the limit fires
	defer cancelBefore()
	if c.Err() != nil || context.Cause(c) != nil {
		t.Fatalf("Err %v Cause %v before firing", c.Err(), context.Cause(c))
	}
	wait(t, c.Done(), "the limit")
	if c.Err() != context.DeadlineExceeded {
		t.Errorf("Err() = %v, want DeadlineExceeded", c.Err())
	}
	var te *TimeoutError
	if !errors.As(context.Cause(c), &te) {
		t.Fatalf("Cause = %v, want *TimeoutError", context.Cause(c))
	}
	if te.Limit != LimitUnary || te.Configured != 30*time.Millisecond || te.Elapsed < 30*time.Millisecond || te.Profile != "p" || te.Service != "pkg.Svc" || te.Method != "M" {
		t.Errorf("cause = %+v", te)
	}
	if !errors.Is(context.Cause(c), context.DeadlineExceeded) {
		t.Error("cause is not DeadlineExceeded")
	}
	wait(t, before.Done(), "the derived context")
	if before.Err() != context.DeadlineExceeded || context.Cause(before) != te {
		t.Errorf("derived before: Err %v Cause %v", before.Err(), context.Cause(before))
	}
	after, cancelAfter := context.WithTimeout(c, time.Hour) // derived after
	defer cancelAfter()
	wait(t, after.Done(), "the context derived after")
	if after.Err() != context.DeadlineExceeded || context.Cause(after) != te {
		t.Errorf("derived after: Err %v Cause %v", after.Err(), context.Cause(after))
	}
	if got := c.finish(time.Now()); got != te {
		t.Errorf("finish() = %v, want the cause", got)
	}
	if c.Err() != context.DeadlineExceeded {
		t.Errorf("Err() after finish = %v", c.Err())
	}
}

func TestCallCtxParentCancelled(t *testing.T) {
	parent, cancel := context.WithCancelCause(context.Background())
	c := newTestCallCtx(t, parent, time.Hour)
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	stop := context.AfterFunc(c, func() {})
	defer stop()
	done := c.Done()
	reason := errors.New("caller went away")
	cancel(reason)
	wait(t, done, "the parent's cancellation")
	if c.Err() != context.Canceled || context.Cause(c) != reason {
		t.Errorf("Err %v Cause %v", c.Err(), context.Cause(c))
	}
	wait(t, child.Done(), "the derived context")
	if child.Err() != context.Canceled || context.Cause(child) != reason {
		t.Errorf("child: Err %v Cause %v", child.Err(), context.Cause(child))
	}
	if te := c.finish(time.Now()); te != nil {
		t.Errorf("finish() = %v, want nil", te)
	}
}

func TestCallCtxParentCancelledNobodyWatching(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	c := newTestCallCtx(t, parent, time.Hour)
	cancel()
	// No Done call, so no registration: Err must still see it.
	if c.Err() != context.Canceled {
		t.Errorf("Err() = %v", c.Err())
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Err reported the cancellation")
	}
}

func TestCallCtxParentDeadlineKept(t *testing.T) {
	// A context without a budget of its own (stream limits only) reports the
	// parent's deadline.
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	p := &Profile{Name: "p", Default: time.Second, Max: time.Hour}
	now := time.Now()
	c := newCallCtx(parent, testMethod, p, now, budget{infinite: true}, LimitTotal, &StreamingPolicy{Gap: time.Hour})
	c.arm(now)
	defer c.finish(time.Now())
	pd, _ := parent.Deadline()
	if dl, ok := c.Deadline(); !ok || !dl.Equal(pd) {
		t.Errorf("Deadline() = %v %v, want the parent's %v", dl, ok, pd)
	}
}

func TestCallCtxFinish(t *testing.T) {
	c := newTestCallCtx(t, context.Background(), time.Hour)
	child, cancelChild := context.WithCancel(c)
	defer cancelChild()
	if te := c.finish(time.Now()); te != nil {
		t.Fatalf("finish() = %v", te)
	}
	if c.Err() != context.Canceled || context.Cause(c) != context.Canceled {
		t.Errorf("Err %v Cause %v", c.Err(), context.Cause(c))
	}
	wait(t, c.Done(), "Done after finish")
	wait(t, child.Done(), "the derived context after finish")
	if c.slot != nil {
		t.Error("timer slot not released")
	}
	c.onTimer() // a late firing changes nothing
	if c.Err() != context.Canceled {
		t.Errorf("Err after a late firing = %v", c.Err())
	}
	if te := c.finish(time.Now()); te != nil {
		t.Errorf("second finish() = %v", te)
	}
}

func TestCallCtxFinishAfterDue(t *testing.T) {
	// The deadline passed but the timer callback has not run: finish
	// reports the timeout all the same.
	p := &Profile{Name: "p", Default: time.Millisecond, Max: time.Hour}
	start := time.Now().Add(-time.Second)
	b := computeBudget(p, start, time.Time{}, false, 0, false)
	c := newCallCtx(context.Background(), testMethod, p, start, b, LimitUnary, nil)
	te := c.finish(time.Now()) // never armed
	if te == nil || te.Limit != LimitUnary || te.Elapsed < time.Second {
		t.Fatalf("finish() = %+v", te)
	}
	if c.Err() != context.DeadlineExceeded || context.Cause(c) != te {
		t.Errorf("Err %v Cause %v", c.Err(), context.Cause(c))
	}
}

func TestCallCtxStaleFiring(t *testing.T) {
	// A slot reused by a new context must ignore its previous owner's firing.
	c := newTestCallCtx(t, context.Background(), time.Hour)
	c.slot.fire() // as if a stale callback ran now
	if c.Err() != nil {
		t.Errorf("stale firing cancelled the context: %v", c.Err())
	}
}

func TestCallCtxAfterFuncWhenDone(t *testing.T) {
	c := newTestCallCtx(t, context.Background(), time.Hour)
	c.finish(time.Now())
	ran := make(chan struct{})
	stop := c.AfterFunc(func() { close(ran) })
	wait(t, ran, "AfterFunc on an ended context")
	if stop() {
		t.Error("stop() = true after f ran")
	}
	// context.AfterFunc through the context package.
	ran2 := make(chan struct{})
	context.AfterFunc(c, func() { close(ran2) })
	wait(t, ran2, "context.AfterFunc")
}

func TestCallCtxAfterFuncStop(t *testing.T) {
	c := newTestCallCtx(t, context.Background(), time.Hour)
	ran := false
	stop := c.AfterFunc(func() { ran = true })
	if !stop() {
		t.Error("stop() = false before c ended")
	}
	c.finish(time.Now())
	if ran {
		t.Error("stopped func ran")
	}
}

func TestCallCtxValue(t *testing.T) {
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, "v")
	c := newTestCallCtx(t, parent, 10*time.Millisecond)
	if c.Value(key{}) != "v" {
		t.Error("value not found before firing")
	}
	wait(t, c.Done(), "the limit")
	if c.Value(key{}) != "v" {
		t.Error("value not found after firing")
	}
	if s := c.String(); s == "" {
		t.Error("empty String()")
	}
}

func TestCallCtxStreamLimits(t *testing.T) {
	p := &Profile{Name: "s", Default: time.Second, Max: time.Hour}
	run := func(t *testing.T, pol StreamingPolicy, total time.Duration, sends int, every time.Duration) *TimeoutError {
		t.Helper()
		now := time.Now()
		var b budget
		if total > 0 {
			b = budget{own: true, timeout: total, deadline: now.Add(total)}
		}
		c := newCallCtx(context.Background(), testMethod, p, now, b, LimitTotal, &pol)
		c.arm(now)
		defer c.finish(time.Now())
		for range sends {
			tm := time.NewTimer(every)
			select {
			case <-tm.C:
			case <-c.Done():
				tm.Stop()
			}
			if te := c.sending(); te != nil {
				return te
			}
		}
		wait(t, c.Done(), "a stream limit")
		te, _ := context.Cause(c).(*TimeoutError)
		return te
	}
	t.Run("initial", func(t *testing.T) {
		te := run(t, StreamingPolicy{Initial: 20 * time.Millisecond, Gap: time.Hour}, 0, 0, 0)
		if te == nil || te.Limit != LimitInitial || te.Configured != 20*time.Millisecond {
			t.Errorf("cause = %+v", te)
		}
	})
	t.Run("gap", func(t *testing.T) {
		te := run(t, StreamingPolicy{Initial: time.Hour, Gap: 30 * time.Millisecond}, 0, 2, time.Millisecond)
		if te == nil || te.Limit != LimitGap || te.Configured != 30*time.Millisecond || te.Elapsed < 30*time.Millisecond {
			t.Errorf("cause = %+v", te)
		}
	})
	t.Run("gap only", func(t *testing.T) {
		// No limit until the first message; then the gap.
		te := run(t, StreamingPolicy{Gap: 30 * time.Millisecond}, 0, 1, time.Millisecond)
		if te == nil || te.Limit != LimitGap || te.Configured != 30*time.Millisecond {
			t.Errorf("cause = %+v", te)
		}
	})
	t.Run("total", func(t *testing.T) {
		te := run(t, StreamingPolicy{Initial: time.Hour, Gap: time.Hour}, 40*time.Millisecond, 1000, 5*time.Millisecond)
		if te == nil || te.Limit != LimitTotal || te.Configured != 40*time.Millisecond {
			t.Errorf("cause = %+v", te)
		}
	})
}

// TestCallCtxConcurrent races the limit, the parent's cancellation, finish
// and derived contexts, for the race detector and for consistency: once Err
// is non-nil it never changes, and every derived context ends.
func TestCallCtxConcurrent(t *testing.T) {
	for i := range 200 {
		parent, cancel := context.WithCancel(context.Background())
		d := time.Duration(i%3) * time.Millisecond
		p := &Profile{Name: "p", Default: time.Millisecond, Max: time.Hour}
		now := time.Now()
		c := newCallCtx(parent, testMethod, p, now, budget{own: true, timeout: d, deadline: now.Add(d)}, LimitUnary, nil)
		c.arm(now)
		done := make(chan struct{})
		var children [4]context.Context
		var cancels [4]context.CancelFunc
		for j := range children {
			go func() {
				children[j], cancels[j] = context.WithCancel(c)
				if j == 0 {
					cancels[j]()
				}
				_ = c.Value(j)
				done <- struct{}{}
			}()
		}
		if i%2 == 0 {
			cancel()
		}
		for range children {
			wait(t, done, "a goroutine")
		}
		c.finish(time.Now())
		first := c.Err()
		if first == nil {
			t.Fatal("Err() nil after finish")
		}
		for _, ctx := range children {
			wait(t, ctx.Done(), "a derived context")
		}
		if c.Err() != first {
			t.Fatalf("Err changed from %v to %v", first, c.Err())
		}
		for _, cc := range cancels {
			cc()
		}
		cancel()
		close(done)
	}
}
