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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command: 0 = every enforced check passed, 1 = a check failed
// or the run could not measure, 2 = bad flags.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gateway-chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	short := fs.Bool("short", false, "CI mode: 9 sessions, lease TTL 2s, a few minutes in all")
	def := defaultOptions(false)
	jsonOut := fs.Bool("json", false, "print the report as JSON (progress still goes to stderr)")
	scenarios := fs.String("scenarios", strings.Join(Scenarios, ","), "faults to run, in order")
	ttl := fs.Duration("ttl", def.TTL, "replicas' --lease-ttl (default 5s; 2s with -short)")
	sessions := fs.Int("sessions", def.Sessions, "sessions, one RunJob loop each (default 40; 9 with -short)")
	watchers := fs.Int("watchers", def.Watchers, "SubmitJob + WatchJob loops (default 15; 3 with -short)")
	think := fs.Duration("think", def.Think, "a RunJob loop's pause after a successful call (after a failed one it is 50ms)")
	events := fs.Int("events", def.Events, "events of each watched job (default 100; 20 with -short)")
	logDir := fs.String("log-dir", "", "on a failed run, write each replica's whole log into this directory")
	gatewayBin := fs.String("gateway-bin", "", "gateway binary (default: go build ./cmd/gateway into a temporary directory)")
	nginx := fs.String("nginx", "", "nginx binary (default: nginx on PATH, else /usr/sbin/nginx)")
	nginxConf := fs.String("nginx-conf", "", "the nginx recipe: a markdown file with an <!-- nginx:begin --> block, or an nginx configuration (default: docs/balancers.md, docs/operations.md or README.md)")
	enforce := fs.Bool("enforce-availability", enforceAvailabilityDefault, "fail on the availability thresholds too (sessions lost, failed calls in the rolling restart, outage of kill and freeze; default true, with -short too)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "gateway-chaos: unexpected arguments %q\n", fs.Args())
		return 2
	}
	o := defaultOptions(*short)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["ttl"] {
		o.TTL = *ttl
	}
	if set["sessions"] {
		o.Sessions = *sessions
	}
	if set["watchers"] {
		o.Watchers = *watchers
	}
	if set["think"] {
		o.Think = *think
	}
	if set["events"] {
		o.Events = *events
	}
	o.Scenarios = nil
	for _, s := range strings.Split(*scenarios, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.Scenarios = append(o.Scenarios, s)
		}
	}
	if set["enforce-availability"] {
		o.EnforceAvailability = *enforce
	}
	o.GatewayBin, o.Nginx, o.NginxConf = *gatewayBin, *nginx, *nginxConf
	o.LogDir = *logDir
	o.Progress = stderr
	if err := o.validate(); err != nil {
		fmt.Fprintln(stderr, "gateway-chaos:", err)
		return 2
	}
	rep, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "gateway-chaos:", err)
		if rep == nil {
			return 1
		}
	}
	if *jsonOut {
		if err := writeJSON(stdout, rep); err != nil {
			fmt.Fprintln(stderr, "gateway-chaos:", err)
			return 1
		}
	} else {
		writeText(stdout, rep)
	}
	if !rep.Pass {
		return 1
	}
	return 0
}
