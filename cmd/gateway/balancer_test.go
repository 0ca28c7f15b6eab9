package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// balancerBinary finds Debian's nginx or haproxy (in /usr/sbin, often not
// on PATH). Without it the test is skipped, unless CI=true: then it fails.
func balancerBinary(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := "/usr/sbin/" + name; fileExists(p) {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s not found (CI=true: apt-get install -y %s)", name, name)
	}
	t.Skipf("%s not found", name)
	return ""
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// docBlock is the code block of docs/balancers.md between
// <!-- name:begin --> and <!-- name:end -->, verbatim.
func docBlock(t *testing.T, name, lang string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/balancers.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- "+name+":begin -->\n```"+lang+"\n")
	block, _, ok2 := strings.Cut(rest, "```\n<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("docs/balancers.md has no %s block", name)
	}
	return block
}

// startBalancer runs docs/balancers.md's recipe for kind (nginx or haproxy)
// in front of c's replicas, with their ports (gRPC 5006x, admin 808x) and a
// free front port substituted, and returns the front address. The
// balancer runs in its own process group, killed at cleanup.
func startBalancer(t *testing.T, ctx context.Context, kind string, c *clustertest.Cluster) string {
	t.Helper()
	bin := balancerBinary(t, kind)
	dir := t.TempDir()
	var conf, confName string
	switch kind {
	case "nginx":
		conf, confName = docBlock(t, "nginx", "nginx"), "sessiongate.conf"
		if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
	case "haproxy":
		conf, confName = docBlock(t, "haproxy", "haproxy"), "sessiongate.cfg"
		// HAProxy reads its error answers as HTTP/1 messages: CRLF.
		ef := strings.ReplaceAll(docBlock(t, "haproxy-errorfile", "http"), "\n", "\r\n")
		if err := os.WriteFile(filepath.Join(dir, "grpc-unavailable.http"), []byte(ef), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range c.Replicas {
		old := fmt.Sprintf("127.0.0.1:5006%d", i+1)
		if !strings.Contains(conf, old) {
			t.Fatalf("%s recipe names no %s", kind, old)
		}
		conf = strings.ReplaceAll(conf, old, r.Addr)
		_, adminPort, _ := net.SplitHostPort(r.Admin)
		conf = strings.ReplaceAll(conf, fmt.Sprintf("port 808%d", i+1), "port "+adminPort)
	}
	front, err := clustertest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf = strings.Replace(conf, "127.0.0.1:50050", front, 1)
	if err := os.WriteFile(filepath.Join(dir, confName), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var cmd *exec.Cmd
	if kind == "nginx" {
		cmd = exec.Command(bin, "-p", dir, "-c", confName, "-g", "daemon off;")
	} else {
		cmd = exec.Command(bin, "-f", filepath.Join(dir, confName), "-db")
	}
	outFile, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outFile.Close() })
	cmd.Stdout, cmd.Stderr = outFile, outFile // a file, not a pipe: a worker must not hold Wait
	// Its own process group, so that the master and its workers are
	// stopped together, by the group id of the process we started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	out := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "out.log"))
		e, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return string(b) + string(e)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("%s: %s", kind, tail(out(), 4000))
		}
	})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err := net.Dial("tcp", front); err == nil {
			conn.Close()
			return front
		}
		select {
		case <-exited:
			t.Fatalf("%s exited: %s", kind, out())
		case <-ctx.Done():
			t.Fatalf("%s did not listen", kind)
		case <-tick.C:
		}
	}
}

// TestClusterBehindBalancers runs each recipe of docs/balancers.md
// (nginx, HAProxy: consistent hash on x-sessiongate-session) in front of
// three replicas: every call with the session header lands on one replica,
// and the session works through the balancer, unary and WatchJob — a watch
// quiet for longer than the recipes' unary timeout (1.5 s) too.
func TestClusterBehindBalancers(t *testing.T) {
	for _, kind := range []string{"nginx", "haproxy"} {
		t.Run(kind, func(t *testing.T) { behindBalancer(t, kind) })
	}
}

func behindBalancer(t *testing.T, kind string) {
	balancerBinary(t, kind)
	ctx := testContext(t, 90*time.Second)
	c, _ := startCluster(t, ctx)
	front := startBalancer(t, ctx, kind, c)

	gw := sessiongatev1.NewSessionGatewayClient(dial(t, front))
	sid := openOn(t, ctx, gw)
	sctx := metadata.AppendToOutgoingContext(ctx, "x-sessiongate-session", sid)
	servedBy := map[string]int{}
	for range 12 {
		var hdr metadata.MD
		if _, err := echo(sctx, gw, sid, grpc.Header(&hdr)); err != nil {
			t.Fatalf("RunJob through %s: %v", kind, err)
		}
		servedBy[strings.Join(hdr.Get("x-sessiongate-served-by"), ",")]++
	}
	if len(servedBy) != 1 {
		t.Fatalf("calls with one session header reached several replicas through %s: %v", kind, servedBy)
	}
	watch := func(count, intervalMS int) []int {
		sub, err := gw.SubmitJob(sctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: streamInput(count, intervalMS)})
		if err != nil {
			t.Fatal(err)
		}
		stream, err := gw.WatchJob(sctx, &sessiongatev1.WatchJobRequest{SessionId: sid, JobId: sub.GetJobId()})
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for {
			item, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return got
			}
			if err != nil {
				t.Fatalf("WatchJob through %s: %v", kind, err)
			}
			if i, ok := eventIndex(item); ok {
				got = append(got, i)
			}
		}
	}
	if got := watch(4, 10); fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("WatchJob through %s saw %v", kind, got)
	}
	if got := watch(2, 2000); fmt.Sprint(got) != "[0 1]" {
		t.Fatalf("quiet WatchJob through %s saw %v", kind, got)
	}
	t.Logf("%s: served by %v", kind, servedBy)
}
