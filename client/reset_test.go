package client_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/client"
)

const resetNginxConf = `worker_processes 1;
pid nginx.pid;
error_log error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path tmp;
    proxy_temp_path tmp;
    fastcgi_temp_path tmp;
    uwsgi_temp_path tmp;
    scgi_temp_path tmp;
    server {
        listen %s http2;
        location / {
            grpc_pass grpc://%s;
            grpc_read_timeout 1h;
        }
    }
}
`

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
	if err := os.WriteFile(filepath.Join(dir, "sessiongate.conf"), fmt.Appendf(nil, resetNginxConf, addr, upstream), 0o644); err != nil {
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
			c, err := client.New(startNginx(t, p.addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := testContext(t, 60*time.Second)
			s, err := c.OpenSession(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			job, err := s.Submit(ctx, "stream", map[string]any{"count": 12, "interval_ms": 60})
			if err != nil {
				t.Fatal(err)
			}
			var opts []client.WatchOption
			if !resume {
				opts = append(opts, client.WithoutResume())
			}
			var items []*client.WatchItem
			var failure error
			for it, err := range s.Watch(ctx, job.ID, opts...) {
				if err != nil {
					failure = err
					break
				}
				items = append(items, it)
				if len(items) == 4 {
					p.cut()
				}
			}
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
			if len(items) != 13 {
				t.Fatalf("%d items, want 12 events and the result", len(items))
			}
			for i, it := range items[:12] {
				if it.Event == nil || it.Event.Body.(map[string]any)["i"] != float64(i) {
					t.Errorf("item %d: %+v", i, it)
				}
				if i > 0 && it.EventSeq <= items[i-1].EventSeq {
					t.Errorf("event_seq not increasing at %d", i)
				}
			}
			if r := items[12].Result; r == nil || r.Result.(map[string]any)["count"] != 12.0 {
				t.Errorf("last item %+v", items[12])
			}
		})
	}
}
