// Command gateway-bench is sessiongate's end-to-end benchmark: in one run it
// starts, on loopback, the ARCP reference runtime, a plain grpc-go service
// and the gateway, measures them side by side and prints a table (JSON with
// -json) of every figure beside its performance targets, each marked pass or
// miss.
//
//	go run ./cmd/gateway-bench            # full: 3 s points, 1k, 10k and 100k sessions, 1M tombstones
//	go run ./cmd/gateway-bench -short     # under a minute: 1 s points, 1k sessions, 100k tombstones
//	go run ./cmd/gateway-bench -json      # the same figures as JSON (progress goes to stderr)
//	go run ./cmd/gateway-bench -check     # exit 1 when any target is missed
//	go run ./cmd/gateway-bench -summarize run*.json  # median and range of several -json runs
//
// It runs from any working directory: section 9b's replicas are
// -gateway-bin (or $SESSIONGATE_GATEWAY_BIN), else cmd/gateway built from
// the module this command was built from.
//
// # What is measured
//
//  1. ARCP direct: an upstream.Conn (the gateway's own ARCP client, with the
//     gateway's upstream settings and features) runs the runtime's echo
//     agent: Submit, then Wait for the result. Serial: one connection (see
//     "How" for how the three serial points are taken together).
//     Concurrent: one connection per worker, as the gateway has one upstream
//     connection per session.
//  2. gRPC no-op: a bare grpc.Server (no options, no interceptors) with a
//     hand-written service bench.v1.Noop/Call taking and returning
//     google.protobuf.Empty, called with ClientConn.Invoke. Its
//     concurrent point runs right before 4's, of which it is the baseline.
//  3. Gateway RunJob(echo): the production gateway (server.New, which
//     installs the whole interceptor chain, timeout profiles included, with
//     cmd/gateway's settings) over the same runtime. Serial: one session,
//     the only one open; concurrent: one session per worker.
//  4. Gateway GetSessionStatus (view BASIC, as a balancer probes) at the
//     same concurrency, one session per worker, beside the no-op's
//     throughput. It runs before 3's concurrent point, so that it does not
//     carry the jobs that point leaves retained (sections.go says why).
//     4a. Alternating: section 4's probes and section 2's no-op callers
//     taking turns in slices as in 3a, right after 4. Its ratio, probe ÷
//     no-op calls/s, is the status target's figure; that of 2's and 4's
//     points, one after the other, is shown beside it.
//     3a. Alternating: section 3's RunJob callers and the direct ARCP
//     client (on fresh connections, one per worker) at the same
//     concurrency, taking turns in slices of 250 ms until each has run the
//     point's duration, so that both sides run in the same stretch of the
//     machine's speed (alternate.go says why). Its ratio, RunJob ÷ direct
//     calls/s, is the throughput target's figure; the ratio of 1's and
//     3's concurrent points, measured one after the other, is shown
//     beside it. A third
//     side takes its turns with them: the bare proxy (proxy.go), a bare
//     grpc.Server whose handler runs the echo job on a direct ARCP
//     connection and nothing else, the floor of any gateway of grpc-go and
//     this ARCP client; bare proxy ÷ direct (the floor) and RunJob ÷ bare
//     proxy (how close the gateway comes to it) are shown beside it.
//     3b. Same rate: section 3's RunJob callers and the direct ARCP client
//     (on fresh connections), both held by a pacer to 0.7 of the calls/s
//     RunJob reached in 3, for their CPU per call (held.go says why). Its
//     ratio, direct ÷ RunJob CPU per call, is a figure, not a target.
//  5. Memory per idle live session: runtime.MemStats of this process (the
//     gateway, heap and stacks) before and after opening N sessions through
//     OpenSession, every one READY, after GC: (HeapAlloc + StackInuse) delta
//     ÷ N, the live objects and stacks, is the figure checked; (HeapInuse +
//     StackInuse) delta ÷ N, which adds partly used spans but depends on
//     what earlier sections left in the heap, is shown beside it. The
//     runtime runs in a child process, so its own per-session memory is
//     not counted; the session ids the bench keeps live in an arena
//     allocated before the baseline.
//  6. RunJob serial p50 on one of N idle sessions with all of them open,
//     against the serial p50 on a fresh session, the only one open. The
//     figure checked: each side on its own gateway child (this binary
//     re-executed with -serve-gateway, the gateway as this process runs
//     it, under the same collector and procs tuner settings) over its own
//     runtime child, the calls interleaved in blocks of 20 (scale.go says
//     why); the CPU per call beside it is that side's gateway and runtime
//     children's. Shown beside it, the figure as it was taken before: both
//     sides in this process, one after the other, on section 5's sessions,
//     the one-session side right before 5 opens them.
//  7. Tombstones: a tombstone.Store of 1M UUID keys (generated before any
//     timing): HeapAlloc delta after GC per entry, insert, lookup (hit and
//     miss) and expiry (one Expire past every TTL) per entry.
//  8. The timeout profile server unary interceptor (server.NewEnforcer, as
//     the gateway builds it) around a bare handler against the bare
//     handler: ns/op and allocs/op, with and without a caller deadline.
//  9. The cluster (cluster.go; needs redis-server, else skipped with the
//     reason printed, failed under CI=true): 9a, forwarded ÷ local RunJob
//     p50 with two in-process replicas on a real redis-server, the two
//     measured interleaved, call by call, each on a fresh session (runs
//     after section 4, inside -cpuprofile); 9b, with three real replicas (built
//     from cmd/gateway, run by gateway/cluster/clustertest, lease TTL 1 s)
//     after everything else: SIGKILL of a session's owner mid-stream → first
//     successful call through another replica, the watched job's events
//     lost or duplicated across the takeover, and calls failed by status
//     code during a rolling SIGTERM restart of all three. 9b runs in -short
//     too (about 30 s); not in the smoke mode of the tests.
//
// # How
//
// Sections 7 and 8 run first, in a quiet process. Then the runtime child
// starts: this binary re-executed with a hidden first argument
// (-serve-runtime), which prints its URL and serves until its stdin closes;
// sections 1 to 5 and 6's in-process figure use it, and 6 starts its own
// children after the others have stopped. Each point warms up with its own
// workers, then measures. Workers call in closed loops; latency comes from
// per-call timings (sorted; nearest-rank p50 and p99), throughput is
// completed calls ÷ wall time. Concurrent points run for -duration (or
// -max-calls calls); their gRPC workers share one ClientConn per
// -workers-per-conn workers (16: four connections for 64 workers), the same
// client setup for the no-op and the gateway. Serial points (concurrency 1,
// the latency figures) run -serial-calls calls on a fresh session or ARCP
// connection: a session keeps its finished jobs for minutes, and two sides
// of a ratio must not differ in the job history their session carries.
// The sides of a ratio of serial points are measured over the same stretch
// of time, taking turns (runInterleaved): the three of the p50 ratio (1, 2
// and 3) in blocks of 20 calls, 9a's two call by call. Any
// failed call aborts the run: figures from a point with errors would mean
// nothing. Each point also reports the CPU time of this process and the
// runtime child per call.
//
// Ratios: p50 = (3 p50) ÷ (1 p50 + 2 p50); throughput = (3) ÷ (1) at the
// concurrency; status = (4) ÷ (2) at the concurrency; scale = (6 at N) ÷ (6 at 1),
// the interleaved figure.
//
// Other processes on the machine skew every figure, so each point notes
// the share of the machine's CPU they used meanwhile (from /proc); a point
// where they used more than 5 % is measured again, up to three times, and
// the quietest attempt is kept. The table warns when the run was not quiet.
//
// -cpuprofile profiles this process (the gateway and the bench's clients)
// during the gateway sections, 3 to 5 and 6's in-process figure (6's
// gateway children are not profiled). -memprofile writes a heap profile
// with the most idle sessions open, recording every allocation made while
// they were opened (runtime.MemProfileRate 1 during section 5; the memory
// figures do not depend on it). -point-profiles profiles single
// concurrent points instead, their measured calls only, so that a
// profile's samples divided by the calls the progress line names are CPU
// per call: the direct client (1), RunJob (3) and the bare proxy (the
// floor, alternate.go), which it measures as a point of its own after 3
// for this. The exit status is 0 even when a target is
// missed, unless -check; it is 1 when the run fails and 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiongate/sessiongate/gateway/gctuner"
)

