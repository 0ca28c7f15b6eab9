// Command deadline-probe measures whether callers whose own deadline fires
// receive the gateway's timeout details, per client language.
//
// For each language (Go, Python, Node) and retry setting (the published
// retry policy on, and off), it makes N RunJob calls through that language's
// client in clients/ (or client/ for Go) to the sleep agent, each sleeping a
// second longer than the call's own deadline, with deadlines spread evenly
// from 50 ms to 2 s, C calls at a time, and prints how many calls ended with
// the TimeoutExceeded details, how many with a bare DEADLINE_EXCEEDED, and
// how many CANCELLED. Languages run one after another against one gateway.
//
//	go run ./cmd/deadline-probe                # all languages, N=200, C=20
//	go run ./cmd/deadline-probe -langs go -n 500
//	go run ./cmd/deadline-probe -deadlines 20ms,50ms,100ms,150ms,1s -retry off -n 100
//	go run ./cmd/deadline-probe -deadlines 20ms,50ms,100ms -agent echo -n 10
//
// With -deadlines, N calls are made at each fixed deadline instead of the
// spread, and each deadline gets its own row. With -agent echo the calls run
// the echo agent (1 ms of work) and the "ok" column counts answers that
// arrived within the deadline.
//
// It starts a real gateway binary (built, or $SESSIONGATE_GATEWAY_BIN) unless
// -addr names a running one. Python runs under /usr/bin/python3 (Debian's
// python3-grpcio); Node needs `npm ci` done in clients/typescript.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/client/gatewaytest"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// result is one language's and retry setting's counts; the Python and Node
// probes print it as JSON lines.
type result struct {
	Lang         string         `json:"lang"`
	Retry        bool           `json:"retry"`
	DeadlineMS   int            `json:"deadline_ms"` // 0: spread 50 ms – 2 s
	Agent        string         `json:"agent"`
	N            int            `json:"n"`
	Details      int            `json:"details"`
	Bare         int            `json:"bare"`
	Cancelled    int            `json:"cancelled"`
	Other        int            `json:"other"`
	OK           int            `json:"ok"`
	RawCancelled int            `json:"rawCancelled,omitempty"`
	Limits       map[string]int `json:"limits"`
	Seconds      float64        `json:"seconds"`
	// Node only: the event loop's delay (monitorEventLoopDelay, 10 ms
	// resolution) over the row, 99th percentile and maximum.
	LoopP99MS float64 `json:"loop_p99_ms,omitempty"`
	LoopMaxMS float64 `json:"loop_max_ms,omitempty"`
	// The machine's stalls while the language ran: gaps over 30 ms seen
	// by a goroutine of this process that sleeps 1 ms at a time, and the
	// longest (see stallWatch).
	Stalls     int     `json:"stalls_over_30ms"`
	StallMaxMS float64 `json:"stall_max_ms"`
}

func main() {
	n := flag.Int("n", 200, "calls per language and retry setting")
	c := flag.Int("c", 20, "calls in flight at a time")
	langs := flag.String("langs", "go,python,node", "languages to probe, comma-separated")
	retry := flag.String("retry", "both", "published retry policy: on, off or both")
	addr := flag.String("addr", "", "a running gateway's gRPC address (default: start one)")
	python := flag.String("python", "/usr/bin/python3", "the Python interpreter with Debian's grpcio")
	asJSON := flag.Bool("json", false, "print JSON lines instead of the table")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	fixed := flag.String("deadlines", "", "fixed deadlines, comma-separated (e.g. 20ms,50ms,1s): N calls at each instead of the spread")
	agent := flag.String("agent", "sleep", "sleep (the job outlives the deadline) or echo (1 ms of work)")
	flag.Parse()
	var ds []int
	for _, f := range strings.Split(*fixed, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil || d < time.Millisecond {
			fmt.Fprintf(os.Stderr, "deadline-probe: -deadlines: %q is not a duration of at least 1ms\n", f)
			os.Exit(2)
		}
		ds = append(ds, int(d.Milliseconds()))
	}
	if *agent != "sleep" && *agent != "echo" {
		fmt.Fprintln(os.Stderr, "deadline-probe: -agent: want sleep or echo")
		os.Exit(2)
	}
	probeDeadlines, probeAgent = ds, *agent
	if err := run(*n, *c, *langs, *retry, *addr, *python, *asJSON, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "deadline-probe:", err)
		os.Exit(1)
	}
}

