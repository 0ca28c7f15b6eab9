package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickstartLines returns the command lines of README.md's quickstart block.
func quickstartLines(t *testing.T) []string { return readmeBlock(t, "quickstart") }

// readmeBlock returns the command lines of README.md's block between
// <!-- name:begin --> and <!-- name:end -->.
func readmeBlock(t *testing.T, name string) []string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- "+name+":begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s block", name)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, "```") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// startReadmeGateway builds the gateway and starts it as the README's
// blocks expect it (no flags: embedded runtime, default ports), and waits
// until /healthz answers. exited receives the process's end; the process is
// killed when the test ends, if it still runs.
func startReadmeGateway(t *testing.T, ctx context.Context) (gw *exec.Cmd, out *bytes.Buffer, exited <-chan error) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gateway")
	if b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	out = &bytes.Buffer{}
	gw = exec.CommandContext(ctx, bin)
	gw.Stdout, gw.Stderr = out, out
	if err := gw.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Wait() }()
	t.Cleanup(func() { _ = gw.Process.Kill() }) // a no-op once it has exited
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ready := false; !ready; {
		select {
		case err := <-done:
			t.Fatalf("gateway exited early: %v\n%s", err, out.String())
		case <-ctx.Done():
			t.Fatal("gateway did not become ready")
		case <-tick.C:
		}
		if resp, err := http.Get("http://127.0.0.1:8080/healthz"); err == nil {
			resp.Body.Close()
			ready = resp.StatusCode == http.StatusOK
		}
	}
	return gw, out, done
}

// TestQuickstart runs the README's quickstart verbatim against the gateway
// started as the README says (no flags: embedded runtime, default ports),
// then stops it with SIGTERM and expects a clean exit.
func TestQuickstart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required by the quickstart")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	gw, gwOut, exited := startReadmeGateway(t, ctx)

	lines := quickstartLines(t)
	var script strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&script, "%s\necho '@@@ %d'\n", l, i)
	}
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart script: %v\n%s", err, out)
	}
	// Split the output by command.
	outputs := map[string]string{}
	rest := string(out)
	for i, l := range lines {
		before, after, ok := strings.Cut(rest, fmt.Sprintf("@@@ %d\n", i))
		if !ok {
			t.Fatalf("no output marker for %q\n%s", l, out)
		}
		outputs[l] += before
		rest = after
	}
	find := func(substr string) string {
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return outputs[l]
			}
		}
		t.Fatalf("no quickstart line contains %q", substr)
		return ""
	}
	expect := []struct {
		line string
		want []string
	}{
		{`echo "session: $SID"`, []string{"session: s1.gw-"}},
		{`"agent":"echo"`, []string{`"hello": "world"`, `"jobId"`}},
		{`WatchJob`, []string{`"kind": "log"`, `"result"`, `"count": 5`}},
		{`x-timeout-ms: 100`, []string{"DeadlineExceeded", "tool_call", `"configuredTimeoutMs": 1000`, "TIMEOUT_PROFILE_EXCEEDED"}},
		{`GetSessionStatus`, []string{"SESSION_STATUS_LIVE", "SESSION_PHASE_READY"}},
	}
	for _, e := range expect {
		got := find(e.line)
		for _, w := range e.want {
			if !strings.Contains(got, w) {
				t.Errorf("output of the line containing %q lacks %q:\n%s", e.line, w, got)
			}
		}
	}
	// The two curl probes: live before the close, not_found after.
	var curls []string
	for _, l := range lines {
		if strings.HasPrefix(l, "curl ") {
			curls = append(curls, outputs[l])
		}
	}
	if len(curls) != 2 || !strings.Contains(curls[0], `"status":"SESSION_STATUS_LIVE"`) || !strings.Contains(curls[1], `"status":"SESSION_STATUS_NOT_FOUND"`) {
		t.Errorf("HTTP probes: %q", curls)
	}
	if m := regexp.MustCompile(`"elapsedMs": (\d+)`).FindStringSubmatch(find("x-timeout-ms: 100")); m == nil {
		t.Error("timeout details lack elapsedMs")
	}

	if err := gw.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gateway exit after SIGTERM: %v\n%s", err, gwOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("gateway did not stop after SIGTERM\n%s", gwOut.String())
	}
	if !strings.Contains(gwOut.String(), "shutdown complete") || strings.Contains(gwOut.String(), `"err":null`) {
		t.Errorf("no clean shutdown log:\n%s", gwOut.String())
	}
}