func main() {
	if isRuntimeChild(os.Args) {
		if err := serveRuntimeChild(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "gateway-bench runtime child:", err)
			os.Exit(1)
		}
		return
	}
	if isGatewayChild(os.Args) {
		if err := serveGatewayChild(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "gateway-bench gateway child:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := runMain(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// runMain is the command: flags in, report out, exit code back.
func runMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway-bench:", err)
		return 2
	}
	if o.summarize != nil {
		if err := summarizeReports(stdout, o.summarize); err != nil {
			fmt.Fprintln(stderr, "gateway-bench:", err)
			return 1
		}
		return 0
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "gateway-bench:", err)
		return 1
	}
	cfg := o.cfg
	cfg.RuntimeCmd = []string{exe, serveRuntimeArg}
	cfg.Progress = stderr
	if o.verbose {
		cfg.GatewayLog = stderr
	}
	rep, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-bench:", err)
		return 1
	}
	if o.json {
		err = writeJSON(stdout, rep)
	} else {
		err = writeTable(stdout, rep)
	}
	if err != nil {
		fmt.Fprintln(stderr, "gateway-bench:", err)
		return 1
	}
	if o.check && !rep.AllPass {
		return 1
	}
	return 0
}

// config is one run's settings.
type config struct {
	Mode string // full, short or smoke
	// Point and Warmup bound each concurrent point and its warm-up;
	// Serial and SerialWarmup each serial (concurrency 1) point.
	Point, Warmup        bounds
	Serial, SerialWarmup bounds
	Concurrency          int
	WorkersPerConn       int
	Sessions             []int // idle session counts of section 5, ascending
	Tombstones           int
	InterceptorOps       int  // calls per round in section 8
	GCMinHeapMiB         int  // gateway/gctuner's least heap goal; 0 = Go's defaults
	ProcsTuner           bool // run gateway/proctuner, as cmd/gateway --procs-tuner does (opt-in there too)
	// ClientWindowBytes is the callers' HTTP/2 flow-control window, as
	// client.WithWindowBytes takes it (0: the Go client's default, fixed;
	// negative: grpc-go's dynamic window and its bandwidth probe).
	ClientWindowBytes int32
	CPUProfile        string
	// PointProfiles is the prefix of the CPU profiles of single
	// concurrent points ("" = none): sections 1 and 3 and the bare proxy
	// measured as a point of its own after 3 (pointProfile).
	PointProfiles string
	MemProfile    string
	Trace         string   // prefix of the execution traces of the interleaved serial sets ("" = none)
	RuntimeCmd    []string // the runtime child's command line
	// GatewayBin is the gateway binary of section 9b ("": built from this
	// module, see gatewayBinary).
	GatewayBin string
	Progress   io.Writer // progress lines; nil discards them
	GatewayLog io.Writer // the gateway's log; nil discards it
}

