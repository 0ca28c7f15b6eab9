package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// report is everything one run measured. Its JSON field names are stable.
type report struct {
	Machine           machineInfo       `json:"machine"`
	Config            configInfo        `json:"config"`
	ARCP              serviceResult     `json:"arcp_direct"`        // 1
	Noop              serviceResult     `json:"grpc_noop"`          // 2
	RunJob            serviceResult     `json:"gateway_run_job"`    // 3
	Alternating       alternateResult   `json:"alternating"`        // 3a
	StatusAlternating statusAlternation `json:"status_alternating"` // 4a
	Held              heldResult        `json:"same_rate"`          // 3b
	Status            statusResult      `json:"gateway_status"`     // 4
	Memory            []memoryResult    `json:"session_memory"`     // 5
	Scale             scaleResult       `json:"scale"`              // 6, interleaved on two gateway children
	// ScaleInProcess is section 6 as it was measured before: both points
	// in this process, one after the other (sections.go, idleSessions).
	ScaleInProcess scaleResult       `json:"scale_in_process"`
	Tombstones     tombstoneResult   `json:"tombstones"`  // 7
	Interceptor    interceptorResult `json:"interceptor"` // 8
	Cluster        clusterResult     `json:"cluster"`     // 9
	Ratios         ratios            `json:"ratios"`
	CPURatios      cpuRatios         `json:"cpu_ratios"`
	Targets        []targetResult    `json:"targets"`
	AllPass        bool              `json:"all_pass"`
	// MaxOtherCPU is the largest OtherCPU of any point or micro-benchmark:
	// how busy other processes kept the machine (-1: unknown).
	MaxOtherCPU float64 `json:"max_other_cpu"`
	Seconds     float64 `json:"seconds"` // the whole run
}

// configInfo is how the figures were taken.
type configInfo struct {
	Mode           string  `json:"mode"` // full, short or smoke
	PointSeconds   float64 `json:"point_seconds"`
	WarmupSeconds  float64 `json:"warmup_seconds"`
	MaxCalls       int     `json:"max_calls_per_point"` // concurrent points
	SerialCalls    int     `json:"serial_calls"`        // per serial point, each on a fresh session
	SerialWarmup   int     `json:"serial_warmup_calls"` // before each serial point
	Concurrency    int     `json:"concurrency"`
	WorkersPerConn int     `json:"workers_per_conn"`
	Sessions       []int   `json:"sessions"`
	// SessionsChanged says which session counts the machine could not
	// hold (the open-file limit), and what was measured instead.
	SessionsChanged []string `json:"sessions_changed,omitempty"`
	Tombstones      int      `json:"tombstones"`
	GCMinHeapMiB    int      `json:"gc_min_heap_mib"` // the garbage collector's least heap goal (0: Go's defaults)
	ProcsTuner      bool     `json:"procs_tuner"`     // gateway/proctuner ran this process's GOMAXPROCS
	ProcsChanges    uint64   `json:"procs_changes"`   // how many times it changed GOMAXPROCS during the run
	// ClientWindowBytes is the callers' flow-control window setting, as
	// client.WithWindowBytes takes it (0: the Go client's default, fixed).
	ClientWindowBytes int32 `json:"client_window_bytes"`
	RuntimePID        int   `json:"runtime_pid"` // the reference runtime's child process
}

// serviceResult is a service's serial point (concurrency 1: the latency
// figures, and throughput at 1) and concurrent point.
type serviceResult struct {
	Serial     point `json:"serial"`
	Concurrent point `json:"concurrent"`
}

// statusResult is section 4.
type statusResult struct {
	Concurrent point `json:"concurrent"`
}

