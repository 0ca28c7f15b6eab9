// Package gctuner gives the Go garbage collector a minimum heap goal.
//
// The collector starts a cycle when the heap has grown by GOGC percent over
// what the last cycle left live, but at least 4 MiB. A gateway's live heap
// under load is small (its sessions' records and the calls in flight, a few
// MiB) while it allocates hundreds of MiB a second (every call's messages),
// so with the defaults it collects hundreds of times a second. Each cycle has
// costs that do not shrink with the heap (its phases, scanning every
// goroutine's stack, assists): on a 2-core machine a plain grpc-go no-op
// service served about 66k calls/s at 230 collections a second and about
// 100k calls/s, the same code, at 30 a second with a larger heap (measured
// in this repository while building this package; see the README's
// Performance section).
//
// The tuner raises GOGC while the live heap is small, so that the heap goal
// is MinHeap instead, and lowers it back to the configured GOGC as the live
// heap grows: the goal is max(live × (1 + GOGC/100), MinHeap). It runs once
// per collection (from a finalizer, so it costs nothing between cycles and
// needs no goroutine of its own) and never lowers GOGC below the configured
// value. GOMEMLIMIT still applies: near the limit the collector runs
// whatever GOGC says. With GOGC=off the tuner does nothing.
//
// The price is memory: an idle gateway's heap may grow to MinHeap before it
// is collected. Live memory (what the gateway holds) is unchanged.
package gctuner

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultMinHeapMiB is the least heap goal cmd/gateway uses unless told
// otherwise (--gc-min-heap-mib), in MiB.
const DefaultMinHeapMiB = 64

// maxPercent bounds the GOGC the tuner sets (a tiny live heap would
// otherwise ask for an absurd percentage).
const maxPercent = 50_000

// Tuner adjusts GOGC after every collection. Stop ends it.
type Tuner struct {
	minHeap uint64
	base    int // the configured GOGC, restored by Stop

	mu      sync.Mutex // serialises adjust and Stop
	current int
	stopped atomic.Bool
	sample  []metrics.Sample

	onAdjust func(live uint64, percent int) // tests
}

// sentinel is garbage by design: its finalizer runs once per collection.
// It holds a pointer, so it is never a tiny allocation (one that shares its
// block with others and may be kept alive by them).
type sentinel struct{ t *Tuner }

// Start makes minHeap (bytes) the least heap goal until Stop. It returns nil
// when there is nothing to tune: minHeap is 0, or GOGC is off.
func Start(minHeap uint64) *Tuner {
	return start(minHeap, nil)
}

func start(minHeap uint64, onAdjust func(uint64, int)) *Tuner {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if minHeap == 0 || base < 0 {
		return nil
	}
	t := &Tuner{
		minHeap:  minHeap,
		base:     base,
		current:  base,
		sample:   []metrics.Sample{{Name: "/gc/heap/live:bytes"}},
		onAdjust: onAdjust,
	}
	t.adjust()
	t.arm()
	return t
}

// arm leaves a sentinel for the next collection to find.
func (t *Tuner) arm() {
	s := &sentinel{t: t}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.t.stopped.Load() {
			return
		}
		s.t.adjust()
		s.t.arm()
	})
}

// adjust sets GOGC for the live heap the last collection measured.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	metrics.Read(t.sample)
	var live uint64
	if t.sample[0].Value.Kind() == metrics.KindUint64 {
		live = t.sample[0].Value.Uint64()
	}
	p := Percent(live, t.minHeap, t.base)
	if p != t.current {
		debug.SetGCPercent(p)
		t.current = p
	}
	if t.onAdjust != nil {
		t.onAdjust(live, p)
	}
}

// Percent is the GOGC that makes the heap goal max(live × (1 + base/100),
// minHeap), at least base and at most maxPercent.
func Percent(live, minHeap uint64, base int) int {
	if live == 0 {
		live = 1
	}
	goal := float64(live) * (1 + float64(base)/100)
	if goal >= float64(minHeap) {
		return base
	}
	p := (float64(minHeap)/float64(live) - 1) * 100
	return int(math.Min(math.Ceil(p), maxPercent))
}

// Stop restores the configured GOGC. It is safe to call on a nil Tuner and
// more than once.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Swap(true) {
		return
	}
	debug.SetGCPercent(t.base)
	t.current = t.base
}
