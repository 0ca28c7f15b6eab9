package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/sessiongate/sessiongate/gateway/gctuner"
	"github.com/sessiongate/sessiongate/gateway/proctuner"
)

// run measures everything cfg asks for and returns the report. Whatever it
// started is stopped before it returns, on every path.
func run(ctx context.Context, cfg config) (*report, error) {
	start := time.Now()
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.GatewayLog == nil {
		cfg.GatewayLog = io.Discard
	}
	// The garbage collector runs as in cmd/gateway (gateway/gctuner, the
	// default minimum heap): every section of this process, baselines
	// included, runs under it. The runtime child, a stand-in for a runtime
	// the gateway does not own, keeps Go's defaults.
	if cfg.GCMinHeapMiB > 0 {
		tuner := gctuner.Start(uint64(cfg.GCMinHeapMiB) << 20)
		defer tuner.Stop()
	}
	// With -procs-tuner (opt-in, as in cmd/gateway) so does the procs tuner
	// (gateway/proctuner), for the same reason: the gateway runs in this
	// process, so the baselines run under it too (their p50s are a little
	// lower under it, which makes the p50 ratio harder, not easier); the
	// runtime child keeps Go's default.
	var procs *proctuner.Tuner
	if cfg.ProcsTuner {
		procs = proctuner.Start(proctuner.Config{})
		defer procs.Stop()
	}
	files := raiseFileLimit(wantFiles)
	var left []string
	cfg.Sessions, left = fitSessions(cfg.Sessions, files, cfg.Concurrency)
	if len(cfg.Sessions) == 0 {
		return nil, errors.New(strings.Join(left, "; "))
	}
	for _, l := range left {
		fmt.Fprintln(cfg.Progress, "gateway-bench:", l)
	}
	rep := &report{Machine: currentMachine(files), Config: configInfo{SessionsChanged: left, GCMinHeapMiB: cfg.GCMinHeapMiB, ProcsTuner: procs != nil, ClientWindowBytes: cfg.ClientWindowBytes,
		Mode: cfg.Mode, PointSeconds: cfg.Point.duration.Seconds(), WarmupSeconds: cfg.Warmup.duration.Seconds(),
		MaxCalls: cfg.Point.maxCalls, SerialCalls: cfg.Serial.maxCalls, SerialWarmup: cfg.SerialWarmup.maxCalls,
		Concurrency: cfg.Concurrency, WorkersPerConn: cfg.WorkersPerConn,
		Sessions: cfg.Sessions, Tombstones: cfg.Tombstones,
	}}
	b := &bench{cfg: cfg}
	if err := b.micro(rep); err != nil {
		return nil, err
	}
	if err := b.services(ctx, rep); err != nil {
		return nil, err
	}
	var err error
	if rep.Scale, err = b.scalePoints(ctx, cfg.Sessions[len(cfg.Sessions)-1]); err != nil {
		return nil, fmt.Errorf("6 scale: %w", err)
	}
	switch {
	case rep.Cluster.Skipped != "":
		rep.Cluster.FailuresSkipped = rep.Cluster.Skipped
	case cfg.Mode == "smoke":
		rep.Cluster.FailuresSkipped = "smoke mode runs no real replicas"
	default:
		if err := b.clusterFailures(ctx, &rep.Cluster); err != nil {
			return nil, fmt.Errorf("9b cluster: %w", err)
		}
	}
	rep.Config.ProcsChanges = procs.Changes()
	rep.finish(time.Since(start))
	return rep, nil
}

// fitSessions returns the session counts of section 5 that an open-file
// limit of files holds (each session is one socket in this process, beside
// 2×concurrency sessions of other sections and some 512 other files), and
// a sentence for each count it changed: counts above the limit are replaced
// by the largest that fits, rounded down to a thousand, when that is more
// than the count before them, else left out.
func fitSessions(counts []int, files uint64, concurrency int) (fit []int, said []string) {
	overhead := 2*concurrency + 512
	largest := (int(min(files, 1<<31)) - overhead) / 1000 * 1000
	for _, n := range counts {
		if uint64(n+overhead) <= files {
			fit = append(fit, n)
			continue
		}
		why := fmt.Sprintf("%d sessions need an open-file limit of about %d and this process may have %d (the hard limit; raising it needs CAP_SYS_RESOURCE)", n, n+overhead, files)
		if largest > 0 && (len(fit) == 0 || largest > fit[len(fit)-1]) {
			fit = append(fit, largest)
			said = append(said, why+fmt.Sprintf(": measuring %d, the largest that fits, instead", largest))
			continue
		}
		said = append(said, why+": left out")
	}
	return fit, said
}

