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
// in this repository while building this package; see docs/performance.md).
// Measured again with BenchmarkNoopUnary (64 callers over loopback, ten
// interleaved rounds, benchstat; 2 vCPU AMD EPYC VM under a load average
// of about 12 from other builds, 2026-11-26): at 4 Ps the tuner took the
// time per call from 66.1 to 37.3 µs (-43.5 %, p=0.005) and collections
// from 59.7 to 3.4 a second; at 2 Ps collections fell from 61.2 to 1.4 a
// second while the time per call did not differ beyond the noise (54.7
// against 73.6 µs, p=0.105). At 2 Ps on a quieter machine, the commit that
// added this package measured gateway/server's benchmarks under the GOGC the
// tuner sets for a 2 MiB live heap (3000) against GOGC=100, benchstat over
// 6: GetSessionStatus -26.6 % (p=0.002), RunJobEcho -13.5 % (p=0.026),
// RunJobParallel -19.2 % (p=0.002).
//
// The tuner raises GOGC while the live heap is small, so that the heap goal
// is MinHeap instead, and lowers it back to the configured GOGC as the live
// heap grows: the goal is max(the configured GOGC's goal, MinHeap). It runs
// once per collection (from a finalizer, so it costs nothing between cycles
// and needs no goroutine of its own) and never lowers GOGC below the
// configured value. GOMEMLIMIT still applies: near the limit the collector
// runs whatever GOGC says. With GOGC=off the tuner does nothing.
//
// The GOGC it picks follows the runtime's own goal: the heap marked live,
// plus GOGC percent of that heap, the stacks and the globals the last cycle
// scanned, but never less than 4 MiB × GOGC/100. So the percentage is
// bounded by MinHeap ÷ 4 MiB (1600 for 64 MiB), and a process that has not
// collected yet (nothing measured live) starts at that bound: its first
// cycle comes at MinHeap, not at the 4 MiB × GOGC/100 a larger percentage
// would put it at.
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

// maxPercent bounds the GOGC the tuner sets.
const maxPercent = 50_000

// runtimeHeapMinimum is the runtime's least heap goal at GOGC=100 (its
// defaultHeapMinimum); at GOGC=p the least goal is this × p/100.
// TestGoalIsMinHeap holds it to the runtime's.
const runtimeHeapMinimum = 4 << 20

// Tuner adjusts GOGC after every collection. Stop ends it.
type Tuner struct {
	minHeap uint64
	base    int // the configured GOGC, restored by Stop

	mu      sync.Mutex // serialises adjust and Stop
	current int
	stopped atomic.Bool
	sample  []metrics.Sample

	onAdjust func(h Heap, percent int) // tests
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

func start(minHeap uint64, onAdjust func(Heap, int)) *Tuner {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if minHeap == 0 || base < 0 {
		return nil
	}
	t := &Tuner{
		minHeap:  minHeap,
		base:     base,
		current:  base,
		sample:   heapSample(),
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

// adjust sets GOGC for what the last collection measured.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped.Load() {
		return
	}
	heap := readHeap(t.sample)
	p := Percent(heap, t.minHeap, t.base)
	if p != t.current {
		debug.SetGCPercent(p)
		t.current = p
	}
	if t.onAdjust != nil {
		t.onAdjust(heap, p)
	}
}

// Heap is what the runtime's heap goal is computed from: the bytes the last
// collection marked live, and the stack and global bytes it scanned. All
// are 0 before the first collection.
type Heap struct {
	Live, Stacks, Globals uint64
}

// heapSample is the runtime/metrics sample readHeap reads.
func heapSample() []metrics.Sample {
	return []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/scan/stack:bytes"},
		{Name: "/gc/scan/globals:bytes"},
	}
}

// readHeap reads the Heap the last collection measured into sample
// (heapSample's).
func readHeap(sample []metrics.Sample) Heap {
	metrics.Read(sample)
	var v [3]uint64
	for i, s := range sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return Heap{Live: v[0], Stacks: v[1], Globals: v[2]}
}

// Goal is the runtime's heap goal for h at GOGC=percent (percent ≥ 0):
// Live + (Live + Stacks + Globals) × percent/100, at least 4 MiB ×
// percent/100.
func Goal(h Heap, percent int) uint64 {
	p := uint64(percent)
	return max(h.Live+(h.Live+h.Stacks+h.Globals)*p/100, runtimeHeapMinimum*p/100)
}

// Percent is the GOGC that makes the heap goal max(Goal(h, base), minHeap):
// base when that reaches minHeap, else the largest percentage whose goal
// does not pass minHeap. It is at least base and at most maxPercent.
func Percent(h Heap, minHeap uint64, base int) int {
	if Goal(h, base) >= minHeap {
		return base
	}
	// Both terms of Goal grow with the percentage; the smaller of the two
	// bounds keeps both within minHeap.
	p := float64(minHeap) * 100 / runtimeHeapMinimum
	if scanned := h.Live + h.Stacks + h.Globals; scanned > 0 {
		p = math.Min(p, float64(minHeap-h.Live)*100/float64(scanned))
	}
	n := max(base, int(math.Min(math.Floor(p), maxPercent)))
	// The float estimate can be off by one either way from Goal's integer
	// division: settle on the exact answer (a step or two at most).
	for n > base && Goal(h, n) > minHeap {
		n--
	}
	for n < maxPercent && Goal(h, n+1) <= minHeap {
		n++
	}
	return n
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
