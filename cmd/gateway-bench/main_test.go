package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"
)

// TestMain serves the reference runtime when the test binary is re-executed
// as the runtime child, exactly as the command does.
func TestMain(m *testing.M) {
	if isRuntimeChild(os.Args) {
		if err := serveRuntimeChild(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "runtime child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if isGatewayChild(os.Args) {
		if err := serveGatewayChild(os.Args[2:], os.Stdin, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "gateway child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// TestSmoke runs the whole harness in its smallest mode (50 calls per
// point, 20 idle sessions, 10k tombstones) with the runtime in a child
// process (this test binary, re-executed), and checks the JSON: every
// section present with positive figures, the ratios exactly as the harness
// defines them from the raw figures, every target's verdict consistent.
func TestSmoke(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := modeConfig("smoke")
	cfg.RuntimeCmd = []string{exe, serveRuntimeArg}
	var progress bytes.Buffer
	cfg.Progress = &progress
	cfg.PointProfiles = filepath.Join(t.TempDir(), "point")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, progress.String())
	}
	var js bytes.Buffer
	if err := writeJSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	j := jsonDoc{t: t, doc: doc}
	checkPointProfiles(t, cfg.PointProfiles, progress.String())

	for _, svc := range []string{"arcp_direct", "grpc_noop", "gateway_run_job"} {
		for _, pt := range []string{"serial", "concurrent"} {
			j.positive(svc+"."+pt, "calls", "seconds", "calls_per_sec", "p50_ns", "p99_ns", "mean_ns", "concurrency", "conns")
		}
	}
	j.positive("gateway_run_job.concurrent", "sessions")
	// Beside every throughput figure: system calls and context switches per
	// call, and the runtime child's part where it takes part. (CPU per call
	// is there too, but /proc counts it in 10 ms ticks, which a smoke
	// point's few calls may not fill.)
	for _, pt := range []string{"arcp_direct.concurrent", "gateway_run_job.concurrent", "alternating.arcp_direct",
		"alternating.gateway_run_job", "alternating.bare_proxy", "same_rate.arcp_direct", "same_rate.gateway_run_job"} {
		j.positive(pt, "syscalls_per_call", "runtime_syscalls_per_call", "switches_per_call", "runtime_switches_per_call")
		if all, rt := j.num(pt+".syscalls_per_call"), j.num(pt+".runtime_syscalls_per_call"); rt >= all {
			t.Errorf("%s: %v syscalls per call of which the runtime child's %v: want its part smaller", pt, all, rt)
		}
	}
	for _, pt := range []string{"grpc_noop.concurrent", "gateway_status.concurrent"} {
		j.positive(pt, "syscalls_per_call")
	}
	// 3b: both sides held to 0.9 of RunJob's free rate.
	j.positive("same_rate", "per_sec")
	j.positive("same_rate.arcp_direct", "calls", "seconds", "calls_per_sec", "concurrency", "conns")
	j.positive("same_rate.gateway_run_job", "calls", "seconds", "calls_per_sec", "concurrency", "conns", "sessions")
	if got, want := j.num("same_rate.per_sec"), heldShare*j.num("gateway_run_job.concurrent.calls_per_sec"); got != want {
		t.Errorf("same_rate.per_sec = %v, want %v", got, want)
	}
	// 3a: both sides over the same stretch of time, slice by slice.
	j.positive("alternating", "slice_seconds", "slices")
	j.positive("alternating.arcp_direct", "calls", "seconds", "calls_per_sec", "p50_ns", "concurrency", "conns")
	j.positive("alternating.gateway_run_job", "calls", "seconds", "calls_per_sec", "p50_ns", "concurrency", "conns", "sessions")
	j.positive("alternating.bare_proxy", "calls", "seconds", "calls_per_sec", "p50_ns", "concurrency", "conns")
	j.positive("ratios", "floor", "to_floor", "throughput_sequential", "status_sequential")
	// 4a: the status ratio's sides slice by slice.
	j.positive("status_alternating", "slice_seconds", "slices")
	j.positive("status_alternating.grpc_noop", "calls", "seconds", "calls_per_sec", "p50_ns", "concurrency", "conns", "syscalls_per_call")
	j.positive("status_alternating.gateway_status", "calls", "seconds", "calls_per_sec", "p50_ns", "concurrency", "conns", "sessions", "syscalls_per_call")
	j.positive("gateway_status.concurrent", "calls", "seconds", "calls_per_sec", "p50_ns", "p99_ns", "sessions")
	// 6: on two gateway children, interleaved; and in this process.
	for _, sc := range []string{"scale", "scale_in_process"} {
		j.positive(sc, "live_sessions", "p50_one_session_ns", "p50_many_sessions_ns")
		j.positive(sc+".one", "calls", "p50_ns", "concurrency", "conns", "sessions")
		j.positive(sc+".many", "calls", "p50_ns", "concurrency", "conns", "sessions")
	}
	// Interleaved, the two sides make the same number of calls.
	if one, many := j.num("scale.one.calls"), j.num("scale.many.calls"); one != many {
		t.Errorf("section 6 made %v calls with one session and %v with the most: not interleaved evenly", one, many)
	}
	if got := j.num("scale.many.sessions"); got != 20 {
		t.Errorf("scale.many.sessions = %v, want 20", got)
	}
	j.positive("tombstones", "entries", "bytes_per_entry", "mib_per_million", "insert_ns_per_op",
		"lookup_hit_ns_per_op", "lookup_miss_ns_per_op", "expire_ns_per_entry")
	j.positive("machine", "num_cpu", "gomaxprocs", "file_limit")
	j.positive("config", "runtime_pid", "concurrency", "serial_calls", "serial_warmup_calls")
	if got := j.num("config.client_window_bytes"); got != 0 {
		t.Errorf("config.client_window_bytes = %v, want 0 (the Go client's default)", got)
	}

	mem := j.list("session_memory")
	if len(mem) != 1 {
		t.Fatalf("session_memory has %d entries, want 1", len(mem))
	}
	j.positive("session_memory.0", "sessions", "bytes_per_session", "goroutines_per_session", "open_per_sec")
	// The heap_inuse figure depends on the baseline (sessions may fill spans
	// that earlier garbage left partly free), and with 20 sessions it can
	// come out at or below zero: it must be there, not positive.
	_ = j.num("session_memory.0.heap_inuse_bytes_per_session")
	if cpu := j.num("session_memory.0.idle_cpu_of_one_core"); cpu < 0 || cpu > 2 {
		t.Errorf("session_memory.0.idle_cpu_of_one_core = %v, want a share of one core within [0, 2]", cpu)
	}
	if got := j.num("session_memory.0.sessions"); got != 20 {
		t.Errorf("session_memory sessions = %v, want 20", got)
	}
	if got := j.num("scale.live_sessions"); got != 20 {
		t.Errorf("scale live_sessions = %v, want 20", got)
	}
	for _, sc := range []string{"scale", "scale_in_process"} {
		if got := j.num(sc + ".p50_one_session_ns"); got != j.num(sc+".one.p50_ns") {
			t.Errorf("%s p50 with one session %v is not its one-session point's p50 %v", sc, got, j.num(sc+".one.p50_ns"))
		}
		if got := j.num(sc + ".p50_many_sessions_ns"); got != j.num(sc+".many.p50_ns") {
			t.Errorf("%s p50 with the most sessions %v is not its many-session point's p50 %v", sc, got, j.num(sc+".many.p50_ns"))
		}
	}

	cases := j.list("interceptor.cases")
	if len(cases) != 2 {
		t.Fatalf("interceptor has %d cases, want 2", len(cases))
	}
	for i := range cases {
		p := fmt.Sprintf("interceptor.cases.%d", i)
		j.positive(p, "bare_ns_per_op", "intercepted_ns_per_op")
		if d := j.num(p+".intercepted_ns_per_op") - j.num(p+".bare_ns_per_op"); d != j.num(p+".overhead_ns_per_op") {
			t.Errorf("%s overhead_ns_per_op %v, want %v", p, j.num(p+".overhead_ns_per_op"), d)
		}
		if d := j.num(p+".intercepted_allocs_per_op") - j.num(p+".bare_allocs_per_op"); d != j.num(p+".overhead_allocs_per_op") {
			t.Errorf("%s overhead_allocs_per_op %v, want %v", p, j.num(p+".overhead_allocs_per_op"), d)
		}
	}

	// The ratios, recomputed from the raw figures by their definitions.
	want := map[string]float64{
		"p50": j.num("gateway_run_job.serial.p50_ns") /
			(j.num("arcp_direct.serial.p50_ns") + j.num("grpc_noop.serial.p50_ns")),
		"throughput":            j.num("alternating.gateway_run_job.calls_per_sec") / j.num("alternating.arcp_direct.calls_per_sec"),
		"status":                j.num("status_alternating.gateway_status.calls_per_sec") / j.num("status_alternating.grpc_noop.calls_per_sec"),
		"throughput_sequential": j.num("gateway_run_job.concurrent.calls_per_sec") / j.num("arcp_direct.concurrent.calls_per_sec"),
		"status_sequential":     j.num("gateway_status.concurrent.calls_per_sec") / j.num("grpc_noop.concurrent.calls_per_sec"),
		"floor":                 j.num("alternating.bare_proxy.calls_per_sec") / j.num("alternating.arcp_direct.calls_per_sec"),
		"to_floor":              j.num("alternating.gateway_run_job.calls_per_sec") / j.num("alternating.bare_proxy.calls_per_sec"),
		"scale":                 j.num("scale.p50_many_sessions_ns") / j.num("scale.p50_one_session_ns"),
		"scale_in_process":      j.num("scale_in_process.p50_many_sessions_ns") / j.num("scale_in_process.p50_one_session_ns"),
	}
	for name, w := range want {
		if got := j.num("ratios." + name); got != w || !(got > 0) {
			t.Errorf("ratios.%s = %v, want %v (positive)", name, got, w)
		}
	}

	// The CPU-based ratios, when /proc gave CPU times.
	for name, pair := range map[string][2]string{
		"throughput": {"alternating.arcp_direct", "alternating.gateway_run_job"},
		"status":     {"status_alternating.grpc_noop", "status_alternating.gateway_status"},
		"same_rate":  {"same_rate.arcp_direct", "same_rate.gateway_run_job"},
	} {
		num, den := j.num(pair[0]+".cpu_ns_per_call"), j.num(pair[1]+".cpu_ns_per_call")
		want := 0.0
		if num > 0 && den > 0 {
			want = num / den
		}
		if got := j.num("cpu_ratios." + name); got != want {
			t.Errorf("cpu_ratios.%s = %v, want %v", name, got, want)
		}
	}

	// Section 9a ran (or says why not); 9b never runs in smoke mode.
	if skipped, _ := doc["cluster"].(map[string]any)["skipped"].(string); skipped == "" {
		j.positive("cluster.local_run_job", "calls", "p50_ns")
		j.positive("cluster.forwarded_run_job", "calls", "p50_ns")
		if got, want := j.num("cluster.forward_ratio"), j.num("cluster.forwarded_run_job.p50_ns")/j.num("cluster.local_run_job.p50_ns"); got != want {
			t.Errorf("cluster.forward_ratio = %v, want %v", got, want)
		}
	} else if os.Getenv("CI") == "true" {
		t.Errorf("section 9 skipped under CI=true: %s", skipped)
	}
	if s, _ := doc["cluster"].(map[string]any)["failures_skipped"].(string); s == "" {
		t.Error("smoke mode ran section 9b")
	}

	j.checkTargets()

	var table bytes.Buffer
	if err := writeTable(&table, rep); err != nil {
		t.Fatal(err)
	}
	for _, tr := range rep.Targets {
		if !strings.Contains(table.String(), tr.What) {
			t.Errorf("the table does not show target %q", tr.What)
		}
	}
	if testing.Verbose() {
		t.Logf("table:\n%s", table.String())
	}
}

// jsonDoc reads a decoded JSON document by dotted paths ("a.b.0.c").
type jsonDoc struct {
	t   *testing.T
	doc map[string]any
}

func (j jsonDoc) get(path string) any {
	j.t.Helper()
	var v any = j.doc
	for _, k := range strings.Split(path, ".") {
		switch c := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = c[k]; !ok {
				j.t.Fatalf("JSON has no %s", path)
			}
		case []any:
			var i int
			if _, err := fmt.Sscan(k, &i); err != nil || i >= len(c) {
				j.t.Fatalf("JSON has no %s", path)
			}
			v = c[i]
		default:
			j.t.Fatalf("JSON has no %s", path)
		}
	}
	return v
}

func (j jsonDoc) num(path string) float64 {
	j.t.Helper()
	f, ok := j.get(path).(float64)
	if !ok {
		j.t.Fatalf("JSON %s is not a number", path)
	}
	return f
}

func (j jsonDoc) list(path string) []any {
	j.t.Helper()
	l, ok := j.get(path).([]any)
	if !ok {
		j.t.Fatalf("JSON %s is not a list", path)
	}
	return l
}

// positive checks that every field of the object at path is a positive number.
func (j jsonDoc) positive(path string, fields ...string) {
	j.t.Helper()
	for _, f := range fields {
		if v := j.num(path + "." + f); !(v > 0) {
			j.t.Errorf("%s.%s = %v, want > 0", path, f, v)
		}
	}
}

// checkTargets checks each target's verdict against its figures, and
// all_pass against the verdicts.
func (j jsonDoc) checkTargets() {
	j.t.Helper()
	targets := j.list("targets")
	if len(targets) < 13 {
		j.t.Errorf("%d targets, want at least 13", len(targets))
	}
	all := true
	for i := range targets {
		p := fmt.Sprintf("targets.%d", i)
		measured, target := j.num(p+".measured"), j.num(p+".target")
		var want bool
		switch op := j.get(p + ".op"); op {
		case "<=":
			want = measured <= target
		case ">=":
			want = measured >= target
		default:
			j.t.Fatalf("%s.op = %v", p, op)
		}
		if got := j.get(p + ".pass"); got != want {
			j.t.Errorf("%s (%v) pass = %v, want %v", p, j.get(p+".name"), got, want)
		}
		all = all && want
	}
	if got := j.get("all_pass"); got != all {
		j.t.Errorf("all_pass = %v, want %v", got, all)
	}
}

func TestFitSessions(t *testing.T) {
	for _, c := range []struct {
		counts []int
		files  uint64
		want   []int
		said   int
	}{
		{[]int{1000, 10_000, 100_000}, 1 << 18, []int{1000, 10_000, 100_000}, 0},
		{[]int{1000, 10_000, 100_000}, 20_000, []int{1000, 10_000, 19_000}, 1},
		{[]int{1000, 10_000, 100_000}, 5000, []int{1000, 4000}, 2},
		{[]int{1000}, 600, nil, 1},
	} {
		got, said := fitSessions(c.counts, c.files, 64)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || len(said) != c.said {
			t.Errorf("fitSessions(%v, %d) = %v, %q; want %v and %d sentences", c.counts, c.files, got, said, c.want, c.said)
		}
	}
}

// startTestChild starts this test binary as the runtime child with args
// (after serveRuntimeArg), stopped when the test ends; ctx bounds the
// test's calls to it at a minute.
func startTestChild(t *testing.T, args ...string) (context.Context, *childProc) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	rt, err := startRuntimeChild(ctx, exe, append([]string{serveRuntimeArg}, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.stop(); err != nil {
			t.Error(err)
		}
	})
	return ctx, rt
}

