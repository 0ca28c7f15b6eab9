package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
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
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
	"github.com/sessiongate/sessiongate/timeoutprofile"
	"github.com/sessiongate/sessiongate/timeoutprofile/tpprom"
)

// Runtime is a configured upstream ARCP runtime.
type Runtime struct {
	Name string // the name callers use in OpenSessionRequest.runtime
	URL  string // ws://host:port/arcp
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
	// Empty: every caller is "anonymous".
	ClientTokens map[string]string
	// Features are requested upstream when OpenSession names none
	// (default: heartbeat, ack, list_jobs, subscribe, progress).
	Features []string
	// MaxSessions caps all sessions (default 100,000); MaxSessionsPerCaller
	// caps one caller's (default 1,000).
	MaxSessions, MaxSessionsPerCaller int
	// IdleTimeout closes sessions with no call and no running job (default 30 min).
	IdleTimeout time.Duration
	// MaxInputBytes caps a job's input (default 8 MiB).
	MaxInputBytes int
	// Upstream is the template for every upstream connection: timeouts and
	// caps. URL, Token, Client, Features, Counters and Logger are filled in.
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
}

// Gateway is the assembled service: the gRPC server, the session table, and
// the admin HTTP handler.
type Gateway struct {
	grpc     *grpc.Server
	health   *health.Server
	table    *session.Table[*upstream.Conn]
	svc      *service
	ids      identities
	admin    http.Handler
	counters *upstream.Counters
	log      *slog.Logger
	draining atomic.Bool
}