// micro is sections 7 and 8, run while the process is still quiet.
func (b *bench) micro(rep *report) (err error) {
	b.progress("7 tombstones: %d entries", b.cfg.Tombstones)
	cpu0, t0 := sampleCPU(os.Getpid()), time.Now()
	if rep.Tombstones, err = benchTombstones(b.cfg.Tombstones); err != nil {
		return err
	}
	cpu1, t1 := sampleCPU(os.Getpid()), time.Now()
	rep.Tombstones.OtherCPU = otherCPU(cpu0, cpu1, t1.Sub(t0))
	b.progress("8 interceptor: %d calls per round", b.cfg.InterceptorOps)
	if rep.Interceptor, err = benchInterceptor(b.cfg.InterceptorOps); err != nil {
		return err
	}
	rep.Interceptor.OtherCPU = otherCPU(cpu1, sampleCPU(os.Getpid()), time.Since(t1))
	return nil
}

// services is sections 1 to 6: it starts the runtime child and the
// servers, measures, and stops everything again, also when it fails.
func (b *bench) services(ctx context.Context, rep *report) (err error) {
	defer func() { err = errors.Join(err, b.close()) }()
	most := b.cfg.Sessions[len(b.cfg.Sessions)-1]
	if err := b.start(ctx, most+b.cfg.Concurrency+16); err != nil {
		return err
	}
	rep.Config.RuntimePID = b.rt.PID()
	if rep.ARCP, err = b.arcpDirect(ctx); err != nil {
		return fmt.Errorf("1 ARCP direct: %w", err)
	}
	if err := b.serialPoints(ctx, rep); err != nil {
		return fmt.Errorf("1-3 serial: %w", err)
	}
	stopProfile, err := startCPUProfile(b.cfg.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if err := b.gatewayCalls(ctx, rep); err != nil {
		return fmt.Errorf("3/4 gateway: %w", err)
	}
	if err := b.clusterForward(ctx, &rep.Cluster); err != nil {
		return fmt.Errorf("9a cluster: %w", err)
	}
	if rep.Memory, rep.ScaleInProcess, err = b.idleSessions(ctx); err != nil {
		return fmt.Errorf("5/6 sessions: %w", err)
	}
	return nil
}

// bench owns the processes, servers and connections of one run.
type bench struct {
	cfg       config
	rt        *childProc
	noop      *noopServer
	gw        *gatewayServer
	noopConns []*grpc.ClientConn
	gwConns   []*grpc.ClientConn
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "gateway-bench: "+format+"\n", args...)
}

// start starts the runtime child, the no-op server and the gateway, and
// connects to both gRPC servers. What it started is stopped by close, even
// when start fails half way.
func (b *bench) start(ctx context.Context, maxSessions int) error {
	args := append(b.cfg.RuntimeCmd[1:len(b.cfg.RuntimeCmd):len(b.cfg.RuntimeCmd)], strconv.Itoa(listenersFor(maxSessions)))
	rt, err := startRuntimeChild(ctx, b.cfg.RuntimeCmd[0], args)
	if err != nil {
		return err
	}
	b.rt = rt
	b.progress("runtime child %d serving %s", rt.PID(), strings.Join(rt.urls, " "))
	if b.noop, err = startNoop(); err != nil {
		return err
	}
	if b.gw, err = startGateway(rt.urls, maxSessions, b.cfg.GatewayLog); err != nil {
		return err
	}
	n := connsFor(b.cfg.Concurrency, b.cfg.WorkersPerConn, b.cfg.Concurrency)
	if b.noopConns, err = dialConns(ctx, b.noop.addr, n, b.cfg.ClientWindowBytes); err != nil {
		return err
	}
	b.gwConns, err = dialConns(ctx, b.gw.addr, n, b.cfg.ClientWindowBytes)
	return err
}

