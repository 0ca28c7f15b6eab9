package server

import (
	"context"
	"errors"
	"fmt"
	"go.opentelemetry.io/otel/trace"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
	"github.com/sessiongate/sessiongate/timeoutprofile/tpprom"
)

// Runtime is a configured upstream ARCP runtime.
type Runtime struct {
	Name string // the name callers use in OpenSessionRequest.runtime
	URL  string // ws://host:port/arcp
	// Counters receives this runtime's upstream counters, exported on
	// /metrics with label runtime=Name; nil = a fresh set.
	Counters *upstream.Counters

	traits *upstream.Traits // what its connections learned of it, shared by them
}

// Config configures a Gateway. Zero values take the documented defaults.
type Config struct {
	// InstanceID is embedded in every session id (required; [a-z0-9-]{1,32}).
	InstanceID string
	// Runtimes are the upstream runtimes; the first is the default.
	Runtimes []Runtime
	// UpstreamToken is the bearer token presented to runtimes when the
	// caller gives none.
	UpstreamToken string
	// ClientTokens maps bearer tokens callers present to caller identities.
	// Empty: every caller is "anonymous". grpc.health.v1.Health never needs
	// a token, so that probes need no credentials.
	ClientTokens map[string]string
	// Features are requested upstream when OpenSession names none
	// (default: every feature the gateway implements, see gatewayFeatures).
	// Features the gateway does not implement are never requested.
	Features []string
	// MaxSessions caps all sessions (default 100,000); MaxSessionsPerCaller
	// caps one caller's (default 1,000).
	MaxSessions, MaxSessionsPerCaller int
	// MaxLiveJobs caps the jobs running for all callers (default 10,000);
	// MaxLiveJobsPerCaller caps one caller's (default 1,000). A job counts
	// from its submit until its end on the runtime. Upstream.MaxLiveJobs
	// caps one session's.
	MaxLiveJobs, MaxLiveJobsPerCaller int64
	// MaxRetainedBytes caps the results and events upstream connections hold
	// in memory for all callers (default 1 GiB); MaxRetainedBytesPerCaller
	// for one caller (default 256 MiB). Upstream.MaxBufferedBytes caps one
	// session's.
	MaxRetainedBytes, MaxRetainedBytesPerCaller int64
	// MaxWatchersPerJob caps the WatchJob streams of one job (default 16).
	MaxWatchersPerJob int
	// StreamWorkers is the number of long-lived goroutines that run calls
	// (grpc.NumStreamWorkers): a call then starts on a goroutine whose stack
	// has already grown, instead of a new one per call (busy workers fall
	// back to a new goroutine). 0 means DefaultStreamWorkers; negative, none.
	// A new goroutine starts with a small stack and grows it, copying it
	// each time, as the call goes deeper: with 4 workers (the earlier
	// default, 2 × GOMAXPROCS) and 64 callers, that copying was 10 % of all
	// CPU of BenchmarkGetSessionStatus and 5.6 % of BenchmarkRunJobParallel;
	// with 64 workers it no longer shows in the profile. Idle workers cost
	// their stacks, some kilobytes each.
	StreamWorkers int
	// MaxConcurrentStreams caps the concurrent gRPC streams (calls) of one
	// client connection (default 1,024); further calls queue in the client.
	MaxConcurrentStreams uint32
	// WindowBytes is the HTTP/2 flow-control window, per stream and per
	// connection, that the gateway grants on its server connections and on
	// its connections to peer replicas (default DefaultWindowBytes, 1 MiB;
	// at least 64 KiB). Negative: grpc-go's dynamic window, which starts at
	// 64 KiB and grows by bandwidth-delay estimation — a PING and its ack
	// after every data frame received while none is outstanding, that is
	// after every call on a connection with one call at a time, on the
	// critical path of a forwarded call (BenchmarkClusterRunJob: see the
	// commit that added this field). A fixed window is what a sidecar on a
	// local link needs; one on a long, fast link may want the dynamic one.
	WindowBytes int32
	// Keepalive: the server pings a connection idle for KeepaliveTime
	// (default 2 min) and closes it when no answer comes within
	// KeepaliveTimeout (default 20 s). A client that pings more often than
	// KeepaliveMinTime (default 500 ms) is sent GOAWAY ENHANCE_YOUR_CALM
	// ("too_many_pings"); pings without active calls are permitted. The
	// Python and TypeScript clients ping every second while calls are in
	// flight, so that a frozen replica's connection is given up in about
	// two seconds (a ping costs the server one 8-byte frame and its ack).
	KeepaliveTime, KeepaliveTimeout, KeepaliveMinTime time.Duration
	// IdleTimeout closes sessions with no call and no running job (default 30 min).
	IdleTimeout time.Duration
	// MaxInputBytes caps a job's input (default 8 MiB).
	MaxInputBytes int
	// MaxReceivingBytes bounds the RunJob and SubmitJob requests being
	// received at once, each counted as the gRPC receive limit (recvLimit)
	// from before its request is read until it is decoded; further calls
	// wait within their deadlines. 0 (the default): no bound; see
	// recvgate.go for why, and SuggestedMaxReceivingBytes.
	MaxReceivingBytes int64
	// Upstream is the template for every upstream connection: timeouts and
	// caps. URL, Token, Client, Features, Counters and Logger are filled in
	// (Counters from the runtime's).
	Upstream upstream.Config
	// TimeoutProfiles is the global layer of the timeout profile table
	// (standard profiles, file, environment); nil means the standard
	// profiles. Per-caller overrides in it apply to the identities of
	// ClientTokens.
	TimeoutProfiles *timeoutprofile.Config
	// Registry receives the gateway's metrics (required).
	Registry *prometheus.Registry
	// Logger (default: discard).
	Logger *slog.Logger
	// Cluster, when set, turns cluster mode on (see ClusterConfig).
	Cluster *ClusterConfig
	// TracerProvider, when set, gets an OpenTelemetry span for every RPC
	// (otelgrpc) and for the gateway's upstream requests; nil: no tracing,
	// at no cost. See tracing.go.
	TracerProvider trace.TracerProvider
}

