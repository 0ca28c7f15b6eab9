package main

import (
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

// nginxBinary finds Debian's nginx (in /usr/sbin, often not on PATH).
func nginxBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nginx not found (CI=true: apt-get install -y nginx)")
	}
	t.Skip("nginx not found")
	return ""
}

// readmeNginx is the nginx configuration of docs/operations.md
// ("Balancers"), which the README's Cluster section links to.
func readmeNginx(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- nginx:begin -->\n```nginx\n")
	block, _, ok2 := strings.Cut(rest, "```\n<!-- nginx:end -->")
	if !ok || !ok2 {
		t.Fatal("docs/operations.md has no nginx block")
	}
	return block
}

// TestClusterBehindNginx runs docs/operations.md's nginx configuration (consistent hash
// on x-sessiongate-session, grpc_pass) in front of three replicas: every
// call with the session header lands on one replica, and the session works
// through nginx, unary and WatchJob.
func TestClusterBehindNginx(t *testing.T) {
	bin := nginxBinary(t)
	ctx := testContext(t, 90*time.Second)
	c, _ := startCluster(t, ctx)
	conf := readmeNginx(t)
	for i, r := range c.Replicas {
		conf = strings.Replace(conf, fmt.Sprintf("127.0.0.1:5006%d", i+1), r.Addr, 1)
	}
	front, err := clustertest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	conf = strings.Replace(conf, "127.0.0.1:50050", front, 1)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sessiongate.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", "sessiongate.conf", "-g", "daemon off;")
	outFile, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile // a file, not a pipe: a worker must not hold Wait
	// Its own process group, so that the master and its worker are
	// stopped together, by the group id of the process we started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	out := func() string { b, _ := os.ReadFile(filepath.Join(dir, "out.log")); return string(b) }
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx: %s\n%s", out(), log)
		}
	})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err := net.Dial("tcp", front); err == nil {
			conn.Close()
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s\n%s", out(), log)
		case <-ctx.Done():
			t.Fatal("nginx did not listen")
		case <-tick.C:
		}
	}

	gw := sessiongatev1.NewSessionGatewayClient(dial(t, front))
	sid := openOn(t, ctx, gw)
	sctx := metadata.AppendToOutgoingContext(ctx, "x-sessiongate-session", sid)
	servedBy := map[string]int{}
	for range 12 {
		var hdr metadata.MD
		if _, err := echo(sctx, gw, sid, grpc.Header(&hdr)); err != nil {
			t.Fatalf("RunJob through nginx: %v", err)
		}
		servedBy[strings.Join(hdr.Get("x-sessiongate-served-by"), ",")]++
	}
	if len(servedBy) != 1 {
		t.Fatalf("calls with one session header reached several replicas: %v", servedBy)
	}
	sub, err := gw.SubmitJob(sctx, &sessiongatev1.SubmitJobRequest{SessionId: sid, Agent: "stream", Input: streamInput(4, 10)})
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
			break
		}
		if err != nil {
			t.Fatalf("WatchJob through nginx: %v", err)
		}
		if i, ok := eventIndex(item); ok {
			got = append(got, i)
		}
	}
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Fatalf("WatchJob through nginx saw %v", got)
	}
	t.Logf("served by %v", servedBy)
}
