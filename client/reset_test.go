package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sessiongate/sessiongate/client"
	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// resetNginxConf is the nginx configuration of the reset tests, shared
// with the Python and TypeScript clients' (LISTEN_ADDR, UPSTREAM_ADDR).
const resetNginxConf = "../clients/testdata/reset-nginx.conf"

// startNginx runs a real nginx (Debian's) in front of upstream, in a temp
// dir, until the test ends; it returns nginx's address. Without nginx the
// test skips, or fails under CI=true.
func startNginx(t *testing.T, upstream string) string {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr == nil {
			bin, err = "/usr/sbin/nginx", nil
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("nginx is not installed (apt-get install -y nginx)")
		}
		t.Skip("nginx is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(resetNginxConf)
	if err != nil {
		t.Fatal(err)
	}
	conf = bytes.ReplaceAll(bytes.ReplaceAll(conf, []byte("LISTEN_ADDR"), []byte(addr)), []byte("UPSTREAM_ADDR"), []byte(upstream))
	if err := os.WriteFile(filepath.Join(dir, "sessiongate.conf"), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", "sessiongate.conf", "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return addr
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx did not listen")
		}
		time.Sleep(20 * time.Millisecond) // polling a port, not synchronising goroutines
	}
}

// TestWatchResumesAfterStreamReset: the real gateway behind a real nginx,
// whose connection to the gateway is reset mid-stream (as a SIGKILLed
// gateway's kernel does): nginx resets the client's stream with
// RST_STREAM INTERNAL_ERROR, grpc-go reports INTERNAL "stream terminated
// by RST_STREAM with error code: INTERNAL_ERROR", and the watch resumes
// from its cursor: every event once, in order, then the result. Without
// resume the cut is that INTERNAL.
func TestWatchResumesAfterStreamReset(t *testing.T) {
	for _, resume := range []bool{true, false} {
		t.Run(map[bool]string{true: "resume", false: "without"}[resume], func(t *testing.T) {
			p := newCutProxy(t, gw.Addr)
			items, failure := watchWithCuts(t, startNginx(t, p.addr()), p, resume, 4)
			if !resume {
				var e *client.Error
				if !errors.As(failure, &e) || e.Code != codes.Internal || !client.StreamReset(failure) || len(items) != 4 {
					t.Fatalf("without resume: %d items, %v (want the reset after 4)", len(items), failure)
				}
				return
			}
			if failure != nil {
				t.Fatal(failure)
			}
			if p.connections() < 2 {
				t.Errorf("%d connections from nginx: the watch was never resumed", p.connections())
			}
			checkStreamOf12(t, items)
		})
	}
}

// resetServer is a SessionGateway whose first RunJob sends its response
// header and then waits (for the test to reset its connection); later
// attempts answer, or, with internal set, every attempt fails with the
// gateway's own INTERNAL (ErrorInfo) in the reset's words.
type resetServer struct {
	gatewayv1.UnimplementedSessionGatewayServer
	internal bool

	mu   sync.Mutex
	keys []string
}

func (r *resetServer) RunJob(ctx context.Context, req *gatewayv1.RunJobRequest) (*gatewayv1.RunJobResponse, error) {
	r.mu.Lock()
	r.keys = append(r.keys, req.GetIdempotencyKey())
	first := len(r.keys) == 1
	r.mu.Unlock()
	if r.internal {
		st, _ := status.New(codes.Internal, "stream terminated by RST_STREAM with error code: INTERNAL_ERROR").WithDetails(
			&errdetails.ErrorInfo{Reason: "INTERNAL", Domain: "sessiongate"})
		return nil, st.Err()
	}
	if first {
		if err := grpc.SendHeader(ctx, metadata.Pairs("x-test", "early")); err != nil {
			return nil, err
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &gatewayv1.RunJobResponse{JobId: "j", Result: structpb.NewStringValue("ok")}, nil
}

// headerSeen is a stats handler that closes seen at the first response
// header the client receives.
type headerSeen struct {
	once sync.Once
	seen chan struct{}
}

func (h *headerSeen) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (h *headerSeen) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.InHeader); ok {
		h.once.Do(func() { close(h.seen) })
	}
}
func (h *headerSeen) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (h *headerSeen) HandleConn(context.Context, stats.ConnStats)                       {}

func (r *resetServer) attempts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.keys)
}

// TestRunResentAfterStreamReset: a Run whose stream nginx resets after the
// response header (its upstream connection reset, as when the replica is
// SIGKILLed) is sent again with the same idempotency key and answers; the
// gateway's own INTERNAL (with ErrorInfo, even in the reset's words) is
// not sent again.
func TestRunResentAfterStreamReset(t *testing.T) {
	for _, internal := range []bool{false, true} {
		t.Run(map[bool]string{false: "reset", true: "gateway-internal"}[internal], func(t *testing.T) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			rs := &resetServer{internal: internal}
			srv := grpc.NewServer()
			gatewayv1.RegisterSessionGatewayServer(srv, rs)
			served := make(chan struct{})
			go func() { defer close(served); _ = srv.Serve(lis) }()
			t.Cleanup(func() { srv.Stop(); <-served })
			p := newCutProxy(t, lis.Addr().String())
			header := &headerSeen{seen: make(chan struct{})}
			c, err := client.New(startNginx(t, p.addr()), client.WithDialOptions(grpc.WithStatsHandler(header)))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := testContext(t, 30*time.Second)
			cut := make(chan struct{})
			go func() {
				defer close(cut)
				// Reset once the client has the response header: nginx
				// then resets the stream (before it, nginx answers 502,
				// an UNAVAILABLE the retry policy covers).
				select {
				case <-header.seen:
					p.cut()
				case <-ctx.Done():
				}
			}()
			res, err := c.Session("s1.test").Run(ctx, "echo", 1)
			if internal {
				var e *client.Error
				if !errors.As(err, &e) || e.Code != codes.Internal || e.Reason != "INTERNAL" {
					t.Fatalf("Run: %v, want the gateway's INTERNAL", err)
				}
				if n := len(rs.attempts()); n != 1 {
					t.Fatalf("%d attempts, want 1: the gateway's INTERNAL is not a reset", n)
				}
				return
			}
			<-cut
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Result != "ok" {
				t.Errorf("result %v", res.Result)
			}
			keys := rs.attempts()
			if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
				t.Errorf("attempts carried keys %q, want two of one key", keys)
			}
		})
	}
}