// ratios are the headline figures, computed from the raw ones.
type ratios struct {
	// P50 = gateway RunJob serial p50 ÷ (ARCP direct serial p50 + no-op serial p50).
	P50 float64 `json:"p50"`
	// Throughput = gateway RunJob concurrent calls/s ÷ ARCP direct
	// concurrent calls/s, from section 3a's points, the two measured slice
	// by slice over the same stretch of time (alternate.go says why).
	Throughput float64 `json:"throughput"`
	// ThroughputSequential = the same from sections 1's and 3's
	// concurrent points, measured one after the other, as before 3a.
	ThroughputSequential float64 `json:"throughput_sequential"`
	// Floor = the bare proxy's calls/s ÷ ARCP direct calls/s, section 3a:
	// the most any gateway of grpc-go and this ARCP client reaches here.
	Floor float64 `json:"floor"`
	// ToFloor = RunJob calls/s ÷ the bare proxy's, section 3a: how close
	// the gateway comes to that floor.
	ToFloor float64 `json:"to_floor"`
	// Status = GetSessionStatus concurrent calls/s ÷ no-op concurrent
	// calls/s, from section 4a's points, slice by slice as 3a's.
	Status float64 `json:"status"`
	// StatusSequential = the same from sections 2's and 4's concurrent
	// points, one after the other, as before 4a.
	StatusSequential float64 `json:"status_sequential"`
	// Scale = RunJob p50 with the most sessions open ÷ with one, each on
	// its own gateway child, interleaved (scale.go).
	Scale float64 `json:"scale"`
	// ScaleInProcess = the same, both in this process, one after the other.
	ScaleInProcess float64 `json:"scale_in_process"`
}

// cpuRatios are the throughput ratios computed from CPU time per call
// instead of calls per second (not the headline definition): at saturation
// throughput is inversely proportional to CPU per call, and CPU per call
// hardly depends on what other processes do, so these stay meaningful on a
// busy machine. 0 when CPU time is unknown.
type cpuRatios struct {
	// Throughput = ARCP direct CPU/call ÷ gateway RunJob CPU/call, 3a.
	Throughput float64 `json:"throughput"`
	// Status = no-op CPU/call ÷ GetSessionStatus CPU/call, 4a.
	Status float64 `json:"status"`
	// SameRate = ARCP direct CPU/call ÷ RunJob CPU/call, both held to the
	// same rate (section 3b): what the gateway costs apart from the rate.
	SameRate float64 `json:"same_rate"`
}

func computeCPURatios(r *report) cpuRatios {
	ratio := func(a, b int64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return float64(a) / float64(b)
	}
	return cpuRatios{
		Throughput: ratio(r.Alternating.ARCP.CPUNsPerCall, r.Alternating.RunJob.CPUNsPerCall),
		Status:     ratio(r.StatusAlternating.Noop.CPUNsPerCall, r.StatusAlternating.Status.CPUNsPerCall),
		SameRate:   ratio(r.Held.ARCP.CPUNsPerCall, r.Held.RunJob.CPUNsPerCall),
	}
}

func computeRatios(r *report) ratios {
	return ratios{
		P50:                  float64(r.RunJob.Serial.P50Ns) / float64(r.ARCP.Serial.P50Ns+r.Noop.Serial.P50Ns),
		Throughput:           r.Alternating.RunJob.CallsPerSec / r.Alternating.ARCP.CallsPerSec,
		ThroughputSequential: r.RunJob.Concurrent.CallsPerSec / r.ARCP.Concurrent.CallsPerSec,
		Floor:                r.Alternating.Proxy.CallsPerSec / r.Alternating.ARCP.CallsPerSec,
		ToFloor:              r.Alternating.RunJob.CallsPerSec / r.Alternating.Proxy.CallsPerSec,
		Status:               r.StatusAlternating.Status.CallsPerSec / r.StatusAlternating.Noop.CallsPerSec,
		StatusSequential:     r.Status.Concurrent.CallsPerSec / r.Noop.Concurrent.CallsPerSec,
		Scale:                float64(r.Scale.P50ManyNs) / float64(r.Scale.P50OneNs),
		ScaleInProcess:       float64(r.ScaleInProcess.P50ManyNs) / float64(r.ScaleInProcess.P50OneNs),
	}
}

// targetResult is one performance target beside the measured figure.
type targetResult struct {
	Name     string  `json:"name"`
	What     string  `json:"what"`
	Op       string  `json:"op"` // "<=" or ">="
	Target   float64 `json:"target"`
	Measured float64 `json:"measured"`
	Unit     string  `json:"unit"`
	Pass     bool    `json:"pass"`
}

func atMost(name, what string, target, measured float64, unit string) targetResult {
	return targetResult{name, what, "<=", target, measured, unit, measured <= target}
}