// Defaults of Config.
const (
	DefaultMaxLiveJobs               = 10_000
	DefaultMaxLiveJobsPerCaller      = 1_000
	DefaultMaxRetainedBytes          = 1 << 30
	DefaultMaxRetainedBytesPerCaller = 256 << 20
	DefaultMaxWatchersPerJob         = 16
	DefaultMaxConcurrentStreams      = 1024
	DefaultStreamWorkers             = 64
	DefaultWindowBytes               = 1 << 20
	DefaultKeepaliveTime             = 2 * time.Minute
	DefaultKeepaliveTimeout          = 20 * time.Second
	DefaultKeepaliveMinTime          = 500 * time.Millisecond
)

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxInputBytes == 0 {
		c.MaxInputBytes = 8 << 20
	}
	if len(c.Features) == 0 {
		c.Features = gatewayFeatures
	}
	def := func(p *int64, v int64) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.MaxLiveJobs, DefaultMaxLiveJobs)
	def(&c.MaxLiveJobsPerCaller, DefaultMaxLiveJobsPerCaller)
	def(&c.MaxRetainedBytes, DefaultMaxRetainedBytes)
	def(&c.MaxRetainedBytesPerCaller, DefaultMaxRetainedBytesPerCaller)
	if c.MaxWatchersPerJob == 0 {
		c.MaxWatchersPerJob = DefaultMaxWatchersPerJob
	}
	if c.StreamWorkers == 0 {
		c.StreamWorkers = DefaultStreamWorkers
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if c.WindowBytes == 0 {
		c.WindowBytes = DefaultWindowBytes
	}
	dur := func(p *time.Duration, v time.Duration) {
		if *p == 0 {
			*p = v
		}
	}
	dur(&c.KeepaliveTime, DefaultKeepaliveTime)
	dur(&c.KeepaliveTimeout, DefaultKeepaliveTimeout)
	dur(&c.KeepaliveMinTime, DefaultKeepaliveMinTime)
}

func (c *Config) validate() error {
	var errs []error
	if len(c.Runtimes) == 0 {
		errs = append(errs, errors.New("at least one runtime is required"))
	}
	if c.Registry == nil {
		errs = append(errs, errors.New("a Registry is required"))
	}
	if c.MaxWatchersPerJob < 0 || c.MaxInputBytes < 0 || c.MaxReceivingBytes < 0 {
		errs = append(errs, errors.New("caps must not be negative"))
	}
	if c.KeepaliveTime < 0 || c.KeepaliveTimeout < 0 || c.KeepaliveMinTime < 0 {
		errs = append(errs, errors.New("keepalive durations must not be negative"))
	}
	if c.WindowBytes > 0 && c.WindowBytes < minWindowBytes {
		errs = append(errs, fmt.Errorf("window bytes %d: want at least %d (HTTP/2's initial window), or negative for the dynamic window", c.WindowBytes, minWindowBytes))
	}
	if len(errs) > 0 {
		return fmt.Errorf("gateway: invalid config: %w", errors.Join(errs...))
	}
	return nil
}

