package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/gctuner"
	"github.com/sessiongate/sessiongate/gateway/server"
)

func TestGCMinHeapFlag(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := parseOptions(nil, env(nil), io.Discard)
	if err != nil || o.gcMinHeapMiB != gctuner.DefaultMinHeapMiB {
		t.Fatalf("default: %d, %v; want %d", o.gcMinHeapMiB, err, gctuner.DefaultMinHeapMiB)
	}
	o, err = parseOptions(nil, env(map[string]string{"SESSIONGATE_GC_MIN_HEAP_MIB": "0"}), io.Discard)
	if err != nil || o.gcMinHeapMiB != 0 {
		t.Fatalf("env 0: %d, %v", o.gcMinHeapMiB, err)
	}
	o, err = parseOptions([]string{"--gc-min-heap-mib", "256"}, env(map[string]string{"SESSIONGATE_GC_MIN_HEAP_MIB": "0"}), io.Discard)
	if err != nil || o.gcMinHeapMiB != 256 {
		t.Fatalf("flag over env: %d, %v", o.gcMinHeapMiB, err)
	}
	err = run(context.Background(), []string{"--gc-min-heap-mib", "-1"}, env(nil), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "gc-min-heap-mib") {
		t.Fatalf("--gc-min-heap-mib -1: %v", err)
	}
}

func TestGRPCWindowFlag(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := parseOptions(nil, env(nil), io.Discard)
	if err != nil || o.windowBytes != server.DefaultWindowBytes {
		t.Fatalf("default: %d, %v; want %d", o.windowBytes, err, server.DefaultWindowBytes)
	}
	o, err = parseOptions([]string{"--grpc-window-bytes", "-1"}, env(map[string]string{"SESSIONGATE_GRPC_WINDOW_BYTES": "4194304"}), io.Discard)
	if err != nil || o.windowBytes != -1 {
		t.Fatalf("flag over env: %d, %v", o.windowBytes, err)
	}
	for _, bad := range []string{"1000", "0", "2147483647"} {
		if _, err := parseOptions([]string{"--grpc-window-bytes", bad}, env(nil), io.Discard); err == nil || !strings.Contains(err.Error(), "--grpc-window-bytes "+bad) {
			t.Errorf("--grpc-window-bytes %s: %v", bad, err)
		}
	}
}

func TestProcsTunerFlag(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	o, err := parseOptions(nil, env(nil), io.Discard)
	if err != nil || o.procsTuner {
		t.Fatalf("default: %v, %v; want off (opt-in)", o.procsTuner, err)
	}
	o, err = parseOptions(nil, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "true"}), io.Discard)
	if err != nil || !o.procsTuner {
		t.Fatalf("env true: %v, %v; want on", o.procsTuner, err)
	}
	o, err = parseOptions([]string{"--procs-tuner=false"}, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "true"}), io.Discard)
	if err != nil || o.procsTuner {
		t.Fatalf("flag over env: %v, %v; want off", o.procsTuner, err)
	}
	if _, err = parseOptions(nil, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "maybe"}), io.Discard); err == nil || !strings.Contains(err.Error(), "PROCS_TUNER") && !strings.Contains(err.Error(), "procs-tuner") {
		t.Fatalf("env maybe: %v, want an error naming the setting", err)
	}
}

// TestHelpShowsProcsTunerOff: `gateway --help` says the procs tuner is off
// unless asked for. The flag package prints "(default true)" for a bool
// flag on by default; the usage names it opt-in.
func TestHelpShowsProcsTunerOff(t *testing.T) {
	var help strings.Builder
	err := run(context.Background(), []string{"--help"}, func(string) string { return "" }, io.Discard, &help)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: %v, want flag.ErrHelp", err)
	}
	usage, ok := flagUsage(help.String(), "procs-tuner")
	if !ok {
		t.Fatalf("--help does not list -procs-tuner:\n%s", help.String())
	}
	if strings.Contains(usage, "(default true)") || !strings.Contains(usage, "off by default") {
		t.Fatalf("--help shows -procs-tuner as on by default, or does not say it is off:\n%s", usage)
	}
}

// flagUsage returns the lines flag.PrintDefaults wrote for name.
func flagUsage(help, name string) (string, bool) {
	var out []string
	in := false
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			f := strings.Fields(line)
			in = len(f) > 0 && f[0] == "-"+name
		case !strings.HasPrefix(line, "    "):
			in = false
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n"), len(out) > 0
}