// settleWarmup is the least time an interleaved serial set warms up (past
// its warm-up's call count if need be): 20 of the procs tuner's windows, so
// that a set that follows a concurrent point is measured on the Ps the
// tuner settles on for it (it tries one P after 10 light windows in a row),
// not on the ones the concurrent point left.
const settleWarmup = 2 * time.Second

// modeConfig returns the defaults of a mode.
func modeConfig(mode string) config {
	c := config{Mode: mode, Concurrency: 64, WorkersPerConn: 16, GCMinHeapMiB: gctuner.DefaultMinHeapMiB}
	switch mode {
	case "short":
		c.Point, c.Warmup = bounds{duration: time.Second, maxCalls: 2_000_000}, bounds{duration: 300 * time.Millisecond, maxCalls: 2_000_000}
		c.Serial, c.SerialWarmup = bounds{duration: time.Second, maxCalls: 2000}, bounds{duration: 3 * time.Second, maxCalls: 200, least: settleWarmup}
		c.Sessions, c.Tombstones, c.InterceptorOps = []int{1000}, 100_000, 200_000
	case "smoke":
		c.Point, c.Warmup = bounds{duration: 10 * time.Second, maxCalls: 50}, bounds{duration: 10 * time.Second, maxCalls: 10}
		c.Serial, c.SerialWarmup = bounds{duration: 10 * time.Second, maxCalls: 50}, bounds{duration: 10 * time.Second, maxCalls: 10}
		c.Concurrency, c.WorkersPerConn = 8, 4
		c.Sessions, c.Tombstones, c.InterceptorOps = []int{20}, 10_000, 10_000
	default:
		c.Mode = "full"
		c.Point, c.Warmup = bounds{duration: 3 * time.Second, maxCalls: 10_000_000}, bounds{duration: time.Second, maxCalls: 10_000_000}
		c.Serial, c.SerialWarmup = bounds{duration: 3 * time.Second, maxCalls: 5000}, bounds{duration: 3 * time.Second, maxCalls: 500, least: settleWarmup}
		c.Sessions, c.Tombstones, c.InterceptorOps = []int{1000, 10_000, 100_000}, 1_000_000, 1_000_000
	}
	return c
}