// close stops everything start started, in reverse order: client
// connections, the gateway (which closes every session), the no-op server,
// the runtime child (killed if it does not exit).
func (b *bench) close() error {
	closeConns(b.gwConns)
	closeConns(b.noopConns)
	var errs []error
	if b.gw != nil {
		errs = append(errs, b.gw.stop(60*time.Second))
	}
	if b.noop != nil {
		errs = append(errs, b.noop.stop())
	}
	if b.rt != nil {
		errs = append(errs, b.rt.stop())
	}
	return errors.Join(errs...)
}

// busyAttempts is how many times a point is measured at most while other
// processes keep more than busyMachine of the CPU busy; the quietest
// attempt is kept.
const busyAttempts = 3

// workload prepares the callers of one measurement attempt; release undoes
// what it prepared (closes the sessions it opened).
type workload func(ctx context.Context) (calls []callFunc, release func() error, err error)

// reuse is a workload that hands out the same callers every attempt.
func reuse(calls []callFunc) workload {
	return func(context.Context) ([]callFunc, func() error, error) {
		return calls, func() error { return nil }, nil
	}
}

// pointSpec describes one measurement point.
type pointSpec struct {
	name            string
	serial          bool // bounded by cfg.Serial (a count), else cfg.Point
	conns, sessions int  // reported with the point
	work            workload
	profile         string // CPU profile of the measured calls, each attempt's in turn ("" = none)
}

// measure measures one point: each attempt prepares its workload, warms up
// with the same workers, then measures, noting how much CPU other processes
// took meanwhile. A point disturbed by other processes is measured again
// (quietest).
func (b *bench) measure(ctx context.Context, s pointSpec) (point, error) {
	warm, bnd := b.cfg.Warmup, b.cfg.Point
	if s.serial {
		warm, bnd = b.cfg.SerialWarmup, b.cfg.Serial
	}
	return quietest(func() (point, float64, error) {
		pt, err := b.attempt(ctx, s, warm, bnd)
		if err != nil {
			return pt, 0, fmt.Errorf("%s: %w", s.name, err)
		}
		b.progress("%-30s c=%-3d %7.0f calls/s  p50 %s  p99 %s  CPU/call %s (runtime %s)  %s  (%d calls, other CPU %.0f%%)",
			s.name, pt.Concurrency, pt.CallsPerSec, us(pt.P50Ns), us(pt.P99Ns), us(pt.CPUNsPerCall), us(pt.RuntimeCPUNsPerCall), callCountsText(pt), pt.Calls, 100*pt.OtherCPU)
		return pt, pt.OtherCPU, nil
	})
}

// quietest runs try up to busyAttempts times, until an attempt ran while
// other processes kept at most busyMachine of the machine busy, and returns
// the attempt during which they used the least (try's second result).
func quietest[T any](try func() (T, float64, error)) (T, error) {
	var best T
	var bestOther float64
	for attempt := range busyAttempts {
		v, other, err := try()
		if err != nil {
			var zero T
			return zero, err
		}
		if attempt == 0 || other < bestOther {
			best, bestOther = v, other
		}
		if bestOther <= busyMachine {
			break
		}
	}
	return best, nil
}

// measureSet measures serial points at once, interleaved block calls at a
// time (runInterleaved), each on the callers its workload prepares (one
// each), with measure's warm-up and its retries of a disturbed attempt.
func (b *bench) measureSet(ctx context.Context, name string, block int, works ...workload) ([]point, error) {
	return quietest(func() ([]point, float64, error) {
		p, err := b.attemptSet(ctx, block, works)
		if err != nil {
			return p, 0, fmt.Errorf("%s: %w", name, err)
		}
		p50s, calls := make([]string, len(p)), make([]string, len(p))
		for i, pt := range p {
			p50s[i], calls[i] = us(pt.P50Ns), strconv.Itoa(pt.Calls)
		}
		b.progress("%-30s p50 %s interleaved by %d (%s calls, other CPU %.0f%%)",
			name, strings.Join(p50s, " / "), block, strings.Join(calls, " + "), 100*p[0].OtherCPU)
		return p, p[0].OtherCPU, nil
	})
}