// probeDeadlines are the fixed deadlines in ms (none: the spread) and
// probeAgent the agent, from the flags.
var (
	probeDeadlines []int
	probeAgent     = "sleep"
)

func run(n, c int, langs, retry, addr, python string, asJSON bool, timeout time.Duration) error {
	if n < 1 || c < 1 {
		return errors.New("-n and -c must be positive")
	}
	settings := map[string][]bool{"on": {true}, "off": {false}, "both": {true, false}}[retry]
	if settings == nil {
		return fmt.Errorf("-retry %q: want on, off or both", retry)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if addr == "" {
		gw, err := gatewaytest.Start(ctx)
		if err != nil {
			return err
		}
		defer gw.Stop()
		addr = gw.Addr
	}
	var results []result
	for _, lang := range strings.Split(langs, ",") {
		var rs []result
		sw := startStallWatch()
		switch lang = strings.TrimSpace(lang); lang {
		case "go":
			for _, r := range settings {
				for _, d := range append([]int{}, fixedOrSpread()...) {
					res, err := probeGo(ctx, addr, n, c, r, d)
					if err != nil {
						return fmt.Errorf("go: %w", err)
					}
					rs = append(rs, res)
				}
			}
		case "python":
			cmd := exec.CommandContext(ctx, python, filepath.Join(root, "clients/python/tools/deadline_probe.py"),
				"--addr", addr, "--n", fmt.Sprint(n), "--c", fmt.Sprint(c), "--retry", retry,
				"--deadlines-ms", joinInts(probeDeadlines), "--agent", probeAgent)
			cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "clients/python"))
			if rs, err = probeChild(cmd); err != nil {
				return fmt.Errorf("python: %w", err)
			}
		case "node":
			ts := filepath.Join(root, "clients/typescript")
			build := exec.CommandContext(ctx, filepath.Join(ts, "node_modules/.bin/tsc"), "-p", "tsconfig.test.json")
			build.Dir = ts
			if out, err := build.CombinedOutput(); err != nil {
				return fmt.Errorf("node: build (npm ci in clients/typescript?): %v\n%s", err, out)
			}
			cmd := exec.CommandContext(ctx, "node", filepath.Join(ts, "dist-test/tools/deadline-probe.js"),
				"--addr", addr, "--n", fmt.Sprint(n), "--c", fmt.Sprint(c), "--retry", retry,
				"--deadlines-ms", joinInts(probeDeadlines), "--agent", probeAgent)
			if rs, err = probeChild(cmd); err != nil {
				return fmt.Errorf("node: %w", err)
			}
		default:
			return fmt.Errorf("unknown language %q", lang)
		}
		stalls, longest := sw.stop()
		for i := range rs {
			rs[i].Stalls, rs[i].StallMaxMS = stalls, longest
		}
		results = append(results, rs...)
		if asJSON {
			for _, r := range rs {
				b, _ := json.Marshal(r)
				fmt.Println(string(b))
			}
		}
	}
	if !asJSON {
		printTable(results, c)
	}
	return nil
}

// fixedOrSpread is probeDeadlines, or one 0 for the spread.
func fixedOrSpread() []int {
	if len(probeDeadlines) == 0 {
		return []int{0}
	}
	return probeDeadlines
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// deadlines spreads n deadlines evenly from 50 ms to 2 s.
func deadlines(n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		f := 0.0
		if n > 1 {
			f = float64(i) / float64(n-1)
		}
		out[i] = (50*time.Millisecond + time.Duration(f*float64(1950*time.Millisecond))).Round(time.Millisecond)
	}
	return out
}

