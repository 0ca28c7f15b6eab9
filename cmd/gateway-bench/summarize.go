package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"text/tabwriter"
)

// summarizeReports reads reports written with -json and prints, for every target
// and for the raw figures behind the ratios, the median, the range and, for
// a target, whether the median meets it and in how many runs it was met.
// Runs vary on shared machines; the median of several is the figure to
// quote.
func summarizeReports(w io.Writer, paths []string) error {
	if len(paths) == 0 {
		return errors.New("-summarize: name the JSON reports (from -json) to summarize")
	}
	reps := make([]*report, 0, len(paths))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r report
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		if len(r.Targets) == 0 {
			return fmt.Errorf("%s: no targets: not a gateway-bench -json report", p)
		}
		reps = append(reps, &r)
	}
	fmt.Fprintf(w, "%d runs: %s", len(reps), reps[0].Machine.Date)
	if n := len(reps); n > 1 {
		fmt.Fprintf(w, " … %s", reps[n-1].Machine.Date)
	}
	fmt.Fprintf(w, " (%s mode, %s, %d CPU)\n\n", reps[0].Config.Mode, reps[0].Machine.GoVersion, reps[0].Machine.NumCPU)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tgoal\tmedian\trange\tmet in\tby the median")
	for _, name := range targetNames(reps) {
		var vals []float64
		var t targetResult
		met := 0
		for _, r := range reps {
			for _, x := range r.Targets {
				if x.Name == name {
					vals = append(vals, x.Measured)
					t = x
					if x.Pass {
						met++
					}
				}
			}
		}
		med, lo, hi := stats(vals)
		pass := med <= t.Target
		if t.Op == ">=" {
			pass = med >= t.Target
		}
		verdict := "missed"
		if pass {
			verdict = "met"
		}
		fmt.Fprintf(tw, "%s\t%s %s %s\t%s\t%s – %s\t%d of %d\t%s\n", t.What, t.Op, fig(t.Target), t.Unit, fig(med), fig(lo), fig(hi), met, len(vals), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tmedian\trange")
	type figure struct {
		name string
		get  func(*report) float64
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	for _, f := range []figure{
		{"1 ARCP direct p50 at 1, µs", func(r *report) float64 { return us(r.ARCP.Serial.P50Ns) }},
		{"2 gRPC no-op p50 at 1, µs", func(r *report) float64 { return us(r.Noop.Serial.P50Ns) }},
		{"3 RunJob p50 at 1, µs", func(r *report) float64 { return us(r.RunJob.Serial.P50Ns) }},
		{"1 ARCP direct calls/s at c", func(r *report) float64 { return r.ARCP.Concurrent.CallsPerSec }},
		{"1 ARCP direct CPU/call at c, µs", func(r *report) float64 { return us(r.ARCP.Concurrent.CPUNsPerCall) }},
		{"1 … of which the runtime child's, µs", func(r *report) float64 { return us(r.ARCP.Concurrent.RuntimeCPUNsPerCall) }},
		{"2 gRPC no-op calls/s at c", func(r *report) float64 { return r.Noop.Concurrent.CallsPerSec }},
		{"2 gRPC no-op CPU/call at c, µs", func(r *report) float64 { return us(r.Noop.Concurrent.CPUNsPerCall) }},
		{"3 RunJob calls/s at c", func(r *report) float64 { return r.RunJob.Concurrent.CallsPerSec }},
		{"3 RunJob CPU/call at c, µs", func(r *report) float64 { return us(r.RunJob.Concurrent.CPUNsPerCall) }},
		{"3 … of which the runtime child's, µs", func(r *report) float64 { return us(r.RunJob.Concurrent.RuntimeCPUNsPerCall) }},
		{"4 GetSessionStatus calls/s at c", func(r *report) float64 { return r.Status.Concurrent.CallsPerSec }},
		{"4 GetSessionStatus CPU/call at c, µs", func(r *report) float64 { return us(r.Status.Concurrent.CPUNsPerCall) }},
		{"1 ARCP direct read+write syscalls/call at c", func(r *report) float64 { return r.ARCP.Concurrent.SyscallsPerCall }},
		{"1 … of which the runtime child's", func(r *report) float64 { return r.ARCP.Concurrent.RuntimeSyscallsPerCall }},
		{"2 gRPC no-op read+write syscalls/call at c", func(r *report) float64 { return r.Noop.Concurrent.SyscallsPerCall }},
		{"3 RunJob read+write syscalls/call at c", func(r *report) float64 { return r.RunJob.Concurrent.SyscallsPerCall }},
		{"3 … of which the runtime child's", func(r *report) float64 { return r.RunJob.Concurrent.RuntimeSyscallsPerCall }},
		{"4 GetSessionStatus read+write syscalls/call at c", func(r *report) float64 { return r.Status.Concurrent.SyscallsPerCall }},
		{"1 ARCP direct context switches/call at c", func(r *report) float64 { return r.ARCP.Concurrent.SwitchesPerCall }},
		{"1 … of which the runtime child's", func(r *report) float64 { return r.ARCP.Concurrent.RuntimeSwitchesPerCall }},
		{"2 gRPC no-op context switches/call at c", func(r *report) float64 { return r.Noop.Concurrent.SwitchesPerCall }},
		{"3 RunJob context switches/call at c", func(r *report) float64 { return r.RunJob.Concurrent.SwitchesPerCall }},
		{"3 … of which the runtime child's", func(r *report) float64 { return r.RunJob.Concurrent.RuntimeSwitchesPerCall }},
		{"3b rate both sides were held to, calls/s", func(r *report) float64 { return r.Held.PerSec }},
		{"1b ARCP direct held: CPU/call, µs", func(r *report) float64 { return us(r.Held.ARCP.CPUNsPerCall) }},
		{"1b … of which the runtime child's, µs", func(r *report) float64 { return us(r.Held.ARCP.RuntimeCPUNsPerCall) }},
		{"3b RunJob held: CPU/call, µs", func(r *report) float64 { return us(r.Held.RunJob.CPUNsPerCall) }},
		{"3b … of which the runtime child's, µs", func(r *report) float64 { return us(r.Held.RunJob.RuntimeCPUNsPerCall) }},
		{"1b ARCP direct held: syscalls/call", func(r *report) float64 { return r.Held.ARCP.SyscallsPerCall }},
		{"1b … of which the runtime child's", func(r *report) float64 { return r.Held.ARCP.RuntimeSyscallsPerCall }},
		{"3b RunJob held: syscalls/call", func(r *report) float64 { return r.Held.RunJob.SyscallsPerCall }},
		{"3b … of which the runtime child's", func(r *report) float64 { return r.Held.RunJob.RuntimeSyscallsPerCall }},
		{"1b ARCP direct held: context switches/call", func(r *report) float64 { return r.Held.ARCP.SwitchesPerCall }},
		{"1b … of which the runtime child's", func(r *report) float64 { return r.Held.ARCP.RuntimeSwitchesPerCall }},
		{"3b RunJob held: context switches/call", func(r *report) float64 { return r.Held.RunJob.SwitchesPerCall }},
		{"3b … of which the runtime child's", func(r *report) float64 { return r.Held.RunJob.RuntimeSwitchesPerCall }},
		{"3a alternating: ARCP direct calls/s at c", func(r *report) float64 { return r.Alternating.ARCP.CallsPerSec }},
		{"3a alternating: ARCP direct CPU/call at c, µs", func(r *report) float64 { return us(r.Alternating.ARCP.CPUNsPerCall) }},
		{"3a alternating: RunJob calls/s at c", func(r *report) float64 { return r.Alternating.RunJob.CallsPerSec }},
		{"3a alternating: RunJob CPU/call at c, µs", func(r *report) float64 { return us(r.Alternating.RunJob.CPUNsPerCall) }},
		{"throughput ratio one after the other (3 ÷ 1, sections 1 and 3)", func(r *report) float64 { return r.Ratios.ThroughputSequential }},
		{"4a alternating: no-op calls/s at c", func(r *report) float64 { return r.StatusAlternating.Noop.CallsPerSec }},
		{"4a alternating: no-op CPU/call at c, µs", func(r *report) float64 { return us(r.StatusAlternating.Noop.CPUNsPerCall) }},
		{"4a alternating: GetSessionStatus calls/s at c", func(r *report) float64 { return r.StatusAlternating.Status.CallsPerSec }},
		{"4a alternating: GetSessionStatus CPU/call at c, µs", func(r *report) float64 { return us(r.StatusAlternating.Status.CPUNsPerCall) }},
		{"status ratio one after the other (4 ÷ 2, sections 2 and 4)", func(r *report) float64 { return r.Ratios.StatusSequential }},
		{"3a alternating: bare proxy calls/s at c", func(r *report) float64 { return r.Alternating.Proxy.CallsPerSec }},
		{"3a alternating: bare proxy CPU/call at c, µs", func(r *report) float64 { return us(r.Alternating.Proxy.CPUNsPerCall) }},
		{"3a alternating: the floor (bare proxy ÷ 1)", func(r *report) float64 { return r.Ratios.Floor }},
		{"3a alternating: to the floor (3 ÷ bare proxy)", func(r *report) float64 { return r.Ratios.ToFloor }},
		{"6 RunJob p50 at 1, one session open (own gateway), µs", func(r *report) float64 { return us(r.Scale.P50OneNs) }},
		{"6 RunJob p50 at 1, the most sessions open (own gateway), µs", func(r *report) float64 { return us(r.Scale.P50ManyNs) }},
		{"6 p50 with the most sessions − with one (own gateway), µs", func(r *report) float64 { return us(r.Scale.P50ManyNs - r.Scale.P50OneNs) }},
		{"6 gateway + runtime CPU/call, one session, µs", func(r *report) float64 { return us(r.Scale.One.CPUNsPerCall) }},
		{"6 gateway + runtime CPU/call, the most sessions, µs", func(r *report) float64 { return us(r.Scale.Many.CPUNsPerCall) }},
		{"6 in process: RunJob p50 at 1, one session open (before 5), µs", func(r *report) float64 { return us(r.ScaleInProcess.P50OneNs) }},
		{"6 in process: RunJob p50 at 1, the most sessions open, µs", func(r *report) float64 { return us(r.ScaleInProcess.P50ManyNs) }},
		{"6 in process: p50 with the most sessions − with one, µs", func(r *report) float64 { return us(r.ScaleInProcess.P50ManyNs - r.ScaleInProcess.P50OneNs) }},
		{"6 in process: scale ratio, one after the other", func(r *report) float64 { return r.Ratios.ScaleInProcess }},
		{"5 CPU while the most sessions sit idle, % of a core", func(r *report) float64 {
			if len(r.Memory) == 0 {
				return 0
			}
			return 100 * r.Memory[len(r.Memory)-1].IdleCPU
		}},
		{"throughput ratio from CPU/call (1 ÷ 3)", func(r *report) float64 { return r.CPURatios.Throughput }},
		{"status ratio from CPU/call (2 ÷ 4)", func(r *report) float64 { return r.CPURatios.Status }},
		{"same-rate ratio from CPU/call (1b ÷ 3b)", func(r *report) float64 { return r.CPURatios.SameRate }},
		{"9a local RunJob p50, µs", func(r *report) float64 { return us(r.Cluster.Local.P50Ns) }},
		{"9a forwarded RunJob p50, µs", func(r *report) float64 { return us(r.Cluster.Forwarded.P50Ns) }},
	} {
		vals := make([]float64, 0, len(reps))
		for _, r := range reps {
			vals = append(vals, f.get(r))
		}
		med, lo, hi := stats(vals)
		fmt.Fprintf(tw, "%s\t%s\t%s – %s\n", f.name, fig(med), fig(lo), fig(hi))
	}
	return tw.Flush()
}

// targetNames lists the targets of all reports, in first-seen order.
func targetNames(reps []*report) []string {
	var names []string
	for _, r := range reps {
		for _, t := range r.Targets {
			if !slices.Contains(names, t.Name) {
				names = append(names, t.Name)
			}
		}
	}
	return names
}

// stats returns the median (the mean of the middle two for an even count),
// the least and the greatest of vals (not empty).
func stats(vals []float64) (med, lo, hi float64) {
	s := slices.Clone(vals)
	slices.Sort(s)
	n := len(s)
	med = s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// fig prints a figure with three significant digits (more for large ones).
func fig(v float64) string {
	switch {
	case v >= 1000 || v <= -1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 100 || v <= -100:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
