// Package gatewaytest runs a real sessiongate gateway binary in a child
// process, on free loopback ports with its embedded reference runtime (demo
// agents echo, sleep, stream, fail), for tests and tools that need a real
// gateway (the client's tests, cmd/deadline-probe).
//
// Start builds the binary with `go build` unless $SESSIONGATE_GATEWAY_BIN
// names one. One goroutine drains the gateway's log until it exits; Stop
// waits for it.
package gatewaytest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a running gateway.
type Process struct {
	Addr  string // gRPC address
	Admin string // admin HTTP address

	cmd  *exec.Cmd
	tmp  string
	done chan struct{} // closed when the log reader ends
	mu   sync.Mutex
	log  strings.Builder
}

// Start starts a gateway and returns once it serves, or within ctx.
func Start(ctx context.Context) (*Process, error) {
	tmp, err := os.MkdirTemp("", "sessiongate-go-")
	if err != nil {
		return nil, err
	}
	p := &Process{tmp: tmp, done: make(chan struct{})}
	bin := os.Getenv("SESSIONGATE_GATEWAY_BIN")
	if bin == "" {
		bin = filepath.Join(tmp, "gateway")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/sessiongate/sessiongate/cmd/gateway")
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(tmp)
			return nil, fmt.Errorf("build gateway: %v\n%s", err, out)
		}
	}
	p.cmd = exec.Command(bin, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-format", "json")
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	ready := make(chan [2]string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			p.mu.Lock()
			p.log.Write(line)
			p.log.WriteByte('\n')
			p.mu.Unlock()
			var rec struct{ Msg, GRPC, Admin string }
			if json.Unmarshal(line, &rec) == nil && rec.Msg == "sessiongate serving" {
				select {
				case ready <- [2]string{rec.GRPC, rec.Admin}:
				default:
				}
			}
		}
	}()
	select {
	case a := <-ready:
		p.Addr, p.Admin = a[0], a[1]
		return p, nil
	case <-p.done:
		p.Stop()
		return nil, fmt.Errorf("gateway exited early:\n%s", p.Log())
	case <-ctx.Done():
		p.Stop()
		return nil, fmt.Errorf("gateway did not start: %w\n%s", ctx.Err(), p.Log())
	}
}

// Log returns what the gateway logged so far.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Stop stops the gateway with SIGTERM (SIGKILL after 30 s) and waits for it
// and its log reader.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	kill := time.AfterFunc(30*time.Second, func() { _ = p.cmd.Process.Kill() })
	<-p.done
	err := p.cmd.Wait()
	kill.Stop()
	os.RemoveAll(p.tmp)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return fmt.Errorf("gateway: %v", err)
	}
	return err
}

// RuntimeJobs returns the embedded reference runtime's own counts, from
// the gateway's /metrics: job.submit envelopes received and distinct jobs
// created (an idempotent repeat is a submit, not a job).
func (p *Process) RuntimeJobs(ctx context.Context) (submitted, accepted int64, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.Admin+"/metrics", nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		var dst *int64
		switch name {
		case "sessiongate_embedded_runtime_jobs_submitted_total":
			dst = &submitted
		case "sessiongate_embedded_runtime_jobs_accepted_total":
			dst = &accepted
		}
		if dst == nil || !ok {
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/metrics: %s %q: %v", name, value, err)
		}
		*dst, found = int64(f), found+1
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, errors.New("/metrics has no embedded runtime job counts (a gateway with --runtime?)")
	}
	return submitted, accepted, nil
}