// ErrHardStop is returned by Shutdown (wrapped, with the number of calls it
// cut) when its context ended before every call had finished, so that the
// remaining calls were cut off.
var ErrHardStop = errors.New("gateway: shutdown deadline passed: stopped hard")

// Gateway is the assembled service: the gRPC server, the session table, and
// the admin HTTP handler.
type Gateway struct {
	grpc     *grpc.Server
	unary    *unaryEntry // the server's unary interceptor (chain.go)
	health   *health.Server
	table    *session.Table[*upstream.Conn]
	svc      *service
	ids      identities
	admin    http.Handler
	counters map[string]*upstream.Counters // per runtime; immutable
	retained *budget.Budget
	recvGate *receiveGate // RunJob and SubmitJob requests being received (recvgate.go)
	log      *slog.Logger
	draining atomic.Bool
	cluster  *clusterState // nil unless cluster mode

	// The lame duck (cluster mode, lameduck.go): buildLame makes the
	// second gRPC server; lame is guarded by lameMu.
	buildLame func() *grpc.Server
	lameMu    sync.Mutex
	lame      *lameDuck

	// endStreams is closed when Shutdown begins: infrastructure streams
	// that no timeout profile bounds (health Watch, reflection) end then.
	endStreams     chan struct{}
	endStreamsOnce sync.Once
	infra          sync.WaitGroup // infrastructure stream handlers (see endAtShutdown)
}

