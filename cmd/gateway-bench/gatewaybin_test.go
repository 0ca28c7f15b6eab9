package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGatewayBinaryFromAnyDirectory: with the working directory outside
// the module, section 9b's gateway is still built, from the module's
// source. Building in the working directory, as 9b did before, fails there
// with "go.mod file not found".
func TestGatewayBinaryFromAnyDirectory(t *testing.T) {
	t.Setenv("SESSIONGATE_GATEWAY_BIN", "")
	t.Chdir(t.TempDir())
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err != nil || strings.TrimSpace(string(out)) != os.DevNull {
		t.Fatalf("the working directory is in a module (go env GOMOD = %q, %v): the test proves nothing", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin, err := gatewayBinary(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(bin) != dir {
		t.Fatalf("built %s, want it in %s", bin, dir)
	}
	// The binary is cmd/gateway: its help names the gateway's own flags.
	help, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	for _, flag := range []string{"-listen", "-redis", "-lease-ttl"} {
		if !strings.Contains(string(help), flag) {
			t.Fatalf("%s --help does not name %s: not the gateway?\n%s", bin, flag, help)
		}
	}
}

// TestGatewayBinaryGiven: -gateway-bin (or $SESSIONGATE_GATEWAY_BIN) is
// used as it is, without a build; a missing file or a directory is an
// error naming it.
func TestGatewayBinaryGiven(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	given := filepath.Join(dir, "my-gateway")
	if err := os.WriteFile(given, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SESSIONGATE_GATEWAY_BIN", "")
	if bin, err := gatewayBinary(ctx, given, t.TempDir()); err != nil || bin != given {
		t.Fatalf("gatewayBinary(%q) = %q, %v; want it as given", given, bin, err)
	}
	t.Setenv("SESSIONGATE_GATEWAY_BIN", given)
	if bin, err := gatewayBinary(ctx, "", t.TempDir()); err != nil || bin != given {
		t.Fatalf("with $SESSIONGATE_GATEWAY_BIN=%q: %q, %v", given, bin, err)
	}
	for _, bad := range []string{filepath.Join(dir, "missing"), dir} {
		if _, err := gatewayBinary(ctx, bad, t.TempDir()); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("gatewayBinary(%q) = %v, want an error naming it", bad, err)
		}
	}
	o, err := parseFlags([]string{"-short", "-gateway-bin", given}, io.Discard)
	if err != nil || o.cfg.GatewayBin != given {
		t.Fatalf("-gateway-bin %s: config %q, %v", given, o.cfg.GatewayBin, err)
	}
}
