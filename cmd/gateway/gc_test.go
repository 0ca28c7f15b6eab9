package main

import (
	"context"
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
	if err != nil || !o.procsTuner {
		t.Fatalf("default: %v, %v; want on", o.procsTuner, err)
	}
	o, err = parseOptions(nil, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "false"}), io.Discard)
	if err != nil || o.procsTuner {
		t.Fatalf("env false: %v, %v; want off", o.procsTuner, err)
	}
	o, err = parseOptions([]string{"--procs-tuner=true"}, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "false"}), io.Discard)
	if err != nil || !o.procsTuner {
		t.Fatalf("flag over env: %v, %v; want on", o.procsTuner, err)
	}
	if _, err = parseOptions(nil, env(map[string]string{"SESSIONGATE_PROCS_TUNER": "maybe"}), io.Discard); err == nil || !strings.Contains(err.Error(), "PROCS_TUNER") && !strings.Contains(err.Error(), "procs-tuner") {
		t.Fatalf("env maybe: %v, want an error naming the setting", err)
	}
}
