package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// memoryResult is section 5 at one session count.
type memoryResult struct {
	Sessions int `json:"sessions"` // idle sessions open for this figure
	// BytesPerSession is the figure checked: (HeapAlloc + StackInuse) after
	// minus before, ÷ Sessions. After GC HeapAlloc is the live objects, so
	// this is what the sessions hold, whatever the heap looked like before.
	BytesPerSession float64 `json:"bytes_per_session"`
	// HeapInusePerSession is (HeapInuse + StackInuse) delta ÷ Sessions: it
	// adds the sessions' share of partly used spans, but depends on the
	// baseline: sessions opened into spans that earlier garbage left partly
	// free count less than they hold.
	HeapInusePerSession  float64 `json:"heap_inuse_bytes_per_session"`
	HeapInuseDelta       int64   `json:"heap_inuse_delta"`
	HeapAllocDelta       int64   `json:"heap_alloc_delta"`
	StackInuseDelta      int64   `json:"stack_inuse_delta"`
	GoroutinesPerSession float64 `json:"goroutines_per_session"`
	OpenPerSec           float64 `json:"open_per_sec"` // sessions opened per second (OpenSession, 32 at a time)
	// IdleCPU is the CPU this process (the gateway) used while the sessions
	// sat idle, as a share of one core, over idleWindow: heartbeats and
	// timers. -1 when unknown.
	IdleCPU float64 `json:"idle_cpu_of_one_core"`
}

// idleWindow is how long section 5 watches the idle sessions' CPU.
const idleWindow = 2 * time.Second

// idleCPU measures this process's CPU over idleWindow, as a share of one
// core (-1 if /proc cannot be read).
func idleCPU(ctx context.Context) float64 {
	before, start := sampleCPU(os.Getpid()), time.Now()
	t := time.NewTimer(idleWindow)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return -1
	case <-t.C:
	}
	after := sampleCPU(os.Getpid())
	if !before.ok || !after.ok {
		return -1
	}
	return (after.ours - before.ours) / time.Since(start).Seconds()
}

// scaleResult is section 6: RunJob's serial p50 on a fresh session with
// only it open (section 3's serial point) and on untouched ones of the idle
// sessions of section 5 with all of them open.
type scaleResult struct {
	LiveSessions int   `json:"live_sessions"` // during the second figure
	P50OneNs     int64 `json:"p50_one_session_ns"`
	P50ManyNs    int64 `json:"p50_many_sessions_ns"`
	One          point `json:"one"` // one session open, right before section 5 opens the others
	Many         point `json:"many"`
}

// memSample is what a memory figure is computed from.
type memSample struct {
	heapInuse, heapAlloc, stackInuse uint64
	goroutines                       int
}

// settle lets what the last step started finish (session closers, the
// runtime's handshakes) until the goroutine count holds still for 200 ms
// (at most 5 s), then collects twice and samples. Polling is the point
// here: nothing signals "the process is quiet".
func settle() memSample {
	prev, stable := runtime.NumGoroutine(), 0
	for i := 0; i < 100 && stable < 4; i++ {
		time.Sleep(50 * time.Millisecond)
		if n := runtime.NumGoroutine(); n == prev {
			stable++
		} else {
			prev, stable = n, 0
		}
	}
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	// A collection shrinks an idle goroutine's stack by half at most, so
	// the stacks of the idle stream workers (64, grown by the earlier
	// sections) shrink over several: collect until they stop, so that two
	// samples compare what is in use, not how far shrinking had got. With
	// only the two collections above, the 20-session smoke run measured
	// -1,238 bytes per session.
	for range 8 {
		stack := m.StackInuse
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.StackInuse >= stack {
			break
		}
	}
	return memSample{heapInuse: m.HeapInuse, heapAlloc: m.HeapAlloc, stackInuse: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// memoryDelta computes the figures for n sessions; opened of them were
// opened in the last step, which took open.
func memoryDelta(before, after memSample, n, opened int, open time.Duration) memoryResult {
	d := func(a, b uint64) int64 { return int64(a) - int64(b) }
	r := memoryResult{
		Sessions:        n,
		HeapInuseDelta:  d(after.heapInuse, before.heapInuse),
		HeapAllocDelta:  d(after.heapAlloc, before.heapAlloc),
		StackInuseDelta: d(after.stackInuse, before.stackInuse),
		OpenPerSec:      float64(opened) / open.Seconds(),
	}
	r.BytesPerSession = float64(r.HeapAllocDelta+r.StackInuseDelta) / float64(n)
	r.HeapInusePerSession = float64(r.HeapInuseDelta+r.StackInuseDelta) / float64(n)
	r.GoroutinesPerSession = float64(after.goroutines-before.goroutines) / float64(n)
	return r
}

// idArena holds session ids in one allocation made before the memory
// baseline, so the ids the bench keeps add nothing to the measured delta.
type idArena struct {
	buf   []byte
	lens  []uint8
	width int
}

func newIDArena(n int) *idArena {
	const width = 64
	return &idArena{buf: make([]byte, n*width), lens: make([]uint8, n), width: width}
}

func (a *idArena) set(i int, id string) error {
	if len(id) > a.width {
		return fmt.Errorf("session id %q is longer than %d bytes", id, a.width)
	}
	a.lens[i] = uint8(copy(a.buf[i*a.width:], id))
	return nil
}

// get returns id i; the string is a fresh copy, garbage once used.
func (a *idArena) get(i int) string {
	return string(a.buf[i*a.width : i*a.width+int(a.lens[i])])
}

// openMany opens sessions [from, to) of ids through the gateway, 32 calls
// at a time spread over conns; session i goes to runtime i÷sessionsPerListener
// of the child's listeners. The first error stops it and is returned.
func openMany(ctx context.Context, conns []*grpc.ClientConn, ids *idArena, from, to int) error {
	const parallel = 32
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	next.Store(int64(from))
	var wg sync.WaitGroup
	for w := range parallel {
		cc := conns[w%len(conns)]
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < to && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				id, err := openSessionOn(ctx, cc, runtimeName(i/sessionsPerListener))
				if err == nil {
					err = ids.set(i, id)
				}
				if err != nil {
					cancel(fmt.Errorf("session %d: %w", i, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// waitAllReady checks sessions [0, n) with GetSessionStatus until every one
// is live and READY, 32 at a time, for at most 60 s.
func waitAllReady(ctx context.Context, conns []*grpc.ClientConn, ids *idArena, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	const parallel = 32
	var next atomic.Int64
	errs := make([]error, parallel)
	var wg sync.WaitGroup
	for w := range parallel {
		client := sessiongatev1.NewSessionGatewayClient(conns[w%len(conns)])
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := waitReadySession(ctx, client, ids.get(i)); err != nil {
					errs[w] = fmt.Errorf("session %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitReadySession polls one session's status every 10 ms until it is READY.
func waitReadySession(ctx context.Context, client sessiongatev1.SessionGatewayClient, id string) error {
	req := &sessiongatev1.GetSessionStatusRequest{SessionId: id}
	for {
		resp, err := client.GetSessionStatus(ctx, req)
		if err != nil {
			return err
		}
		if resp.GetStatus() != sessiongatev1.SessionStatus_SESSION_STATUS_LIVE {
			return fmt.Errorf("status %v", resp.GetStatus())
		}
		if resp.GetPhase() == sessiongatev1.SessionPhase_SESSION_PHASE_READY {
			return nil
		}
		t := time.NewTimer(10 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("phase %v: %w", resp.GetPhase(), ctx.Err())
		case <-t.C:
		}
	}
}