// New validates cfg and assembles a Gateway. Nothing listens until Serve.
func New(cfg Config) (*Gateway, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	runtimes := make(map[string]Runtime, len(cfg.Runtimes))
	names := make([]string, 0, len(cfg.Runtimes))
	counters := make(map[string]*upstream.Counters, len(cfg.Runtimes))
	for _, rt := range cfg.Runtimes {
		if rt.Name == "" || rt.URL == "" {
			return nil, fmt.Errorf("gateway: runtime %q: name and URL are required", rt.Name)
		}
		if _, dup := runtimes[rt.Name]; dup {
			return nil, fmt.Errorf("gateway: runtime %q configured twice", rt.Name)
		}
		if rt.Counters == nil {
			rt.Counters = &upstream.Counters{}
		}
		rt.traits = &upstream.Traits{}
		runtimes[rt.Name] = rt
		names = append(names, rt.Name)
		counters[rt.Name] = rt.Counters
	}
	table, err := session.New[*upstream.Conn](session.Config{
		InstanceID: cfg.InstanceID, MaxSessions: cfg.MaxSessions, MaxPerCaller: cfg.MaxSessionsPerCaller,
		IdleTimeout: cfg.IdleTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	liveJobs, err := budget.New("live_jobs", cfg.MaxLiveJobs, cfg.MaxLiveJobsPerCaller)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	retained, err := budget.New("retained_bytes", cfg.MaxRetainedBytes, cfg.MaxRetainedBytesPerCaller)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g := &Gateway{
		table:      table,
		ids:        newIdentities(cfg.ClientTokens),
		counters:   counters,
		retained:   retained,
		log:        cfg.Logger,
		endStreams: make(chan struct{}),
	}
	tmpl := cfg.Upstream
	tmpl.Logger = cfg.Logger
	features := implementedFeatures(cfg.Features)
	g.svc = &service{
		table: table, runtimes: runtimes, runtimeNames: names, defaultRuntime: cfg.Runtimes[0].Name,
		maxInputBytes: cfg.MaxInputBytes, maxWatchersPerJob: cfg.MaxWatchersPerJob, liveJobs: liveJobs,
		cancelTimeout: 2 * time.Second, log: cfg.Logger, watchers: make(map[watchKey]int),
		dial: func(ctx context.Context, rt Runtime, caller string, req *sessiongatev1.OpenSessionRequest) (*upstream.Conn, error) {
			uc := tmpl
			uc.URL = rt.URL
			uc.Counters = rt.Counters
			uc.Traits = rt.traits
			uc.Token = cfg.UpstreamToken
			if req.GetUpstreamToken() != "" {
				uc.Token = req.GetUpstreamToken()
			}
			uc.Client = arcp.ClientInfo{Name: "sessiongate", Version: "1"}
			if req.GetClientName() != "" {
				uc.Client.Name = "sessiongate/" + req.GetClientName()
			}
			uc.Features = features
			if len(req.GetFeatures()) > 0 {
				uc.Features = implementedFeatures(req.GetFeatures()) // empty: none
			}
			uc.RetainedBytes = retained.Account(caller) // results and events held in memory are reserved there
			uc.KeyNamespace = caller
			uc.OnJobLost = func(jobID string) { g.svc.recheckObservers(caller, rt.Name, jobID) }
			if g.cluster == nil {
				return upstream.Dial(ctx, uc)
			}
			o := g.cluster.prepare(&uc)
			conn, err := upstream.Dial(ctx, uc)
			if err == nil {
				g.cluster.dialled(conn, o, caller, rt.Name)
			}
			return conn, err
		},
	}
	if cfg.Cluster != nil {
		cc := *cfg.Cluster
		cc.tracer = cfg.TracerProvider
		cc.window = cfg.WindowBytes
		cc.setDefaults()
		if err := cc.validate(); err != nil {
			return nil, fmt.Errorf("gateway: %w", err)
		}
		m, err := newClusterMetrics(cfg.Registry, cc.Directory)
		if err != nil {
			return nil, err
		}
		g.cluster = newClusterState(cc, cfg.InstanceID, table, runtimes, tmpl, features, retained, cfg.Logger, m)
		if g.cluster.proofs, err = newPeerProofs(cc.Secret, cfg.InstanceID, cfg.Registry); err != nil {
			return nil, err
		}
		g.svc.cluster = g.cluster
	}

	srvMetrics := newGRPCMetrics()
	if err := srvMetrics.register(cfg.Registry); err != nil {
		return nil, fmt.Errorf("gateway: register gRPC metrics: %w", err)
	}
	if err := registerGatewayMetrics(cfg.Registry, table, names, counters, liveJobs, retained); err != nil {
		return nil, err
	}
	access := &accessLog{log: cfg.Logger, skip: map[string]bool{
		sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName: true,
		healthpb.Health_Check_FullMethodName:                         true,
		healthpb.Health_Watch_FullMethodName:                         true,
	}}
	recovered := func(ctx context.Context, p any) error {
		cfg.Logger.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	}
	recoveryOpt := recovery.WithRecoveryHandlerContext(recovered)
	unary := []grpc.UnaryServerInterceptor{
		srvMetrics.unary,
		access.unary,
		recovery.UnaryServerInterceptor(recoveryOpt),
		selector.UnaryServerInterceptor(auth.UnaryServerInterceptor(g.authFunc), selector.MatchFunc(authenticated)),
		g.clusterUnary,
	}
	stream := []grpc.StreamServerInterceptor{
		srvMetrics.stream,
		access.stream,
		recovery.StreamServerInterceptor(recoveryOpt),
		selector.StreamServerInterceptor(auth.StreamServerInterceptor(g.authFunc), selector.MatchFunc(authenticated)),
		g.clusterStream,
	}
	enforcer, err := NewEnforcer(cfg.TimeoutProfiles, cfg.Registry, cfg.Logger, g.svc.agentProfiles())
	if err != nil {
		return nil, err
	}
	unary = append(unary, selector.UnaryServerInterceptor(enforcer.UnaryServerInterceptor(), selector.MatchFunc(profiled)))
	entry := &unaryEntry{chain: unaryChain(unary...), auth: g.authFunc, enforce: enforcer.UnaryServerInterceptor(), recovered: recovered,
		access: access, route: g.clusterUnary}
	g.unary = entry
	stream = append(stream,
		selector.StreamServerInterceptor(enforcer.StreamServerInterceptor(), selector.MatchFunc(profiled)),
		selector.StreamServerInterceptor(g.endAtShutdown, selector.MatchFunc(unprofiled)))

	g.health = health.NewServer()
	for _, svc := range servedHealth {
		g.health.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	// build makes the gRPC server; in cluster mode a second one takes the
	// listener over for the lame duck (lameduck.go), so that the first can
	// send GOAWAY to every connection while the listener still accepts.
	gate := newReceiveGate(cfg.MaxReceivingBytes, recvLimit(cfg.MaxInputBytes))
	g.recvGate = gate
	build := func() *grpc.Server {
		gs := grpc.NewServer(append(append(append(tracingOptions(cfg.TracerProvider), windowOptions(cfg.WindowBytes)...), peerServerOptions(cfg.Cluster)...),
			grpc.UnaryInterceptor(entry.intercept),
			grpc.ForceServerCodecV2(wirecodec.NewCodec()),
			grpc.ChainStreamInterceptor(stream...),
			grpc.MaxRecvMsgSize(recvLimit(cfg.MaxInputBytes)),
			grpc.MaxSendMsgSize(32<<20),
			grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
			streamWorkers(cfg.StreamWorkers),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: cfg.KeepaliveMinTime, PermitWithoutStream: true}),
		)...)
		// RunJob answers with its result's bytes (runJobHandler). In cluster
		// mode session calls reach routing undecoded (wirecodec.RawHandler), so that a
		// forwarded one is never decoded or encoded here.
		gs.RegisterService(wirecodec.RawFirst(&sessiongatev1.SessionGateway_ServiceDesc, func(full string, h grpc.MethodHandler) grpc.MethodHandler {
			var own grpc.MethodHandler
			if full == sessiongatev1.SessionGateway_RunJob_FullMethodName {
				h, own = runJobHandler, runJobHandler
			}
			if mi := methodOf(full); g.cluster != nil && mi != nil && mi.sessionField != nil && !readOnlyMethods[full] {
				own = wirecodec.RawHandler(full, h)
			}
			if full == sessiongatev1.SessionGateway_RunJob_FullMethodName || full == sessiongatev1.SessionGateway_SubmitJob_FullMethodName {
				// Job inputs may nest: too deep to decode is INVALID_ARGUMENT (depth.go).
				if own == nil {
					own = h
				}
				return tooDeepRequests(gate.wrap(own))
			}
			return own
		}), g.svc)
		timeoutprofilev1.RegisterTimeoutProfileServiceServer(gs, timeoutprofile.NewService(enforcer))
		healthpb.RegisterHealthServer(gs, g.health)
		reflection.Register(gs)
		return gs
	}
	g.grpc = build()
	if g.cluster != nil {
		g.buildLame = build
	}
	srvMetrics.init(g.grpc.GetServiceInfo())
	entry.methods = serviceMethods(srvMetrics, access)
	g.admin = g.adminHandler(cfg.Registry)
	return g, nil
}

// recvLimit is the gateway's gRPC receive limit for a max_input_bytes cap:
// twice the cap plus 1 MiB for the request's other fields, so that an input
// of up to twice the cap reaches the handler and gets the clear
// RESOURCE_EXHAUSTED CAP_EXCEEDED naming max_input_bytes, not gRPC's bare
// "received message larger than max". (The protobuf form of an input can
// be a little larger or smaller than its JSON, which the cap counts.) With
// the default cap of 8 MiB: up to 8 MiB of JSON runs; a request of up to
// 17 MiB (the 10 MB and 16 MiB inputs of TestLimitsAligned) gets
// CAP_EXCEEDED max_input_bytes with ErrorInfo; a larger one gets grpc-go's
// RESOURCE_EXHAUSTED "grpc: received message larger than max (N vs. L)".
//
// That last status has no ErrorInfo and cannot get one: grpc-go (1.85)
// refuses the request from the message's 5-byte length prefix in
// parser.recvMsg, before reading any of it, and writes that status itself,
// in a defer of serverStream.RecvMsg, before the handler's dec returns — so
// no interceptor, handler wrapper or stats handler can replace it (a
// wrapper mapping dec's error was tried: the caller still saw the bare
// status, TestInputOverReceiveLimit). A higher limit would name
// max_input_bytes for larger inputs too, but each request being received
// may make the gateway hold up to the limit (recvgate.go): the limit times
// the --max-receiving-bytes budget's slots is the memory at stake.
func recvLimit(maxInputBytes int) int { return 2*maxInputBytes + 1<<20 }

// probeMethods answer from memory at once, at any caller deadline.
var probeMethods = []string{
	sessiongatev1.SessionGateway_GetSessionStatus_FullMethodName,
	healthpb.Health_Check_FullMethodName,
}

// servedHealth are the services health reports: the server as a whole ("")
// and each application service.
var servedHealth = []string{
	"",
	sessiongatev1.SessionGateway_ServiceDesc.ServiceName,
	timeoutprofilev1.TimeoutProfileService_ServiceDesc.ServiceName,
}

// NewEnforcer builds the timeout profile enforcer the gateway installs: the
// global layer (nil = standard profiles), caller identities from the
// authentication interceptor, warnings to log, and the sw4rm_rpc_* metrics on
// reg. It is exported so that benchmarks measure the production chain.
func NewEnforcer(global *timeoutprofile.Config, reg prometheus.Registerer, log *slog.Logger, extra ...timeoutprofile.Option) (*timeoutprofile.Enforcer, error) {
	obs, err := tpprom.New(reg)
	if err != nil {
		return nil, fmt.Errorf("gateway: timeout profile metrics: %w", err)
	}
	opts := []timeoutprofile.Option{
		timeoutprofile.WithCallerIdentity(callerFrom),
		timeoutprofile.WithObserver(obs),
		// The probes answer from memory: a balancer's deadline, however
		// short, is not shortened by a margin (their profile still bounds
		// them).
		timeoutprofile.WithoutDeadlineMargin(probeMethods...),
	}
	if log != nil {
		opts = append(opts, timeoutprofile.WithLogger(log))
	}
	if global != nil {
		opts = append(opts, timeoutprofile.WithConfig(global))
	}
	return timeoutprofile.New(append(opts, extra...)...)
}

// profiled says which calls run under a timeout profile: all but the
// infrastructure streams that are meant to stay open (server reflection and
// health watches), which no profile could bound sensibly.
func profiled(_ context.Context, c interceptors.CallMeta) bool {
	switch {
	case c.Service == "grpc.reflection.v1.ServerReflection", c.Service == "grpc.reflection.v1alpha.ServerReflection":
		return false
	case c.Service == "grpc.health.v1.Health" && c.Method == "Watch":
		return false
	}
	return true
}

func unprofiled(ctx context.Context, c interceptors.CallMeta) bool { return !profiled(ctx, c) }

// authenticated says which calls need a bearer token when tokens are
// configured: all but grpc.health.v1.Health, which Kubernetes and balancer
// probes call without credentials. Health reveals only serving status.
func authenticated(_ context.Context, c interceptors.CallMeta) bool {
	return c.Service != healthpb.Health_ServiceDesc.ServiceName
}

// errShuttingDown ends infrastructure streams when Shutdown begins.
var errShuttingDown = status.Error(codes.Unavailable, "gateway is shutting down: reconnect to another instance")

// endAtShutdown bounds the streams no timeout profile bounds (health Watch,
// server reflection) by the gateway's life: when Shutdown begins they end
// with UNAVAILABLE — a health Watch right after it has told its client
// NOT_SERVING — so that GracefulStop does not wait for them until its
// deadline. Their handlers block in places a context cannot reach
// (reflection in Recv), so the handler runs on its own goroutine and this
// interceptor returns at shutdown; grpc-go then finishes the stream, which
// unblocks the handler, and Shutdown waits for it (g.infra).
func (g *Gateway) endAtShutdown(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	select {
	case <-g.endStreams:
		return errShuttingDown
	default:
	}
	is := &infraStream{ServerStream: ss, notServing: make(chan struct{})}
	done := make(chan error, 1)
	g.infra.Add(1)
	go func() {
		defer g.infra.Done()
		done <- handler(srv, is)
	}()
	select {
	case err := <-done:
		return err
	case <-g.endStreams:
	}
	if info.FullMethod == healthpb.Health_Watch_FullMethodName {
		// health.Server.Shutdown has queued NOT_SERVING for the watcher;
		// let it reach the client first. A watcher of a service health
		// does not know gets no update: the timer bounds the wait.
		grace := time.NewTimer(healthGrace)
		defer grace.Stop()
		select {
		case <-is.notServing:
		case err := <-done:
			return err
		case <-grace.C:
		}
	}
	return errShuttingDown
}

// healthGrace bounds the wait for a health watcher's NOT_SERVING at shutdown.
const healthGrace = time.Second

// infraStream notes when a health Watch has sent NOT_SERVING.
type infraStream struct {
	grpc.ServerStream
	notServing chan struct{}
	once       sync.Once
}

func (s *infraStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if r, ok := m.(*healthpb.HealthCheckResponse); ok && r.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
		s.once.Do(func() { close(s.notServing) })
	}
	return err
}

