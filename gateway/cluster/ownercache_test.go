package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

func TestOwnerCache(t *testing.T) {
	t0 := time.Unix(1000, 0)
	c := NewOwnerCache(time.Second, 4)
	c.Put("s1", "alice", "gw-1", "a:1", t0)
	if o, a, ok := c.Get("s1", "alice", t0.Add(999*time.Millisecond)); !ok || o != "gw-1" || a != "a:1" {
		t.Fatalf("fresh entry: %q %q %v", o, a, ok)
	}
	if _, _, ok := c.Get("s1", "mallory", t0); ok {
		t.Fatal("another caller's entry was a hit")
	}
	if _, _, ok := c.Get("s1", "alice", t0.Add(time.Second)); ok {
		t.Fatal("expired entry was a hit")
	}
	if c.Len() != 0 {
		t.Fatal("expired entry not dropped")
	}
	c.Put("s1", "alice", "", "a:1", t0)
	c.Put("s2", "alice", "gw-1", "", t0)
	if c.Len() != 0 {
		t.Fatal("an entry without owner or address was kept")
	}
	for i := range 10 {
		c.Put(fmt.Sprint("s", i), "alice", "gw-1", "a:1", t0)
	}
	if c.Len() > 4 {
		t.Fatalf("cache holds %d entries, max 4", c.Len())
	}
	c.Forget("s9")
	if _, _, ok := c.Get("s9", "alice", t0); ok {
		t.Fatal("forgotten entry was a hit")
	}
	if NewOwnerCache(0, 0).Put("s", "a", "o", "x", t0); NewOwnerCache(-1, 0).Len() != 0 {
		t.Fatal("a cache with TTL ≤ 0 keeps entries")
	}
}

func TestAfter(t *testing.T) {
	for _, tc := range []struct {
		r                Reply
		used, hint       string
		attempt          int
		wantKeep, wantRe bool
	}{
		{Served, "gw-1", "gw-1", 0, true, false},
		{Served, "gw-1", "", 0, true, false},
		{Served, "gw-1", "gw-2", 0, false, false}, // the hint names another owner
		{Refused, "gw-1", "", 0, false, true},
		{Refused, "gw-1", "", 1, false, false}, // once only
		{Failed, "gw-1", "gw-1", 0, false, false},
	} {
		keep, retry := After(tc.r, tc.used, tc.hint, tc.attempt)
		if keep != tc.wantKeep || retry != tc.wantRe {
			t.Errorf("After(%v, %q, %q, %d) = %v, %v; want %v, %v", tc.r, tc.used, tc.hint, tc.attempt, keep, retry, tc.wantKeep, tc.wantRe)
		}
	}
}

// TestStaleCacheNeverMisdelivers runs random schedules of ownership changes
// (takeovers, handoffs, lost leases) and client calls through replicas
// that cache owners, with the rules of Route on every replica, and checks
// after every call that it was served by the replica that owned the
// session at that moment, or refused/failed — never served elsewhere — and
// that no call was forwarded twice. A deliberately broken receiver (one
// that serves a forwarded call it does not own) is caught.
func TestStaleCacheNeverMisdelivers(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		if err := staleCacheSchedule(seed, false); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	caught := false
	for seed := uint64(1); seed <= 300 && !caught; seed++ {
		caught = staleCacheSchedule(seed, true) != nil
	}
	if !caught {
		t.Fatal("a receiver that serves forwarded calls it does not own was not caught")
	}
}

func staleCacheSchedule(seed uint64, broken bool) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	const n = 3
	names := []string{"gw-0", "gw-1", "gw-2"}
	owner := 0 // index; -1 = released
	live := []bool{true, true, true}
	caches := make([]*OwnerCache, n)
	for i := range caches {
		caches[i] = NewOwnerCache(time.Hour, 0) // never expires: only the rules keep it safe
	}
	now := time.Unix(0, 0)
	addr := func(i int) string { return fmt.Sprint("10.0.0.", i, ":1") }
	// receive is replica j getting a forwarded call: Route with its facts.
	receive := func(j int) (served bool, refused bool) {
		if broken {
			return true, false
		}
		f := Facts{Self: names[j], Local: owner == j, Forwarded: true, Dir: DirRecord, CallerMatches: true}
		if owner >= 0 {
			f.Owner, f.OwnerLive, f.OwnerAddr = names[owner], live[owner], addr(owner)
		}
		switch Route(f) {
		case Serve:
			return true, false
		case TakeOver:
			owner, live[j] = j, true // the epoch CAS: j is the owner now
			return true, false
		case Forward:
			panic("a forwarded call was forwarded again")
		}
		return false, true // Misrouted: NOT_OWNER
	}
	for step := range 200 {
		now = now.Add(time.Millisecond)
		switch rng.IntN(4) {
		case 0: // ownership moves (takeover by another replica, or adoption after a handoff)
			owner = rng.IntN(n)
			live[owner] = true
		case 1: // a handoff: released
			owner = -1
		case 2: // a lease is lost (crash); it comes back with a restart
			i := rng.IntN(n)
			live[i] = !live[i]
		default: // a client call through replica i
			i := rng.IntN(n)
			for attempt := 0; attempt < 2; attempt++ {
				if owner == i {
					break // served locally by the owner
				}
				target, ok := -1, false
				if attempt == 0 {
					var a string
					if _, a, ok = caches[i].Get("s", "alice", now); ok {
						fmt.Sscanf(a, "10.0.0.%d:1", &target)
					}
				}
				if !ok {
					f := Facts{Self: names[i], Dir: DirRecord, CallerMatches: true}
					if owner >= 0 {
						f.Owner, f.OwnerLive, f.OwnerAddr = names[owner], live[owner], addr(owner)
					}
					if Route(f) != Forward {
						owner, live[i] = i, true // TakeOver (or Misrouted: no live address)
						break
					}
					target = owner
					caches[i].Put("s", "alice", names[owner], addr(owner), now)
				}
				if !live[target] {
					caches[i].Forget("s") // unreachable: Failed
					break
				}
				served, refused := receive(target)
				if served && owner != target {
					return fmt.Errorf("step %d: a call through %s was served by %s, which does not own the session (owner %d)", step, names[i], names[target], owner)
				}
				r := Served
				if refused {
					r = Refused
				}
				hint := ""
				if served {
					hint = names[target]
				}
				keep, retry := After(r, names[target], hint, attempt)
				if !keep {
					caches[i].Forget("s")
				}
				if !retry {
					break
				}
			}
		}
	}
	return nil
}
