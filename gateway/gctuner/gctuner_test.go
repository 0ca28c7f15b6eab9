package gctuner

import (
	"context"
	"net"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, min  uint64
		base, want int
	}{
		{live: 2 * mib, min: 64 * mib, base: 100, want: 3100},  // goal 64 MiB
		{live: 32 * mib, min: 64 * mib, base: 100, want: 100},  // 32 × 2 = 64: GOGC already reaches it
		{live: 100 * mib, min: 64 * mib, base: 100, want: 100}, // large heap: the configured GOGC
		{live: 16 * mib, min: 64 * mib, base: 200, want: 300},  // 16 × 4 = 64
		{live: 0, min: 64 * mib, base: 100, want: maxPercent},  // nothing live yet: capped
		{live: 1, min: 64 * mib, base: 100, want: maxPercent},
	} {
		if got := Percent(c.live, c.min, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.min, c.base, got, c.want)
		}
		if got := Percent(c.live, c.min, c.base); got < c.base {
			t.Errorf("Percent(%d, %d, %d) = %d, below the configured GOGC", c.live, c.min, c.base, got)
		}
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
		live    uint64
		percent int
	}
	ch := make(chan adj, 64)
	const minHeap = 1 << 30
	tu := start(minHeap, func(live uint64, p int) {
		select {
		case ch <- adj{live, p}:
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
	if want := Percent(a.live, minHeap, 150); a.percent != want || a.percent <= 150 {
		t.Fatalf("after a collection with %d live bytes: GOGC %d, want %d (above 150)", a.live, a.percent, want)
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
