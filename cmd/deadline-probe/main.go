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
	N            int            `json:"n"`
	Details      int            `json:"details"`
	Bare         int            `json:"bare"`
	Cancelled    int            `json:"cancelled"`
	Other        int            `json:"other"`
	OK           int            `json:"ok"`
	RawCancelled int            `json:"rawCancelled,omitempty"`
	Limits       map[string]int `json:"limits"`
	Seconds      float64        `json:"seconds"`
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
	flag.Parse()
	if err := run(*n, *c, *langs, *retry, *addr, *python, *asJSON, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "deadline-probe:", err)
		os.Exit(1)
	}
}

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
		switch lang = strings.TrimSpace(lang); lang {
		case "go":
			for _, r := range settings {
				res, err := probeGo(ctx, addr, n, c, r)
				if err != nil {
					return fmt.Errorf("go: %w", err)
				}
				rs = append(rs, res)
			}
		case "python":
			cmd := exec.CommandContext(ctx, python, filepath.Join(root, "clients/python/tools/deadline_probe.py"),
				"--addr", addr, "--n", fmt.Sprint(n), "--c", fmt.Sprint(c), "--retry", retry)
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
				"--addr", addr, "--n", fmt.Sprint(n), "--c", fmt.Sprint(c), "--retry", retry)
			if rs, err = probeChild(cmd); err != nil {
				return fmt.Errorf("node: %w", err)
			}
		default:
			return fmt.Errorf("unknown language %q", lang)
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

func probeGo(ctx context.Context, addr string, n, conc int, retry bool) (result, error) {
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

	res := result{Lang: "go", Retry: retry, N: n, Limits: map[string]int{}}
	var mu sync.Mutex
	var next atomic.Int64
	ds := deadlines(n)
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
				_, err := s.Run(cctx, "sleep", map[string]any{"ms": ds[i].Milliseconds() + 1000})
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
	fmt.Printf("RunJob(sleep deadline+1s), own deadline spread 50 ms – 2 s, %d in flight\n", conc)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "client\tretry policy\tcalls\tTimeoutExceeded\tbare DEADLINE_EXCEEDED\tCANCELLED\tother\tok\tlimits\twall")
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
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d (%.1f%%)\t%s\t%d\t%d\t%d\t%s\t%.1fs\n", r.Lang, on, r.N, r.Details,
			100*float64(r.Details)/float64(max(r.N, 1)), bare, r.Cancelled, r.Other, r.OK, strings.Join(lim, " "), r.Seconds)
	}
	tw.Flush()
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
