package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Section 3a measures the throughput ratio's two concurrent points, the
// direct ARCP client (1) and RunJob (3), and the bare proxy (the floor of
// a gateway, proxy.go), over the same stretch of time: each side's workers
// run in closed loops for a slice, then the next side's, round after
// round, and each side's figures are the sums over its slices.
//
// Why: measured one after the other, seconds apart, each side took in its
// own stretch of the machine's speed. On the machine of docs/performance.md the direct
// client's CPU per call at 64 callers ranged from 97 to 201 µs from run to
// run of one build, and within a run the two points drifted apart by as
// much again: the throughput ratio of five runs of one build spread from
// 0.57 to 0.88. Section 1-3's serial points were interleaved for the same
// reason (sections.go). A slice is long against a call (250 ms against a
// p50 of 4 – 8 ms at 64 callers) and short against the machine's drift.

// altSlice is how long each side runs before the other takes over.
const altSlice = 250 * time.Millisecond

// alternateResult is section 3a.
type alternateResult struct {
	SliceSeconds float64 `json:"slice_seconds"`
	Slices       int     `json:"slices"` // per side
	ARCP         point   `json:"arcp_direct"`
	RunJob       point   `json:"gateway_run_job"`
	Proxy        point   `json:"bare_proxy"` // the floor (proxy.go)
}

// alternatePoints measures section 3a: runs (section 3's RunJob callers on
// its sessions) against the direct ARCP client on fresh connections, one
// per worker, and the bare proxy (proxy.go) on as many fresh connections of
// its own, alternating slice by slice.
func (b *bench) alternatePoints(ctx context.Context, runs []callFunc, conns, sessions int) (r alternateResult, err error) {
	direct, closeDirect, err := b.directCallers(ctx, b.cfg.Concurrency)
	if err != nil {
		return r, err
	}
	defer closeDirect()
	proxied, stopProxy, err := startProxyCallers(ctx, b.rt.url, b.cfg.Concurrency, conns, b.cfg.ClientWindowBytes)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, stopProxy()) }()
	pts, err := b.alternateSet(ctx, "3a ARCP direct / RunJob / proxy", direct, runs, proxied)
	if err != nil {
		return r, err
	}
	r.ARCP, r.RunJob, r.Proxy = pts[0], pts[1], pts[2]
	r.ARCP.Conns = len(direct)
	r.RunJob.Conns, r.RunJob.Sessions = conns, sessions
	r.Proxy.Conns = conns
	r.SliceSeconds = altSlice.Seconds()
	r.Slices = altRounds(b.cfg.Point.duration, altSlice)
	return r, nil
}

// statusAlternation is section 4a.
type statusAlternation struct {
	SliceSeconds float64 `json:"slice_seconds"`
	Slices       int     `json:"slices"` // per side
	Noop         point   `json:"grpc_noop"`
	Status       point   `json:"gateway_status"`
}

// statusAlternatePoints measures section 4a: probes (section 4's callers
// on its sessions) against the no-op (section 2's callers), alternating
// slice by slice, as 3a does for the throughput ratio. Measured one after
// the other, each side took in its own stretch of the machine's speed: the
// no-op's calls/s ranged from 46,700 to 64,300 over five runs of one build.
func (b *bench) statusAlternatePoints(ctx context.Context, noops, probes []callFunc, conns, sessions int) (r statusAlternation, err error) {
	pts, err := b.alternateSet(ctx, "4a no-op / GetSessionStatus", noops, probes)
	if err != nil {
		return r, err
	}
	r.Noop, r.Status = pts[0], pts[1]
	r.Noop.Conns = conns
	r.Status.Conns, r.Status.Sessions = conns, sessions
	r.SliceSeconds = altSlice.Seconds()
	r.Slices = altRounds(b.cfg.Point.duration, altSlice)
	return r, nil
}

