package tombstone

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestTTLFormula(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name                    string
		req, init, back, budget time.Duration
		want                    time.Duration
	}{
		{"defaults", 30 * s, 10 * s, 30 * s, 0, 75 * s},
		{"budget below request timeout uses the default", 30 * s, 10 * s, 30 * s, 5 * s, 75 * s},
		{"budget equal to request timeout", 30 * s, 10 * s, 30 * s, 30 * s, 75 * s},
		{"long call extends the TTL", 30 * s, 10 * s, 30 * s, 120 * s, 165 * s},
		{"one hour call", 30 * s, 10 * s, 30 * s, time.Hour, time.Hour + 45*s},
		{"other configuration", 5 * s, 2 * s, 10 * s, 0, 22 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := TTL(tt.req, tt.init, tt.back, tt.budget); got != tt.want {
				t.Fatalf("TTL = %v, want %v", got, tt.want)
			}
		})
	}
	if got := TTLWithSlack(time.Second, time.Second, time.Second, 0, 0); got != 3*time.Second {
		t.Fatalf("TTLWithSlack = %v", got)
	}
}

func TestInsertContainsTake(t *testing.T) {
	s := New(10, WithEpoch(t0))
	if s.Contains("a", t0) {
		t.Fatal("empty store contains a")
	}
	s.Insert("a", 75*time.Second, t0)
	if !s.Contains("a", t0) || !s.Contains("a", t0.Add(74*time.Second)) {
		t.Fatal("a not contained within its TTL")
	}
	if s.Contains("b", t0) {
		t.Fatal("b contained")
	}
	if s.Contains("a", t0.Add(75*time.Second)) {
		t.Fatal("a contained at its expiry")
	}
	if !s.Take("a", t0.Add(time.Second)) {
		t.Fatal("Take(a) = false")
	}
	if s.Take("a", t0.Add(time.Second)) || s.Contains("a", t0) || s.Len() != 0 {
		t.Fatal("a still there after Take")
	}
	st := s.Stats()
	if st.Inserted != 1 || st.Taken != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestExpiryNeverEarly: an entry is held for at least its TTL and at most one
// tick longer, whatever the tick.
func TestExpiryNeverEarly(t *testing.T) {
	for _, res := range []time.Duration{time.Millisecond, 7 * time.Millisecond, time.Second} {
		t.Run(res.String(), func(t *testing.T) {
			s := New(1000, WithEpoch(t0), WithResolution(res))
			for i := range 200 {
				now := t0.Add(time.Duration(i) * 3 * time.Millisecond)
				ttl := time.Duration(10+i%17) * time.Millisecond
				key := strconv.Itoa(i)
				s.Insert(key, ttl, now)
				if !s.Contains(key, now.Add(ttl-time.Nanosecond)) {
					t.Fatalf("%s expired before its TTL", key)
				}
				if s.Contains(key, now.Add(ttl+res)) {
					t.Fatalf("%s outlived TTL + one tick", key)
				}
			}
		})
	}
}

func TestExpireRemovesOnlyExpired(t *testing.T) {
	s := New(100, WithEpoch(t0), WithResolution(time.Millisecond))
	for i := range 50 {
		s.Insert("short"+strconv.Itoa(i), 10*time.Millisecond, t0)
		s.Insert("long"+strconv.Itoa(i), time.Second, t0)
	}
	if n := s.Expire(t0.Add(9 * time.Millisecond)); n != 0 {
		t.Fatalf("Expire before TTL removed %d", n)
	}
	if n := s.Expire(t0.Add(10 * time.Millisecond)); n != 50 {
		t.Fatalf("Expire at TTL removed %d, want 50", n)
	}
	if s.Len() != 50 || !s.Contains("long7", t0.Add(10*time.Millisecond)) || s.Contains("short7", t0) {
		t.Fatalf("wrong entries left: len %d", s.Len())
	}
	if n := s.Expire(t0.Add(time.Hour)); n != 50 || s.Len() != 0 {
		t.Fatalf("final Expire removed %d, len %d", n, s.Len())
	}
	if st := s.Stats(); st.Expired != 100 {
		t.Fatalf("stats = %+v", st)
	}
	if _, ok := s.NextExpiry(); ok {
		t.Fatal("NextExpiry on an empty wheel")
	}
}

// TestExpireCostIsOExpired checks the number of hashes Expire visits, not
// time: expiring k entries of a large store touches about k hashes.
func TestExpireCostIsOExpired(t *testing.T) {
	const big = 100_000
	s := New(big+100, WithEpoch(t0), WithResolution(time.Millisecond))
	for i := range big {
		s.Insert("long"+strconv.Itoa(i), time.Hour, t0)
	}
	for i := range 100 {
		s.Insert("short"+strconv.Itoa(i), time.Duration(1+i%5)*time.Millisecond, t0)
	}
	before := s.queued
	n := s.Expire(t0.Add(10 * time.Millisecond))
	visited := before - s.queued
	if n != 100 || visited != 100 {
		t.Fatalf("Expire removed %d and visited %d hashes, want 100 and 100", n, visited)
	}
	if s.Len() != big {
		t.Fatalf("len %d", s.Len())
	}
}

func TestReinsertExtends(t *testing.T) {
	s := New(10, WithEpoch(t0), WithResolution(time.Millisecond))
	s.Insert("a", 10*time.Millisecond, t0)
	s.Insert("a", 100*time.Millisecond, t0)
	s.Insert("a", 5*time.Millisecond, t0) // shorter: ignored
	if n := s.Expire(t0.Add(50 * time.Millisecond)); n != 0 || !s.Contains("a", t0.Add(50*time.Millisecond)) {
		t.Fatalf("re-inserted key expired at its first TTL (n=%d)", n)
	}
	if n := s.Expire(t0.Add(100 * time.Millisecond)); n != 1 {
		t.Fatalf("Expire = %d, want 1", n)
	}
	if st := s.Stats(); st.Inserted != 1 {
		t.Fatalf("re-insertions counted as inserts: %+v", st)
	}
}

func TestOverflowEvictsSoonestExpiring(t *testing.T) {
	s := New(3, WithEpoch(t0), WithResolution(time.Millisecond))
	s.Insert("c", 30*time.Millisecond, t0)
	s.Insert("a", 10*time.Millisecond, t0)
	s.Insert("b", 20*time.Millisecond, t0)
	if s.Insert("d", 40*time.Millisecond, t0) != true {
		t.Fatal("Insert into a full store did not report an eviction")
	}
	if s.Contains("a", t0) || !s.Contains("b", t0) || !s.Contains("c", t0) || !s.Contains("d", t0) {
		t.Fatal("the soonest-expiring entry was not the one evicted")
	}
	// Re-inserting a held key never evicts.
	if s.Insert("b", time.Second, t0) {
		t.Fatal("re-insert evicted")
	}
	// b now expires last; c is the soonest.
	s.Insert("e", time.Millisecond*50, t0)
	if s.Contains("c", t0) || !s.Contains("b", t0) {
		t.Fatal("eviction ignored b's extended expiry")
	}
	if st := s.Stats(); st.Evicted != 2 || s.Len() != 3 {
		t.Fatalf("stats %+v len %d", st, s.Len())
	}
}

// TestStaleHashesBounded: taking and re-inserting many keys leaves stale hashes
// in the wheel; they never exceed about twice the capacity.
func TestStaleHashesBounded(t *testing.T) {
	const capacity = 1000
	s := New(capacity, WithEpoch(t0), WithResolution(time.Millisecond))
	for i := range 50 * capacity {
		k := fmt.Sprint(i)
		s.Insert(k, time.Hour, t0)
		s.Take(k, t0)
		if s.queued > 2*capacity+chunkLen {
			t.Fatalf("after %d: %d queued hashes", i, s.queued)
		}
	}
	if s.Len() != 0 {
		t.Fatalf("len %d", s.Len())
	}
	// The store still works after compactions.
	s.Insert("x", time.Millisecond, t0)
	if n := s.Expire(t0.Add(time.Second)); n != 1 {
		t.Fatalf("Expire after compaction = %d", n)
	}
}

func TestTakeExpiredReportsFalse(t *testing.T) {
	s := New(10, WithEpoch(t0), WithResolution(time.Millisecond))
	s.Insert("a", time.Millisecond, t0)
	if s.Take("a", t0.Add(time.Second)) {
		t.Fatal("Take of an expired entry reported true")
	}
	if s.Len() != 0 {
		t.Fatal("expired entry not removed by Take")
	}
}

func TestNewPanicsOnBadCapacity(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New(0) did not panic")
		}
	}()
	New(0)
}
