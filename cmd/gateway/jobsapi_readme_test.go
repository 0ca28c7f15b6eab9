package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestJobsAPIReadme runs README.md's "ARCP 1.1 job surface" block verbatim
// against the gateway binary started as the quickstart says (embedded
// runtime, default ports), then checks each capability in its output.
func TestJobsAPIReadme(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	if _, err := exec.LookPath("grpcurl"); err != nil {
		t.Skip("grpcurl is not on PATH (CI installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "gateway")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	var gwOut bytes.Buffer
	gw := exec.CommandContext(ctx, bin)
	gw.Stdout, gw.Stderr = &gwOut, &gwOut
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- gw.Wait() }()
	defer func() {
		if gw.ProcessState == nil {
			_ = gw.Process.Kill()
			<-exited
		}
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ready := false; !ready; {
		select {
		case err := <-exited:
			t.Fatalf("gateway exited early: %v\n%s", err, gwOut.String())
		case <-ctx.Done():
			t.Fatal("gateway did not become ready")
		case <-tick.C:
		}
		if resp, err := http.Get("http://127.0.0.1:8080/healthz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", strings.Join(readmeBlock(t, "jobs-api"), "\n"))
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("jobs-api script: %v\n%s", err, out)
	}
	for _, want := range []string{
		`"traceId": "4bf92f3577b34da6a3ce929d0e0e4736"`, `"agent": "sleep@1.0.0"`, `"/workspace/**"`, `"USD": 5`,
		`"x-vendor.acme.tag": "blue"`, `"expiresAt"`, `"replayed": true`, `"progress"`, `"units": "ms"`,
		`"state": "JOB_STATE_SUCCEEDED"`, `"resultId"`, `"resultSize": "100"`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-exited; err != nil {
		t.Fatalf("gateway exit after SIGTERM: %v\n%s", err, gwOut.String())
	}
}
