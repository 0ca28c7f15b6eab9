package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Serial points (concurrency 1) run on a fresh session or connection per
// attempt, bounded by a count (-serial-calls): a session keeps every
// finished job watchable for a while, and the two sides of a ratio must
// not differ in the history their session carries. Concurrent points
// spread their calls over one session per worker, far fewer per session.

// serialBlock is how many calls each side of the p50 ratio makes in turn
// (see runInterleaved): from under a millisecond of no-op calls to about
// 6 ms of RunJob, so that a round takes about 10 ms, far less than the
// machine's speed takes to drift, while each side still runs mostly on
// caches its own calls warmed.
const serialBlock = 20

// serialPoints is the p50 ratio's three serial points, sections 1, 2 and
// 3 at concurrency 1: the ARCP client on a fresh connection, the no-op,
// and RunJob on a fresh session, the only one open, interleaved in blocks
// of serialBlock calls. Measured one section after the other, tens of
// seconds apart, each side of the ratio took in its own stretch of the
// machine's speed: four runs of one build gave 1.45 – 1.67 that way, and
// five runs of the same gateway code, interleaved in the same spell, 1.62
// – 1.70.
func (b *bench) serialPoints(ctx context.Context, rep *report) (err error) {
	fresh := func(ctx context.Context) ([]callFunc, func() error, error) {
		conns, err := dialARCP(ctx, b.rt.url, 1)
		if err != nil {
			return nil, nil, err
		}
		return []callFunc{arcpCaller(conns[0])}, func() error { closeARCP(conns); return nil }, nil
	}
	noop := reuse([]callFunc{noopCaller(b.noopConns[0])})
	stop, err := startTrace(b.cfg.Trace, "serial")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	p, err := b.measureSet(ctx, "1-3 ARCP / no-op / RunJob", serialBlock, fresh, noop, freshSessionOn(b.gwConns[0]))
	if err != nil {
		return err
	}
	rep.ARCP.Serial, rep.Noop.Serial, rep.RunJob.Serial = p[0], p[1], p[2]
	return nil
}

// arcpDirect is section 1's concurrent point: the gateway's ARCP client
// straight to the runtime. Its serial point is in serialPoints.
func (b *bench) arcpDirect(ctx context.Context) (r serviceResult, err error) {
	calls, closeDirect, err := b.directCallers(ctx, b.cfg.Concurrency)
	if err != nil {
		return r, err
	}
	defer closeDirect()
	r.Concurrent, err = b.measure(ctx, pointSpec{name: "1 ARCP direct echo", conns: len(calls), work: reuse(calls), profile: b.pointProfile("1-direct")})
	return r, err
}

// noopConcurrent is section 2's concurrent point (its serial point is in
// serialPoints). It runs right before section 4's, the probe it is the
// baseline of: measured after section 1 instead, while the runtime child
// was still settling from 64 closed connections, it came out anywhere from
// 82,000 to 111,000 calls/s (16.7 to 22.7 µs of CPU per call) from run to
// run, and 110,000 to 116,000 measured again later in the same runs.
func (b *bench) noopConcurrent(ctx context.Context) (point, error) {
	return b.measure(ctx, pointSpec{name: "2 gRPC no-op", conns: len(b.noopConns), work: reuse(b.noopCallers())})
}

// noopCallers is one no-op caller per worker, spread over the no-op's
// connections.
func (b *bench) noopCallers() []callFunc {
	calls := make([]callFunc, b.cfg.Concurrency)
	for w := range calls {
		calls[w] = noopCaller(b.noopConns[w%len(b.noopConns)])
	}
	return calls
}

