package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Section 6 measures RunJob's serial p50 with one session open and with
// the most sessions of section 5 open, each on its own gateway and its own
// runtime: two gateway children (this binary, re-executed, serving the
// gateway exactly as this process does, under the same collector and
// procs tuner settings), each over its own runtime child. The calls of the
// two sides are interleaved in blocks of serialBlock, as the p50 ratio's
// (sections.go), so that both sides run in the same stretch of the
// machine's speed.
//
// Why: with both counts in this process, the two points had to be measured
// one after the other, with the sessions opened in between, and on the
// the machine of docs/performance.md two back-to-back windows of 5000 calls on one build
// differed by up to 12 % (a 1-session point measured again right after the
// 19k-session point, the sessions still open). Over fifteen runs the ratio
// spread from 0.82 to 1.36. That in-process figure is still measured
// (scaleInProcess, sections.go) and reported beside this one.

// scaleChildren is section 6's four child processes.
type scaleChildren struct {
	rtOne, rtMany, gwOne, gwMany *childProc
}

// scalePoints measures section 6 with most sessions open on the second
// gateway child. Everything it starts is stopped before it returns.
func (b *bench) scalePoints(ctx context.Context, most int) (r scaleResult, err error) {
	exe, rtArgs := b.cfg.RuntimeCmd[0], b.cfg.RuntimeCmd[1:len(b.cfg.RuntimeCmd):len(b.cfg.RuntimeCmd)]
	var kids []*childProc
	defer func() {
		for i := len(kids) - 1; i >= 0; i-- { // the gateways first
			err = errors.Join(err, kids[i].stop())
		}
	}()
	start := func(f func() (*childProc, error)) (*childProc, error) {
		c, err := f()
		if err == nil {
			kids = append(kids, c)
		}
		return c, err
	}
	var c scaleChildren
	runtimeFor := func(sessions int) func() (*childProc, error) {
		return func() (*childProc, error) {
			return startRuntimeChild(ctx, exe, append(rtArgs, fmt.Sprint(listenersFor(sessions))))
		}
	}
	gatewayFor := func(rt *childProc, sessions int) func() (*childProc, error) {
		return func() (*childProc, error) {
			return startGatewayChild(ctx, exe, gatewayChildArgs(b.cfg, sessions, rt.urls))
		}
	}
	// Room for the warm-up's sessions on top of the measured ones.
	const spare = 16
	if c.rtOne, err = start(runtimeFor(1 + spare)); err != nil {
		return r, err
	}
	if c.rtMany, err = start(runtimeFor(most + spare)); err != nil {
		return r, err
	}
	if c.gwOne, err = start(gatewayFor(c.rtOne, 1+spare)); err != nil {
		return r, err
	}
	if c.gwMany, err = start(gatewayFor(c.rtMany, most+spare)); err != nil {
		return r, err
	}
	n := connsFor(b.cfg.Concurrency, b.cfg.WorkersPerConn, b.cfg.Concurrency)
	oneConns, err := dialConns(ctx, c.gwOne.url, 1, b.cfg.ClientWindowBytes)
	if err != nil {
		return r, err
	}
	defer closeConns(oneConns) // before the children stop
	manyConns, err := dialConns(ctx, c.gwMany.url, n, b.cfg.ClientWindowBytes)
	if err != nil {
		return r, err
	}
	defer closeConns(manyConns)
	ids := newIDArena(most)
	t0 := time.Now()
	if err := openMany(ctx, manyConns, ids, 0, most); err != nil {
		return r, err
	}
	if err := waitAllReady(ctx, manyConns, ids, most); err != nil {
		return r, err
	}
	b.progress("6 %d sessions open on the second gateway child (%v)", most, time.Since(t0).Round(time.Millisecond))
	untouched := untouchedOn(manyConns[0], ids, most)
	pts, err := quietest(func() ([]point, float64, error) {
		p, err := b.scaleAttempt(ctx, c, freshSessionOn(oneConns[0]), untouched)
		if err != nil {
			return p, 0, fmt.Errorf("6 RunJob, 1 / %d sessions: %w", most, err)
		}
		b.progress("%-30s p50 %s / %s interleaved by %d (%d + %d calls; CPU/call %s / %s, runtimes %s / %s; other CPU %.0f%%)",
			fmt.Sprintf("6 RunJob, 1 / %d sessions", most), us(p[0].P50Ns), us(p[1].P50Ns), serialBlock, p[0].Calls, p[1].Calls,
			us(p[0].CPUNsPerCall), us(p[1].CPUNsPerCall), us(p[0].RuntimeCPUNsPerCall), us(p[1].RuntimeCPUNsPerCall), 100*p[0].OtherCPU)
		return p, p[0].OtherCPU, nil
	})
	if err != nil {
		return r, err
	}
	pts[0].Sessions, pts[1].Sessions = 1, most
	return scaleResult{LiveSessions: most, P50OneNs: pts[0].P50Ns, P50ManyNs: pts[1].P50Ns, One: pts[0], Many: pts[1]}, nil
}

