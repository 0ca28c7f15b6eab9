package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: 0 = pass, 1 = a violation or a failed run, 2 = bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway-soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "CI mode: 30 s, fewer workers and sessions")
	def := defaultOptions(false)
	duration := fs.Duration("duration", def.Duration, "how long load and faults run (default 10m; 30s with -short)")
	seed := fs.Uint64("seed", def.Seed, "seed of the fault schedule and of every worker's choices")
	var names []string
	for _, d := range arcpruntime.Dialects {
		names = append(names, d.Name)
	}
	dialect := fs.String("dialect", def.Dialect, "runtime dialect: "+strings.Join(names, ", "))
	workers := fs.Int("workers", 0, "concurrent load workers (default 8; 6 with -short)")
	noFaults := fs.Bool("no-faults", false, "a control run: the same load without faults")
	jsonOut := fs.Bool("json", false, "print the report as JSON (progress still goes to stderr)")
	verbose := fs.Bool("v", false, "gateway and runtime logs (WARN and above) to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	o := defaultOptions(*short)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["duration"] {
		o.Duration = *duration
	}
	if *workers > 0 {
		o.Workers = *workers
	}
	o.Seed, o.Dialect, o.Faults = *seed, *dialect, !*noFaults
	o.Progress = stderr
	if *verbose {
		o.Log = stderr
	}
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-soak:", err)
		if rep == nil {
			return 1
		}
	}
	if *jsonOut {
		if err := writeJSON(stdout, rep); err != nil {
			fmt.Fprintln(stderr, "gateway-soak:", err)
			return 1
		}
	} else {
		writeText(stdout, rep)
	}
	if err != nil || !rep.Pass {
		return 1
	}
	return 0
}