// New validates cfg and assembles a Gateway. Nothing listens until Serve.
func New(cfg Config) (*Gateway, error) {
	if len(cfg.Runtimes) == 0 {
		return nil, errors.New("gateway: at least one runtime is required")
	}
	if cfg.Registry == nil {
		return nil, errors.New("gateway: Registry is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInputBytes == 0 {
		cfg.MaxInputBytes = 8 << 20
	}
	if len(cfg.Features) == 0 {
		cfg.Features = []string{arcp.FeatureHeartbeat, arcp.FeatureAck, arcp.FeatureListJobs, arcp.FeatureSubscribe, arcp.FeatureProgress}
	}
	runtimes := make(map[string]Runtime, len(cfg.Runtimes))
	names := make([]string, 0, len(cfg.Runtimes))
	for _, rt := range cfg.Runtimes {
		if rt.Name == "" || rt.URL == "" {
			return nil, fmt.Errorf("gateway: runtime %q: name and URL are required", rt.Name)
		}
		if _, dup := runtimes[rt.Name]; dup {
			return nil, fmt.Errorf("gateway: runtime %q configured twice", rt.Name)
		}
		runtimes[rt.Name] = rt
		names = append(names, rt.Name)
	}
	table, err := session.New[*upstream.Conn](session.Config{
		InstanceID: cfg.InstanceID, MaxSessions: cfg.MaxSessions, MaxPerCaller: cfg.MaxSessionsPerCaller,
		IdleTimeout: cfg.IdleTimeout, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	g := &Gateway{
		table:    table,
		ids:      newIdentities(cfg.ClientTokens),
		counters: cfg.Upstream.Counters,
		log:      cfg.Logger,
	}
	if g.counters == nil {
		g.counters = &upstream.Counters{}
	}
	tmpl := cfg.Upstream
	tmpl.Counters = g.counters
	tmpl.Logger = cfg.Logger
	features := cfg.Features
	g.svc = &service{
		table: table, runtimes: runtimes, runtimeNames: names, defaultRuntime: cfg.Runtimes[0].Name,
		maxInputBytes: cfg.MaxInputBytes, cancelTimeout: 2 * time.Second, log: cfg.Logger,
		dial: func(ctx context.Context, rt Runtime, req *sessiongatev1.OpenSessionRequest) (*upstream.Conn, error) {
			uc := tmpl
			uc.URL = rt.URL
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
				uc.Features = req.GetFeatures()
			}
			return upstream.Dial(ctx, uc)
		},
	}

	srvMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	if err := cfg.Registry.Register(srvMetrics); err != nil {
		return nil, fmt.Errorf("gateway: register gRPC metrics: %w", err)
	}
	if err := registerGatewayMetrics(cfg.Registry, table, g.counters); err != nil {
		return nil, err
	}
	logger := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		cfg.Logger.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	logOpts := []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(func(c codes.Code) logging.Level {
			switch c {
			case codes.OK, codes.NotFound, codes.Canceled, codes.AlreadyExists:
				return logging.LevelDebug
			case codes.Internal, codes.Unknown, codes.DataLoss:
				return logging.LevelError
			default:
				return logging.LevelWarn
			}
		}),
	}
	recoveryOpt := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		cfg.Logger.ErrorContext(ctx, "panic in handler", "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	unary := []grpc.UnaryServerInterceptor{
		srvMetrics.UnaryServerInterceptor(),
		selector.UnaryServerInterceptor(logging.UnaryServerInterceptor(logger, logOpts...), selector.MatchFunc(logged)),
		recovery.UnaryServerInterceptor(recoveryOpt),
		auth.UnaryServerInterceptor(g.ids.authFunc),
	}
	stream := []grpc.StreamServerInterceptor{
		srvMetrics.StreamServerInterceptor(),
		logging.StreamServerInterceptor(logger, logOpts...),
		recovery.StreamServerInterceptor(recoveryOpt),
		auth.StreamServerInterceptor(g.ids.authFunc),
	}
	enforcer, err := NewEnforcer(cfg.TimeoutProfiles, cfg.Registry, cfg.Logger)
	if err != nil {
		return nil, err
	}
	unary = append(unary, selector.UnaryServerInterceptor(enforcer.UnaryServerInterceptor(), selector.MatchFunc(profiled)))
	stream = append(stream, selector.StreamServerInterceptor(enforcer.StreamServerInterceptor(), selector.MatchFunc(profiled)))

	g.grpc = grpc.NewServer(
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
		grpc.MaxRecvMsgSize(cfg.MaxInputBytes+(1<<20)),
		grpc.MaxSendMsgSize(32<<20),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	sessiongatev1.RegisterSessionGatewayServer(g.grpc, g.svc)
	timeoutprofilev1.RegisterTimeoutProfileServiceServer(g.grpc, timeoutprofile.NewService(enforcer))
	g.health = health.NewServer()
	healthpb.RegisterHealthServer(g.grpc, g.health)
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus(sessiongatev1.SessionGateway_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	reflection.Register(g.grpc)
	srvMetrics.InitializeMetrics(g.grpc)
	g.admin = g.adminHandler(cfg.Registry)
	return g, nil
}

// NewEnforcer builds the timeout profile enforcer the gateway installs: the
// global layer (nil = standard profiles), caller identities from the
// authentication interceptor, warnings to log, and the sw4rm_rpc_* metrics on
// reg. It is exported so that benchmarks measure the production chain.
func NewEnforcer(global *timeoutprofile.Config, reg prometheus.Registerer, log *slog.Logger) (*timeoutprofile.Enforcer, error) {
	obs, err := tpprom.New(reg)
	if err != nil {
		return nil, fmt.Errorf("gateway: timeout profile metrics: %w", err)
	}
	opts := []timeoutprofile.Option{
		timeoutprofile.WithCallerIdentity(callerFrom),
		timeoutprofile.WithObserver(obs),
	}
	if log != nil {
		opts = append(opts, timeoutprofile.WithLogger(log))
	}
	if global != nil {
		opts = append(opts, timeoutprofile.WithConfig(global))
	}
	return timeoutprofile.New(opts...)
}

// logged says which calls are access-logged: all but the liveness probes
// (GetSessionStatus and health checks), which balancers call thousands of
// times a second and which, like health checks everywhere, would only drown
// the log. Their failures are still counted by the gRPC metrics.
func logged(_ context.Context, c interceptors.CallMeta) bool {
	switch {
	case c.Service == sessiongatev1.SessionGateway_ServiceDesc.ServiceName && c.Method == "GetSessionStatus":
		return false
	case c.Service == "grpc.health.v1.Health":
		return false
	}
	return true
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

// Serve serves gRPC on lis until Shutdown; it returns nil after a shutdown.
func (g *Gateway) Serve(lis net.Listener) error {
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

// Counters returns the upstream counters all sessions add to.
func (g *Gateway) Counters() *upstream.Counters { return g.counters }

// Shutdown drains in a fixed order: health NOT_SERVING, refuse new sessions
// and close every upstream session gracefully, then stop gRPC gracefully;
// when ctx ends first, stop hard. In-flight calls on a closed session end
// with Unavailable.
func (g *Gateway) Shutdown(ctx context.Context) error {
	g.draining.Store(true)
	g.health.Shutdown() // every service NOT_SERVING, Watch streams told
	drainErr := g.table.Drain(ctx)
	stopped := make(chan struct{})
	go func() { g.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		g.grpc.Stop()
		<-stopped
	}
	g.table.Wait()
	return drainErr
}