func atLeast(name, what string, target, measured float64, unit string) targetResult {
	return targetResult{name, what, ">=", target, measured, unit, measured >= target}
}

// computeTargets checks every performance target (set for 2 cores).
func computeTargets(r *report) []targetResult {
	q := r.Ratios
	ts := []targetResult{
		atMost("p50_ratio", "RunJob p50 ÷ (ARCP p50 + no-op p50)", 1.25, q.P50, "ratio"),
		atLeast("throughput_ratio", fmt.Sprintf("RunJob ÷ ARCP calls/s at %d (3a, alternating)", r.Config.Concurrency), 0.75, q.Throughput, "ratio"),
		atLeast("status_ratio", fmt.Sprintf("GetSessionStatus ÷ no-op calls/s at %d (4a, alternating)", r.Config.Concurrency), 0.95, q.Status, "ratio"),
		atMost("scale_ratio", fmt.Sprintf("RunJob p50 at %d sessions ÷ at 1", r.Scale.LiveSessions), 1.1, q.Scale, "ratio"),
	}
	for _, m := range r.Memory {
		ts = append(ts, atMost(fmt.Sprintf("session_memory_%d", m.Sessions),
			fmt.Sprintf("heap+stack per idle session at %d", m.Sessions), 18, m.BytesPerSession/1024, "KiB"))
	}
	t := r.Tombstones
	ts = append(ts,
		atMost("tombstone_memory", fmt.Sprintf("tombstone memory per 1M (from %d)", t.Entries), 64, t.MiBPerMillion, "MiB"),
		atMost("tombstone_insert", "tombstone insert", 150, t.InsertNs, "ns/op"),
		atMost("tombstone_lookup_hit", "tombstone lookup, hit", 150, t.LookupHitNs, "ns/op"),
		atMost("tombstone_lookup_miss", "tombstone lookup, miss", 150, t.LookupMissNs, "ns/op"),
		atMost("tombstone_expire", "tombstone expiry per entry", 150, t.ExpireNsPerEntry, "ns/op"),
	)
	ts = append(ts, clusterTargets(r.Cluster)...)
	for _, c := range r.Interceptor.Cases {
		ts = append(ts,
			atMost("interceptor_ns_"+c.Name, "interceptor overhead, "+strings.ReplaceAll(c.Name, "_", " "), 1000, c.OverheadNs, "ns/op"),
			atMost("interceptor_allocs_"+c.Name, "interceptor allocs, "+strings.ReplaceAll(c.Name, "_", " "), 2, c.OverheadAllocs, "allocs/op"),
		)
	}
	return ts
}

// finish computes the ratios and the targets.
func (r *report) finish(elapsed time.Duration) {
	r.Ratios = computeRatios(r)
	r.CPURatios = computeCPURatios(r)
	r.Targets = computeTargets(r)
	r.AllPass = true
	for _, t := range r.Targets {
		r.AllPass = r.AllPass && t.Pass
	}
	r.Seconds = elapsed.Seconds()
	r.MaxOtherCPU = -1
	for _, v := range []float64{r.ARCP.Serial.OtherCPU, r.ARCP.Concurrent.OtherCPU, r.Noop.Serial.OtherCPU,
		r.Noop.Concurrent.OtherCPU, r.RunJob.Serial.OtherCPU, r.RunJob.Concurrent.OtherCPU,
		r.Status.Concurrent.OtherCPU, r.Held.ARCP.OtherCPU, r.Held.RunJob.OtherCPU, r.Alternating.ARCP.OtherCPU, r.Scale.Many.OtherCPU, r.ScaleInProcess.Many.OtherCPU, r.Tombstones.OtherCPU, r.Interceptor.OtherCPU,
		r.Cluster.Local.OtherCPU, r.Cluster.Forwarded.OtherCPU} {
		r.MaxOtherCPU = max(r.MaxOtherCPU, v)
	}
}

// busyMachine is the MaxOtherCPU above which the table warns that the
// figures are unreliable.
const busyMachine = 0.05

