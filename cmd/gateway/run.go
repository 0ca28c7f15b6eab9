package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	"github.com/sessiongate/sessiongate/gateway/gctuner"
	"github.com/sessiongate/sessiongate/gateway/proctuner"
	"github.com/sessiongate/sessiongate/gateway/server"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// run is the whole command; main only supplies the process's environment.
// It returns when ctx ends (SIGTERM) and the gateway has drained.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "profiles" {
		return printProfiles(args[1:], getenv, stdout)
	}
	if len(args) > 0 && args[0] == "runtime" {
		return runRuntime(ctx, args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(o.logLevel, o.logFormat, stderr)
	if err != nil {
		return err
	}
	if o.gcMinHeapMiB < 0 {
		return fmt.Errorf("--gc-min-heap-mib %d: want 0 (off) or more", o.gcMinHeapMiB)
	}
	tuner := gctuner.Start(uint64(o.gcMinHeapMiB) << 20)
	defer tuner.Stop()
	var procs *proctuner.Tuner
	switch {
	case !o.procsTuner:
	case getenv("GOMAXPROCS") != "":
		log.Info("procs tuner off: GOMAXPROCS is set", "gomaxprocs", runtime.GOMAXPROCS(0))
	default:
		procs = proctuner.Start(proctuner.Config{})
		defer procs.Stop()
	}
	tp, stopTracing, err := setupTracing(ctx, o.otlpEndpoint, log) // otel.go
	if err != nil {
		return err
	}
	defer func() {
		// Flush batched spans, bounded: a collector that is gone must not
		// hold the exit.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = stopTracing(fctx)
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if procs != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiongate_procs_tuner_changes_total",
			Help: "Times the procs tuner changed GOMAXPROCS (the current value is go_sched_gomaxprocs_threads).",
		}, func() float64 { return float64(procs.Changes()) }))
	}

	profiles, err := timeoutprofile.LoadGlobal(profileEnv(getenv, o.profileFile))
	if err != nil {
		return err
	}
	tokens := map[string]string{}
	pairs, err := splitPairs("client-token", o.clientTokens)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		tokens[p[1]] = p[0]
	}

	var runtimes []server.Runtime
	pairs, err = splitPairs("runtime", o.runtimes)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		runtimes = append(runtimes, server.Runtime{Name: p[0], URL: p[1]})
	}
	var embedded *arcpruntime.Server
	if len(runtimes) == 0 {
		embedded, err = arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{Logger: log.With("component", "runtime")})
		if err != nil {
			return fmt.Errorf("embedded runtime: %w", err)
		}
		defer embedded.Close()
		registerEmbeddedRuntime(reg, embedded.Runtime())
		runtimes = []server.Runtime{{Name: "default", URL: embedded.URL()}}
		log.Info("embedded reference runtime", "url", embedded.URL())
	}

	grpcLis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("gRPC listener: %w", err)
	}
	defer grpcLis.Close()
	cl, err := openCluster(ctx, o, grpcLis.Addr().String(), reg, log)
	if err != nil {
		return err
	}
	if cl != nil {
		defer cl.dir.Close()
	}
	gw, err := server.New(server.Config{
		InstanceID:                o.instanceID,
		Runtimes:                  runtimes,
		UpstreamToken:             o.upstreamToken,
		ClientTokens:              tokens,
		MaxSessions:               o.maxSessions,
		MaxSessionsPerCaller:      o.maxPerCaller,
		MaxLiveJobs:               o.maxLiveJobs,
		MaxLiveJobsPerCaller:      o.maxLiveJobsCaller,
		MaxRetainedBytes:          o.maxRetained,
		MaxReceivingBytes:         o.maxReceiving,
		MaxRetainedBytesPerCaller: o.maxRetainedCaller,
		MaxWatchersPerJob:         o.maxWatchersPerJob,
		MaxConcurrentStreams:      uint32(o.maxStreams),
		StreamWorkers:             o.streamWorkers,
		WindowBytes:               int32(max(o.windowBytes, -1)),
		KeepaliveTime:             o.keepaliveTime,
		KeepaliveTimeout:          o.keepaliveTimeout,
		KeepaliveMinTime:          o.keepaliveMinTime,
		IdleTimeout:               o.idleTimeout,
		MaxInputBytes:             o.maxInputBytes,
		Upstream: upstream.Config{
			InitTimeout:    o.initTimeout,
			RequestTimeout: o.requestTimeout,
			BackoffMax:     o.backoffMax,
			MaxLiveJobs:    o.maxJobsPerSession,
			MaxFrameBytes:  o.maxFrameBytes,
		},
		TimeoutProfiles: profiles,
		Registry:        reg,
		Logger:          log,
		Cluster:         cl.config(),
		TracerProvider:  tp,
	})
	if err != nil {
		return err
	}
	adminLis, err := net.Listen("tcp", o.admin)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("admin listener: %w", err)
	}
	admin := &http.Server{Handler: gw.AdminHandler(), ReadHeaderTimeout: 5 * time.Second}

	log.Info("sessiongate serving", "grpc", grpcLis.Addr().String(), "admin", adminLis.Addr().String(),
		"instance_id", gw.InstanceID(), "runtimes", len(runtimes))
	if embedded != nil {
		printTryIt(stdout, grpcLis.Addr().String(), adminLis.Addr().String())
	}

	g, gctx := errgroup.WithContext(ctx)
	// The directory lease outlives the gateway's sessions: it is dropped
	// only after Shutdown has handed them off (see server.ClusterConfig).
	leaseCtx, stopLease := context.WithCancel(context.Background())
	defer stopLease()
	if cl != nil {
		g.Go(func() error { return cl.dir.Run(leaseCtx) })
	}
	g.Go(func() error { return gw.Serve(grpcLis) })
	g.Go(func() error {
		if err := admin.Serve(adminLis); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		log.Info("shutting down: draining sessions", "deadline", o.shutdownTimeout)
		start := time.Now()
		sctx, cancel := context.WithTimeoutCause(context.Background(), o.shutdownTimeout,
			fmt.Errorf("--shutdown-timeout %v", o.shutdownTimeout))
		defer cancel()
		err := gw.Shutdown(sctx)
		stopLease()
		if aerr := admin.Shutdown(sctx); aerr != nil {
			_ = admin.Close()
		}
		switch {
		case errors.Is(err, server.ErrHardStop):
			log.Warn("shutdown: hard stop at the deadline, calls still in progress were cut off",
				"elapsed", time.Since(start), "deadline", o.shutdownTimeout, "err", err.Error())
		case err != nil:
			log.Warn("shutdown complete, upstream sessions not all closed cleanly", "elapsed", time.Since(start), "err", err.Error())
		default:
			log.Info("shutdown complete", "elapsed", time.Since(start))
		}
		return nil
	})
	return g.Wait()
}

