package tombstone

import (
	"runtime"
	"testing"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

const benchEntries = 1 << 20 // 1,048,576

// benchKeys returns n distinct keys shaped like real ones (UUIDv7 strings, as
// ARCP request and job ids are).
func benchKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = arcp.NewID()
	}
	return keys
}

var keysCache []string

func keys1M() []string {
	if keysCache == nil {
		keysCache = benchKeys(benchEntries)
	}
	return keysCache
}

// BenchmarkTombstoneSteadyState is a busy connection's steady state: about
// 1M tombstones held (capacity 1.25M, so nothing is evicted), every insert
// (75 s TTL, the clock advancing 75 µs per insert) balanced by one expiry,
// Expire being called every 1024 inserts. One op = one insert + one expiry.
func BenchmarkTombstoneSteadyState(b *testing.B) {
	keys := keys1M()
	others := benchKeys(benchEntries)
	const ttl, step = 75 * time.Second, 75 * time.Microsecond
	s := New(benchEntries*5/4, WithEpoch(t0))
	now := t0
	for _, k := range keys { // warm up to the steady state
		s.Insert(k, ttl, now)
		now = now.Add(step)
	}
	set := [2][]string{others, keys}
	i, round := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if i == benchEntries {
			i, round = 0, round+1
		}
		s.Insert(set[round&1][i], ttl, now)
		now = now.Add(step)
		i++
		if i&1023 == 0 {
			s.Expire(now)
		}
	}
	b.ReportMetric(float64(s.Len()), "entries")
}

// BenchmarkTombstoneInsert inserts 1M distinct keys into an empty store of
// capacity 1M (a fresh store every 1M inserts, created outside the timer), so
// the table's growth from empty to 1M entries is included, as in real use.
func BenchmarkTombstoneInsert(b *testing.B) {
	keys := keys1M()
	ttl := TTL(30*time.Second, 10*time.Second, 30*time.Second, 0)
	s := New(len(keys), WithEpoch(t0))
	now := t0
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if i == len(keys) {
			b.StopTimer()
			s = New(len(keys), WithEpoch(t0))
			i = 0
			b.StartTimer()
		}
		s.Insert(keys[i], ttl, now)
		now = now.Add(time.Microsecond)
		i++
	}
}

// BenchmarkTombstoneInsertFull inserts into a full store of capacity 1M, so
// every insert also evicts the soonest-expiring entry (the overflow path).
func BenchmarkTombstoneInsertFull(b *testing.B) {
	keys := keys1M()
	others := benchKeys(benchEntries)
	s := New(benchEntries, WithEpoch(t0))
	now := t0
	for _, k := range keys {
		s.Insert(k, 75*time.Second, now)
		now = now.Add(time.Microsecond)
	}
	set := [2][]string{others, keys}
	i, round := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if i == benchEntries {
			i, round = 0, round+1
		}
		s.Insert(set[round&1][i], 75*time.Second, now)
		now = now.Add(time.Microsecond)
		i++
	}
	b.ReportMetric(float64(s.Stats().Evicted)/float64(b.N), "evictions/op")
}

func filled(b *testing.B) (*Store, []string) {
	keys := keys1M()
	s := New(len(keys), WithEpoch(t0))
	for i, k := range keys {
		s.Insert(k, 75*time.Second, t0.Add(time.Duration(i)*time.Microsecond))
	}
	return s, keys
}

// BenchmarkTombstoneContains looks up keys present in a 1M-entry store.
func BenchmarkTombstoneContains(b *testing.B) {
	s, keys := filled(b)
	now := t0.Add(2 * time.Second)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if !s.Contains(keys[i&(benchEntries-1)], now) {
			b.Fatal("miss")
		}
		i++
	}
}

// BenchmarkTombstoneContainsMiss looks up keys absent from a 1M-entry store,
// the common case on the hot path (most answers are not late).
func BenchmarkTombstoneContainsMiss(b *testing.B) {
	s, _ := filled(b)
	others := benchKeys(1 << 16)
	now := t0.Add(2 * time.Second)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s.Contains(others[i&(1<<16-1)], now) {
			b.Fatal("false positive")
		}
		i++
	}
}

// BenchmarkTombstoneTake removes present keys (refilling out of the timer).
func BenchmarkTombstoneTake(b *testing.B) {
	s, keys := filled(b)
	now := t0.Add(2 * time.Second)
	i := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if i == len(keys) {
			b.StopTimer()
			s, _ = filled(b)
			i = 0
			b.StartTimer()
		}
		s.Take(keys[i], now)
		i++
	}
}

// BenchmarkTombstoneExpire measures expiry: 1M entries inserted over 1 s of
// clock (one per µs) with a 75 s TTL, then expired in 100 ms steps. It
// reports ns per expired entry; one op is a whole 1M-entry cycle.
func BenchmarkTombstoneExpire(b *testing.B) {
	keys := keys1M()
	var elapsed time.Duration
	var expired int
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s := New(len(keys), WithEpoch(t0), WithResolution(10*time.Millisecond))
		for i, k := range keys {
			s.Insert(k, 75*time.Second, t0.Add(time.Duration(i)*time.Microsecond))
		}
		b.StartTimer()
		start := time.Now()
		for step := 75 * time.Second; s.Len() > 0; step += 100 * time.Millisecond {
			expired += s.Expire(t0.Add(step))
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(expired), "ns/expired")
}

// BenchmarkTombstoneExpireNone measures an Expire call that finds nothing to
// expire in a 1M-entry store: it must not depend on the store's size.
func BenchmarkTombstoneExpireNone(b *testing.B) {
	s, _ := filled(b)
	now := t0.Add(10 * time.Second)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if s.Expire(now) != 0 {
			b.Fatal("expired")
		}
	}
}

// BenchmarkTombstoneMemory reports the heap held by a store of 1M entries
// (HeapAlloc delta after GC, the keys themselves excluded) as bytes/entry.
func BenchmarkTombstoneMemory(b *testing.B) {
	keys := keys1M()
	var perEntry float64
	b.ReportAllocs()
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := New(len(keys), WithEpoch(t0))
		for i, k := range keys {
			s.Insert(k, 75*time.Second, t0.Add(time.Duration(i)*time.Microsecond))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.Len() != len(keys) {
			b.Fatalf("len %d", s.Len())
		}
		perEntry = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(len(keys))
		runtime.KeepAlive(s)
	}
	b.ReportMetric(perEntry, "bytes/entry")
	b.ReportMetric(perEntry*float64(len(keys))/(1<<20), "MiB/1M")
}
