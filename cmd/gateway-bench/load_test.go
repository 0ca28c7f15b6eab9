package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunInterleaved: the sides take turns block calls at a time, the side
// that goes first rotates every round, each side makes maxCalls calls (the
// last block cut short), and the first error ends the set with that error.
func TestRunInterleaved(t *testing.T) {
	var order strings.Builder
	side := func(name string) callFunc {
		return func(context.Context) error { order.WriteString(name); return nil }
	}
	cases := []struct {
		sides    string
		block, n int
		want     string
	}{
		{"ab", 1, 3, "abbaab"},
		{"abc", 2, 5, "aabbccbbccaacab"},
		{"abc", 3, 3, "aaabbbccc"},
	}
	for _, tc := range cases {
		order.Reset()
		calls := make([]callFunc, len(tc.sides))
		for i, r := range tc.sides {
			calls[i] = side(string(r))
		}
		pts, err := runInterleaved(context.Background(), calls, tc.block, bounds{duration: time.Minute, maxCalls: tc.n})
		if err != nil {
			t.Fatal(err)
		}
		if got := order.String(); got != tc.want {
			t.Errorf("%s by %d, %d calls: order %q, want %q", tc.sides, tc.block, tc.n, got, tc.want)
		}
		for i, p := range pts {
			if p.Calls != tc.n || p.Concurrency != 1 {
				t.Errorf("%s by %d: side %d made %d calls at concurrency %d, want %d at 1", tc.sides, tc.block, i, p.Calls, p.Concurrency, tc.n)
			}
		}
	}

	boom := errors.New("boom")
	n := 0
	failing := func(context.Context) error {
		if n++; n == 2 {
			return boom
		}
		return nil
	}
	order.Reset()
	if _, err := runInterleaved(context.Background(), []callFunc{side("a"), failing}, 1, bounds{duration: time.Minute, maxCalls: 100}); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
	// Round 0: a, then b's first call; round 1: b first, which fails.
	if got := order.String(); got != "a" || n != 2 {
		t.Errorf("calls before the failure: a %q, b %d; want a once, b twice (the set stops at the error)", got, n)
	}
	if _, err := runInterleaved(context.Background(), []callFunc{side("a")}, 0, bounds{duration: time.Minute, maxCalls: 1}); err == nil {
		t.Error("a block of 0 calls was accepted")
	}

	// A warm-up with a least time runs whole rounds past its call count
	// until that time has passed, still in turn.
	order.Reset()
	start := time.Now()
	pts, err := runInterleaved(context.Background(), []callFunc{side("a"), side("b")}, 2, bounds{duration: time.Minute, maxCalls: 3, least: 30 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 30*time.Millisecond {
		t.Errorf("a warm-up of least 30ms returned after %v", el)
	}
	if pts[0].Calls <= 3 || pts[1].Calls <= 3 {
		t.Errorf("least time: sides made %d and %d calls, want more than the 3 of maxCalls", pts[0].Calls, pts[1].Calls)
	}
	// Rounds of 2, then of 1 up to maxCalls, then of 2 again.
	if got := order.String(); !strings.HasPrefix(got, "aabb"+"ba"+"aabb"+"bbaa") {
		t.Errorf("least time: order %.20q…, want aabb ba aabb bbaa…", got)
	}
}

// TestQuietest: attempts stop at the first one quiet enough, else the
// quietest of busyAttempts is kept; an error ends them.
func TestQuietest(t *testing.T) {
	run := func(others ...float64) (int, int) {
		n := 0
		best, err := quietest(func() (int, float64, error) {
			i := n
			n++
			return i, others[i], nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return best, n
	}
	if best, n := run(0.5, busyMachine, 0.9); best != 1 || n != 2 {
		t.Errorf("stopped after %d attempts keeping %d, want 2 keeping the quiet one (1)", n, best)
	}
	if best, n := run(0.5, 0.3, 0.4); best != 1 || n != busyAttempts {
		t.Errorf("kept attempt %d of %d, want the quietest (1) of %d", best, n, busyAttempts)
	}
	boom := errors.New("boom")
	if _, err := quietest(func() (int, float64, error) { return 0, 0, boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want boom", err)
	}
}

// TestSampleCPU: last is the last process's own CPU time (with one
// process, all of ours), and this process spinning moves it; with another
// process first, ours holds both. The two files are read apart, so only
// one-file figures are compared exactly.
func TestSampleCPU(t *testing.T) {
	pid := os.Getpid()
	a := sampleCPU(pid)
	if !a.ok {
		t.Fatal("cannot read /proc")
	}
	give := time.Now().Add(30 * time.Second)
	b := a
	for ; b.last <= a.last; b = sampleCPU(pid) {
		if time.Now().After(give) {
			t.Fatalf("no CPU time counted in 30 s of spinning: %+v", b)
		}
		for n := 0; n < 1e6; n++ { // spin between reads
			_ = n
		}
	}
	if a.ours != a.last || b.ours != b.last {
		t.Fatalf("samples of one process %+v, %+v: want ours = last", a, b)
	}
	both := sampleCPU(1, pid)
	if !both.ok || both.last < b.last || both.ours < both.last {
		t.Fatalf("sample of pid 1 and this process %+v after %+v: want last ≥ %v and ours ≥ last", both, b, b.last)
	}
}

// TestStartTrace: no prefix traces nothing; a prefix names the file after
// the set, and the file is an execution trace once stop returns.
func TestStartTrace(t *testing.T) {
	stop, err := startTrace("", "serial")
	if err != nil || stop() != nil {
		t.Fatalf("no prefix: %v", err)
	}
	prefix := t.TempDir() + "/run"
	stop, err = startTrace(prefix, "9a")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(prefix + "-9a.trace")
	if err != nil {
		t.Fatal(err)
	}
	head := string(b[:min(len(b), 16)])
	if !strings.HasPrefix(head, "go 1.") || !strings.Contains(head, " trace") {
		t.Errorf("%s-9a.trace begins %q, want an execution trace's header", prefix, head)
	}
}

// TestAttemptSetReleases: every workload prepared is released, a release's
// error reaches the caller with the points, and a workload that fails to
// prepare ends the attempt after releasing the ones before it.
func TestAttemptSetReleases(t *testing.T) {
	self, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{cfg: config{Serial: bounds{duration: time.Minute, maxCalls: 4}, SerialWarmup: bounds{duration: time.Minute, maxCalls: 1}},
		rt: &childProc{cmd: &exec.Cmd{Process: self}}}
	released := map[string]int{}
	errRelease, errPrepare := errors.New("release failed"), errors.New("prepare failed")
	work := func(name string, releaseErr, prepareErr error) workload {
		return func(context.Context) ([]callFunc, func() error, error) {
			if prepareErr != nil {
				return nil, nil, prepareErr
			}
			call := func(context.Context) error { return nil }
			return []callFunc{call}, func() error { released[name]++; return releaseErr }, nil
		}
	}

	p, err := b.attemptSet(context.Background(), 2, []workload{work("a", errRelease, nil), work("b", nil, nil)})
	if !errors.Is(err, errRelease) {
		t.Errorf("err = %v, want the release's error", err)
	}
	if len(p) != 2 || p[0].Calls != 4 || p[1].Calls != 4 {
		t.Errorf("points %+v: want two of 4 calls each", p)
	}
	if released["a"] != 1 || released["b"] != 1 {
		t.Errorf("released %v, want each once", released)
	}

	clear(released)
	if _, err := b.attemptSet(context.Background(), 1, []workload{work("a", nil, nil), work("b", nil, errPrepare)}); !errors.Is(err, errPrepare) {
		t.Errorf("err = %v, want the failed preparation's", err)
	}
	if released["a"] != 1 {
		t.Errorf("released %v, want a released once after b failed to prepare", released)
	}
}

// TestSampleCounts: two threads passing a byte back and forth over two
// blocking pipes make four read or write calls a round, and in every round
// at least one of them must sleep in read until the other writes, so a
// sample of this process counts at least that many calls and switches.
func TestSampleCounts(t *testing.T) {
	pid := os.Getpid()
	var ping, pong [2]int
	for _, p := range []*[2]int{&ping, &pong} {
		if err := syscall.Pipe(p[:]); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]) })
	}
	const rounds = 200
	a := sampleCPU(pid)
	if !a.counted {
		t.Fatal("cannot read /proc/PID/io or /proc/PID/task")
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		b := make([]byte, 1)
		for range rounds {
			if _, err := syscall.Read(ping[0], b); err != nil {
				done <- err
				return
			}
			if _, err := syscall.Write(pong[1], b); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	runtime.LockOSThread()
	b := []byte{1}
	for range rounds {
		if _, err := syscall.Write(ping[1], b); err != nil {
			t.Fatal(err)
		}
		if _, err := syscall.Read(pong[0], b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.UnlockOSThread()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	d := a.to(sampleCPU(pid))
	if !d.counted || d.sys < 4*rounds || d.switches < rounds {
		t.Fatalf("after %d rounds: %.0f read/write calls and %.0f switches counted (counted %v), want ≥ %d and ≥ %d",
			rounds, d.sys, d.switches, d.counted, 4*rounds, rounds)
	}
	if d.lastSys != d.sys || d.lastSwitches != d.switches {
		t.Fatalf("one process: last %.0f/%.0f, all %.0f/%.0f: want equal", d.lastSys, d.lastSwitches, d.sys, d.switches)
	}
}

// TestSetPerCall: the figures of a point are the difference of two samples
// divided by its calls, summed over stretches by add, and left at 0 when a
// sample could not be read.
func TestSetPerCall(t *testing.T) {
	a := cpuSample{ours: 1, last: 0.5, ok: true, sys: 100, lastSys: 40, switches: 10, lastSwitches: 4, counted: true}
	b := cpuSample{ours: 1.5, last: 0.7, ok: true, sys: 500, lastSys: 240, switches: 60, lastSwitches: 24, counted: true}
	var sum cpuSample
	sum.ok, sum.counted = true, true
	sum.add(a.to(b))
	sum.add(a.to(b))
	pt := point{Calls: 400}
	sum.setPerCall(&pt)
	want := point{Calls: 400, CPUNsPerCall: 2_500_000, RuntimeCPUNsPerCall: 1_000_000,
		SyscallsPerCall: 2, RuntimeSyscallsPerCall: 1, SwitchesPerCall: 0.25, RuntimeSwitchesPerCall: 0.1}
	if pt != want {
		t.Fatalf("got %+v\nwant %+v", pt, want)
	}
	b.counted = false
	pt = point{Calls: 400}
	a.to(b).setPerCall(&pt)
	if pt.CPUNsPerCall != 1_250_000 || pt.SyscallsPerCall != 0 || pt.SwitchesPerCall != 0 {
		t.Fatalf("with counts unknown: %+v, want CPU only", pt)
	}
}