// alternateSet measures sides alternating slice by slice (alternate), with
// measure's retries of a disturbed attempt (quietest), and prints one
// progress line for the set, named name.
func (b *bench) alternateSet(ctx context.Context, name string, sides ...[]callFunc) ([]point, error) {
	return quietest(func() ([]point, float64, error) {
		p, err := b.alternate(ctx, sides, altSlice)
		if err != nil {
			return p, 0, fmt.Errorf("%s: %w", name, err)
		}
		rates := make([]string, len(p))
		for i, pt := range p {
			cpu := "CPU/call " + us(pt.CPUNsPerCall)
			if pt.RuntimeCPUNsPerCall > 0 {
				cpu += ", runtime " + us(pt.RuntimeCPUNsPerCall)
			}
			rates[i] = strconv.FormatFloat(pt.CallsPerSec, 'f', 0, 64) + " (" + cpu + "; " + callCountsText(pt) + ")"
		}
		b.progress("%-30s c=%-3d calls/s %s, slices of %v (other CPU %.0f%%)",
			name, b.cfg.Concurrency, strings.Join(rates, " / "), altSlice, 100*p[0].OtherCPU)
		return p, p[0].OtherCPU, nil
	})
}

// alternate runs concurrent points over the same stretch of time: sides[0]'s
// workers for one slice, then sides[1]'s, and so on, round after round,
// with the side that goes first rotating, until each side has run
// cfg.Point's duration (or made its maxCalls calls). A warm-up of
// cfg.Warmup per side, alternating the same way, comes first. Each side's
// point sums its slices: calls, wall time, every call's timing, and the CPU
// of this process and the runtime child sampled around each slice.
func (b *bench) alternate(ctx context.Context, sides [][]callFunc, slice time.Duration) ([]point, error) {
	if len(sides) == 0 || slice <= 0 {
		return nil, errors.New("alternating needs sides and a slice")
	}
	if _, err := b.alternateRounds(ctx, sides, slice, altRounds(b.cfg.Warmup.duration, slice), b.cfg.Warmup.maxCalls); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return b.alternateRounds(ctx, sides, slice, altRounds(b.cfg.Point.duration, slice), b.cfg.Point.maxCalls)
}

// altRounds is how many slices each side runs to fill total: at least one,
// the last one whole.
func altRounds(total, slice time.Duration) int { return max(int((total+slice-1)/slice), 1) }

// sideTotals accumulates one side's slices: their timings, wall time, and
// the differences of their CPU samples, summed (ok: every sample was).
type sideTotals struct {
	times []time.Duration
	wall  time.Duration
	cpu   cpuSample
}

func (b *bench) alternateRounds(ctx context.Context, sides [][]callFunc, slice time.Duration, rounds, maxCalls int) ([]point, error) {
	tot := make([]sideTotals, len(sides))
	for i := range tot {
		tot[i].cpu.ok, tot[i].cpu.counted = true, true
	}
	perSlice := max(maxCalls/rounds, 1)
	for round := range rounds {
		for k := range sides {
			side := (round + k) % len(sides)
			var times []time.Duration
			var wall time.Duration
			before, after, _, err := b.sampled(func() (err error) {
				times, wall, err = runTimed(ctx, sides[side], bounds{duration: slice, maxCalls: perSlice})
				return err
			})
			if err != nil {
				return nil, err
			}
			t := &tot[side]
			t.times = append(t.times, times...)
			t.wall += wall
			t.cpu.add(before.to(after))
		}
	}
	pts := make([]point, len(sides))
	for i, t := range tot {
		if len(t.times) == 0 {
			return nil, errors.New("no call completed")
		}
		p := summarize(t.times, len(sides[i]), t.wall)
		p.OtherCPU = otherCPU(cpuSample{ok: true}, t.cpu, t.wall)
		t.cpu.setPerCall(&p)
		pts[i] = p
	}
	// Every side reports the busier side's other CPU: the set is retried,
	// or not, as one (quietest).
	worst := slices.MaxFunc(pts, func(a, b point) int { return cmp.Compare(a.OtherCPU, b.OtherCPU) }).OtherCPU
	for i := range pts {
		pts[i].OtherCPU = worst
	}
	return pts, nil
}
