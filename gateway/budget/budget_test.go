package budget

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

var seedFlag = flag.Uint64("budget.seed", 0, "replay one property-test seed")

// ledger is the interface the property checker drives: a Budget, or a
// deliberately broken one.
type ledger interface {
	Reserve(caller string, n int64) error
	Fits(caller string, n int64) Scope
	Release(caller string, n int64)
	Stats() Stats
	InUse(caller string) int64
}

// checkSchedule runs a random schedule of reservations and releases from
// seed against l and a model, checking the invariants after every step.
// It returns the first violation.
func checkSchedule(seed uint64, l ledger, total, perCaller int64) error {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	callers := []string{"a", "b", "c", "d"}
	held := map[string]int64{} // the model
	var sum int64
	for step := range 2000 {
		c := callers[r.IntN(len(callers))]
		n := r.Int64N(8)
		if r.IntN(3) == 0 {
			n = r.Int64N(total + 2) // occasionally a large request
		}
		if r.IntN(2) == 0 {
			fitsCaller := perCaller == 0 || held[c]+n <= perCaller
			fitsTotal := total == 0 || sum+n <= total
			wantScope := Scope("")
			switch {
			case n <= 0:
			case !fitsCaller:
				wantScope = ScopeCaller
			case !fitsTotal:
				wantScope = ScopeGateway
			}
			refused := l.Stats()
			if got := l.Fits(c, n); got != wantScope {
				return fmt.Errorf("step %d: Fits(%s, %d) = %q with caller %d, total %d (caps %d/%d), want %q", step, c, n, got, held[c], sum, perCaller, total, wantScope)
			}
			if st := l.Stats(); st != refused {
				return fmt.Errorf("step %d: Fits changed the stats: %+v, then %+v", step, refused, st)
			}
			err := l.Reserve(c, n)
			var ee *ExceededError
			switch {
			case err == nil:
				if n > 0 && (!fitsCaller || !fitsTotal) {
					return fmt.Errorf("step %d: Reserve(%s, %d) succeeded with caller %d, total %d (caps %d/%d)", step, c, n, held[c], sum, perCaller, total)
				}
				if n > 0 {
					held[c] += n
					sum += n
				}
			case errors.As(err, &ee):
				if fitsCaller && fitsTotal {
					return fmt.Errorf("step %d: Reserve(%s, %d) refused though it fits: %v", step, c, n, err)
				}
				want := "x"
				if !fitsCaller {
					want = "x_per_caller"
				}
				if ee.Budget != want || ee.Requested != n {
					return fmt.Errorf("step %d: refusal names %q (requested %d), want %q", step, ee.Budget, ee.Requested, want)
				}
			default:
				return fmt.Errorf("step %d: Reserve error of type %T", step, err)
			}
		} else {
			n = min(n, held[c]) // a correct releaser
			l.Release(c, n)
			held[c] -= n
			sum -= n
		}
		st := l.Stats()
		if st.InUse != sum {
			return fmt.Errorf("step %d: InUse %d, model %d", step, st.InUse, sum)
		}
		if total > 0 && st.InUse > total {
			return fmt.Errorf("step %d: InUse %d over total %d", step, st.InUse, total)
		}
		nonzero := 0
		for _, cc := range callers {
			if l.InUse(cc) != held[cc] {
				return fmt.Errorf("step %d: caller %s holds %d, model %d", step, cc, l.InUse(cc), held[cc])
			}
			if perCaller > 0 && held[cc] > perCaller {
				return fmt.Errorf("step %d: caller %s over its cap", step, cc)
			}
			if held[cc] > 0 {
				nonzero++
			}
		}
		if st.Callers != nonzero {
			return fmt.Errorf("step %d: %d caller entries, %d callers hold something", step, st.Callers, nonzero)
		}
	}
	return nil
}

// TestPropertySchedules: random schedules from seeds; a failure prints the
// seed to replay with -budget.seed.
func TestPropertySchedules(t *testing.T) {
	seeds := []uint64{*seedFlag}
	if *seedFlag == 0 {
		seeds = seeds[:0]
		for i := range uint64(200) {
			seeds = append(seeds, i+1)
		}
	}
	for _, caps := range [][2]int64{{20, 8}, {10, 0}, {0, 5}, {0, 0}, {7, 7}} {
		for _, seed := range seeds {
			b, err := New("x", caps[0], caps[1])
			if err != nil {
				t.Fatal(err)
			}
			if err := checkSchedule(seed, b, caps[0], caps[1]); err != nil {
				t.Fatalf("caps %v, seed %d (replay: go test ./gateway/budget -run PropertySchedules -budget.seed=%d): %v", caps, seed, seed, err)
			}
		}
	}
}

