// Package clustertest runs a real sessiongate cluster on one machine for
// tests and benchmarks: a redis-server on a unix socket in a temporary
// directory (persistence off), the reference runtime (`gateway runtime`) and
// N gateway replicas (real binaries built with `go build`) on free loopback
// ports, each with a stable instance id gw-1 … gw-N and stable ports, so a
// replica can be killed (SIGKILL), terminated (SIGTERM) and started again
// where it was.
//
// Every process it starts has one goroutine that drains its log and waits
// for it; Kill, Term and Close wait for them. Close stops everything that
// still runs; it is idempotent.
package clustertest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoBinary: redis-server is not installed.
var ErrNoBinary = errors.New("clustertest: redis-server not found on PATH")

// Options configure a cluster.
type Options struct {
	Replicas int           // default 3
	LeaseTTL time.Duration // --lease-ttl, default 1s
	Bin      string        // gateway binary; "" = built into the temp dir (or $SESSIONGATE_GATEWAY_BIN)
	Args     []string      // extra gateway flags for every replica
}

// Secret is the cluster secret the replicas share.
const Secret = "clustertest-secret-0123456789"

// Cluster is a running cluster.
type Cluster struct {
	Dir        string
	Bin        string
	RedisSock  string
	RedisURL   string
	RuntimeURL string
	Replicas   []*Replica
	LeaseTTL   time.Duration

	key   string
	args  []string
	redis *proc
	rt    *proc
	mu    sync.Mutex
	procs []*proc
}

// Replica is one gateway replica.
type Replica struct {
	Instance string // gw-1 …
	Addr     string // gRPC host:port
	Admin    string // admin HTTP host:port
	p        *proc
}

// Running reports whether the replica's process is up.
func (r *Replica) Running() bool { return r.p != nil && !r.p.exited() }