// gatewayCalls is the concurrent points of sections 3 and 4 (the probe's,
// then RunJob's), and section 3b (held.go), on one session per worker,
// closed again afterwards.
func (b *bench) gatewayCalls(ctx context.Context, rep *report) (err error) {
	cc0 := b.gwConns[0]
	var ids []string
	defer func() {
		for _, id := range ids {
			err = errors.Join(err, closeSession(ctx, cc0, id))
		}
	}()
	for len(ids) < b.cfg.Concurrency {
		id, err := openSession(ctx, b.gwConns[len(ids)%len(b.gwConns)])
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	runs := make([]callFunc, len(ids))
	probes := make([]callFunc, len(ids))
	for w, id := range ids {
		cc := b.gwConns[w%len(b.gwConns)]
		runs[w], probes[w] = runJobCaller(cc, id), statusCaller(cc, id)
	}
	n, conns := len(ids), len(b.gwConns)
	// The probe point runs first. The concurrent RunJob point leaves tens
	// of thousands of finished jobs that the gateway retains for watchers
	// (JobRetention), and marking them made every later collection dearer:
	// measured after it, the probe cost 27.4 µs of CPU per call (5 runs,
	// median), before it 19.9 µs (2 runs), a cost of that retained heap,
	// not of the probe, which the no-op baseline never carries.
	if rep.Noop.Concurrent, err = b.noopConcurrent(ctx); err != nil {
		return err
	}
	if rep.Status.Concurrent, err = b.measure(ctx, pointSpec{name: "4 gateway GetSessionStatus", conns: conns, sessions: n, work: reuse(probes)}); err != nil {
		return err
	}
	if rep.StatusAlternating, err = b.statusAlternatePoints(ctx, b.noopCallers(), probes, conns, n); err != nil {
		return err
	}
	if rep.RunJob.Concurrent, err = b.measure(ctx, pointSpec{name: "3 gateway RunJob(echo)", conns: conns, sessions: n, work: reuse(runs), profile: b.pointProfile("3-runjob")}); err != nil {
		return err
	}
	if err := b.profileFloor(ctx, conns); err != nil {
		return err
	}
	if rep.Alternating, err = b.alternatePoints(ctx, runs, conns, n); err != nil {
		return err
	}
	rep.Held, err = b.heldPoints(ctx, runs, conns, n, rep.RunJob.Concurrent.CallsPerSec)
	return err
}

// profileFloor measures the bare proxy as a concurrent point of its own,
// under -point-profiles only, for its CPU profile: in section 3a, where its
// figures come from, it takes turns with the other sides and cannot be
// profiled alone. The point is not reported; its progress line is.
func (b *bench) profileFloor(ctx context.Context, conns int) (err error) {
	path := b.pointProfile("floor-proxy")
	if path == "" {
		return nil
	}
	calls, stop, err := startProxyCallers(ctx, b.rt.url, b.cfg.Concurrency, conns, b.cfg.ClientWindowBytes)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	_, err = b.measure(ctx, pointSpec{name: "bare proxy (profiled)", conns: conns, work: reuse(calls), profile: path})
	return err
}

// idleSessions is section 5 and section 6's in-process figure: it opens
// cfg.Sessions idle sessions in steps, measuring this process's memory
// after each, then RunJob's serial p50 on untouched ones of them (a
// different one per attempt) with all of them open, against the p50 on a
// fresh session, the only one open, measured before they were opened.
// Section 6's headline figure is scalePoints' (scale.go), which measures
// the two sides interleaved.
func (b *bench) idleSessions(ctx context.Context) ([]memoryResult, scaleResult, error) {
	most := b.cfg.Sessions[len(b.cfg.Sessions)-1]
	// Section 6's baseline: RunJob on a fresh session, the only one open,
	// right before the sessions are opened, so that both sides of the
	// ratio carry what the earlier sections left in the process (the jobs
	// 3's concurrent point retains, 9a's replicas' garbage). Section 3's
	// serial point, minutes earlier, differed from it by up to 10 % from
	// run to run.
	// Both sides of the ratio start with the runtime child settled, as
	// this process settles itself before its samples: the sessions opened
	// below grow the child's heap, and its next collection otherwise fell
	// into the point with the most sessions open in some runs and not in
	// others.
	if err := b.rt.settle(ctx); err != nil {
		return nil, scaleResult{}, err
	}
	one, err := b.measure(ctx, pointSpec{name: "6 RunJob, 1 session", serial: true, conns: 1, sessions: 1, work: freshSessionOn(b.gwConns[0])})
	if err != nil {
		return nil, scaleResult{}, err
	}
	ids := newIDArena(most)
	// With -memprofile, record every allocation of the sessions for the heap
	// profile (MemStats do not depend on it), and stop before section 6:
	// profiling every allocation slows everything down.
	rate := runtime.MemProfileRate
	if b.cfg.MemProfile != "" {
		runtime.MemProfileRate = 1
	}
	defer func() { runtime.MemProfileRate = rate }()
	before := settle()
	var mem []memoryResult
	opened := 0
	for _, n := range b.cfg.Sessions {
		t0 := time.Now()
		if err := openMany(ctx, b.gwConns, ids, opened, n); err != nil {
			return nil, scaleResult{}, err
		}
		open := time.Since(t0)
		if err := waitAllReady(ctx, b.gwConns, ids, n); err != nil {
			return nil, scaleResult{}, err
		}
		m := memoryDelta(before, settle(), n, n-opened, open)
		m.IdleCPU = idleCPU(ctx)
		opened = n
		b.progress("5 %d idle sessions: %s per session (heap_alloc+stack), %.2f goroutines per session, %.1f%% of a core while idle", n, kib(m.BytesPerSession), m.GoroutinesPerSession, 100*m.IdleCPU)
		mem = append(mem, m)
	}
	if err := writeHeapProfile(b.cfg.MemProfile); err != nil {
		return nil, scaleResult{}, err
	}
	runtime.MemProfileRate = rate
	untouched := untouchedOn(b.gwConns[0], ids, most)
	if err := b.rt.settle(ctx); err != nil {
		return nil, scaleResult{}, err
	}
	many, err := b.measure(ctx, pointSpec{name: fmt.Sprintf("6 RunJob, %d sessions", most), serial: true, conns: 1, sessions: most, work: untouched})
	if err != nil {
		return nil, scaleResult{}, err
	}
	runtime.KeepAlive(ids)
	return mem, scaleResult{LiveSessions: most, P50OneNs: one.P50Ns, P50ManyNs: many.P50Ns, One: one, Many: many}, nil
}
