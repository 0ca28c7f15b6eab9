package gctuner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		h          Heap
		min        uint64
		base, want int
	}{
		// 2 + 2 × 31 = 64 MiB.
		{h: Heap{Live: 2 * mib}, min: 64 * mib, base: 100, want: 1600},
		{h: Heap{Live: 4 * mib}, min: 64 * mib, base: 100, want: 1500},
		{h: Heap{Live: 32 * mib}, min: 64 * mib, base: 100, want: 100},  // 32 × 2 = 64: GOGC already reaches it
		{h: Heap{Live: 100 * mib}, min: 64 * mib, base: 100, want: 100}, // large heap: the configured GOGC
		{h: Heap{Live: 16 * mib}, min: 64 * mib, base: 200, want: 300},  // 16 × 4 = 64
		// Stacks and globals are scanned too: 8 + (8 + 16 + 8) × 1.75 = 64.
		{h: Heap{Live: 8 * mib, Stacks: 16 * mib, Globals: 8 * mib}, min: 64 * mib, base: 100, want: 175},
		{h: Heap{Live: 8 * mib, Stacks: 40 * mib}, min: 64 * mib, base: 100, want: 116}, // 8 + 48 × 1.16 ≤ 64 < 8 + 48 × 1.17
		{h: Heap{Live: 8 * mib, Stacks: 60 * mib}, min: 64 * mib, base: 100, want: 100}, // 8 + 68 × 1 = 76: already past
		// Nothing measured yet (before the first collection), or a tiny
		// heap: bounded by the runtime's least goal, 4 MiB × 16 = 64 MiB.
		{h: Heap{}, min: 64 * mib, base: 100, want: 1600},
		{h: Heap{Live: 1}, min: 64 * mib, base: 100, want: 1600},
		{h: Heap{Globals: 300 << 10}, min: 64 * mib, base: 100, want: 1600},
		// A minimum the configured GOGC's least goal already passes.
		{h: Heap{}, min: 2 * mib, base: 100, want: 100},
		{h: Heap{}, min: 1 << 40, base: 100, want: maxPercent},
	} {
		got := Percent(c.h, c.min, c.base)
		if got != c.want {
			t.Errorf("Percent(%+v, %d, %d) = %d, want %d", c.h, c.min, c.base, got, c.want)
		}
		if got < c.base {
			t.Errorf("Percent(%+v, %d, %d) = %d, below the configured GOGC", c.h, c.min, c.base, got)
		}
		if got > c.base && got < maxPercent && Goal(c.h, got) > c.min {
			t.Errorf("Percent(%+v, %d, %d) = %d: goal %d passes the minimum", c.h, c.min, c.base, got, Goal(c.h, got))
		}
	}
}

// TestPercentRandom: for random heaps the goal of the chosen percentage is
// max(the configured goal, minHeap), to within one percent step, and never
// past minHeap unless the configured GOGC already is. A failure names its
// seed; GCTUNER_SEED replays it.
func TestPercentRandom(t *testing.T) {
	seed := time.Now().UnixNano()
	if s := os.Getenv("GCTUNER_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("GCTUNER_SEED=%q: %v", s, err)
		}
		seed = v
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	for range 100_000 {
		h := Heap{Live: rng.Uint64N(1 << 30), Stacks: rng.Uint64N(1 << 28), Globals: rng.Uint64N(1 << 22)}
		if rng.IntN(4) == 0 {
			h.Live = rng.Uint64N(8 << 20)
		}
		minHeap := 1<<20 + rng.Uint64N(1<<30)
		base := 1 + rng.IntN(400)
		p := Percent(h, minHeap, base)
		natural := Goal(h, base)
		switch {
		case p < base || p > maxPercent:
			t.Fatalf("seed %d: Percent(%+v, %d, %d) = %d, out of [base, max]", seed, h, minHeap, base, p)
		case natural >= minHeap && p != base:
			t.Fatalf("seed %d: Percent(%+v, %d, %d) = %d, but GOGC %d already reaches the minimum", seed, h, minHeap, base, p, base)
		case p > base && Goal(h, p) > minHeap:
			t.Fatalf("seed %d: Percent(%+v, %d, %d) = %d: goal %d > minimum", seed, h, minHeap, base, p, Goal(h, p))
		case p > base && p < maxPercent && Goal(h, p+1) <= minHeap:
			t.Fatalf("seed %d: Percent(%+v, %d, %d) = %d: %d would still be within the minimum", seed, h, minHeap, base, p, p+1)
		}
	}
}

