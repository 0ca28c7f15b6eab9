package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Section 3b holds RunJob and the direct ARCP client to the same call rate,
// under the rate RunJob reached unpaced at the concurrency (3), and
// measures the CPU per call of both.
//
// Why: at 64 callers the machine is CPU-bound, so the throughput ratio is a
// ratio of CPU per call, and CPU per call is not a constant of the code. It
// rises as the rate falls: below saturation each process's threads run out
// of work, sleep and are woken again (a futex and a context switch each
// time) more often per call. In a trial on the machine of docs/performance.md, the direct
// client held to 60 % of its free rate (by a closed loop that sleeps until
// each call's slot) spent 37 µs more per call and the runtime child 35 µs
// more (four pairs). The throughput ratio compares the direct path at its
// own rate with RunJob at RunJob's, so it charges the gateway for that rise
// too. Held to the same rate, the two sides differ only in what the gateway
// does. The held points' figures are higher than the free points' for both
// sides (see heldShare); their ratio is the figure.

// heldShare is the share of RunJob's free rate both sides are held to.
// Paced calls arrive one by one, not in the bursts of a closed loop, and
// cost more each: held to 0.9 of its free rate, RunJob fell short of it
// (5,516 of 6,028 calls/s in a -short run) while the direct client kept to
// it, so the two ran at different rates. At 0.7 both keep to the rate.
const heldShare = 0.7

// heldResult is section 3b. The points' latencies include the waits for
// the pacer and mean nothing; their calls/s and CPU per call are the
// figures.
type heldResult struct {
	PerSec float64 `json:"per_sec"` // the rate both sides were held to
	ARCP   point   `json:"arcp_direct"`
	RunJob point   `json:"gateway_run_job"`
}

// heldPoints measures section 3b: runs (the RunJob callers of section 3's
// concurrent point, on its sessions), then the direct ARCP client on fresh
// connections, both held to heldShare of free calls/s.
func (b *bench) heldPoints(ctx context.Context, runs []callFunc, conns, sessions int, free float64) (r heldResult, err error) {
	if !(free > 0) {
		return r, fmt.Errorf("no rate to hold to: RunJob made %v calls/s", free)
	}
	r.PerSec = heldShare * free
	every := time.Duration(float64(time.Second) / r.PerSec)
	name := fmt.Sprintf("at %.0f/s", r.PerSec)
	held := func(calls []callFunc) []callFunc { return paced(&pacer{every: every}, calls) }
	if r.RunJob, err = b.measure(ctx, pointSpec{name: "3b RunJob " + name, conns: conns, sessions: sessions,
		work: func(context.Context) ([]callFunc, func() error, error) {
			return held(runs), func() error { return nil }, nil
		}}); err != nil {
		return r, err
	}
	r.ARCP, err = b.measure(ctx, pointSpec{name: "1b ARCP direct " + name, conns: b.cfg.Concurrency,
		work: func(ctx context.Context) ([]callFunc, func() error, error) {
			calls, closeDirect, err := b.directCallers(ctx, b.cfg.Concurrency)
			if err != nil {
				return nil, nil, err
			}
			return held(calls), func() error { closeDirect(); return nil }, nil
		}})
	return r, err
}

// pacer spaces calls every interval, across all the workers that share it:
// no burst, so that after an idle spell (between a warm-up and its point)
// it carries on at the rate instead of catching up. A service that cannot
// keep up runs below the rate.
type pacer struct {
	every time.Duration
	mu    sync.Mutex
	next  time.Time // the next free slot
}

// wait returns at the caller's slot, or with ctx's cause when ctx ends
// first.
func (p *pacer) wait(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = at.Add(p.every)
	p.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		return pause(ctx, d) // cluster.go
	}
	return nil
}

// paced makes each call wait for its slot of p first.
func paced(p *pacer, calls []callFunc) []callFunc {
	out := make([]callFunc, len(calls))
	for i, call := range calls {
		out[i] = func(ctx context.Context) error {
			if err := p.wait(ctx); err != nil {
				return errors.Join(errors.New("waiting for the pacer"), err)
			}
			return call(ctx)
		}
	}
	return out
}
