package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// gatewayRun is the command run in-process on loopback ports, as SIGTERM
// (ctx's cancellation) would stop it.
type gatewayRun struct {
	addr   string
	stop   context.CancelFunc
	exited chan error
	mu     sync.Mutex
	logs   []map[string]any
}

func startGateway(t *testing.T, args ...string) *gatewayRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	g := &gatewayRun{stop: cancel, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			g.mu.Lock()
			g.logs = append(g.logs, rec)
			g.mu.Unlock()
			if rec["msg"] == "sessiongate serving" {
				addr <- rec["grpc"].(string)
			}
		}
	}()
	args = append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json", "--instance-id", "gw-test"}, args...)
	go func() {
		err := run(ctx, args, func(string) string { return "" }, io.Discard, pw)
		pw.Close()
		<-readerDone
		g.exited <- err
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-g.exited:
		case <-time.After(30 * time.Second):
			t.Error("gateway did not exit")
		}
	})
	select {
	case g.addr = <-addr:
	case err := <-g.exited:
		t.Fatalf("gateway exited early: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("gateway did not start")
	}
	return g
}

// shutdown cancels the run's context and returns how long the command took
// to return, and its log records from the shutdown on.
func (g *gatewayRun) shutdown(t *testing.T) (time.Duration, []map[string]any) {
	t.Helper()
	start := time.Now()
	g.stop()
	select {
	case err := <-g.exited:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("gateway did not exit")
	}
	took := time.Since(start)
	g.exited <- nil // for Cleanup
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, rec := range g.logs {
		if strings.HasPrefix(rec["msg"].(string), "shutting down") {
			return took, g.logs[i:]
		}
	}
	t.Fatal("no shutdown log")
	return 0, nil
}

// stacksContain reports whether any goroutine's stack mentions fn.
func stacksContain(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// TestShutdownWithHealthWatch: a client holding a health Watch does not hold
// the shutdown until --shutdown-timeout: the command exits in well under a
// second and logs a clean shutdown (no "err":null).
func TestShutdownWithHealthWatch(t *testing.T) {
	g := startGateway(t, "--shutdown-timeout", "10s")
	conn := dial(t, g.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := w.Recv(); err != nil || m.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Watch: %v, %v", m, err)
	}
	took, logs := g.shutdown(t)
	t.Logf("exited %v after SIGTERM", took)
	if took > 3*time.Second {
		t.Errorf("exit took %v with a health Watch open (--shutdown-timeout 10s)", took)
	}
	last := logs[len(logs)-1]
	if last["msg"] != "shutdown complete" || last["level"] != "INFO" {
		t.Errorf("last log %v, want INFO shutdown complete", last)
	}
	if _, ok := last["err"]; ok {
		t.Errorf("clean shutdown logged an err attribute: %v", last)
	}
}

// TestShutdownHardStopIsLogged: a call that outlives --shutdown-timeout (a
// WatchJob whose client stopped reading, far from its gap limit) makes the
// command stop hard at the deadline and say so at WARN.
func TestShutdownHardStopIsLogged(t *testing.T) {
	g := startGateway(t, "--shutdown-timeout", "500ms")
	conn := dial(t, g.addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	client := sessiongatev1.NewSessionGatewayClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open, err := client.OpenSession(ctx, &sessiongatev1.OpenSessionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	in, _ := structpb.NewValue(map[string]any{"count": 6000.0})
	sub, err := client.SubmitJob(ctx, &sessiongatev1.SubmitJobRequest{SessionId: open.GetSessionId(), Agent: "stream", Input: in})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := client.WatchJob(ctx, &sessiongatev1.WatchJobRequest{SessionId: open.GetSessionId(), JobId: sub.GetJobId()})
	if err != nil {
		t.Fatal(err)
	}
	// Read one item, so the stream is surely established, then stop reading
	// until the gateway's Send blocks in HTTP/2 flow control (the gateway
	// runs in this process, so its goroutines are visible).
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !stacksContain("(*writeQuota).get") {
		select {
		case <-ctx.Done():
			t.Fatal("the gateway's Send never blocked")
		case <-tick.C:
		}
	}
	took, logs := g.shutdown(t)
	t.Logf("exited %v after SIGTERM", took)
	var hard map[string]any
	for _, rec := range logs {
		if strings.Contains(rec["msg"].(string), "hard stop") {
			hard = rec
		}
		if rec["msg"] == "shutdown complete" {
			t.Errorf("a hard stop logged as %v", rec)
		}
	}
	if hard == nil || hard["level"] != "WARN" || !strings.Contains(hard["err"].(string), "stopped hard") {
		t.Fatalf("no WARN hard stop log in %v", logs)
	}
	if took < 400*time.Millisecond {
		t.Errorf("exited after %v, before the 500ms deadline: nothing was cut off", took)
	}
}
