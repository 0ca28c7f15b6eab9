package main

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// readmeClusterBlock is the shell block of README.md between
// <!-- cluster:begin --> and <!-- cluster:end -->, verbatim.
func readmeClusterBlock(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- cluster:begin -->\n```sh\n")
	block, _, ok2 := strings.Cut(rest, "```\n<!-- cluster:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no cluster block")
	}
	return block
}

// needTool skips (or, under CI=true, fails) when a tool the block uses is
// missing.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true: .ci/run installs it)", name)
		}
		t.Skipf("%s not found", name)
	}
}

// freePrefix returns a four-digit prefix P such that the ports P1, P2 and
// P3 were free a moment ago (the block's 5006$i and 808$i become P$i). The
// ports are 10001 – 32003, below the kernel's usual ephemeral range (32768
// on), so that no outgoing connection takes one before the script binds it
// (see clustertest.FreePort).
func freePrefix(t *testing.T, avoid string) string {
	t.Helper()
	for range 200 {
		p := strconv.Itoa(1000 + rand.IntN(2201))
		if p == avoid {
			continue
		}
		free := true
		for i := 1; i <= 3 && free; i++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+p+strconv.Itoa(i))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return p
		}
	}
	t.Fatal("no free port prefix")
	return ""
}

// syncBuffer collects a process's output for polling.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestClusterReadmeBlock runs README's local three-replica cluster block as
// it is, in bash, with its fixed places replaced so that it can run beside
// anything else: /tmp/sg by a temporary directory, 127.0.0.1:9090 (the
// runtime) by a free port, 127.0.0.1:5006$i (gRPC) and 127.0.0.1:808$i
// (admin) by free ports P1…P3 and Q1…Q3. It checks what the block prints
// (the session opened on gw-1, RunJob through gw-2 answered with gw-1 as
// the owner, the status probe on gw-3 naming gw-1), then calls RunJob on
// the session through each replica. At the end the script kills the
// background jobs it started (by their pids, `jobs -p`) and waits for
// them; the test waits for the script.
func TestClusterReadmeBlock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary, redis-server and three replicas")
	}
	for _, tool := range []string{"redis-server", "grpcurl", "curl", "bash"} {
		needTool(t, tool)
	}
	ctx := testContext(t, 3*time.Minute)
	dir := t.TempDir()
	rtAddr, err := clustertest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	grpcPrefix := freePrefix(t, "")
	adminPrefix := freePrefix(t, grpcPrefix)
	block := readmeClusterBlock(t)
	for _, r := range [][2]string{
		{"/tmp/sg", dir},
		{"127.0.0.1:9090", rtAddr},
		{"127.0.0.1:5006", "127.0.0.1:" + grpcPrefix},
		{"127.0.0.1:808", "127.0.0.1:" + adminPrefix},
	} {
		if !strings.Contains(block, r[0]) {
			t.Fatalf("the README block no longer contains %q: update this test", r[0])
		}
		block = strings.ReplaceAll(block, r[0], r[1])
	}
	// After the block: report the background jobs, wait until the test
	// closes stdin, then stop them and wait for them.
	script := block + "\necho \"@@ready $(jobs -p | tr '\\n' ' ')\"\nread -r _ || true\nkill $(jobs -p) 2>/dev/null\nwait\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = "../.."
	// Its own process group, so that a block that never got ready (its
	// jobs unknown) is stopped whole; and Wait returns even while a
	// leftover child holds the output pipe.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var jobs []int
	t.Cleanup(func() {
		stdin.Close()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-exited:
		case <-timer.C:
			// The script did not stop its jobs: kill them and it.
			for _, pid := range jobs {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Errorf("the script did not stop its jobs within 30 s:\n%s", out.String())
		}
		if t.Failed() {
			t.Logf("script output:\n%s", out.String())
		}
	})

	ready := regexp.MustCompile(`@@ready ([0-9 ]*)\n`)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var m []string
	for m == nil {
		select {
		case <-ctx.Done():
			t.Fatalf("the block did not finish: %v", ctx.Err())
		case err := <-exited:
			exited <- err
			t.Fatalf("the script exited early: %v", err)
		case <-tick.C:
		}
		m = ready.FindStringSubmatch(out.String())
	}
	for _, f := range strings.Fields(m[1]) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, pid)
	}
	if len(jobs) != 5 {
		t.Errorf("the block left %d background jobs, want 5 (redis-server, runtime, three replicas)", len(jobs))
	}
	text := out.String()
	sid := regexp.MustCompile(`session: (s1\.gw-1\.\S+)`).FindStringSubmatch(text)
	if sid == nil {
		t.Fatalf("the block printed no session opened on gw-1:\n%s", text)
	}
	for _, want := range []string{`"via": "gw-2"`, "x-sessiongate-owner: gw-1", "x-sessiongate-served-by: gw-2", `"instanceId":"gw-1"`, `"status":"SESSION_STATUS_LIVE"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the block's output lacks %q", want)
		}
	}

	// The session answers through each replica, with gw-1 as its owner.
	for i := 1; i <= 3; i++ {
		addr := "127.0.0.1:" + grpcPrefix + strconv.Itoa(i)
		gw := sessiongatev1.NewSessionGatewayClient(dial(t, addr))
		var hdr metadata.MD
		resp, err := echo(ctx, gw, sid[1], grpc.Header(&hdr))
		if err != nil {
			t.Fatalf("RunJob through gw-%d: %v", i, err)
		}
		if got := resp.GetResult().GetStructValue().GetFields()["hello"].GetStringValue(); got != "cluster" {
			t.Errorf("RunJob through gw-%d: %v", i, resp.GetResult())
		}
		if got := hdr.Get("x-sessiongate-owner"); len(got) != 1 || got[0] != "gw-1" {
			t.Errorf("owner through gw-%d = %v, want gw-1", i, got)
		}
		if got := hdr.Get("x-sessiongate-served-by"); len(got) != 1 || got[0] != fmt.Sprintf("gw-%d", i) {
			t.Errorf("served-by through gw-%d = %v", i, got)
		}
	}

	// Stop: the script kills its jobs and waits for them.
	stdin.Close()
	select {
	case err := <-exited:
		exited <- err
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("script: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the script did not stop its jobs within 30 s")
	}
	for _, pid := range jobs {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("job %d still runs after the script ended", pid)
		}
	}
}
