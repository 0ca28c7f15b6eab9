package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/server"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// Options configure one soak run.
type Options struct {
	Duration          time.Duration // load and faults; in-flight calls then finish within their budgets
	Seed              uint64        // the fault schedule and every worker's choices
	Dialect           string        // arcpruntime.Dialects name
	Workers           int           // concurrent load goroutines
	Callers           int           // caller identities (bearer tokens)
	SessionsPerCaller int
	Slack             time.Duration // how late past its budget a call may end and still count as definite
	Gap               time.Duration // WatchJob's message gap limit (the server's)
	Heartbeat         time.Duration // the runtime's heartbeat interval
	Tolerance         int           // goroutines above the baseline still counted as returned
	Settle            time.Duration // bound on the wait for goroutines to return
	Faults            bool          // inject faults (false: a control run)
	Log               io.Writer     // gateway and runtime logs (WARN and above); nil discards
	Progress          io.Writer     // progress lines; nil discards
}

// defaultOptions are the command's defaults; short is the CI mode.
func defaultOptions(short bool) Options {
	o := Options{
		Duration: 10 * time.Minute, Seed: 1, Dialect: "reference", Workers: 12, Callers: 3, SessionsPerCaller: 2,
		Slack: 2 * time.Second, Gap: 6 * time.Second, Heartbeat: time.Second, Tolerance: 5,
		Settle: 30 * time.Second, Faults: true,
	}
	if short {
		o.Duration, o.Workers, o.SessionsPerCaller = 20*time.Second, 8, 1
	}
	return o
}

// Upstream settings: reconnects must be quick for faults to be healed
// within the calls' budgets.
const (
	upstreamInit       = 3 * time.Second
	upstreamRequest    = 10 * time.Second
	upstreamBackoff    = 100 * time.Millisecond
	upstreamBackoffMax = time.Second
	runtimeResume      = 60 * time.Second
	watchMethod        = "/sessiongate.v1.SessionGateway/WatchJob"
)

// rig is everything the soak starts: runtime, proxy, gateway.
type rig struct {
	rt       *arcpruntime.Server
	proxy    *faultProxy
	gw       *server.Gateway
	addr     string
	served   chan error
	counters *upstream.Counters
}

func startRig(o Options, dialect arcpruntime.Dialect, tokens map[string]string) (*rig, error) {
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{
		Dialect: dialect, HeartbeatInterval: o.Heartbeat, ResumeWindow: runtimeResume,
		Logger: log.With("component", "runtime"),
	})
	if err != nil {
		return nil, fmt.Errorf("runtime: %w", err)
	}
	r := &rig{rt: rt, counters: &upstream.Counters{}, served: make(chan error, 1)}
	runtimeAddr := rt.URL()[len("ws://") : len(rt.URL())-len("/arcp")]
	if r.proxy, err = newFaultProxy(runtimeAddr); err != nil {
		rt.Close()
		return nil, err
	}
	profiles, err := timeoutprofile.ParseConfig(fmt.Appendf(nil,
		`{"streaming":{%q:{"initial_timeout_ms":%d,"message_gap_timeout_ms":%d,"total_timeout_ms":0}}}`,
		watchMethod, o.Gap.Milliseconds(), o.Gap.Milliseconds()))
	if err != nil {
		r.close()
		return nil, err
	}
	r.gw, err = server.New(server.Config{
		InstanceID:   "soak",
		Runtimes:     []server.Runtime{{Name: "default", URL: "ws://" + r.proxy.addr + "/arcp", Counters: r.counters}},
		ClientTokens: tokens,
		IdleTimeout:  time.Hour,
		Upstream: upstream.Config{
			InitTimeout: upstreamInit, RequestTimeout: upstreamRequest,
			BackoffInitial: upstreamBackoff, BackoffMax: upstreamBackoffMax,
		},
		TimeoutProfiles: profiles,
		Registry:        prometheus.NewRegistry(),
		Logger:          log.With("component", "gateway"),
	})
	if err != nil {
		r.close()
		return nil, err
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.close()
		return nil, err
	}
	r.addr = lis.Addr().String()
	go func() { r.served <- r.gw.Serve(lis) }()
	return r, nil
}

// close shuts the gateway down (hard after 10 s), then the proxy and the
// runtime, and waits for all of them.
func (r *rig) close() error {
	var errs []error
	if r.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, r.gw.Shutdown(ctx))
		cancel()
		if r.addr != "" {
			errs = append(errs, <-r.served)
		}
	}
	if r.proxy != nil {
		r.proxy.close()
	}
	errs = append(errs, r.rt.Close())
	return errors.Join(errs...)
}

