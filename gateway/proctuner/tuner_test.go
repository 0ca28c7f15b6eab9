package proctuner

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestTunerFollowsLoad runs the tuner on this process: idle, it goes to one
// P; with more runnable goroutines than one P can run, back to Max; Stop
// restores GOMAXPROCS. The test waits on the tuner's own steps, never on
// the clock, and blocks between them so that its own scheduling events do
// not count as load.
func TestTunerFollowsLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	steps := make(chan int, 1024)
	tu := start(Config{Max: 2, Every: 5 * time.Millisecond, LightRun: 4, Confirm: 4}, func(_ Window, n int) {
		select {
		case steps <- n:
		default:
		}
	})
	if tu == nil {
		t.Fatal("Start returned nil with Max 2")
	}
	defer tu.Stop()
	waitFor := func(want int, what string) {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case n := <-steps:
				if n == want {
					if got := runtime.GOMAXPROCS(0); got != want {
						t.Fatalf("%s: the rule wants %d Ps, GOMAXPROCS is %d", what, want, got)
					}
					return
				}
			case <-deadline:
				t.Fatalf("%s: still not %d Ps after 20 s (GOMAXPROCS %d)", what, want, runtime.GOMAXPROCS(0))
			}
		}
	}
	if other := Start(Config{Max: 2}); other != nil {
		other.Stop()
		t.Fatal("a second tuner started beside the first")
	}
	waitFor(1, "idle")
	if tu.Procs() != 1 || tu.Changes() != 1 {
		t.Fatalf("idle: Procs %d, Changes %d; want 1, 1", tu.Procs(), tu.Changes())
	}

	// Pressure: 16 goroutines that each run for 200 µs between yields, so
	// that on one P each waits about 3 ms behind the other 15.
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for !stop.Load() {
				for start := time.Now(); time.Since(start) < 200*time.Microsecond; {
				}
				runtime.Gosched()
			}
		})
	}
	waitFor(2, "pressed")
	stop.Store(true)
	wg.Wait()
	if tu.Changes() < 2 {
		t.Fatalf("Changes %d after going up, want at least 2", tu.Changes())
	}
	waitFor(1, "idle again")

	tu.Stop()
	tu.Stop()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("after Stop GOMAXPROCS is %d, want the 2 it started with", got)
	}
	again := Start(Config{Max: 2})
	if again == nil {
		t.Fatal("no tuner could start after the first stopped")
	}
	again.Stop()
}

func TestStartNothingToTune(t *testing.T) {
	if tu := Start(Config{Max: 1}); tu != nil {
		tu.Stop()
		t.Fatal("Start with Max 1 returned a tuner")
	}
	var tu *Tuner
	tu.Stop()
	if tu.Changes() != 0 || tu.Procs() != runtime.GOMAXPROCS(0) {
		t.Fatal("a nil Tuner must report no changes and the current GOMAXPROCS")
	}
}