// TestRuntimeChildListeners: the runtime child serves as many listeners as
// asked, each a runtime of its own that completes a WebSocket handshake.
func TestRuntimeChildListeners(t *testing.T) {
	ctx, rt := startTestChild(t, "3")
	if len(rt.urls) != 3 || rt.url != rt.urls[0] || rt.urls[0] == rt.urls[1] || rt.urls[1] == rt.urls[2] {
		t.Fatalf("urls = %q", rt.urls)
	}
	for _, u := range rt.urls {
		ws, _, err := websocket.Dial(ctx, u, nil)
		if err != nil {
			t.Fatalf("dial %s: %v", u, err)
		}
		ws.CloseNow()
	}
}

// TestSummarize: the median, range and count of runs that met each target.
func TestSummarize(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, v := range []float64{0.5, 2, 0.9} {
		r := &report{Targets: []targetResult{atMost("a", "figure a", 1, v, "ratio")}}
		r.RunJob.Serial.P50Ns = int64(1000 * (i + 1))
		var b bytes.Buffer
		if err := writeJSON(&b, r); err != nil {
			t.Fatal(err)
		}
		p := fmt.Sprintf("%s/run%d.json", dir, i)
		if err := os.WriteFile(p, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var out bytes.Buffer
	if code := runMain(context.Background(), append([]string{"-summarize"}, paths...), &out, &out); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, want := range []string{"figure a", "0.9", "0.5 – 2", "2 of 3", "met", "3 RunJob p50 at 1, µs", "2 ", "1 – 3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
	if code := runMain(context.Background(), []string{"-summarize"}, &out, &out); code != 2 {
		t.Errorf("-summarize without reports: exit %d, want 2", code)
	}
}

// TestClientWindowFlag: -client-window-bytes reaches the run's config (0,
// the Go client's fixed default, unless given), and a value beyond int32 is
// refused instead of wrapping.
// checkPointProfiles: -point-profiles wrote a gzipped profile for each of
// its three points, and the progress names the calls each one covers.
func checkPointProfiles(t *testing.T, prefix, progress string) {
	t.Helper()
	for _, p := range []struct{ file, point string }{
		{"1-direct", "1 ARCP direct echo"}, {"3-runjob", "3 gateway RunJob(echo)"}, {"floor-proxy", "bare proxy (profiled)"},
	} {
		path := prefix + "-" + p.file + ".pprof"
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("-point-profiles: %v", err)
			continue
		}
		if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s is not a gzipped pprof profile (%d bytes)", path, len(b))
		}
		if !regexp.MustCompile(regexp.QuoteMeta(p.point) + `: CPU profile of [1-9][0-9]* calls in [0-9.]+s written to ` + regexp.QuoteMeta(path)).MatchString(progress) {
			t.Errorf("the progress does not name %s's profile and its calls", p.point)
		}
	}
}

func TestPointProfilesFlag(t *testing.T) {
	f, err := parseFlags([]string{"-point-profiles", "/tmp/x"}, io.Discard)
	if err != nil || f.cfg.PointProfiles != "/tmp/x" {
		t.Fatalf("parseFlags(-point-profiles /tmp/x) = %+v, %v", f, err)
	}
	if _, err := parseFlags([]string{"-point-profiles", "/tmp/x", "-cpuprofile", "/tmp/y"}, io.Discard); err == nil || !strings.Contains(err.Error(), "cannot be used together") {
		t.Fatalf("-point-profiles with -cpuprofile: error %v, want one saying they cannot be used together", err)
	}
}

func TestClientWindowFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    int32
		wantErr bool
	}{
		{nil, 0, false},
		{[]string{"-client-window-bytes=-1"}, -1, false},
		{[]string{"-client-window-bytes=65536"}, 65536, false},
		{[]string{"-client-window-bytes=4294967296"}, 0, true},
	} {
		f, err := parseFlags(tc.args, io.Discard)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseFlags(%q): error %v, want one: %v", tc.args, err, tc.wantErr)
			continue
		}
		if err == nil && f.cfg.ClientWindowBytes != tc.want {
			t.Errorf("parseFlags(%q): client window %d, want %d", tc.args, f.cfg.ClientWindowBytes, tc.want)
		}
	}
}