type flags struct {
	cfg                  config
	json, check, verbose bool
	summarize            []string // with -summarize: the reports to summarize
}

// parseFlags reads the flags; zero values take the mode's defaults.
func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	fs := flag.NewFlagSet("gateway-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o                     flags
		short                 bool
		duration, warmup      time.Duration
		maxCalls, serialCalls int
		conc, perConn         int
		tombs, icptOps        int
		sessions              string
		summary               bool
		gcMin                 int
		procsTuner            bool
		clientWindow          int
	)
	fs.BoolVar(&summary, "summarize", false, "instead of measuring, print the median and range of every figure of the -json reports named as arguments")
	fs.BoolVar(&short, "short", false, "finish in under a minute: 1 s per point, 1k sessions, 100k tombstones")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of the table")
	fs.BoolVar(&o.check, "check", false, "exit 1 when any target is missed")
	fs.BoolVar(&o.verbose, "v", false, "send the gateway's log (JSON, info) to stderr")
	fs.DurationVar(&duration, "duration", 0, "length of each concurrent point, and the longest a serial point may run (default 3s, 1s with -short)")
	fs.DurationVar(&warmup, "warmup", 0, "warm-up before each concurrent point, and the longest a serial warm-up may run (default 1s, 300ms with -short)")
	fs.IntVar(&maxCalls, "max-calls", 0, "at most this many calls per concurrent point (default 10M, 2M with -short)")
	fs.IntVar(&serialCalls, "serial-calls", 0, "calls per serial point, each on a fresh session; a tenth of it warms up (default 5000, 2000 with -short)")
	fs.IntVar(&conc, "concurrency", 64, "workers of the concurrent points (and sessions of 3 and 4)")
	fs.IntVar(&perConn, "workers-per-conn", 16, "workers sharing one gRPC ClientConn")
	fs.StringVar(&sessions, "sessions", "", "idle session counts of section 5, comma-separated (default 1000,10000,100000; 1000 with -short)")
	fs.IntVar(&tombs, "tombstones", 0, "tombstone entries of section 7 (default 1000000, 100000 with -short)")
	fs.IntVar(&icptOps, "interceptor-iterations", 0, "calls per round in section 8 (default 1000000, 200000 with -short)")
	fs.IntVar(&gcMin, "gc-min-heap-mib", gctuner.DefaultMinHeapMiB, "the garbage collector's least heap goal for this process, as cmd/gateway's --gc-min-heap-mib (0: Go's defaults)")
	fs.BoolVar(&procsTuner, "procs-tuner", false, "run this process's GOMAXPROCS as cmd/gateway's opt-in --procs-tuner does (one P while no goroutine waits for one); off, as cmd/gateway's default: Go's default")
	fs.IntVar(&clientWindow, "client-window-bytes", 0, "the callers' HTTP/2 flow-control window, for every gRPC service measured, as the Go client's WithWindowBytes takes it (0: its default, a fixed 1 MiB; -1: grpc-go's dynamic window, whose bandwidth probe sends a PING per call at concurrency 1)")
	fs.StringVar(&o.cfg.CPUProfile, "cpuprofile", "", "write a CPU profile of the gateway's concurrent points, sections 5 and 9a, and section 6's in-process figure to `file`")
	fs.StringVar(&o.cfg.PointProfiles, "point-profiles", "", "write a CPU profile of each of three concurrent points, the measured calls only: section 1's to `prefix`-1-direct.pprof, 3's to prefix-3-runjob.pprof, and the bare proxy's, measured as a point of its own after 3, to prefix-floor-proxy.pprof (not with -cpuprofile)")
	fs.StringVar(&o.cfg.MemProfile, "memprofile", "", "write a heap profile with the most sessions open to `file`")
	fs.StringVar(&o.cfg.GatewayBin, "gateway-bin", "", "the gateway binary section 9b runs as its three replicas (default: $SESSIONGATE_GATEWAY_BIN, else cmd/gateway built from this module's source, from any working directory)")
	fs.StringVar(&o.cfg.Trace, "trace", "", "write execution traces of the interleaved serial sets to `prefix`-serial.trace (1-3) and prefix-9a.trace, for go tool trace")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if summary {
		if fs.NArg() == 0 {
			return nil, errors.New("-summarize needs the -json reports to summarize as arguments")
		}
		o.summarize = fs.Args()
		return &o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.cfg.CPUProfile != "" && o.cfg.PointProfiles != "" {
		return nil, errors.New("-cpuprofile and -point-profiles cannot be used together: a process has one CPU profile at a time")
	}
	mode := "full"
	if short {
		mode = "short"
	}
	c := modeConfig(mode)
	c.CPUProfile, c.PointProfiles, c.MemProfile, c.Trace = o.cfg.CPUProfile, o.cfg.PointProfiles, o.cfg.MemProfile, o.cfg.Trace
	c.GatewayBin = o.cfg.GatewayBin
	c.GCMinHeapMiB = gcMin
	c.ProcsTuner = procsTuner
	if clientWindow < math.MinInt32 || clientWindow > math.MaxInt32 {
		return nil, fmt.Errorf("-client-window-bytes %d is out of range", clientWindow)
	}
	c.ClientWindowBytes = int32(clientWindow)
	setIf(&c.Point.duration, duration)
	setIf(&c.Warmup.duration, warmup)
	setIf(&c.Point.maxCalls, maxCalls)
	setIf(&c.Serial.duration, duration)
	setIf(&c.SerialWarmup.duration, warmup)
	if serialCalls > 0 {
		c.Serial.maxCalls, c.SerialWarmup.maxCalls = serialCalls, max(serialCalls/10, 1)
	}
	setIf(&c.Tombstones, tombs)
	setIf(&c.InterceptorOps, icptOps)
	c.Concurrency, c.WorkersPerConn = conc, perConn
	if sessions != "" {
		list, err := parseSessions(sessions)
		if err != nil {
			return nil, err
		}
		c.Sessions = list
	}
	if c.GCMinHeapMiB < 0 {
		return nil, errors.New("-gc-min-heap-mib must be 0 (Go's defaults) or more")
	}
	if c.Concurrency < 1 || c.WorkersPerConn < 1 || c.Point.duration <= 0 || c.Warmup.duration <= 0 || c.Point.maxCalls < 1 ||
		serialCalls < 0 || c.Tombstones < 1 || c.InterceptorOps < 1 {
		return nil, errors.New("-concurrency, -workers-per-conn, -duration, -warmup, -max-calls, -serial-calls, -tombstones and -interceptor-iterations must be positive")
	}
	o.cfg = c
	return &o, nil
}

func setIf[T comparable](dst *T, v T) {
	var zero T
	if v != zero {
		*dst = v
	}
}

// parseSessions parses "1000,10000": positive and ascending.
func parseSessions(s string) ([]int, error) {
	var list []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || (len(list) > 0 && n <= list[len(list)-1]) {
			return nil, fmt.Errorf("-sessions %q: want positive ascending counts such as 1000,10000", s)
		}
		list = append(list, n)
	}
	return list, nil
}
