package main

import (
	"context"
	"os/exec"
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
	gw, gwOut, exited := startReadmeGateway(t, ctx)
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
