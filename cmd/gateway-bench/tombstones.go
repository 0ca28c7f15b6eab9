package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/tombstone"
)

// tombstoneResult is section 7: a tombstone.Store of Entries keys.
type tombstoneResult struct {
	Entries          int     `json:"entries"`
	TTLSeconds       float64 `json:"ttl_seconds"`
	BytesPerEntry    float64 `json:"bytes_per_entry"`       // HeapAlloc delta after GC ÷ Entries; the keys excluded
	MiBPerMillion    float64 `json:"mib_per_million"`       // BytesPerEntry × 1,000,000 ÷ 2²⁰
	InsertNs         float64 `json:"insert_ns_per_op"`      // filling an empty store of capacity Entries
	LookupHitNs      float64 `json:"lookup_hit_ns_per_op"`  // Contains of every inserted key
	LookupMissNs     float64 `json:"lookup_miss_ns_per_op"` // Contains of as many keys never inserted
	ExpireNsPerEntry float64 `json:"expire_ns_per_entry"`   // one Expire past every TTL ÷ entries removed
	FalsePositives   int     `json:"false_positives"`       // misses reported as held (hash collisions)
	OtherCPU         float64 `json:"other_cpu"`             // see point.OtherCPU
}

// benchTombstones measures one Store the way package upstream uses it:
// realistic keys (36-character UUIDv7 strings, as ARCP ids are), generated
// before any timing; the default TTL (75 s); insertion times one
// microsecond apart. Each figure is one timed pass over all n keys.
func benchTombstones(n int) (tombstoneResult, error) {
	keys, misses := uuidKeys(n), uuidKeys(n)
	ttl := tombstone.TTL(30*time.Second, 10*time.Second, 30*time.Second, 0)
	t0 := time.Now()
	res := tombstoneResult{Entries: n, TTLSeconds: ttl.Seconds()}

	before := heapAllocAfterGC()
	s := tombstone.New(n, tombstone.WithEpoch(t0))
	start := time.Now()
	for i, k := range keys {
		s.Insert(k, ttl, t0.Add(time.Duration(i)*time.Microsecond))
	}
	res.InsertNs = nsPerOp(time.Since(start), n)
	after := heapAllocAfterGC()
	if s.Len() != n {
		return res, fmt.Errorf("tombstones: %d held after %d inserts", s.Len(), n)
	}
	res.BytesPerEntry = float64(int64(after)-int64(before)) / float64(n)
	res.MiBPerMillion = res.BytesPerEntry * 1e6 / (1 << 20)

	now := t0.Add(time.Duration(n) * time.Microsecond)
	hits := 0
	start = time.Now()
	for _, k := range keys {
		if s.Contains(k, now) {
			hits++
		}
	}
	res.LookupHitNs = nsPerOp(time.Since(start), n)
	if hits != n {
		return res, fmt.Errorf("tombstones: %d of %d inserted keys found", hits, n)
	}
	start = time.Now()
	for _, k := range misses {
		if s.Contains(k, now) {
			res.FalsePositives++
		}
	}
	res.LookupMissNs = nsPerOp(time.Since(start), n)

	later := now.Add(ttl + 2*s.Resolution())
	start = time.Now()
	expired := s.Expire(later)
	elapsed := time.Since(start)
	if expired != n || s.Len() != 0 {
		return res, fmt.Errorf("tombstones: Expire removed %d of %d (%d left)", expired, n, s.Len())
	}
	res.ExpireNsPerEntry = nsPerOp(elapsed, expired)
	runtime.KeepAlive(keys)
	runtime.KeepAlive(misses)
	return res, nil
}

func uuidKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = arcp.NewID()
	}
	return keys
}

// heapAllocAfterGC returns HeapAlloc after two collections: the live heap.
func heapAllocAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func nsPerOp(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) }