// brokenBudget forgets the per-caller cap: the property checker must catch it.
type brokenBudget struct{ *Budget }

func (b brokenBudget) Reserve(caller string, n int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n <= 0 {
		return nil
	}
	if b.total > 0 && b.used+n > b.total {
		return &ExceededError{Budget: b.name, Limit: b.total, InUse: b.used, Requested: n}
	}
	b.byCaller[caller] += n
	b.used += n
	return nil
}

func TestPropertyCatchesBrokenRule(t *testing.T) {
	b, _ := New("x", 20, 8)
	var caught error
	for seed := uint64(1); seed <= 50 && caught == nil; seed++ {
		caught = checkSchedule(seed, brokenBudget{b}, 20, 8)
		b, _ = New("x", 20, 8)
	}
	if caught == nil {
		t.Fatal("a budget without its per-caller cap passed 50 schedules")
	}
	t.Logf("broken rule caught: %v", caught)
}

func TestExceededNamesTheBudget(t *testing.T) {
	b, err := New("live_jobs", 3, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve("alice", 2); err != nil {
		t.Fatal(err)
	}
	var ee *ExceededError
	if err := b.Reserve("alice", 1); !errors.As(err, &ee) || ee.Budget != "live_jobs_per_caller" || ee.Scope != ScopeCaller ||
		ee.Limit != 2 || ee.InUse != 2 || ee.Requested != 1 || ee.Caller != "alice" {
		t.Fatalf("alice's third: %#v", err)
	}
	if err := b.Reserve("bob", 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve("carol", 1); !errors.As(err, &ee) || ee.Budget != "live_jobs" || ee.Scope != ScopeGateway || ee.Limit != 3 || ee.InUse != 3 {
		t.Fatalf("carol: %#v", err)
	}
	if st := b.Stats(); st.RefusedCaller != 1 || st.RefusedGateway != 1 || st.InUse != 3 || st.Callers != 2 {
		t.Fatalf("stats %+v", st)
	}
	b.Release("alice", 5) // more than held: clamped and counted
	if st := b.Stats(); st.InUse != 1 || st.Overreleased != 1 || st.Callers != 1 {
		t.Fatalf("after over-release: %+v", st)
	}
	if _, err := New("x", -1, 0); err == nil {
		t.Fatal("negative cap accepted")
	}
}

// TestConcurrentNeverOvershoots: many goroutines reserve and release; what
// is held at any moment never exceeds a cap, and everything comes back.
func TestConcurrentNeverOvershoots(t *testing.T) {
	const total, per = 50, 20
	b, _ := New("x", total, per)
	var heldAll atomic.Int64
	var heldBy [4]atomic.Int64
	var wg sync.WaitGroup
	var bad atomic.Value
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ci := g % 4
			caller := string(rune('a' + ci))
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range 5000 {
				n := r.Int64N(5) + 1
				if b.Reserve(caller, n) != nil {
					continue
				}
				if v := heldAll.Add(n); v > total {
					bad.Store(fmt.Sprintf("total %d over %d", v, total))
				}
				if v := heldBy[ci].Add(n); v > per {
					bad.Store(fmt.Sprintf("caller %s %d over %d", caller, v, per))
				}
				heldBy[ci].Add(-n)
				heldAll.Add(-n)
				b.Release(caller, n)
			}
		}()
	}
	wg.Wait()
	if v := bad.Load(); v != nil {
		t.Fatal(v)
	}
	if st := b.Stats(); st.InUse != 0 || st.Callers != 0 || st.Overreleased != 0 {
		t.Fatalf("after all released: %+v", st)
	}
}

func BenchmarkReserveRelease(b *testing.B) {
	bud, _ := New("x", 1<<40, 1<<30)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		acct := bud.Account("caller")
		for pb.Next() {
			if err := acct.Reserve(64); err != nil {
				b.Error(err)
				return
			}
			acct.Release(64)
		}
	})
}
