package proctuner

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var seedFlag = flag.Uint64("proctuner.seed", 0, "replay one property-test seed")

// stepper is what the property test drives: Rule, or a broken copy.
type stepper interface {
	Step(Window) int
	Procs() int
	Wait() int
}

// schedule makes n windows from seed: a load that moves between idle,
// light, middle and pressed stretches of random length, each window's
// figures drawn around its stretch's kind (so some windows of a light
// stretch are middle, as on a real machine).
func schedule(seed uint64, n int) []Window {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	ws := make([]Window, 0, n)
	for len(ws) < n {
		kind, run := r.IntN(4), 1+r.IntN(60)
		if r.IntN(4) == 0 {
			run = 1 + r.IntN(3) // short bursts too
		}
		for range run {
			var w Window
			switch kind {
			case 0: // idle
				w = Window{Events: uint64(r.IntN(10)), P90: time.Duration(r.IntN(2000)) * time.Microsecond}
			case 1: // light
				w = Window{Events: 8 + uint64(r.IntN(500)), P90: time.Duration(r.IntN(120)) * time.Microsecond}
			case 2: // middle
				w = Window{Events: 8 + uint64(r.IntN(500)), P90: time.Duration(80+r.IntN(200)) * time.Microsecond}
			default: // pressed
				w = Window{Events: 8 + uint64(r.IntN(5000)), P90: time.Duration(200+r.IntN(5000)) * time.Microsecond}
			}
			ws = append(ws, w)
		}
	}
	return ws[:n]
}

// check drives s through ws and checks, after every step, the rule's
// promises against the history (not against a second implementation):
// the Ps are 1 or Max; one P goes to Max on a pressed window and only on
// one; Max goes to one P only after exactly the wait's run of light
// windows; the wait stays within [LightRun, MaxLightRun], doubles when a
// try is pressed within Confirm windows with no idle window between (back
// to what it was if the next window presses Max too), and is LightRun again
// once a try has lasted Confirm windows or seen an idle one.
func check(c Config, s stepper, ws []Window) error {
	c = c.withDefaults()
	light, sinceTry, trying, undo := 0, 0, false, 0
	for i, w := range ws {
		before, wait := s.Procs(), s.Wait()
		after := s.Step(w)
		k := c.classify(w)
		if after != s.Procs() {
			return fmt.Errorf("step %d: Step returned %d, Procs says %d", i, after, s.Procs())
		}
		if after != 1 && after != c.Max {
			return fmt.Errorf("step %d: %d Ps, want 1 or %d", i, after, c.Max)
		}
		nw := s.Wait()
		if nw < c.LightRun || nw > c.MaxLightRun {
			return fmt.Errorf("step %d: wait %d outside [%d, %d]", i, nw, c.LightRun, c.MaxLightRun)
		}
		switch before {
		case 1:
			switch {
			case k == kindPressed && after != c.Max:
				return fmt.Errorf("step %d: pressed window (%+v) on one P left it on one", i, w)
			case k != kindPressed && after != 1:
				return fmt.Errorf("step %d: %v window (%+v) on one P went to %d", i, k, w, after)
			}
			if trying {
				sinceTry++
			}
			switch {
			case after == c.Max && trying && sinceTry <= c.Confirm:
				if want := min(2*wait, c.MaxLightRun); nw != want {
					return fmt.Errorf("step %d: try failed after %d windows: wait %d → %d, want %d", i, sinceTry, wait, nw, want)
				}
				undo = wait
			case after == 1 && trying && (sinceTry == c.Confirm || w.Events < c.MinEvents):
				if nw != c.LightRun {
					return fmt.Errorf("step %d: try held %d windows (this one %+v), wait %d, want %d", i, sinceTry, w, nw, c.LightRun)
				}
				trying = false
			case nw != wait:
				return fmt.Errorf("step %d: wait changed %d → %d on one P", i, wait, nw)
			}
			if after == c.Max {
				light, trying = 0, false
			}
		default:
			want := wait
			if undo > 0 && k == kindPressed {
				want = undo // the window after a failed try pressed Max too
			}
			undo = 0
			if nw != want {
				return fmt.Errorf("step %d: wait changed %d → %d on %d Ps (%v window), want %d", i, wait, nw, before, k, want)
			}
			if k == kindLight {
				light++
			} else {
				light = 0
			}
			switch {
			case after == 1 && light != wait:
				return fmt.Errorf("step %d: went to one P after %d light windows, want %d", i, light, wait)
			case after != 1 && light >= wait:
				return fmt.Errorf("step %d: %d light windows (wait %d) and still on %d Ps", i, light, wait, after)
			}
			if after == 1 {
				light, sinceTry, trying = 0, 0, true
			}
		}
	}
	return nil
}

func seeds(n uint64) []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i) + 1
	}
	return out
}

// TestRuleProperty: random schedules from seeds, under the defaults and
// under small settings that reach every branch (the wait's cap, a try that
// holds) often; a failure prints the seed to replay with -proctuner.seed.
func TestRuleProperty(t *testing.T) {
	configs := []Config{
		{Max: 2},
		{Max: 8, LightRun: 3, MaxLightRun: 20, Confirm: 4},
		{Max: 4, LightRun: 1, MaxLightRun: 1, Confirm: 1},
	}
	for _, c := range configs {
		for _, seed := range seeds(300) {
			if err := check(c, NewRule(c), schedule(seed, 3000)); err != nil {
				t.Fatalf("config %+v, seed %d (replay: go test ./gateway/proctuner -run RuleProperty -proctuner.seed=%d): %v", c, seed, seed, err)
			}
		}
	}
}