// Serve serves gRPC on lis until Shutdown; it returns nil after a shutdown.
func (g *Gateway) Serve(lis net.Listener) error {
	if g.cluster != nil {
		g.cluster.start()
		return g.serveMux(lis) // lameduck.go
	}
	err := g.grpc.Serve(lis)
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// AdminHandler serves /metrics, /healthz and /v1/sessions/{id}/status.
func (g *Gateway) AdminHandler() http.Handler { return g.admin }

// InstanceID returns the instance id in this gateway's session ids.
func (g *Gateway) InstanceID() string { return g.table.InstanceID() }

// Counters returns the upstream counters of the named runtime (nil if no
// such runtime is configured).
func (g *Gateway) Counters(runtime string) *upstream.Counters { return g.counters[runtime] }

// RetainedBytes returns the retained-bytes budget upstream connections
// reserve from.
func (g *Gateway) RetainedBytes() *budget.Budget { return g.retained }

// Shutdown drains in a fixed order: health NOT_SERVING and infrastructure
// streams (health Watch, reflection) ended, new sessions refused and every
// upstream session closed gracefully (in cluster mode: handed off, then a
// lame-duck period of ClusterConfig.LameDuck in which calls are still
// accepted and forwarded to the adopters), then gRPC stopped gracefully
// (GOAWAY, listener closed). When ctx
// ends first it stops hard and returns an error wrapping ErrHardStop. In-flight
// calls on a closed session end with UNAVAILABLE. Shutdown returns once every
// goroutine the gateway started has ended.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	g.health.Shutdown() // every service NOT_SERVING, Watch streams told
	g.endStreamsOnce.Do(func() { close(g.endStreams) })
	var ld *lameDuck
	if g.cluster != nil {
		// Cluster mode: GOAWAY to every connection (a second server
		// keeps the listener: lameduck.go), hand the sessions off instead
		// of closing them, then serve as a lame duck (forwarding to the
		// adopters) while peers and balancers move away.
		ld = g.beginLameDuck()
		g.cluster.handoff(ctx)
		defer g.cluster.close()
		g.cluster.lameDuck(ctx)
	}
	drainErr := g.table.Drain(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if ld == nil {
			g.grpc.GracefulStop()
			return
		}
		// The listener last: closed now, new connections are refused
		// (nobody would accept them), then the servers stop gracefully.
		ld.mux.Close()
		if ld.second == nil {
			g.grpc.GracefulStop()
			return
		}
		ld.second.GracefulStop()
		<-ld.firstStopped
	}()
	var hard error
	select {
	case <-stopped:
	case <-ctx.Done():
		g.grpc.Stop()
		if ld != nil && ld.second != nil {
			ld.second.Stop()
		}
		<-stopped
		hard = fmt.Errorf("%w after %v: %w", ErrHardStop, context.Cause(ctx), ctx.Err())
	}
	g.table.Wait()
	g.infra.Wait()
	g.svc.bg.Wait()
	if drainErr != nil {
		drainErr = fmt.Errorf("gateway: closing upstream sessions: %w", drainErr)
	}
	return errors.Join(hard, drainErr)
}

// minWindowBytes is HTTP/2's initial window: grpc-go ignores a smaller one.
const minWindowBytes = 64 << 10

// windowOptions are the server options of Config.WindowBytes.
func windowOptions(n int32) []grpc.ServerOption {
	if n <= 0 {
		return nil
	}
	return []grpc.ServerOption{grpc.InitialWindowSize(n), grpc.InitialConnWindowSize(n)}
}

// peerWindowOptions are windowOptions for a connection to a peer.
func peerWindowOptions(n int32) []grpc.DialOption {
	if n <= 0 {
		return nil
	}
	return []grpc.DialOption{grpc.WithInitialWindowSize(n), grpc.WithInitialConnWindowSize(n)}
}

// streamWorkers is the NumStreamWorkers option for n (see Config).
func streamWorkers(n int) grpc.ServerOption {
	if n <= 0 {
		return grpc.EmptyServerOption{}
	}
	return grpc.NumStreamWorkers(uint32(n))
}