func (b *bench) attemptSet(ctx context.Context, block int, works []workload) (p []point, err error) {
	calls, release, err := prepareSides(ctx, works)
	// The named result: a release's error reaches the caller.
	defer func() { err = errors.Join(err, release()) }()
	if err != nil {
		return nil, err
	}
	if _, err := runInterleaved(ctx, calls, block, b.cfg.SerialWarmup); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	before, after, wall, err := b.sampled(func() (err error) {
		p, err = runInterleaved(ctx, calls, block, b.cfg.Serial)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range p {
		p[i].OtherCPU = otherCPU(before, after, wall)
		p[i].Conns, p[i].Sessions = 1, 1
	}
	return p, nil
}

// prepareSides prepares the one caller of each side of an interleaved set.
// Its release undoes every preparation that succeeded, also when a later
// one failed (then err is that failure's).
func prepareSides(ctx context.Context, works []workload) (calls []callFunc, release func() error, err error) {
	var releases []func() error
	release = func() error {
		var errs []error
		for _, r := range releases {
			errs = append(errs, r())
		}
		return errors.Join(errs...)
	}
	for _, w := range works {
		c, r, err := w(ctx)
		if err != nil {
			return nil, release, err
		}
		releases = append(releases, r)
		if len(c) != 1 {
			return nil, release, errors.New("an interleaved set needs one caller on each side")
		}
		calls = append(calls, c[0])
	}
	return calls, release, nil
}

// attempt is one try at a point.
func (b *bench) attempt(ctx context.Context, s pointSpec, warm, bnd bounds) (pt point, err error) {
	calls, release, err := s.work(ctx)
	if err != nil {
		return pt, err
	}
	defer func() { err = errors.Join(err, release()) }()
	if _, err := runPoint(ctx, calls, warm); err != nil {
		return pt, fmt.Errorf("warm-up: %w", err)
	}
	stopProfile, err := startCPUProfile(s.profile)
	if err != nil {
		return pt, err
	}
	before, after, wall, err := b.sampled(func() (err error) {
		pt, err = runPoint(ctx, calls, bnd)
		return err
	})
	stopProfile()
	if err != nil {
		return pt, err
	}
	if s.profile != "" {
		b.progress("%s: CPU profile of %d calls in %.2fs written to %s", s.name, pt.Calls, wall.Seconds(), s.profile)
	}
	pt.OtherCPU = otherCPU(before, after, wall)
	before.to(after).setPerCall(&pt)
	pt.Conns, pt.Sessions = s.conns, s.sessions
	return pt, nil
}

// sampled runs run between two CPU samples of this process and the runtime
// child, and returns them and the wall time between.
func (b *bench) sampled(run func() error) (before, after cpuSample, wall time.Duration, err error) {
	pids := []int{os.Getpid(), b.rt.PID()}
	before, start := sampleCPU(pids...), time.Now()
	err = run()
	return before, sampleCPU(pids...), time.Since(start), err
}

// pointProfile is the path of the named point's CPU profile under
// -point-profiles, "" without it.
func (b *bench) pointProfile(name string) string {
	if b.cfg.PointProfiles == "" {
		return ""
	}
	return b.cfg.PointProfiles + "-" + name + ".pprof"
}

// startCPUProfile starts profiling to path ("" = none) and returns an
// idempotent stop.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	stopped := false
	return func() {
		if !stopped {
			stopped = true
			pprof.StopCPUProfile()
			f.Close()
		}
	}, nil
}

// startTrace starts an execution trace of the set named set, to
// prefix-set.trace (prefix "" = none), and returns a stop that ends it
// and reports the file's errors.
func startTrace(prefix, set string) (stop func() error, err error) {
	if prefix == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(prefix + "-" + set + ".trace")
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		trace.Stop()
		return f.Close()
	}, nil
}

// writeHeapProfile writes the heap profile to path ("" = none) after a GC.
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
