package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sessiongate/sessiongate/gateway/gctuner"
	"github.com/sessiongate/sessiongate/gateway/server"
)

// options are the command's settings, from flags, else environment, else defaults.
type options struct {
	listen, admin       string
	runtimes            listFlag // name=ws://host:port/arcp
	upstreamToken       string
	clientTokens        listFlag // name=token
	profileFile         string
	instanceID          string
	idleTimeout         time.Duration
	maxSessions         int
	maxPerCaller        int
	maxJobsPerSession   int
	maxLiveJobs         int64
	maxLiveJobsCaller   int64
	maxRetained         int64
	maxReceiving        int64
	maxRetainedCaller   int64
	maxWatchersPerJob   int
	maxStreams          int
	windowBytes         int
	streamWorkers       int
	gcMinHeapMiB        int
	procsTuner          bool
	keepaliveTime       time.Duration
	keepaliveTimeout    time.Duration
	keepaliveMinTime    time.Duration
	maxInputBytes       int
	maxFrameBytes       int64
	initTimeout         time.Duration
	requestTimeout      time.Duration
	backoffMax          time.Duration
	shutdownTimeout     time.Duration
	logLevel, logFormat string
	otlpEndpoint        string

	// Cluster mode (see cluster.go).
	redisURL      string
	advertise     string
	directoryKeys listFlag // id:base64key; the first encrypts
	clusterSecret string
	leaseTTL      time.Duration
	ackLag        time.Duration
	lameDuck      time.Duration
	peerFirstByte time.Duration
	peerKeepalive time.Duration
	ownerWait     time.Duration
	rebalance     float64
	peerTLS       struct{ cert, key, ca string }
}

