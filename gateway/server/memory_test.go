package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/gateway/arcpruntime"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// runtimeChildEnv makes the test binary serve the reference runtime alone,
// so that memory figures count the gateway only.
const runtimeChildEnv = "SESSIONGATE_TEST_RUNTIME_CHILD"

func init() {
	if os.Getenv(runtimeChildEnv) != "1" {
		return
	}
	srv, err := arcpruntime.Listen("127.0.0.1:0", arcpruntime.Options{MaxConcurrentJobs: 1000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	// Serve until the parent closes stdin.
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	_ = srv.Close()
	os.Exit(0)
}

// childRuntime starts the reference runtime in a child process.
func childRuntime(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), runtimeChildEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("runtime child: %v", err)
	}
	return strings.TrimSpace(line)
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestRetainedMemoryBounded is issue 9's scenario: 30 sessions × 2 RunJobs
// of 7 MiB, then nothing in progress. Before, finished results were kept per
// session for 5 minutes: 622 MB of heap. Now a delivered RunJob result is
// released at once, and what job logs hold is bounded by the retained-bytes
// budgets. The runtime runs in a child process, so the figure is the
// gateway's.
func TestRetainedMemoryBounded(t *testing.T) {
	sessions, budgetMiB := 30, 100
	if raceEnabled {
		sessions, budgetMiB = 3, 14 // the same properties, a tenth of the bytes
	}
	if testing.Short() {
		t.Skip("moves ~1 GB through the gateway")
	}
	url := childRuntime(t)
	h := newHarness(t, harnessOpts{
		config: func(c *Config) {
			c.Runtimes = []Runtime{{Name: "default", URL: url}}
			c.MaxRetainedBytesPerCaller = int64(budgetMiB) << 20
		},
		dial: []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(32<<20), grpc.MaxCallSendMsgSize(32<<20))},
	})
	ctx := ctxT(t, 300*time.Second)
	big := structpb.NewStringValue(strings.Repeat("x", 7<<20))
	before := heapAfterGC()
	var ids []string
	for range sessions {
		ids = append(ids, h.open(t, ctx))
	}
	for _, id := range ids {
		for range 2 {
			resp, err := h.client.RunJob(ctx, &sessiongatev1.RunJobRequest{SessionId: id, Agent: "echo", Input: big})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetResult().GetStringValue()) != 7<<20 {
				t.Fatalf("result of %d bytes", len(resp.GetResult().GetStringValue()))
			}
		}
	}
	after := heapAfterGC()
	grew := int64(after) - int64(before)
	t.Logf("%d sessions × 2 RunJobs of 7 MiB, nothing in progress: heap %.1f MiB → %.1f MiB (%+.1f MiB; 30 sessions were 622 MB)",
		sessions, float64(before)/(1<<20), float64(after)/(1<<20), float64(grew)/(1<<20))
	if grew > 64<<20 {
		t.Fatalf("the gateway retains %.1f MiB after every result was delivered", float64(grew)/(1<<20))
	}
	// Results nobody collects (SubmitJob, never watched) stay in the job
	// logs until their retention ends: the caller's retained-bytes budget
	// bounds them.
	for _, id := range ids {
		for range 2 {
			if _, err := h.client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: id, Agent: "echo", Input: big}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every job has ended once the runtime acked them all; wait for the
	// last session's jobs to be done upstream.
	waitFor(t, 60*time.Second, "the submitted jobs to end", func() bool {
		for _, id := range ids {
			if s, ok := h.gw.table.Get(id, "anonymous"); ok && s.Conn.ActiveJobs() > 0 {
				return false
			}
		}
		return true
	})
	held := heapAfterGC()
	t.Logf("then %d SubmitJobs of 7 MiB whose results nobody collects: heap %.1f MiB (per-caller budget %d MiB)",
		2*sessions, float64(held)/(1<<20), budgetMiB)
	if limit := uint64(budgetMiB+32) << 20; held > limit {
		t.Fatalf("uncollected results hold %.1f MiB, over the %d MiB budget plus slack", float64(held)/(1<<20), budgetMiB)
	}
	for _, id := range ids {
		if _, err := h.client.CloseSession(context.Background(), &sessiongatev1.CloseSessionRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
	}
}