// Log returns the replica's log so far (its latest process).
func (r *Replica) Log() string {
	if r.p == nil {
		return ""
	}
	return r.p.logText()
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  strings.Builder
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Start starts redis-server, the runtime and the replicas, and returns once
// every replica serves (or ctx ends).
func Start(ctx context.Context, o Options) (c *Cluster, err error) {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = time.Second
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNoBinary
	}
	dir, err := os.MkdirTemp("", "sgcl")
	if err != nil {
		return nil, err
	}
	c = &Cluster{Dir: dir, LeaseTTL: o.LeaseTTL, args: o.Args}
	started := c // the error returns below set c to nil
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	var k [32]byte
	_, _ = rand.Read(k[:])
	c.key = "k1:" + base64.StdEncoding.EncodeToString(k[:])
	c.Bin = o.Bin
	if c.Bin == "" {
		c.Bin = os.Getenv("SESSIONGATE_GATEWAY_BIN")
	}
	if c.Bin == "" {
		c.Bin = filepath.Join(dir, "gateway")
		build := exec.CommandContext(ctx, "go", "build", "-o", c.Bin, "github.com/sessiongate/sessiongate/cmd/gateway")
		if out, err := build.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("clustertest: build gateway: %v\n%s", err, out)
		}
	}
	c.RedisSock = filepath.Join(dir, "r.sock")
	c.RedisURL = "unix://" + c.RedisSock
	if err := c.StartRedis(ctx); err != nil {
		return nil, err
	}
	rtPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	c.rt, err = c.spawn(c.Bin, "runtime", "--listen", rtPort, "--log-format", "json")
	if err != nil {
		return nil, err
	}
	line, err := c.rt.waitFor(ctx, "reference runtime serving")
	if err != nil {
		return nil, err
	}
	c.RuntimeURL, _ = line["url"].(string)
	for i := range o.Replicas {
		addr, err1 := FreePort()
		admin, err2 := FreePort()
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		c.Replicas = append(c.Replicas, &Replica{Instance: fmt.Sprintf("gw-%d", i+1), Addr: addr, Admin: admin})
	}
	for i := range c.Replicas {
		if err := c.StartReplica(ctx, i); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// FreePort returns a loopback host:port that was free a moment ago, below
// the kernel's ephemeral range. A port from that range (what listening on
// port 0 gives) may be taken, between FreePort and the replica's listen, by
// any outgoing connection of any process on the machine as its local port:
// CI saw a replica fail with "address already in use" that way. Below the
// range only an explicit bind can take it.
func FreePort() (string, error) {
	low := ephemeralLow()
	var b [2]byte
	for range 200 {
		_, _ = rand.Read(b[:])
		port := minFreePort + int(uint16(b[0])<<8|uint16(b[1]))%(low-minFreePort)
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken: try another
		}
		addr := l.Addr().String()
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("clustertest: no free loopback port in [%d, %d) after 200 tries", minFreePort, low)
}

// minFreePort is the least port FreePort returns.
const minFreePort = 10000

// ephemeralLow is the first port of the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), 32768 when it cannot be read or
// leaves too little room below it.
func ephemeralLow() int {
	const fallback = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	var low, high int
	if _, err := fmt.Sscan(string(raw), &low, &high); err != nil || low < minFreePort+1000 {
		return fallback
	}
	return low
}

// ReplicaArgs are the flags of replica i (for a README-like command line).
func (c *Cluster) ReplicaArgs(i int) []string {
	r := c.Replicas[i]
	args := []string{
		"--listen", r.Addr, "--admin", r.Admin, "--instance-id", r.Instance, "--log-format", "json",
		"--runtime", "default=" + c.RuntimeURL, "--redis", c.RedisURL, "--directory-key", c.key,
		"--cluster-secret", Secret, "--lease-ttl", c.LeaseTTL.String(), "--shutdown-timeout", "15s",
	}
	return append(args, c.args...)
}

// StartReplica starts replica i (again) on its ports and waits until it
// serves.
func (c *Cluster) StartReplica(ctx context.Context, i int) error {
	r := c.Replicas[i]
	if r.Running() {
		return nil
	}
	p, err := c.spawn(c.Bin, c.ReplicaArgs(i)...)
	if err != nil {
		return err
	}
	r.p = p
	_, err = p.waitFor(ctx, "sessiongate serving")
	return err
}

// Kill sends SIGKILL to replica i and waits for it to exit.
func (c *Cluster) Kill(i int) {
	if p := c.Replicas[i].p; p != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Freeze sends SIGSTOP to replica i (a GC pause, a VM freeze: its sockets
// stay open and the kernel still accepts connections); Thaw sends SIGCONT.
// Close ends a frozen replica too.
func (c *Cluster) Freeze(i int) {
	if p := c.Replicas[i].p; p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	}
}

// Thaw resumes replica i after Freeze.
func (c *Cluster) Thaw(i int) {
	if p := c.Replicas[i].p; p != nil {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
	}
}

// Term sends SIGTERM to replica i and waits for it to exit (or ctx).
func (c *Cluster) Term(ctx context.Context, i int) error {
	p := c.Replicas[i].p
	if p == nil {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("clustertest: %s did not exit after SIGTERM: %w", c.Replicas[i].Instance, ctx.Err())
	}
}

// FreezeRuntime stops the reference runtime with SIGSTOP (a runtime slow
// to take resumes: the kernel still accepts connections, nothing is
// answered); ThawRuntime continues it. Close ends a frozen runtime too.
func (c *Cluster) FreezeRuntime() { c.signalRuntime(syscall.SIGSTOP) }

// ThawRuntime continues a frozen runtime (SIGCONT).
func (c *Cluster) ThawRuntime() { c.signalRuntime(syscall.SIGCONT) }

func (c *Cluster) signalRuntime(sig os.Signal) {
	if p := c.rt; p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// StopRedis kills redis-server (its data is lost: no persistence).
func (c *Cluster) StopRedis() {
	if p := c.redis; p != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		c.redis = nil
	}
}

// FreezeRedis stops redis-server with SIGSTOP (a stall: connections stay
// open, nothing is answered); ThawRedis continues it (SIGCONT).
func (c *Cluster) FreezeRedis() { c.signalRedis(syscall.SIGSTOP) }

// ThawRedis continues a frozen redis-server.
func (c *Cluster) ThawRedis() { c.signalRedis(syscall.SIGCONT) }

func (c *Cluster) signalRedis(sig os.Signal) {
	if p := c.redis; p != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// RedisCommand sends one command to redis-server (RESP over its socket)
// and returns the reply's first line (e.g. "+OK" for FLUSHALL), or the
// content of a bulk string reply (e.g. INFO's text).
func (c *Cluster) RedisCommand(ctx context.Context, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", c.RedisSock)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	br := bufio.NewReader(conn)
	l, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(l, "$") {
		return strings.TrimSpace(l), err
	}
	n, err := strconv.Atoi(strings.TrimSpace(l[1:]))
	if err != nil || n < 0 {
		return "", err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(br, body); err != nil {
		return "", err
	}
	return string(body[:n]), nil
}

// RedisInfoInt reads one integer field of INFO (e.g. total_commands_processed).
func (c *Cluster) RedisInfoInt(ctx context.Context, field string) (int64, error) {
	info, err := c.RedisCommand(ctx, "INFO", "all")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), field+":"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("clustertest: INFO has no %s", field)
}

// StartRedis starts redis-server on the cluster's socket and waits for it.
func (c *Cluster) StartRedis(ctx context.Context) error {
	if c.redis != nil {
		return nil
	}
	_ = os.Remove(c.RedisSock)
	p, err := c.spawn("redis-server", "--port", "0", "--unixsocket", c.RedisSock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", c.Dir)
	if err != nil {
		return err
	}
	c.redis = p
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if conn, err := net.Dial("unix", c.RedisSock); err == nil {
			_, _ = conn.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			l, err := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if err == nil && strings.HasPrefix(l, "+PONG") {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("clustertest: redis-server not ready: %w", ctx.Err())
		case <-p.done:
			return fmt.Errorf("clustertest: redis-server exited: %s", p.logText())
		case <-tick.C:
		}
	}
}

// Close kills every process still running and removes the directory.
func (c *Cluster) Close() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for _, p := range procs {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
		}
		<-p.done
	}
	if c.Dir != "" {
		_ = os.RemoveAll(c.Dir)
	}
}

func (c *Cluster) spawn(bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	out, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.Write(sc.Bytes())
			p.log.WriteByte('\n')
			p.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	return p, nil
}

// waitFor waits for a JSON log line whose msg is msg.
func (p *proc) waitFor(ctx context.Context, msg string) (map[string]any, error) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, l := range strings.Split(p.logText(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == msg {
				return rec, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("clustertest: no %q: %w\n%s", msg, ctx.Err(), p.logText())
		case <-p.done:
			return nil, fmt.Errorf("clustertest: exited before %q:\n%s", msg, p.logText())
		case <-tick.C:
		}
	}
}

// Redis is a redis-server started alone, for replicas that run in the
// caller's own process (benchmarks that profile them).
type Redis struct {
	URL string // unix:// URL of its socket
	c   *Cluster
}

// StartRedis starts a redis-server on a unix socket in a new temporary
// directory (persistence off) and waits until it answers PING. Close stops
// it and removes the directory.
func StartRedis(ctx context.Context) (*Redis, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, ErrNoBinary
	}
	dir, err := os.MkdirTemp("", "sgrd")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, RedisSock: filepath.Join(dir, "r.sock")}
	c.RedisURL = "unix://" + c.RedisSock
	if err := c.StartRedis(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return &Redis{URL: c.RedisURL, c: c}, nil
}

// Close kills redis-server, waits for it and removes its directory.
func (r *Redis) Close() { r.c.Close() }

// Key is the directory key (--directory-key) the replicas share.
func (c *Cluster) Key() string { return c.key }

// Pid is the process id of replica i's current process, 0 when it was never
// started; the process may have exited (see Running). For faults this
// package has no method for (SIGSTOP, SIGCONT) sent by the caller's own
// code to a process this package started.
func (c *Cluster) Pid(i int) int {
	if p := c.Replicas[i].p; p != nil {
		return p.cmd.Process.Pid
	}
	return 0
}

// RedisPid is redis-server's process id, 0 when it is not running.
func (c *Cluster) RedisPid() int {
	if p := c.redis; p != nil && !p.exited() {
		return p.cmd.Process.Pid
	}
	return 0
}
