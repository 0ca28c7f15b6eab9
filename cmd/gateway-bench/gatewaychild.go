package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/sessiongate/sessiongate/gateway/gctuner"
	"github.com/sessiongate/sessiongate/gateway/proctuner"
)

// serveGatewayArg, as the first argument, makes the bench binary (or the
// test binary, through TestMain) serve the gateway instead of
// benchmarking: a gateway child of section 6. It is not a documented flag.
const serveGatewayArg = "-serve-gateway"

// gatewayChildShutdown bounds a gateway child's shutdown (the sessions it
// closes).
const gatewayChildShutdown = 60 * time.Second

// isGatewayChild reports whether args (os.Args) ask for a gateway child.
func isGatewayChild(args []string) bool {
	return len(args) > 1 && args[1] == serveGatewayArg
}

// gatewayChildArgs are the arguments after serveGatewayArg: what the
// parent runs under (its -gc-min-heap-mib, -procs-tuner and -v), the
// session cap, then the runtime's URLs.
func gatewayChildArgs(cfg config, maxSessions int, runtimeURLs []string) []string {
	verbose := cfg.GatewayLog != nil && cfg.GatewayLog != io.Discard
	return append([]string{serveGatewayArg, strconv.Itoa(cfg.GCMinHeapMiB), strconv.FormatBool(cfg.ProcsTuner),
		strconv.FormatBool(verbose), strconv.Itoa(maxSessions)}, runtimeURLs...)
}

// serveGatewayChild is the whole of a gateway child: the gateway as the
// bench runs it in its own process (startGateway, under the same garbage
// collector and procs tuner settings), over the runtime URLs it is given.
// It prints its gRPC address as the first line of stdout and serves until
// stdin reaches EOF or SIGTERM/SIGINT (serveUntilDone), then shuts the
// gateway down.
func serveGatewayChild(args []string, stdin io.Reader, stdout, stderr io.Writer) (err error) {
	if len(args) < 5 {
		return errors.New("want: gc-min-heap-mib procs-tuner verbose max-sessions runtime-URL…")
	}
	minHeap, err := strconv.Atoi(args[0])
	if err != nil || minHeap < 0 {
		return fmt.Errorf("gc-min-heap-mib %q: want a count of MiB", args[0])
	}
	procs, err := strconv.ParseBool(args[1])
	if err != nil {
		return fmt.Errorf("procs-tuner %q: %w", args[1], err)
	}
	verbose, err := strconv.ParseBool(args[2])
	if err != nil {
		return fmt.Errorf("verbose %q: %w", args[2], err)
	}
	maxSessions, err := strconv.Atoi(args[3])
	if err != nil || maxSessions < 1 {
		return fmt.Errorf("max-sessions %q: want a positive count", args[3])
	}
	raiseFileLimit(wantFiles)
	if minHeap > 0 {
		t := gctuner.Start(uint64(minHeap) << 20)
		defer t.Stop()
	}
	if procs {
		t := proctuner.Start(proctuner.Config{})
		defer t.Stop()
	}
	logw := io.Discard
	if verbose {
		logw = stderr
	}
	g, err := startGateway(args[4:], maxSessions, logw)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, g.stop(gatewayChildShutdown)) }()
	return serveUntilDone(g.addr, stdin, stdout)
}

// startGatewayChild starts a gateway child (exe, args from
// gatewayChildArgs) and waits for the address it prints.
func startGatewayChild(ctx context.Context, exe string, args []string) (*childProc, error) {
	return startChild(ctx, exe, args, "gateway child", func(f []string) error {
		if len(f) != 1 {
			return fmt.Errorf("printed %q, want one address", f)
		}
		host, _, err := net.SplitHostPort(f[0])
		if err != nil || host != "127.0.0.1" {
			return fmt.Errorf("printed %q, want a 127.0.0.1 address", f[0])
		}
		return nil
	})
}
