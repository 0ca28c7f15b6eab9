package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sessiongate/sessiongate/client"
	"github.com/sessiongate/sessiongate/gateway/cluster/clustertest"
	"github.com/sessiongate/sessiongate/timeoutprofile"
)

// restartTimeout bounds a replica's restart (a build is not part of it).
const restartTimeout = time.Minute

// rig is what a run starts: the cluster (redis-server, the reference
// runtime, three replicas: clustertest), nginx in front of it, and the
// client connections of the load.
type rig struct {
	c     *clustertest.Cluster
	nginx *nginxProc
	front string // nginx's listen address

	viaNginx  *grpc.ClientConn // to nginx
	direct    *client.Client   // the project's Go client over the three replicas, its defaults
	health    []*grpc.ClientConn
	attempts  *attemptCounter
	frozen    map[int]bool // pids this run stopped (SIGSTOP) and has not continued
	redisStop bool
}

// startRig starts everything and waits until each part is ready: every
// replica SERVING on grpc.health.v1, nginx accepting connections.
func startRig(ctx context.Context, o Options) (_ *rig, err error) {
	r := &rig{attempts: &attemptCounter{}, frozen: map[int]bool{}}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	conf, err := nginxConf(o.NginxConf)
	if err != nil {
		return nil, err
	}
	nginx, err := nginxBinary(o.Nginx)
	if err != nil {
		return nil, err
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (apt-get install -y redis-server): %w", err)
	}
	o.progress("starting redis-server, the reference runtime and three replicas (lease TTL %v)", o.TTL)
	r.c, err = clustertest.Start(ctx, clustertest.Options{Replicas: 3, LeaseTTL: o.TTL, Bin: o.GatewayBin,
		Args: []string{"--peer-first-byte", peerFirstByte(o.TTL).String()}})
	if err != nil {
		return nil, err
	}
	for _, rp := range r.c.Replicas {
		cc, err := grpc.NewClient(rp.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()), fastReconnect())
		if err != nil {
			return nil, err
		}
		r.health = append(r.health, cc)
	}
	for i := range r.c.Replicas {
		if err := r.waitServing(ctx, i); err != nil {
			return nil, err
		}
	}
	front, err := clustertest.FreePort()
	if err != nil {
		return nil, err
	}
	for i, rp := range r.c.Replicas {
		from := fmt.Sprintf("127.0.0.1:5006%d", i+1)
		if !strings.Contains(conf, from) {
			return nil, fmt.Errorf("nginx recipe names no %s", from)
		}
		conf = strings.ReplaceAll(conf, from, rp.Addr)
	}
	if !strings.Contains(conf, "127.0.0.1:50050") {
		return nil, errors.New("nginx recipe listens on no 127.0.0.1:50050")
	}
	conf = strings.ReplaceAll(conf, "127.0.0.1:50050", front)
	r.front = front
	r.nginx, err = startNginx(ctx, nginx, r.c.Dir, conf)
	if err != nil {
		return nil, err
	}
	sc, err := timeoutprofile.RetryServiceConfig(timeoutprofile.RetryPolicy{})
	if err != nil {
		return nil, err
	}
	r.viaNginx, err = grpc.NewClient(front, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(sc), fastReconnect(), grpc.WithStatsHandler(r.attempts))
	if err != nil {
		return nil, err
	}
	var addrs []string
	for _, rp := range r.c.Replicas {
		addrs = append(addrs, rp.Addr)
	}
	// The direct route is a caller using the project's Go client with the
	// cluster's addresses and its defaults (retry policy, round robin, the
	// silence bound, reconnect backoff); the stats handler only counts.
	r.direct, err = client.New("", client.WithReplicas(addrs...), client.WithDialOptions(grpc.WithStatsHandler(r.attempts)))
	if err != nil {
		return nil, err
	}
	return r, nil
}

// peerFirstByte is the replicas' --peer-first-byte: the default (1 s) up to
// a quarter of the lease's TTL, so that with the short mode's 2 s lease a
// forward to a frozen owner is given up in 500 ms (the full mode runs the
// default). A call whose forward was given up then waits for the frozen
// owner's lease to end once less than the bound is left of it
// (cluster.Await), rather than forward into the silence again.
func peerFirstByte(ttl time.Duration) time.Duration { return min(time.Second, ttl/4) }

// fastReconnect reconnects at once to a restarted replica (grpc-go's
// default backoff grows to two minutes, which no client of a fleet keeps).
func fastReconnect() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: time.Second,
		Backoff: backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond}})
}

// waitServing waits until replica i answers SERVING on grpc.health.v1.
func (r *rig) waitServing(ctx context.Context, i int) error {
	hc := healthpb.NewHealthClient(r.health[i])
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := hc.Check(cctx, &healthpb.HealthCheckRequest{})
		cancel()
		if err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("status %v", resp.GetStatus())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not SERVING on grpc.health: %v (%w)", r.c.Replicas[i].Instance, last, ctx.Err())
		case <-tick.C:
		}
	}
}

// restart starts replica i again (if it is down) and waits until it is
// SERVING, for at most restartTimeout.
func (r *rig) restart(ctx context.Context, i int) error {
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	if err := r.c.StartReplica(ctx, i); err != nil {
		return err
	}
	return r.waitServing(ctx, i)
}