// heapGoal is the runtime's current heap goal.
func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestGoalIsMinHeap: with the tuner set after a collection, the runtime's
// own heap goal is MinHeap while what it scans is small, also when that
// is mostly goroutine stacks, and the configured GOGC's goal once the live
// heap is large. It holds Goal (and runtimeHeapMinimum) to the runtime.
func TestGoalIsMinHeap(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	const minHeap = 64 << 20
	adjusted := make(chan Heap, 64)
	tu := start(minHeap, func(h Heap, _ int) {
		select {
		case adjusted <- h:
		default:
		}
	})
	defer tu.Stop()
	<-adjusted
	// collect runs a cycle and waits for the tuner's adjustment to what
	// it measured (earlier adjustments, for cycles the allocations set
	// off, are passed over).
	collect := func() Heap {
		runtime.GC()
		cur := readHeap(heapSample())
		timeout := time.After(10 * time.Second)
		for {
			select {
			case h := <-adjusted:
				if h == cur {
					return h
				}
			case <-timeout:
				t.Fatalf("no adjustment to %+v after a collection", cur)
			}
		}
	}
	var keep [][]byte
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	for _, step := range []struct {
		name      string
		live      int // MiB more to keep live
		stacks    int // goroutines with about 27 KiB of stack in use to add
		wantFloor bool
	}{
		{name: "small heap", wantFloor: true},
		{name: "8 MiB live", live: 8, wantFloor: true},
		{name: "plus 1000 goroutines' stacks", stacks: 1000, wantFloor: true},
		{name: "plus 90 MiB live", live: 90, wantFloor: false},
	} {
		for range step.live {
			keep = append(keep, make([]byte, 1<<20))
		}
		for range step.stacks {
			ready := make(chan struct{})
			wg.Go(func() { deepStack(24, ready, stop) })
			<-ready
		}
		h := collect()
		want := max(Goal(h, 100), minHeap)
		got := heapGoal()
		if step.wantFloor && want != minHeap || !step.wantFloor && want == minHeap {
			t.Fatalf("%s: measured %+v: the configured goal %d; the case does not test what it says", step.name, h, Goal(h, 100))
		}
		// One percentage step of the scanned bytes, and the runtime's
		// rounding.
		slack := (h.Live+h.Stacks+h.Globals)/100 + 64<<10
		t.Logf("%s: measured %+v, GOGC %d: heap goal %.1f MiB", step.name, h, gcPercent(), float64(got)/(1<<20))
		if got > want+slack || got+slack < want {
			t.Errorf("%s: measured %+v, GOGC %d: runtime heap goal %d MiB, want %d MiB", step.name, h, gcPercent(), got>>20, want>>20)
		}
	}
	runtime.KeepAlive(keep)
}

// deepStack recurses depth times on about 1 KiB of stack each, then says
// ready and waits for stop.
func deepStack(depth int, ready, stop chan struct{}) byte {
	var pad [1024]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		close(ready)
		<-stop
		return pad[0]
	}
	return deepStack(depth-1, ready, stop) + pad[depth%len(pad)]
}

// TestFirstCycleAtMinHeap: a process that starts the tuner before its first
// collection has nothing measured live; its first cycle must come at
// MinHeap, not at the runtime's 4 MiB × GOGC/100 for an unbounded
// percentage (2 GB at the old cap). The check runs in a fresh process.
func TestFirstCycleAtMinHeap(t *testing.T) {
	if os.Getenv("GCTUNER_FIRST_CYCLE") == "1" {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		tu := Start(64 << 20)
		defer tu.Stop()
		fmt.Printf("numgc=%d goal=%d\n", ms.NumGC, heapGoal())
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^TestFirstCycleAtMinHeap$")
	cmd.Env = append(os.Environ(), "GCTUNER_FIRST_CYCLE=1", "GOGC=100")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var numGC uint32
	var goal uint64
	i := strings.Index(string(out), "numgc=")
	if i < 0 {
		t.Fatalf("child said %q", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "numgc=%d goal=%d", &numGC, &goal); err != nil {
		t.Fatalf("child said %q: %v", out, err)
	}
	if numGC != 0 {
		t.Logf("the child had collected %d times before Start", numGC)
	}
	if goal > 64<<20 || goal < 60<<20 {
		t.Fatalf("heap goal right after Start: %d MiB, want 64 MiB", goal>>20)
	}
}

func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestTunerFollowsCollections: after a collection the tuner has set GOGC for
// the live heap it measured; Stop restores the configured GOGC.
func TestTunerFollowsCollections(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	type adj struct {
		h       Heap
		percent int
	}
	ch := make(chan adj, 64)
	const minHeap = 1 << 30
	tu := start(minHeap, func(h Heap, p int) {
		select {
		case ch <- adj{h, p}:
		default:
		}
	})
	if tu == nil {
		t.Fatal("Start returned nil with GOGC=150")
	}
	<-ch // the adjustment Start makes
	runtime.GC()
	var a adj
	select {
	case a = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no adjustment after a collection")
	}
	if want := Percent(a.h, minHeap, 150); a.percent != want || a.percent <= 150 {
		t.Fatalf("after a collection that measured %+v: GOGC %d, want %d (above 150)", a.h, a.percent, want)
	}
	if got := gcPercent(); got != a.percent {
		t.Fatalf("GOGC is %d, the tuner said %d", got, a.percent)
	}
	tu.Stop()
	tu.Stop()
	if got := gcPercent(); got != 150 {
		t.Fatalf("after Stop GOGC is %d, want the configured 150", got)
	}
	runtime.GC()
	if got := gcPercent(); got != 150 {
		t.Fatalf("a collection after Stop changed GOGC to %d", got)
	}
}

func TestNothingToTune(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	if tu := Start(64 << 20); tu != nil {
		t.Fatal("Start with GOGC=off returned a tuner")
	}
	debug.SetGCPercent(100)
	if tu := Start(0); tu != nil {
		t.Fatal("Start with no minimum heap returned a tuner")
	}
	var nilTuner *Tuner
	nilTuner.Stop()
}

// BenchmarkNoopUnary: a grpc-go no-op unary service over loopback, 64
// callers, without and with the tuner (64 MiB minimum heap). gc/s is the
// collections per second of the whole process.
func BenchmarkNoopUnary(b *testing.B) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := grpc.NewServer()
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "bench.Noop", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			return in, dec(in)
		}}}}, struct{}{})
	go func() { _ = s.Serve(lis) }()
	defer s.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	for _, minHeap := range []uint64{0, 64 << 20} {
		name := "tuner=off"
		if minHeap > 0 {
			name = "tuner=64MiB"
		}
		b.Run(name, func(b *testing.B) {
			tu := Start(minHeap)
			defer tu.Stop()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			start := time.Now()
			b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := cc.Invoke(context.Background(), "/bench.Noop/Call", &emptypb.Empty{}, &emptypb.Empty{}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(m1.NumGC-m0.NumGC)/time.Since(start).Seconds(), "gc/s")
		})
	}
}