// listFlag is a repeatable flag; its environment form is comma-separated.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// envFlag describes one flag and its environment variable.
type envFlag struct{ flag, env string }

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	vars := []envFlag{}
	str := func(p *string, name, env, def, usage string) {
		fs.StringVar(p, name, def, usage+" (env "+env+")")
		vars = append(vars, envFlag{name, env})
	}
	dur := func(p *time.Duration, name, env string, def time.Duration, usage string) {
		fs.DurationVar(p, name, def, usage+" (env "+env+")")
		vars = append(vars, envFlag{name, env})
	}
	num := func(p *int, name, env string, def int, usage string) {
		fs.IntVar(p, name, def, usage+" (env "+env+")")
		vars = append(vars, envFlag{name, env})
	}
	num64 := func(p *int64, name, env string, def int64, usage string) {
		fs.Int64Var(p, name, def, usage+" (env "+env+")")
		vars = append(vars, envFlag{name, env})
	}
	str(&o.listen, "listen", "SESSIONGATE_LISTEN", "127.0.0.1:50051", "gRPC listen address")
	str(&o.admin, "admin", "SESSIONGATE_ADMIN", "127.0.0.1:8080", "admin HTTP address: /metrics, /healthz, /v1/sessions/{id}/status")
	fs.Var(&o.runtimes, "runtime", "upstream runtime name=ws://host:port/arcp, repeatable; the first is the default; none = embedded reference runtime (env SESSIONGATE_RUNTIMES, comma-separated)")
	str(&o.upstreamToken, "upstream-token", "SESSIONGATE_UPSTREAM_TOKEN", "", "bearer token presented to runtimes when the caller gives none")
	fs.Var(&o.clientTokens, "client-token", "caller identity name=token, repeatable; when set, callers must send authorization: Bearer <token> (env SESSIONGATE_CLIENT_TOKENS, comma-separated)")
	str(&o.profileFile, "timeout-profiles", "TIMEOUTPROFILE_FILE", "", "timeout profile configuration file (JSON)")
	str(&o.instanceID, "instance-id", "SESSIONGATE_INSTANCE_ID", "", "this instance's id in session ids, [a-z0-9-]{1,32} (default: random)")
	dur(&o.idleTimeout, "idle-timeout", "SESSIONGATE_IDLE_TIMEOUT", 30*time.Minute, "close sessions idle (no call, no running job) this long")
	num(&o.maxSessions, "max-sessions", "SESSIONGATE_MAX_SESSIONS", 100_000, "cap on all sessions")
	num(&o.maxPerCaller, "max-sessions-per-caller", "SESSIONGATE_MAX_SESSIONS_PER_CALLER", 1_000, "cap on one caller's sessions")
	num(&o.maxJobsPerSession, "max-jobs-per-session", "SESSIONGATE_MAX_JOBS_PER_SESSION", 100, "cap on live jobs per session")
	num64(&o.maxLiveJobs, "max-live-jobs", "SESSIONGATE_MAX_LIVE_JOBS", 10_000, "cap on live jobs of all callers")
	num64(&o.maxLiveJobsCaller, "max-live-jobs-per-caller", "SESSIONGATE_MAX_LIVE_JOBS_PER_CALLER", 1_000, "cap on one caller's live jobs")
	num64(&o.maxRetained, "max-retained-bytes", "SESSIONGATE_MAX_RETAINED_BYTES", 1<<30, "cap on results and events held in memory for all callers")
	num64(&o.maxRetainedCaller, "max-retained-bytes-per-caller", "SESSIONGATE_MAX_RETAINED_BYTES_PER_CALLER", 256<<20, "cap on results and events held in memory for one caller")
	num(&o.maxWatchersPerJob, "max-watchers-per-job", "SESSIONGATE_MAX_WATCHERS_PER_JOB", 16, "cap on WatchJob streams of one job")
	num(&o.maxStreams, "max-concurrent-streams", "SESSIONGATE_MAX_CONCURRENT_STREAMS", 1024, "cap on concurrent calls per client connection (HTTP/2 streams)")
	num(&o.windowBytes, "grpc-window-bytes", "SESSIONGATE_GRPC_WINDOW_BYTES", server.DefaultWindowBytes, "HTTP/2 flow-control window per stream and connection, client and peer connections (at least 65536; -1: grpc-go's dynamic window, which pings after every call on a quiet connection)")
	num(&o.streamWorkers, "stream-workers", "SESSIONGATE_STREAM_WORKERS", 0, "goroutines kept to run calls, so that a call starts on a grown stack (0: 64, -1: a new goroutine per call)")
	fs.BoolVar(&o.procsTuner, "procs-tuner", false, "opt-in, off by default (GOMAXPROCS is then the Go runtime's, container-aware): run on one P (GOMAXPROCS=1) while no goroutine waits for one, and on all as soon as they do, for fewer cross-CPU wake-ups per call at light load (measured on a 2 vCPU VM only, see gateway/proctuner); ignored when GOMAXPROCS is set (env SESSIONGATE_PROCS_TUNER)")
	vars = append(vars, envFlag{"procs-tuner", "SESSIONGATE_PROCS_TUNER"})
	num(&o.gcMinHeapMiB, "gc-min-heap-mib", "SESSIONGATE_GC_MIN_HEAP_MIB", gctuner.DefaultMinHeapMiB, "least heap goal of the garbage collector, MiB: GOGC is raised while the live heap is small (0: GOGC alone; GOMEMLIMIT still applies)")
	dur(&o.keepaliveTime, "keepalive-time", "SESSIONGATE_KEEPALIVE_TIME", 2*time.Minute, "ping a client connection idle this long")
	dur(&o.keepaliveTimeout, "keepalive-timeout", "SESSIONGATE_KEEPALIVE_TIMEOUT", 20*time.Second, "close a connection whose ping is unanswered this long")
	dur(&o.keepaliveMinTime, "keepalive-min-time", "SESSIONGATE_KEEPALIVE_MIN_TIME", 500*time.Millisecond, "shortest client ping interval tolerated; faster pingers get GOAWAY too_many_pings")
	num(&o.maxInputBytes, "max-input-bytes", "SESSIONGATE_MAX_INPUT_BYTES", 8<<20, "cap on a job's input")
	num64(&o.maxReceiving, "max-receiving-bytes", "SESSIONGATE_MAX_RECEIVING_BYTES", 0, "memory for RunJob and SubmitJob requests being received at once, each counted as the gRPC receive limit (2 × --max-input-bytes + 1 MiB); further calls wait within their deadlines (0: no bound; e.g. 268435456; a stream that never sends its request holds its share)")
	var frame int
	num(&frame, "max-frame-bytes", "SESSIONGATE_MAX_FRAME_BYTES", 16<<20, "cap on an upstream WebSocket frame")
	dur(&o.initTimeout, "init-timeout", "SESSIONGATE_INIT_TIMEOUT", 10*time.Second, "upstream handshake timeout")
	dur(&o.requestTimeout, "request-timeout", "SESSIONGATE_REQUEST_TIMEOUT", 30*time.Second, "default upstream request timeout (a term of the tombstone TTL)")
	dur(&o.backoffMax, "backoff-max", "SESSIONGATE_BACKOFF_MAX", 30*time.Second, "longest upstream reconnect backoff")
	dur(&o.shutdownTimeout, "shutdown-timeout", "SESSIONGATE_SHUTDOWN_TIMEOUT", 30*time.Second, "graceful shutdown deadline before a hard stop")
	str(&o.otlpEndpoint, "otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "", "OTLP/gRPC collector (host:port or URL) for OpenTelemetry spans of RPCs and upstream requests; empty: no tracing")
	str(&o.logLevel, "log-level", "SESSIONGATE_LOG_LEVEL", "info", "debug, info, warn or error")
	str(&o.logFormat, "log-format", "SESSIONGATE_LOG_FORMAT", "auto", "json, text, or auto (text on a terminal, else JSON)")

	str(&o.redisURL, "redis", "SESSIONGATE_REDIS", "", "cluster mode: the directory's Redis, redis://[user:pass@]host:port[/db], rediss://… or unix://[user:pass@]/path; unset = a single gateway")
	str(&o.advertise, "advertise", "SESSIONGATE_ADVERTISE", "", "cluster mode: host:port peers use to reach this replica's gRPC port (default: the --listen address)")
	fs.Var(&o.directoryKeys, "directory-key", "cluster mode: resume token encryption key id:base64(32 bytes), repeatable; the first encrypts, all decrypt (env SESSIONGATE_DIRECTORY_KEYS, comma-separated)")
	str(&o.clusterSecret, "cluster-secret", "SESSIONGATE_CLUSTER_SECRET", "", "cluster mode: secret shared by all replicas, authenticates forwarded calls (at least 16 bytes)")
	dur(&o.leaseTTL, "lease-ttl", "SESSIONGATE_LEASE_TTL", 5*time.Second, "cluster mode: replica lease lifetime; a killed owner's sessions are taken over after it")
	str(&o.peerTLS.cert, "peer-tls-cert", "SESSIONGATE_PEER_TLS_CERT", "", "cluster mode: this replica's certificate (PEM) for mutual TLS between replicas, with --peer-tls-key and --peer-tls-ca; forwarded calls are then accepted only over TLS with a certificate of that CA; reloaded when the files change")
	str(&o.peerTLS.key, "peer-tls-key", "SESSIONGATE_PEER_TLS_KEY", "", "cluster mode: the private key (PEM) of --peer-tls-cert")
	str(&o.peerTLS.ca, "peer-tls-ca", "SESSIONGATE_PEER_TLS_CA", "", "cluster mode: the CA certificate(s) (PEM) that sign every replica's --peer-tls-cert")
	dur(&o.lameDuck, "lame-duck", "SESSIONGATE_LAME_DUCK", 3*time.Second, "cluster mode: after SIGTERM hands the sessions off, keep serving (health NOT_SERVING) and forwarding calls to the adopters this long, so peers' owner caches and balancers move away, then GOAWAY and close the listener (0: none; --shutdown-timeout must leave room)")
	dur(&o.peerFirstByte, "peer-first-byte", "SESSIONGATE_PEER_FIRST_BYTE", time.Second, "cluster mode: a forward with no answer header from the session's owner this long (also a peer dial's bound) is abandoned and the call waits, within its deadline, for a live owner")
	dur(&o.ownerWait, "owner-wait", "SESSIONGATE_OWNER_WAIT", time.Second, "cluster mode: longest wait of a call whose session owner does not answer (or is not yet judged gone) for a live owner, within its deadline, before UNAVAILABLE; keep it under a balancer's read timeout (0: no wait)")
	fs.Float64Var(&o.rebalance, "rebalance-per-second", 50, "cluster mode: idle sessions moved per second to the replica the placement hash prefers (0: never) (env SESSIONGATE_REBALANCE_PER_SECOND)")
	vars = append(vars, envFlag{"rebalance-per-second", "SESSIONGATE_REBALANCE_PER_SECOND"})
	dur(&o.peerKeepalive, "peer-keepalive", "SESSIONGATE_PEER_KEEPALIVE", time.Second, "cluster mode: while forwards are in flight to a peer, health-check it this often; one unanswered this long closes the connection (0: off)")
	dur(&o.ackLag, "ack-lag", "SESSIONGATE_ACK_LAG", 2*time.Second, "cluster mode: how far behind the upstream a watcher may be and still continue across a takeover")

	// Environment first, so that flags given on the command line win.
	for _, v := range vars {
		if val := getenv(v.env); val != "" {
			if err := fs.Set(v.flag, val); err != nil {
				return nil, fmt.Errorf("%s=%q: %w", v.env, val, err)
			}
		}
	}
	for env, l := range map[string]*listFlag{"SESSIONGATE_RUNTIMES": &o.runtimes, "SESSIONGATE_CLIENT_TOKENS": &o.clientTokens, "SESSIONGATE_DIRECTORY_KEYS": &o.directoryKeys} {
		if val := getenv(env); val != "" {
			for _, item := range strings.Split(val, ",") {
				if item = strings.TrimSpace(item); item != "" {
					*l = append(*l, item)
				}
			}
		}
	}
	envRuntimes, envTokens, envKeys := len(o.runtimes), len(o.clientTokens), len(o.directoryKeys)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	// Repeatable flags given on the command line replace the environment's.
	if len(o.runtimes) > envRuntimes && envRuntimes > 0 {
		o.runtimes = o.runtimes[envRuntimes:]
	}
	if len(o.clientTokens) > envTokens && envTokens > 0 {
		o.clientTokens = o.clientTokens[envTokens:]
	}
	if len(o.directoryKeys) > envKeys && envKeys > 0 {
		o.directoryKeys = o.directoryKeys[envKeys:]
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.maxFrameBytes = int64(frame)
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"max-sessions", int64(o.maxSessions)}, {"max-sessions-per-caller", int64(o.maxPerCaller)},
		{"max-live-jobs", o.maxLiveJobs}, {"max-live-jobs-per-caller", o.maxLiveJobsCaller},
		{"max-retained-bytes", o.maxRetained}, {"max-retained-bytes-per-caller", o.maxRetainedCaller},
		{"max-watchers-per-job", int64(o.maxWatchersPerJob)}, {"max-concurrent-streams", int64(o.maxStreams)},
	} {
		if c.v <= 0 {
			return nil, fmt.Errorf("--%s %d: want a positive number", c.name, c.v)
		}
	}
	if o.maxReceiving < 0 {
		return nil, fmt.Errorf("--max-receiving-bytes %d: want 0 (no bound) or a positive number", o.maxReceiving)
	}
	if o.windowBytes >= 0 && (o.windowBytes < 64<<10 || o.windowBytes > 1<<30) {
		return nil, fmt.Errorf("--grpc-window-bytes %d: want 65536 to %d, or -1 for the dynamic window", o.windowBytes, 1<<30)
	}
	if o.maxStreams > 1<<31 {
		return nil, fmt.Errorf("--max-concurrent-streams %d: at most %d", o.maxStreams, 1<<31)
	}
	if o.redisURL != "" {
		if len(o.directoryKeys) == 0 {
			return nil, fmt.Errorf("--redis needs --directory-key id:base64key (32 bytes: head -c32 /dev/urandom | base64) to encrypt resume tokens")
		}
		if len(o.clusterSecret) < 16 {
			return nil, fmt.Errorf("--redis needs --cluster-secret of at least 16 bytes, the same on every replica")
		}
		if o.instanceID == "" {
			return nil, fmt.Errorf("--redis needs --instance-id: a stable id per replica, so a restarted replica is recognised")
		}
	}
	if p := o.peerTLS; p != (struct{ cert, key, ca string }{}) {
		switch {
		case p.cert == "" || p.key == "" || p.ca == "":
			return nil, fmt.Errorf("--peer-tls-cert, --peer-tls-key and --peer-tls-ca go together: give all three")
		case o.redisURL == "":
			return nil, fmt.Errorf("--peer-tls-* are for cluster mode: give --redis too")
		}
	}
	if o.instanceID == "" {
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.instanceID = "gw-" + hex.EncodeToString(b[:])
	}
	return o, nil
}

func splitPairs(flagName string, items []string) ([][2]string, error) {
	out := make([][2]string, 0, len(items))
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("--%s %q: want name=value", flagName, it)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func newLogger(level, format string, w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	hopts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, hopts)), nil
	case "auto":
		if f, ok := w.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
				return slog.New(slog.NewTextHandler(w, hopts)), nil
			}
		}
		return slog.New(slog.NewJSONHandler(w, hopts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json, text or auto", format)
}
