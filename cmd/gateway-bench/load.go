package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessiongate/sessiongate/client"
)

// callFunc performs one request and reports its error. Each worker has its
// own callFunc, so a callFunc may reuse its request and response messages.
type callFunc func(ctx context.Context) error

// bounds ends a measurement point: after duration or after maxCalls calls
// (all workers together), whichever comes first.
type bounds struct {
	duration time.Duration
	maxCalls int
	// least, for an interleaved warm-up (runInterleaved), is the least
	// time it runs, past maxCalls if need be (never past duration): long
	// enough for the process's adaptive parts to settle on the load (the
	// procs tuner tries one P after a second of light windows).
	least time.Duration
}

// callGrace is how long a call may still run after its point's duration
// before the point's context is cancelled: the watchdog that keeps every
// load loop bounded even if a service hangs.
const callGrace = 30 * time.Second

// point is one measurement: len(calls) workers calling in closed loops.
type point struct {
	Concurrency int     `json:"concurrency"`
	Conns       int     `json:"conns"`              // gRPC ClientConns (or ARCP connections) the workers shared
	Sessions    int     `json:"sessions,omitempty"` // gateway sessions the workers spread over
	Calls       int     `json:"calls"`              // completed calls
	Seconds     float64 `json:"seconds"`            // wall time from the first call to the last answer
	CallsPerSec float64 `json:"calls_per_sec"`
	P50Ns       int64   `json:"p50_ns"`
	P99Ns       int64   `json:"p99_ns"`
	MeanNs      int64   `json:"mean_ns"`
	// CPUNsPerCall is the CPU time (user + system) of this process and the
	// runtime child per completed call (0: unknown). At saturation
	// throughput is about NumCPU ÷ this, whatever else runs.
	CPUNsPerCall int64 `json:"cpu_ns_per_call"`
	// RuntimeCPUNsPerCall is the runtime child's part of CPUNsPerCall: what
	// the reference runtime spent, apart from the caller and the gateway.
	RuntimeCPUNsPerCall int64 `json:"runtime_cpu_ns_per_call"`
	// SyscallsPerCall is the read and write system calls of the same
	// processes per completed call, SwitchesPerCall their threads' context
	// switches; the Runtime fields are the runtime child's part (0:
	// unknown). On loopback a write or a wake-up costs microseconds, which a
	// CPU profile spreads over many callers: these say where CPU per call
	// goes between two points.
	SyscallsPerCall        float64 `json:"syscalls_per_call"`
	RuntimeSyscallsPerCall float64 `json:"runtime_syscalls_per_call"`
	SwitchesPerCall        float64 `json:"switches_per_call"`
	RuntimeSwitchesPerCall float64 `json:"runtime_switches_per_call"`
	// OtherCPU is the share of the machine's CPU that other processes used
	// during the point (-1: unknown); see otherCPU.
	OtherCPU float64 `json:"other_cpu"`
}

// runPoint runs every call in its own worker until b is reached and times
// every call. The first error stops the point and is returned: figures from
// a point that saw errors would mean nothing. Every worker is awaited; the
// watchdog cancels calls still running callGrace after the duration.
func runPoint(ctx context.Context, calls []callFunc, b bounds) (point, error) {
	all, wall, err := runTimed(ctx, calls, b)
	if err != nil {
		return point{}, err
	}
	return summarize(all, len(calls), wall), nil
}