func writeJSON(w io.Writer, r *report) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep "<=" readable
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints the report as aligned text: one block per section,
// then the ratios and every target beside its measured figure.
func writeTable(w io.Writer, r *report) error {
	m, c := r.Machine, r.Config
	fmt.Fprintf(w, "gateway-bench (%s mode): %s/%s, %d CPU, GOMAXPROCS %d, %s, %s\n", c.Mode, m.GOOS, m.GOARCH, m.NumCPU, m.GOMAXPROCS, m.GoVersion, m.Date)
	if m.CPUModel != "" {
		fmt.Fprintf(w, "CPU: %s\n", m.CPUModel)
	}
	fmt.Fprintf(w, "serial points: %d calls (at most %.1fs) on a fresh session after %d warm-up calls; reference runtime in child process %d\n",
		c.SerialCalls, c.PointSeconds, c.SerialWarmup, c.RuntimePID)
	fmt.Fprintf(w, "concurrent points: %.1fs after a %.1fs warm-up, %d workers, one gRPC ClientConn per %d workers (ARCP direct: one connection per worker)\n",
		c.PointSeconds, c.WarmupSeconds, c.Concurrency, c.WorkersPerConn)
	switch {
	case r.MaxOtherCPU < 0:
		fmt.Fprintln(w, "other processes' CPU use: unknown (no /proc)")
	case r.MaxOtherCPU > busyMachine:
		fmt.Fprintf(w, "WARNING: other processes used up to %.0f%% of the machine's CPU during a point: these figures are unreliable\n", 100*r.MaxOtherCPU)
	default:
		fmt.Fprintf(w, "other processes used at most %.1f%% of the machine's CPU during any point\n", 100*r.MaxOtherCPU)
	}
	if c.GCMinHeapMiB > 0 {
		fmt.Fprintf(w, "garbage collector of this process: least heap goal %d MiB (gateway/gctuner, cmd/gateway's default); the runtime child: Go's defaults\n", c.GCMinHeapMiB)
	}
	if c.ProcsTuner {
		fmt.Fprintf(w, "GOMAXPROCS of this process: gateway/proctuner (-procs-tuner, opt-in as in cmd/gateway), %d changes during the run; the runtime child: Go's default\n", c.ProcsChanges)
	} else {
		fmt.Fprintln(w, "GOMAXPROCS of this process and the runtime child: Go's default (cmd/gateway's default; -procs-tuner runs gateway/proctuner)")
	}
	if c.ClientWindowBytes < 0 {
		fmt.Fprintln(w, "callers: grpc-go's dynamic flow-control window (a bandwidth-probe PING per call at concurrency 1)")
	} else {
		fmt.Fprintln(w, "callers: the sessiongate Go client's flow-control window (client.WithWindowBytes, fixed: no bandwidth-probe PINGs)")
	}
	for _, s := range c.SessionsChanged {
		fmt.Fprintf(w, "idle sessions: %s\n", s)
	}

	var blocks [][]string
	lat := []string{"LATENCY, concurrency 1\tp50\tp99\tcalls"}
	addLat := func(name string, pt point) {
		lat = append(lat, fmt.Sprintf("%s\t%s\t%s\t%d", name, us(pt.P50Ns), us(pt.P99Ns), pt.Calls))
	}
	addLat("1 ARCP direct echo (Submit+Wait)", r.ARCP.Serial)
	addLat("2 gRPC no-op unary", r.Noop.Serial)
	addLat("3 gateway RunJob(echo), 1 session", r.RunJob.Serial)
	addLat("6 gateway RunJob(echo), 1 session (own gateway, interleaved)", r.Scale.One)
	addLat(fmt.Sprintf("6 gateway RunJob(echo), %d sessions (own gateway, interleaved)", r.Scale.LiveSessions), r.Scale.Many)
	addLat("6 in process: RunJob(echo), 1 session, before 5", r.ScaleInProcess.One)
	addLat(fmt.Sprintf("6 in process: RunJob(echo), %d sessions, after 5", r.ScaleInProcess.LiveSessions), r.ScaleInProcess.Many)
	blocks = append(blocks, lat)

	thr := []string{fmt.Sprintf("THROUGHPUT, calls/s\tc=1\tCPU/call at 1\tc=%d\tCPU/call at %d\tsyscalls/call\tswitches/call\tp50 at %d\tp99 at %d\tconns",
		c.Concurrency, c.Concurrency, c.Concurrency, c.Concurrency)}
	addThr := func(name string, s *point, cp point) {
		serial, serialCPU := "-", "-"
		if s != nil {
			serial, serialCPU = fmt.Sprintf("%.0f", s.CallsPerSec), us(s.CPUNsPerCall)
		}
		thr = append(thr, fmt.Sprintf("%s\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%d",
			name, serial, serialCPU, cp.CallsPerSec, us(cp.CPUNsPerCall), withRuntime(cp.SyscallsPerCall, cp.RuntimeSyscallsPerCall),
			withRuntime(cp.SwitchesPerCall, cp.RuntimeSwitchesPerCall), us(cp.P50Ns), us(cp.P99Ns), cp.Conns))
	}
	addThr("1 ARCP direct echo", &r.ARCP.Serial, r.ARCP.Concurrent)
	addThr("2 gRPC no-op unary", &r.Noop.Serial, r.Noop.Concurrent)
	addThr(fmt.Sprintf("3 gateway RunJob(echo), %d sessions", r.RunJob.Concurrent.Sessions), &r.RunJob.Serial, r.RunJob.Concurrent)
	addThr(fmt.Sprintf("4 gateway GetSessionStatus, %d sessions", r.Status.Concurrent.Sessions), nil, r.Status.Concurrent)
	blocks = append(blocks, thr)
	side := func(name string, pt point) string {
		return fmt.Sprintf("%s\t%.0f\t%s\t%s\t%s\t%s", name, pt.CallsPerSec, us(pt.CPUNsPerCall), us(pt.RuntimeCPUNsPerCall),
			withRuntime(pt.SyscallsPerCall, pt.RuntimeSyscallsPerCall), withRuntime(pt.SwitchesPerCall, pt.RuntimeSwitchesPerCall))
	}
	const sideCols = "\tcalls/s\tCPU/call\tof which the runtime's\tsyscalls/call\tswitches/call"
	a := r.Alternating
	blocks = append(blocks, []string{
		fmt.Sprintf("3a ALTERNATING, %.2fs SLICES, c=%d", a.SliceSeconds, c.Concurrency) + sideCols,
		side("1 ARCP direct echo", a.ARCP),
		side("3 gateway RunJob(echo)", a.RunJob),
		side("bare proxy (the floor)", a.Proxy),
	})
	sa := r.StatusAlternating
	blocks = append(blocks, []string{
		fmt.Sprintf("4a ALTERNATING, %.2fs SLICES, c=%d", sa.SliceSeconds, c.Concurrency) + sideCols,
		side("2 gRPC no-op unary", sa.Noop),
		side("4 gateway GetSessionStatus", sa.Status),
	})
	blocks = append(blocks, []string{
		fmt.Sprintf("3b HELD TO %.0f CALLS/S, c=%d", r.Held.PerSec, c.Concurrency) + sideCols,
		side("1b ARCP direct echo", r.Held.ARCP),
		side("3b gateway RunJob(echo)", r.Held.RunJob),
	})

	mem := []string{"5 MEMORY PER IDLE SESSION\theap_alloc+stack\theap_inuse+stack\tgoroutines\topened/s\tCPU while idle"}
	for _, mr := range r.Memory {
		mem = append(mem, fmt.Sprintf("%d sessions\t%s\t%s\t%.2f\t%.0f\t%.1f%% of a core", mr.Sessions, kib(mr.BytesPerSession), kib(mr.HeapInusePerSession),
			mr.GoroutinesPerSession, mr.OpenPerSec, 100*mr.IdleCPU))
	}
	blocks = append(blocks, mem)

	t := r.Tombstones
	blocks = append(blocks, []string{
		fmt.Sprintf("7 TOMBSTONES, %d entries\tbytes/entry\tMiB per 1M\tinsert\thit\tmiss\texpiry/entry", t.Entries),
		fmt.Sprintf("tombstone.Store, TTL %.0fs\t%.1f\t%.1f\t%.1fns\t%.1fns\t%.1fns\t%.1fns",
			t.TTLSeconds, t.BytesPerEntry, t.MiBPerMillion, t.InsertNs, t.LookupHitNs, t.LookupMissNs, t.ExpireNsPerEntry),
	})

	icpt := []string{"8 INTERCEPTOR, " + r.Interceptor.Method + "\tbare\twith\toverhead\tbare allocs\twith allocs\toverhead allocs"}
	for _, ic := range r.Interceptor.Cases {
		icpt = append(icpt, fmt.Sprintf("%s\t%.1fns\t%.1fns\t%.1fns\t%.2f\t%.2f\t%.2f",
			ic.Name, ic.BareNs, ic.InterceptedNs, ic.OverheadNs, ic.BareAllocs, ic.InterceptedAllocs, ic.OverheadAllocs))
	}
	blocks = append(blocks, icpt)

	blocks = append(blocks, clusterBlock(r.Cluster))

	q := r.Ratios
	blocks = append(blocks, []string{
		"RATIOS\tvalue",
		fmt.Sprintf("p50: 3 ÷ (1 + 2)\t%.3f", q.P50),
		fmt.Sprintf("throughput: 3 ÷ 1 at %d, alternating (3a)\t%.3f", c.Concurrency, q.Throughput),
		fmt.Sprintf("status: 4 ÷ 2 at %d, alternating (4a)\t%.3f", c.Concurrency, q.Status),
		fmt.Sprintf("(one after the other, sections 1 and 3) throughput: 3 ÷ 1 at %d\t%.3f", c.Concurrency, q.ThroughputSequential),
		fmt.Sprintf("(one after the other, sections 2 and 4) status: 4 ÷ 2 at %d\t%.3f", c.Concurrency, q.StatusSequential),
		fmt.Sprintf("(alternating, section 3a) the floor: bare proxy ÷ 1 at %d\t%.3f", c.Concurrency, q.Floor),
		fmt.Sprintf("(alternating, section 3a) to the floor: 3 ÷ bare proxy at %d\t%.3f", c.Concurrency, q.ToFloor),
		fmt.Sprintf("scale: 6 at %d ÷ 6 at 1 (p50)\t%.3f", r.Scale.LiveSessions, q.Scale),
		fmt.Sprintf("(in process, one after the other) scale: 6 at %d ÷ 6 at 1\t%.3f", r.ScaleInProcess.LiveSessions, q.ScaleInProcess),
		fmt.Sprintf("(the difference) 6 at %d − 6 at 1 (p50), interleaved / in process\t%s / %s", r.Scale.LiveSessions,
			us(r.Scale.P50ManyNs-r.Scale.P50OneNs), us(r.ScaleInProcess.P50ManyNs-r.ScaleInProcess.P50OneNs)),
		fmt.Sprintf("(by CPU/call, for a busy machine) throughput: 1 ÷ 3\t%.3f", r.CPURatios.Throughput),
		fmt.Sprintf("(by CPU/call, for a busy machine) status: 2 ÷ 4\t%.3f", r.CPURatios.Status),
		fmt.Sprintf("(by CPU/call, held to the same rate) 1b ÷ 3b\t%.3f", r.CPURatios.SameRate),
	})

	targets := []string{"TARGETS (2 cores)\ttarget\tmeasured\tresult"}
	misses := 0
	for _, tr := range r.Targets {
		result := "pass"
		if !tr.Pass {
			result, misses = "MISS", misses+1
		}
		targets = append(targets, fmt.Sprintf("%s\t%s %s %s\t%s\t%s", tr.What, tr.Op, num(tr.Target), tr.Unit, num(tr.Measured), result))
	}
	blocks = append(blocks, targets)

	for _, b := range blocks {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw)
		for _, line := range b {
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%d of %d targets met, %d missed; the run took %.1fs\n", len(r.Targets)-misses, len(r.Targets), misses, r.Seconds)
	return err
}

func us(ns int64) string   { return fmt.Sprintf("%.1fµs", float64(ns)/1e3) }
func kib(b float64) string { return fmt.Sprintf("%.2f KiB", b/1024) }
func num(v float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}

// withRuntime is a per-call count and the runtime child's part of it, as
// "3.57 (runtime 2.04)", or "-" when unknown (0); a point without the
// runtime child (the no-op, the probe) shows the count alone.
func withRuntime(all, rt float64) string {
	switch {
	case all == 0:
		return "-"
	case rt == 0:
		return fmt.Sprintf("%.2f", all)
	}
	return fmt.Sprintf("%.2f (runtime %.2f)", all, rt)
}
