package server

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/directory"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// ageRecords makes every record of owned last written by ago.
func ageRecords(owned []*owned, by time.Duration) {
	for _, o := range owned {
		o.mu.Lock()
		o.written = time.Now().Add(-by)
		o.mu.Unlock()
	}
}

func TestRefreshBudget(t *testing.T) {
	for _, c := range []struct {
		n             int
		pass, refresh time.Duration
		want          int
	}{
		{19000, 250 * time.Millisecond, time.Minute, 2*80 + 1}, // share 79.2
		{2000, 250 * time.Millisecond, time.Minute, 2*9 + 1},   // share 8.3
		{40, time.Second, time.Minute, 2*1 + 1},                // share 0.67
		{0, 250 * time.Millisecond, time.Minute, 0},
		{40, time.Minute, time.Second, 40}, // a pass longer than the period: everything
		{40, 250 * time.Millisecond, 0, 40},
		{40, 0, time.Minute, 40},
	} {
		if got := refreshBudget(c.n, c.pass, c.refresh); got != c.want {
			t.Errorf("refreshBudget(%d, %v, %v) = %d, want %d", c.n, c.pass, c.refresh, got, c.want)
		}
	}
}

// TestRefreshSpread: records that fall due together (RefreshEvery since
// their last write) are rewritten a pass's budget at a time, every one of
// them within a few passes; a record twice overdue is rewritten at once,
// whatever the budget.
func TestRefreshSpread(t *testing.T) {
	const n = 40
	gws, gateways := startReplicaGateways(t, 1, nil)
	ctx := ctxT(t, 30*time.Second)
	for range n {
		if _, err := gws[0].OpenSession(ctx, &sessiongatev1.OpenSessionRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	c := gateways[0].cluster
	c.stopLoop() // the test's passes are the only ones
	owned := c.snapshot()
	if len(owned) != n {
		t.Fatalf("the replica owns %d sessions, want %d", len(owned), n)
	}
	every := c.cfg.RefreshEvery
	age := func(by time.Duration) { ageRecords(owned, by) }
	fresh := func() (k int) {
		for _, o := range owned {
			o.mu.Lock()
			if time.Since(o.written) < every/2 {
				k++
			}
			o.mu.Unlock()
		}
		return k
	}
	budget := refreshBudget(n, c.cfg.AckEvery, every)
	if budget >= n {
		t.Fatalf("budget %d for %d sessions: the test needs one below n", budget, n)
	}
	age(every)
	c.tick()
	if got := fresh(); got != budget {
		t.Fatalf("one pass over %d due records rewrote %d, want the budget %d", n, got, budget)
	}
	passes := 1
	for ; fresh() < n; passes++ {
		if passes > n {
			t.Fatalf("after %d passes %d of %d due records are rewritten", passes, fresh(), n)
		}
		c.tick()
	}
	if want := (n + budget - 1) / budget; passes != want {
		t.Fatalf("the due records took %d passes, want %d (%d a pass)", passes, want, budget)
	}
	age(2 * every)
	c.tick()
	if got := fresh(); got != n {
		t.Fatalf("one pass over %d records twice overdue rewrote %d, want all", n, got)
	}
}

// TestRefreshEveryUnderHalfTTL: a record may wait up to twice RefreshEvery
// for its rewrite, so a RefreshEvery of half the directory's SessionTTL or
// more is refused.
func TestRefreshEveryUnderHalfTTL(t *testing.T) {
	_, gateways := startReplicaGateways(t, 1, nil)
	d := gateways[0].cluster.cfg.Directory
	ttl := d.SessionTTL()
	if ttl != directory.DefaultSessionTTL {
		t.Fatalf("SessionTTL() = %v, want the default %v", ttl, directory.DefaultSessionTTL)
	}
	for _, c := range []struct {
		every time.Duration
		ok    bool
	}{{0, true}, {ttl/2 - time.Second, true}, {ttl / 2, false}, {ttl, false}} {
		cfg := ClusterConfig{Directory: d, Advertise: "127.0.0.1:1", Secret: "0123456789abcdef", RefreshEvery: c.every}
		cfg.setDefaults()
		err := cfg.validate()
		if (err == nil) != c.ok {
			t.Errorf("RefreshEvery %v with SessionTTL %v: validate() = %v, want ok=%v", c.every, ttl, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "SessionTTL") {
			t.Errorf("the refusal does not name SessionTTL: %v", err)
		}
	}
}