// Run runs one soak and reports on it. The error is for a soak that could
// not run; violations are in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	var dialect *arcpruntime.Dialect
	for _, d := range arcpruntime.Dialects {
		if d.Name == o.Dialect {
			dialect = &d.Dialect
		}
	}
	if dialect == nil {
		return nil, fmt.Errorf("unknown dialect %q", o.Dialect)
	}
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	logf := func(format string, args ...any) { fmt.Fprintf(progress, format+"\n", args...) }
	callers := make([]caller, o.Callers)
	tokens := map[string]string{}
	for i := range callers {
		callers[i] = caller{name: fmt.Sprintf("caller%d", i+1), token: fmt.Sprintf("soak-token-%d-%016x", i+1, rand.Uint64())}
		tokens[callers[i].token] = callers[i].name
	}

	r, err := startRig(o, *dialect, tokens)
	if err != nil {
		return nil, err
	}
	rep := &Report{Dialect: o.Dialect, Seed: o.Seed, Duration: o.Duration.String()}
	defer func() {
		if err := r.close(); err != nil {
			logf("shutdown: %v", err)
		}
	}()

	// Client connections: two ordinary ones, and one with small fixed
	// windows (no BDP growth) for watchers that stop reading, so that the
	// gateway's sends block soon.
	var conns []*grpc.ClientConn
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	dial := func(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
		cc, err := grpc.NewClient(r.addr, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err == nil {
			conns = append(conns, cc)
		}
		return cc, err
	}
	for range 2 {
		if _, err := dial(); err != nil {
			return nil, err
		}
	}
	if _, err := dial(grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(1<<20)); err != nil {
		return nil, err
	}
	for _, cc := range conns {
		hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := healthpb.NewHealthClient(cc).Check(hctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("gateway health: %w", err)
		}
	}

	// Baseline: the rig up, client connections ready, no session.
	runtime.GC()
	base := takeGoroutines()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.Goroutines.Before, rep.Goroutines.ProxyBefore = base.total, base.proxy
	rep.Heap.BeforeAlloc, rep.Heap.BeforeInuse = ms.HeapAlloc, ms.HeapInuse
	logf("soak: dialect %s, seed %d, %v, gateway %s, proxy %s → %s", o.Dialect, o.Seed, o.Duration, r.addr, r.proxy.addr, r.rt.URL())

	l := newLoad(o, conns[:2], conns[2], callers, logf)
	start := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	faultCtx, stopFaults := context.WithCancel(ctx)
	defer stopFaults()
	faults := &faultCounts{}
	var wg sync.WaitGroup
	var faultErr error
	if o.Faults {
		sched := &faultScheduler{
			proxy: r.proxy, rng: rand.New(rand.NewPCG(o.Seed, 0x5eed)), counts: faults,
			heartbeat: o.Heartbeat, init: upstreamInit, log: logf,
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			faultErr = sched.run(faultCtx)
		}()
	}
	l.run(loadCtx, time.Now().Add(o.Duration)) // returns when every worker has finished its last action
	stopFaults()
	wg.Wait()
	if faultErr != nil {
		return nil, faultErr
	}
	rep.LoadElapsed = time.Since(start).Round(time.Millisecond).String()
	logf("soak: load ended after %s; closing sessions", rep.LoadElapsed)

	// Quiesce: close every session the soak holds, then wait (bounded) for
	// the goroutines to come back to the baseline.
	l.closeAll(ctx)
	sctx, cancel := context.WithTimeout(ctx, o.Settle)
	after := waitGoroutines(sctx, base, o.Tolerance)
	cancel()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	rep.Goroutines.After, rep.Goroutines.ProxyAfter = after.total, after.proxy
	rep.Goroutines.Tolerance = o.Tolerance
	if d := after.total - base.total; d > o.Tolerance {
		rep.Goroutines.Leaked = d
		rep.Goroutines.Growth = after.growth(base)
	}
	rep.Heap.AfterAlloc, rep.Heap.AfterInuse = ms.HeapAlloc, ms.HeapInuse
	// Every session is closed: the retained-bytes budget must come back to
	// zero (waited for, bounded, like the goroutines).
	sctx, cancel = context.WithTimeout(ctx, 5*time.Second)
	rb := r.gw.RetainedBytes().Stats()
	for rb.InUse != 0 && sleepCtx(sctx, 100*time.Millisecond) {
		rb = r.gw.RetainedBytes().Stats()
	}
	cancel()
	rep.RetainedAfter, rep.Overreleased = rb.InUse, rb.Overreleased

	rep.Faults = faults.snapshot()
	rep.Upstream = counterMap(r.counters)
	st := r.rt.Runtime().Stats()
	rep.Runtime = map[string]int64{
		"jobs_accepted": st.JobsAccepted, "jobs_cancelled": st.JobsCancelled, "resumes": st.Resumes,
		"resume_failures": st.ResumeFailures, "heartbeat_losses": st.HeartbeatLosses,
		"slow_consumers": st.SlowConsumers, "auth_failures": st.AuthFailures, "sessions_left": st.Sessions,
	}
	l.fill(rep)
	rep.finish()
	return rep, ctx.Err()
}