// runTimed is runPoint's loop: it returns every completed call's time, and
// the wall time from the first call to the last answer.
func runTimed(ctx context.Context, calls []callFunc, b bounds) ([]time.Duration, time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(b.duration+callGrace, func() {
		cancel(fmt.Errorf("a call still ran %v after the point's %v", callGrace, b.duration))
	})
	defer watchdog.Stop()

	var (
		claimed  atomic.Int64
		wg       sync.WaitGroup
		timings  = make([][]time.Duration, len(calls))
		firstErr error
		errOnce  sync.Once
	)
	start := time.Now()
	deadline := start.Add(b.duration)
	for w, call := range calls {
		wg.Go(func() {
			d := make([]time.Duration, 0, min(b.maxCalls/len(calls)+1, 1<<12))
			for claimed.Add(1) <= int64(b.maxCalls) {
				t0 := time.Now()
				if !t0.Before(deadline) || ctx.Err() != nil {
					break
				}
				if err := call(ctx); err != nil {
					errOnce.Do(func() {
						if cause := context.Cause(ctx); cause != nil {
							err = errors.Join(err, cause)
						}
						firstErr = err
						cancel(err)
					})
					break
				}
				d = append(d, time.Since(t0))
			}
			timings[w] = d
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return nil, 0, firstErr
	}
	all := slices.Concat(timings...)
	if len(all) == 0 {
		return nil, 0, errors.New("no call completed")
	}
	return all, wall, nil
}

// summarize sorts the timings and computes the point's figures.
func summarize(all []time.Duration, concurrency int, wall time.Duration) point {
	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	return point{
		Concurrency: concurrency,
		Calls:       len(all),
		Seconds:     wall.Seconds(),
		CallsPerSec: float64(len(all)) / wall.Seconds(),
		P50Ns:       percentile(all, 50).Nanoseconds(),
		P99Ns:       percentile(all, 99).Nanoseconds(),
		MeanNs:      (sum / time.Duration(len(all))).Nanoseconds(),
	}
}

// percentile returns the nearest-rank p-th percentile of sorted.
func percentile(sorted []time.Duration, p int) time.Duration {
	rank := (len(sorted)*p + 99) / 100 // ceil(n·p/100)
	return sorted[max(rank, 1)-1]
}

// dialConns opens n gRPC client connections to addr with one setup for every
// service measured: plaintext, the flow-control window of the sessiongate Go
// client (client.WindowDialOptions(window): a fixed window, so no
// bandwidth-probe PING per call; negative: grpc-go's dynamic window), grpc-go's
// defaults otherwise. Each connection is made ready before it is returned, so
// no point pays for a connect.
func dialConns(ctx context.Context, addr string, n int, window int32) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, n)
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, client.WindowDialOptions(window)...)
	for range n {
		cc, err := grpc.NewClient(addr, opts...)
		if err != nil {
			closeConns(conns)
			return nil, fmt.Errorf("gRPC client for %s: %w", addr, err)
		}
		conns = append(conns, cc)
		if err := waitReady(ctx, cc); err != nil {
			closeConns(conns)
			return nil, fmt.Errorf("gRPC client for %s: %w", addr, err)
		}
	}
	return conns, nil
}

// waitReady connects cc and waits until it is ready (bounded by ctx and 10 s).
func waitReady(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cc.Connect()
	for {
		s := cc.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !cc.WaitForStateChange(ctx, s) {
			return fmt.Errorf("not ready: %w", context.Cause(ctx))
		}
	}
}

func closeConns(conns []*grpc.ClientConn) {
	for _, cc := range conns {
		cc.Close()
	}
}

// connsFor is how many of the shared connections concurrency workers use:
// one per workersPerConn workers, at least one.
func connsFor(concurrency, workersPerConn, available int) int {
	return min(max((concurrency+workersPerConn-1)/workersPerConn, 1), available)
}

// runInterleaved runs serial points over the same stretch of time: one
// call at a time, calls[0] block times, then calls[1] block times, and so
// on round after round, until each has made bnd.maxCalls calls or the
// duration has passed, timing each side on its own. A machine whose speed
// drifts (CPU steal, frequency) then moves every side alike, and their
// ratios keep only what differs between them. The side that goes first
// rotates every round. A block longer than one call lets each side run on
// caches warmed by its own calls rather than by the other sides'. Each
// point's Seconds is the sum of its calls' times.
func runInterleaved(ctx context.Context, calls []callFunc, block int, bnd bounds) ([]point, error) {
	if len(calls) == 0 || block < 1 {
		return nil, errors.New("interleaving needs callers and a block of at least one call")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(bnd.duration+callGrace, func() {
		cancel(fmt.Errorf("a call still ran %v after the point's %v", callGrace, bnd.duration))
	})
	defer watchdog.Stop()
	n := min(bnd.maxCalls, 1<<16)
	times := make([][]time.Duration, len(calls))
	for i := range times {
		times[i] = make([]time.Duration, 0, n)
	}
	start := time.Now()
	deadline := start.Add(bnd.duration)
	one := func(side int) error {
		t0 := time.Now()
		if err := calls[side](ctx); err != nil {
			if cause := context.Cause(ctx); cause != nil {
				err = errors.Join(err, cause)
			}
			return err
		}
		times[side] = append(times[side], time.Since(t0))
		return nil
	}
	for made := 0; time.Now().Before(deadline); made += block {
		if made >= bnd.maxCalls && time.Since(start) >= bnd.least {
			break
		}
		calls1 := block
		if made < bnd.maxCalls {
			calls1 = min(block, bnd.maxCalls-made)
		}
		round := made / block
		for k := range calls {
			side := (round + k) % len(calls)
			for range calls1 {
				if err := one(side); err != nil {
					return nil, err
				}
			}
		}
	}
	pts := make([]point, len(calls))
	for i, ts := range times {
		if len(ts) == 0 {
			return nil, errors.New("no call completed")
		}
		var sum time.Duration
		for _, t := range ts {
			sum += t
		}
		pts[i] = summarize(ts, 1, sum)
	}
	return pts, nil
}
