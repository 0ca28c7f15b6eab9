package proctuner

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
)

const latencies = "/sched/latencies:seconds"

// Tuner applies a Rule to this process: every window it reads the
// scheduling latencies and sets GOMAXPROCS to what the rule wants. Stop ends
// it and restores the Ps it started with.
type Tuner struct {
	rule   *Rule
	base   int // GOMAXPROCS at Start, restored by Stop
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	procs  atomic.Int64
	change atomic.Uint64

	sample []metrics.Sample
	prev   []uint64

	onStep func(Window, int) // tests: each window and the Ps after it
}

// running makes the tuner one per process: GOMAXPROCS is the process's, and
// two tuners (two gateways in one test binary, say) would undo each other
// and restore each other's settings.
var running atomic.Bool

// Start runs the tuner with c (its Max defaults to the current GOMAXPROCS).
// It returns nil, and changes nothing, when there is nothing to tune (one P
// only, or a runtime without the latency histogram) or when another Tuner
// of this process is running.
func Start(c Config) *Tuner { return start(c, nil) }

func start(c Config, onStep func(Window, int)) (t *Tuner) {
	if !running.CompareAndSwap(false, true) {
		return nil
	}
	defer func() {
		if t == nil {
			running.Store(false)
		}
	}()
	base := runtime.GOMAXPROCS(0)
	if c.Max <= 0 {
		c.Max = base
	}
	r := NewRule(c)
	if r.cfg.Max <= 1 {
		return nil
	}
	s := []metrics.Sample{{Name: latencies}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	t = &Tuner{rule: r, base: base, stop: make(chan struct{}), done: make(chan struct{}), sample: s, onStep: onStep}
	t.prev = append([]uint64(nil), s[0].Value.Float64Histogram().Counts...)
	t.procs.Store(int64(base))
	go t.run()
	return t
}

func (t *Tuner) run() {
	defer close(t.done)
	tick := time.NewTicker(t.rule.cfg.Every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		w := t.read()
		n := t.rule.Step(w)
		if int64(n) != t.procs.Load() {
			runtime.GOMAXPROCS(n)
			t.procs.Store(int64(n))
			t.change.Add(1)
		}
		if t.onStep != nil {
			t.onStep(w, n)
		}
	}
}

// read takes the window since the last read from the histogram.
func (t *Tuner) read() Window {
	metrics.Read(t.sample)
	h := t.sample[0].Value.Float64Histogram()
	w := windowOf(h.Counts, t.prev, h.Buckets)
	t.prev = append(t.prev[:0], h.Counts...)
	return w
}

// windowOf is the count and 90th percentile of the events between two
// readings of a cumulative histogram (counts[i] is the bucket from
// buckets[i] to buckets[i+1]); the percentile is its bucket's upper bound.
func windowOf(counts, prev []uint64, buckets []float64) Window {
	delta := func(i int) uint64 {
		if i < len(prev) {
			return counts[i] - min(counts[i], prev[i])
		}
		return counts[i]
	}
	var n uint64
	for i := range counts {
		n += delta(i)
	}
	if n == 0 {
		return Window{}
	}
	want := (n*9 + 9) / 10 // ceil(0.9 n)
	var seen uint64
	for i := range counts {
		if seen += delta(i); seen >= want {
			return Window{Events: n, P90: upper(buckets, i)}
		}
	}
	return Window{Events: n, P90: upper(buckets, len(counts)-1)}
}

func upper(buckets []float64, i int) time.Duration {
	if i+1 >= len(buckets) {
		return time.Duration(1<<63 - 1)
	}
	b := buckets[i+1]
	if b > float64(time.Duration(1<<63-1))/1e9 {
		return time.Duration(1<<63 - 1)
	}
	return time.Duration(b * 1e9)
}

// Procs is the GOMAXPROCS the tuner set last (or found at Start).
func (t *Tuner) Procs() int {
	if t == nil {
		return runtime.GOMAXPROCS(0)
	}
	return int(t.procs.Load())
}

// Changes is how many times the tuner has changed GOMAXPROCS.
func (t *Tuner) Changes() uint64 {
	if t == nil {
		return 0
	}
	return t.change.Load()
}

// Stop ends the tuner and restores GOMAXPROCS to its value at Start. It is
// safe on a nil Tuner and more than once.
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.once.Do(func() {
		close(t.stop)
		<-t.done
		if runtime.GOMAXPROCS(0) != t.base {
			runtime.GOMAXPROCS(t.base)
		}
		t.procs.Store(int64(t.base))
		running.Store(false)
	})
}