// stop sends SIGSTOP to pid (a replica or redis-server this run started);
// cont sends SIGCONT. close continues whatever is still stopped.
func (r *rig) stop(pid int) error {
	if pid == 0 {
		return errors.New("process not running")
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return err
	}
	r.frozen[pid] = true
	return nil
}

func (r *rig) cont(pid int) error {
	delete(r.frozen, pid)
	return syscall.Kill(pid, syscall.SIGCONT)
}

// dumpLogs writes the tail of each replica's log and nginx's to the
// progress output, for a run that failed.
func (r *rig) dumpLogs(o Options) {
	tail := func(s string) string {
		const n = 3000
		if len(s) > n {
			return "…" + s[len(s)-n:]
		}
		return s
	}
	for _, rp := range r.c.Replicas {
		o.progress("log of %s (tail):\n%s", rp.Instance, tail(rp.Log()))
		if o.LogDir != "" {
			name := filepath.Join(o.LogDir, rp.Instance+".log")
			if err := os.WriteFile(name, []byte(rp.Log()), 0o644); err != nil {
				o.progress("log of %s not kept: %v", rp.Instance, err)
			}
		}
	}
	if r.nginx != nil {
		o.progress("nginx log (tail):\n%s", tail(r.nginx.logs()))
	}
}

// close stops everything this run started, by pid (clustertest's Close
// kills its processes; nginx's process group is killed), even after a
// failure half-way.
func (r *rig) close() {
	for pid := range r.frozen {
		_ = r.cont(pid)
	}
	if r.viaNginx != nil {
		_ = r.viaNginx.Close()
	}
	if r.direct != nil {
		_ = r.direct.Close()
	}
	for _, cc := range r.health {
		_ = cc.Close()
	}
	if r.nginx != nil {
		r.nginx.stop()
	}
	if r.c != nil {
		r.c.Close()
	}
}

// nginxProc is nginx in the foreground, in its own process group.
type nginxProc struct {
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

func (n *nginxProc) stop() {
	_ = syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	<-n.done
}

func (n *nginxProc) logs() string {
	out, _ := os.ReadFile(filepath.Join(n.dir, "out.log"))
	errl, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	return string(out) + string(errl)
}

// startNginx runs nginx -p dir/nginx with conf and waits until it accepts
// connections on its listen address.
func startNginx(ctx context.Context, bin, parent, conf string) (*nginxProc, error) {
	dir := filepath.Join(parent, "nginx")
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "sessiongate.conf"), []byte(conf), 0o644); err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "out.log"))
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command(bin, "-p", dir, "-c", "sessiongate.conf", "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = out, out // a file: a worker must not hold Wait
	// Its own process group: the master and its worker are killed together
	// by the group id of the process this run started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	n := &nginxProc{cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(n.done) }()
	listen := ""
	for _, l := range strings.Split(conf, "\n") {
		if f := strings.Fields(strings.TrimSpace(l)); len(f) >= 2 && f[0] == "listen" {
			listen = strings.TrimSuffix(f[1], ";")
			break
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := d.DialContext(dctx, "tcp", listen)
		cancel()
		if err == nil {
			conn.Close()
			return n, nil
		}
		select {
		case <-n.done:
			return nil, fmt.Errorf("nginx exited: %s", n.logs())
		case <-ctx.Done():
			n.stop()
			return nil, fmt.Errorf("nginx does not accept on %s: %w\n%s", listen, ctx.Err(), n.logs())
		case <-tick.C:
		}
	}
}

// nginxBinary is path, else nginx on PATH, else Debian's /usr/sbin/nginx.
func nginxBinary(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("-nginx: %w", err)
		}
		return path, nil
	}
	if p, err := exec.LookPath("nginx"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx", nil
	}
	return "", errors.New("nginx not found on PATH nor in /usr/sbin (apt-get install -y nginx)")
}

// nginxConf is the project's published nginx recipe: the block between
// <!-- nginx:begin --> and <!-- nginx:end --> of the first of
// docs/balancers.md, docs/operations.md and README.md that has one (found
// from the working directory up to the module root), or of the file named
// by -nginx-conf (a markdown file with the markers, or a plain nginx
// configuration).
func nginxConf(path string) (string, error) {
	var candidates []string
	if path != "" {
		candidates = []string{path}
	} else {
		root, err := moduleRoot()
		if err != nil {
			return "", err
		}
		candidates = []string{filepath.Join(root, "docs", "balancers.md"), filepath.Join(root, "docs", "operations.md"), filepath.Join(root, "README.md")}
	}
	for _, p := range candidates {
		raw, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) && path == "" {
			continue
		}
		if err != nil {
			return "", err
		}
		if block, ok := markedBlock(string(raw)); ok {
			return block, nil
		}
		if path != "" && !strings.HasSuffix(p, ".md") {
			return string(raw), nil
		}
	}
	return "", fmt.Errorf("no nginx recipe (<!-- nginx:begin --> block) in %s", strings.Join(candidates, ", "))
}

func markedBlock(doc string) (string, bool) {
	_, rest, ok := strings.Cut(doc, "<!-- nginx:begin -->\n```nginx\n")
	if !ok {
		return "", false
	}
	block, _, ok := strings.Cut(rest, "```\n<!-- nginx:end -->")
	return block, ok
}

// moduleRoot is the nearest directory from the working directory up that
// holds this module's go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(raw, []byte("module github.com/sessiongate/sessiongate\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the sessiongate module: run from the repository or pass -nginx-conf")
		}
		dir = parent
	}
}