// TestRuntimeChildSettle: the runtime child collects its garbage when the
// parent settles it, says so, and goes on serving; each settle waits for
// its own answer.
func TestRuntimeChildSettle(t *testing.T) {
	ctx, rt := startTestChild(t)
	for i := range 3 {
		if err := rt.settle(ctx); err != nil {
			t.Fatalf("settle %d: %v", i, err)
		}
		if len(rt.out.settled) != 0 {
			t.Fatalf("settle %d left an answer for the next", i)
		}
	}
	ws, _, err := websocket.Dial(ctx, rt.url, nil)
	if err != nil {
		t.Fatalf("the child does not serve after settling: %v", err)
	}
	ws.CloseNow()
}

// TestChildOut: the first line is handed over whole however the writes
// split it, settledLine after it is signalled, other lines are not.
func TestChildOut(t *testing.T) {
	w := &childOut{ch: make(chan string, 1), settled: make(chan struct{}, 1)}
	for _, p := range []string{"ws://127.0.0.1:1 ws://", "127.0.0.1:2\nnoise\nsett", "led\n", "settled"} {
		if _, err := w.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-w.ch; got != "ws://127.0.0.1:1 ws://127.0.0.1:2" {
		t.Fatalf("first line %q", got)
	}
	if len(w.settled) != 1 {
		t.Fatalf("%d settled signals after one settled line, want 1", len(w.settled))
	}
	<-w.settled
	if _, err := w.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	if len(w.settled) != 1 {
		t.Fatal("a settled line split across writes was not signalled")
	}
}