func probeGo(ctx context.Context, addr string, n, conc int, retry bool, fixedMS int) (result, error) {
	var opts []client.Option
	if !retry {
		opts = append(opts, client.WithoutRetry())
	}
	cl, err := client.New(addr, opts...)
	if err != nil {
		return result{}, err
	}
	defer cl.Close()
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s, err := cl.OpenSession(octx, &gatewayv1.OpenSessionRequest{ClientName: "deadline-probe"})
	cancel()
	if err != nil {
		return result{}, err
	}
	defer s.Close(context.WithoutCancel(ctx))

	res := result{Lang: "go", Retry: retry, DeadlineMS: fixedMS, Agent: probeAgent, N: n, Limits: map[string]int{}}
	var mu sync.Mutex
	var next atomic.Int64
	ds := deadlines(n)
	if fixedMS > 0 {
		for i := range ds {
			ds[i] = time.Duration(fixedMS) * time.Millisecond
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ds) || ctx.Err() != nil {
					return
				}
				cctx, cancel := context.WithTimeout(ctx, ds[i])
				var err error
				if probeAgent == "echo" {
					_, err = s.Run(cctx, "echo", map[string]any{"deadline_ms": ds[i].Milliseconds()})
				} else {
					_, err = s.Run(cctx, "sleep", map[string]any{"ms": ds[i].Milliseconds() + 1000})
				}
				cancel()
				var te *client.TimeoutError
				var e *client.Error
				mu.Lock()
				switch {
				case err == nil:
					res.OK++
				case errors.As(err, &te):
					res.Details++
					res.Limits[te.Limit]++
				case errors.Is(err, context.DeadlineExceeded):
					res.Bare++
				case errors.Is(err, context.Canceled):
					res.Cancelled++
				case errors.As(err, &e):
					res.Other++
				default:
					res.Other++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Seconds = time.Since(start).Round(100 * time.Millisecond).Seconds()
	return res, ctx.Err()
}

// probeChild runs a language's probe and reads its JSON lines.
func probeChild(cmd *exec.Cmd) ([]result, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v\n%s", err, stderr.String())
	}
	var rs []result
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("probe printed %q: %v", sc.Text(), err)
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func printTable(rs []result, conc int) {
	if probeAgent == "echo" {
		fmt.Printf("RunJob(echo), own deadline as given, %d in flight; ok = answered in time\n", conc)
	} else {
		fmt.Printf("RunJob(sleep deadline+1s), own deadline as given (spread: 50 ms – 2 s), %d in flight\n", conc)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "client\tretry policy\tdeadline\tcalls\tTimeoutExceeded\tbare DEADLINE_EXCEEDED\tCANCELLED\tother\tok\tlimits\twall\tloop delay p99/max\tstalls >30 ms (longest)")
	for _, r := range rs {
		on := "off"
		if r.Retry {
			on = "on"
		}
		bare := fmt.Sprint(r.Bare)
		if r.RawCancelled > 0 {
			bare += fmt.Sprintf(" (%d were CANCELLED)", r.RawCancelled)
		}
		keys := make([]string, 0, len(r.Limits))
		for k := range r.Limits {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var lim []string
		for _, k := range keys {
			lim = append(lim, fmt.Sprintf("%s=%d", k, r.Limits[k]))
		}
		dl := "spread"
		if r.DeadlineMS > 0 {
			dl = fmt.Sprintf("%d ms", r.DeadlineMS)
		}
		loop := "-"
		if r.LoopMaxMS > 0 {
			loop = fmt.Sprintf("%.0f/%.0f ms", r.LoopP99MS, r.LoopMaxMS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d (%.1f%%)\t%s\t%d\t%d\t%d\t%s\t%.1fs\t%s\t%d (%.0f ms)\n", r.Lang, on, dl, r.N, r.Details,
			100*float64(r.Details)/float64(max(r.N, 1)), bare, r.Cancelled, r.Other, r.OK, strings.Join(lim, " "), r.Seconds, loop, r.Stalls, r.StallMaxMS)
	}
	tw.Flush()
}

// stallWatch measures the machine's stalls as any process feels them: a
// goroutine sleeps 1 ms at a time and counts the gaps over 30 ms. A lost
// block of details that coincides with gaps here is the scheduler's, not
// the gateway's (see "The lost blocks" in timeoutprofile's doc).
type stallWatch struct {
	done    chan struct{}
	ended   chan struct{}
	stalls  int
	longest time.Duration
}

func startStallWatch() *stallWatch {
	w := &stallWatch{done: make(chan struct{}), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		last := time.Now()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
			}
			now := time.Now()
			if g := now.Sub(last); g > 30*time.Millisecond {
				w.stalls++
				w.longest = max(w.longest, g)
			}
			last = now
		}
	}()
	return w
}

// stop ends the watch and returns the gaps over 30 ms and the longest, in ms.
func (w *stallWatch) stop() (int, float64) {
	close(w.done)
	<-w.ended
	return w.stalls, float64(w.longest.Microseconds()) / 1000
}

// repoRoot finds the module root (where go.mod is) from the working directory.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("run it inside the sessiongate module")
	}
	return filepath.Dir(mod), nil
}