// scaleAttempt is one try at section 6: both sides' callers prepared, the
// four children settled (a collection now rather than in the points), a
// warm-up, then the interleaved points. Each point's CPU per call is its
// own gateway child's and runtime child's (the runtime's apart); the
// callers, in this process, serve both sides and are left out.
func (b *bench) scaleAttempt(ctx context.Context, c scaleChildren, works ...workload) (p []point, err error) {
	calls, release, err := prepareSides(ctx, works)
	defer func() { err = errors.Join(err, release()) }()
	if err != nil {
		return nil, err
	}
	for _, k := range []*childProc{c.rtOne, c.rtMany, c.gwOne, c.gwMany} {
		if err := k.settle(ctx); err != nil {
			return nil, err
		}
	}
	settle()
	if _, err := runInterleaved(ctx, calls, serialBlock, b.cfg.SerialWarmup); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	sample := func() [3]cpuSample {
		return [3]cpuSample{
			sampleCPU(c.gwOne.PID(), c.rtOne.PID()),
			sampleCPU(c.gwMany.PID(), c.rtMany.PID()),
			sampleCPU(os.Getpid(), c.gwOne.PID(), c.rtOne.PID(), c.gwMany.PID(), c.rtMany.PID()),
		}
	}
	before, t0 := sample(), time.Now()
	p, err = runInterleaved(ctx, calls, serialBlock, b.cfg.Serial)
	if err != nil {
		return nil, err
	}
	after, wall := sample(), time.Since(t0)
	other := otherCPU(before[2], after[2], wall)
	for i := range p {
		p[i].Conns, p[i].OtherCPU = 1, other
		before[i].to(after[i]).setPerCall(&p[i])
	}
	return p, nil
}

// untouchedOn is the workload of a serial RunJob point on one of the n
// idle sessions of ids, on cc's gateway: the next one not yet used by an
// attempt (round the n), left open afterwards.
func untouchedOn(cc *grpc.ClientConn, ids *idArena, n int) workload {
	var next atomic.Int64
	return func(context.Context) ([]callFunc, func() error, error) {
		id := ids.get(int(next.Add(1)-1) % n)
		return []callFunc{runJobCaller(cc, id)}, func() error { return nil }, nil
	}
}

// freshSessionOn is the workload of a serial RunJob point on cc's gateway:
// one session, opened for the attempt and closed after it.
func freshSessionOn(cc *grpc.ClientConn) workload {
	return func(ctx context.Context) ([]callFunc, func() error, error) {
		id, err := openSession(ctx, cc)
		if err != nil {
			return nil, nil, err
		}
		return []callFunc{runJobCaller(cc, id)}, func() error { return closeSession(ctx, cc, id) }, nil
	}
}