func printTryIt(w io.Writer, grpcAddr, adminAddr string) {
	fmt.Fprintf(w, `sessiongate is serving gRPC on %[1]s (admin HTTP on %[2]s) with the embedded reference runtime.
Try it (go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4):
  grpcurl -plaintext %[1]s list sessiongate.v1.SessionGateway
  grpcurl -plaintext -d '{"client_name":"try"}' %[1]s sessiongate.v1.SessionGateway/OpenSession
  grpcurl -plaintext -d '{"session_id":"<id>","agent":"echo","input":{"hello":"world"}}' %[1]s sessiongate.v1.SessionGateway/RunJob
  curl -s http://%[2]s/v1/sessions/<id>/status
See README.md, "Quickstart", for more.
`, grpcAddr, adminAddr)
}

// registerEmbeddedRuntime exposes the embedded reference runtime's own job
// counts on /metrics, so that a test or a demo can see how many jobs the
// runtime ran — e.g. that a retried call created one job, not three.
func registerEmbeddedRuntime(reg prometheus.Registerer, rt *arcpruntime.Runtime) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiongate_embedded_runtime_jobs_submitted_total",
			Help: "job.submit envelopes the embedded reference runtime received (idempotent repeats included).",
		}, func() float64 { return float64(rt.Stats().JobsSubmitted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sessiongate_embedded_runtime_jobs_accepted_total",
			Help: "Distinct jobs the embedded reference runtime created (idempotent repeats excluded).",
		}, func() float64 { return float64(rt.Stats().JobsAccepted) }),
	)
}