// brokenRule forgets to double the wait after a failed try: the property
// test must catch it.
type brokenRule struct{ *Rule }

func (b brokenRule) Step(w Window) int {
	need := b.need
	n := b.Rule.Step(w)
	if b.need > need {
		b.need = need
	}
	return n
}

func TestRulePropertyCatchesABrokenRule(t *testing.T) {
	c := Config{Max: 2, LightRun: 2, MaxLightRun: 16, Confirm: 3}
	var caught error
	for seed := uint64(1); seed <= 50 && caught == nil; seed++ {
		caught = check(c, brokenRule{NewRule(c)}, schedule(seed, 3000))
	}
	if caught == nil {
		t.Fatal("a rule that never backs off passed 50 schedules")
	}
}

// TestRuleSteadyLoads: what a steady load costs. Idle, a gateway is on one P
// after LightRun windows and stays there; under a load that presses every
// window, the tries back off so that the windows spent on one P are about
// log2(MaxLightRun/LightRun) plus one per MaxLightRun windows.
func TestRuleSteadyLoads(t *testing.T) {
	c := Config{Max: 2}.withDefaults()
	r := NewRule(c)
	for i := range 1000 {
		p := r.Step(Window{Events: 2, P90: time.Millisecond}) // idle: too few events to judge
		if want := 2; i < c.LightRun-1 && p != want {
			t.Fatalf("window %d of an idle start: %d Ps, want %d until %d light windows", i, p, want, c.LightRun)
		}
		if i >= c.LightRun-1 && p != 1 {
			t.Fatalf("window %d of idle: %d Ps, want 1", i, p)
		}
	}
	r = NewRule(c)
	onOne, n := 0, 100_000
	for range n {
		if r.Step(Window{Events: 5000, P90: 2 * time.Millisecond}) == 1 {
			onOne++
		}
	}
	if onOne != 0 {
		t.Fatalf("always pressed: %d windows on one P, want 0 (a try needs light windows)", onOne)
	}
	// A load that presses one P but not two: every try fails.
	r = NewRule(c)
	onOne = 0
	for range n {
		w := Window{Events: 500, P90: 50 * time.Microsecond} // light on Max
		if r.Procs() == 1 {
			w.P90 = 2 * time.Millisecond
		}
		if r.Step(w) == 1 {
			onOne++
		}
	}
	doublings := 0
	for w := c.LightRun; w < c.MaxLightRun; w *= 2 {
		doublings++
	}
	if most := doublings + n/c.MaxLightRun + 1; onOne == 0 || onOne > most {
		t.Fatalf("a load one P cannot carry: %d of %d windows on one P, want 1 to %d", onOne, n, most)
	}
}

func TestClassify(t *testing.T) {
	c := Config{}.withDefaults()
	for _, tc := range []struct {
		w    Window
		want kind
	}{
		{Window{}, kindLight},
		{Window{Events: 7, P90: time.Second}, kindLight},
		{Window{Events: 8, P90: 99 * time.Microsecond}, kindLight},
		{Window{Events: 8, P90: 100 * time.Microsecond}, kindMiddle},
		{Window{Events: 8, P90: 249 * time.Microsecond}, kindMiddle},
		{Window{Events: 8, P90: 250 * time.Microsecond}, kindPressed},
	} {
		if got := c.classify(tc.w); got != tc.want {
			t.Errorf("classify(%+v) = %v, want %v", tc.w, got, tc.want)
		}
	}
}

func TestWindowOf(t *testing.T) {
	buckets := []float64{0, 1e-6, 10e-6, 100e-6, 1e-3}
	prev := []uint64{5, 5, 5, 5}
	// The window: 0 in [0,1µs), 80 in [1,10µs), 10 in [10,100µs), 10 in [100µs,1ms).
	counts := []uint64{5, 85, 15, 15}
	w := windowOf(counts, prev, buckets)
	if w.Events != 100 || w.P90 != 100*time.Microsecond {
		t.Fatalf("windowOf = %+v, want 100 events, p90 100µs (the 90th falls in [10µs,100µs))", w)
	}
	counts[3] = 16 // one more slow event: the 91st of 101 is a slow one
	if w := windowOf(counts, prev, buckets); w.Events != 101 || w.P90 != time.Millisecond {
		t.Fatalf("windowOf = %+v, want 101 events, p90 1ms", w)
	}
	counts[1] = 94 // nine more fast ones: 11 slow of 110, the 99th is in [10µs,100µs)
	if w := windowOf(counts, prev, buckets); w.Events != 110 || w.P90 != 100*time.Microsecond {
		t.Fatalf("windowOf = %+v, want 110 events, p90 100µs", w)
	}
	counts[3] = 30 // 25 of 124 slow: the 90th is in the last bucket
	if w := windowOf(counts, prev, buckets); w.Events != 124 || w.P90 != time.Millisecond {
		t.Fatalf("windowOf = %+v, want 124 events, p90 1ms", w)
	}
	if w := windowOf(prev, prev, buckets); w != (Window{}) {
		t.Fatalf("an empty window: %+v", w)
	}
	inf := []float64{0, 1e-6, math.Inf(1)}
	if w := windowOf([]uint64{0, 3}, []uint64{0, 0}, inf); w.P90 != time.Duration(1<<63-1) {
		t.Fatalf("+Inf bucket: %+v", w)
	}
}
