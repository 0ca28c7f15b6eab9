package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	gatewayv1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// The request metadata keys the client sets.
const (
	// TimeoutMetadataKey asks the gateway for a timeout, in milliseconds.
	TimeoutMetadataKey = "x-timeout-ms"
	// SessionMetadataKey names the session of a session-scoped call.
	SessionMetadataKey = "x-sessiongate-session"
	// TraceparentMetadataKey carries the caller's W3C trace context; the
	// trace id in it becomes the trace id of the jobs the call submits.
	TraceparentMetadataKey = "traceparent"
)

// closeTimeout bounds Session.Close when its context has no deadline.
const closeTimeout = 10 * time.Second

// Option configures New.
type Option func(*options)

type options struct {
	creds   credentials.TransportCredentials
	token   string
	noRetry bool
	dial    []grpc.DialOption

	affinity bool     // WithSessionAffinity
	replicas []string // WithReplicas

	window int32 // WithWindowBytes

	silenceAfter, silenceTimeout time.Duration // WithSilenceBound; after < 0: WithoutSilenceBound
}

// DefaultWindowBytes is the HTTP/2 flow-control window a Client grants the
// gateway, per call and per connection, unless WithWindowBytes says
// otherwise: 1 MiB, the gateway's own default.
const DefaultWindowBytes = 1 << 20

// minWindowBytes is HTTP/2's initial window; grpc-go ignores a smaller one.
const minWindowBytes = 64 << 10

// WithWindowBytes sets the HTTP/2 flow-control window the client grants the
// gateway, per call and per connection (default DefaultWindowBytes; values
// under 64 KiB are raised to 64 KiB). A fixed window turns off grpc-go's
// bandwidth-delay probe, which sends a PING after every answer received
// while no PING is outstanding: with one call at a time on a connection,
// that is a PING per call, and its ack is a write of its own on the gateway
// and a wake-up of the client's reader. A negative n restores the probe and
// its dynamic window (for large results over long, fast links).
func WithWindowBytes(n int32) Option {
	return func(o *options) { o.window = n }
}

// WindowDialOptions are the dial options WithWindowBytes(n) adds, for a
// connection the caller dials itself (NewFromConn): n as WithWindowBytes
// takes it, 0 for DefaultWindowBytes; nil for a negative n.
func WindowDialOptions(n int32) []grpc.DialOption {
	switch {
	case n < 0:
		return nil
	case n == 0:
		n = DefaultWindowBytes
	case n < minWindowBytes:
		n = minWindowBytes
	}
	return []grpc.DialOption{grpc.WithInitialWindowSize(n), grpc.WithInitialConnWindowSize(n)}
}

// WithTransportCredentials sets the connection's credentials (default:
// insecure, for a gateway on loopback or behind a sidecar).
func WithTransportCredentials(c credentials.TransportCredentials) Option {
	return func(o *options) { o.creds = c }
}

// WithToken sends "authorization: Bearer <token>" on every call, for a
// gateway that identifies callers by token.
func WithToken(token string) Option {
	return func(o *options) { o.token = token }
}

// WithoutRetry leaves out the published retry policy.
func WithoutRetry() Option {
	return func(o *options) { o.noRetry = true }
}

// WithDialOptions adds grpc.DialOptions, e.g. interceptors.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dial = append(o.dial, opts...) }
}

// Client is a connection to a sessiongate gateway. Its methods may be called
// concurrently.
type Client struct {
	// immutable
	api   gatewayv1.SessionGatewayClient
	conn  *grpc.ClientConn // nil when the caller owns the connection
	token string
	wd    *watchdog // the silence bound; nil without one
}

// New connects to the gateway at target (see grpc.NewClient: the connection
// is made on the first call).
func New(target string, opts ...Option) (*Client, error) {
	o := options{creds: insecure.NewCredentials()}
	for _, opt := range opts {
		opt(&o)
	}
	dial := append([]grpc.DialOption{grpc.WithTransportCredentials(o.creds), receiveLimit(), reconnect()}, WindowDialOptions(o.window)...)
	var sc string
	if !o.noRetry {
		var err error
		if sc, err = RetryServiceConfig(); err != nil {
			return nil, err
		}
	}
	target, sc, extra, err := o.dialTarget(target, sc)
	if err != nil {
		return nil, err
	}
	dial = append(dial, extra...)
	if sc != "" {
		dial = append(dial, grpc.WithDefaultServiceConfig(sc))
	}
	if !o.noRetry {
		dial = append(dial, grpc.WithChainUnaryInterceptor(resetResend))
	}
	var wd *watchdog
	if o.silenceAfter >= 0 {
		after, timeout := o.silenceAfter, o.silenceTimeout
		if after == 0 {
			after = DefaultSilenceAfter
		}
		if timeout <= 0 {
			timeout = DefaultSilenceTimeout
		}
		wd = newWatchdog(after, timeout, []grpc.DialOption{grpc.WithTransportCredentials(o.creds)})
		dial = append(dial, grpc.WithChainUnaryInterceptor(wd.unary), grpc.WithChainStreamInterceptor(wd.stream))
	}
	conn, err := grpc.NewClient(target, append(dial, o.dial...)...)
	if err != nil {
		if wd != nil {
			wd.close()
		}
		return nil, err
	}
	return &Client{api: gatewayv1.NewSessionGatewayClient(conn), conn: conn, token: o.token, wd: wd}, nil
}

// reconnect is New's reconnect backoff: from 100 ms growing to 1 s (grpc-go's
// default grows to two minutes, so a client would shun a restarted replica
// that long), and a connection attempt given up after 2 s (grpc-go's 20 s
// would hold a connection to a frozen replica as long after its thaw).
func reconnect() grpc.DialOption {
	return grpc.WithConnectParams(grpc.ConnectParams{MinConnectTimeout: 2 * time.Second,
		Backoff: backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}})
}

// Conn is the connection New made (nil for NewFromConn's client), for the
// generated stubs: their calls get the retry policy, the balancing and the
// silence bound as the Client's own do.
func (c *Client) Conn() grpc.ClientConnInterface {
	if c.conn == nil {
		return nil
	}
	return c.conn
}

// NewFromConn wraps a connection the caller owns (and closes); no retry
// policy or token is added to it.
func NewFromConn(conn grpc.ClientConnInterface) *Client {
	return &Client{api: gatewayv1.NewSessionGatewayClient(conn)}
}

// Close closes the connection New made. It does not close sessions.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	if c.wd != nil {
		c.wd.close()
	}
	return err
}

// callContext adds the client's request metadata to ctx: the token, the
// deadline as x-timeout-ms (unless the caller set one), the session, and
// the traceparent of the context's OpenTelemetry span (unless the caller
// set one).
func (c *Client) callContext(ctx context.Context, sessionID string, sessionScoped bool) context.Context {
	kv := make([]string, 0, 6)
	if c.token != "" {
		kv = append(kv, "authorization", "Bearer "+c.token)
	}
	if dl, ok := ctx.Deadline(); ok {
		if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(TimeoutMetadataKey)) == 0 {
			ms := (time.Until(dl) + time.Millisecond - 1) / time.Millisecond
			kv = append(kv, TimeoutMetadataKey, strconv.FormatInt(max(int64(ms), 1), 10))
		}
	}
	if sessionScoped {
		kv = append(kv, SessionMetadataKey, sessionID)
	}
	if tp := spanTraceparent(ctx); tp != "" {
		if md, _ := metadata.FromOutgoingContext(ctx); len(md.Get(TraceparentMetadataKey)) == 0 {
			kv = append(kv, TraceparentMetadataKey, tp)
		}
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// OpenSession opens a session; close it with Session.Close.
func (c *Client) OpenSession(ctx context.Context, req *gatewayv1.OpenSessionRequest, opts ...grpc.CallOption) (*Session, error) {
	if req == nil {
		req = &gatewayv1.OpenSessionRequest{}
	}
	resp, err := c.api.OpenSession(c.callContext(ctx, "", false), req, opts...)
	if err != nil {
		return nil, wrapError(err)
	}
	return &Session{c: c, id: resp.GetSessionId(), Opened: resp}, nil
}

// Session returns a handle on an existing session, e.g. one opened by
// another process. Nothing is sent until it is used.
func (c *Client) Session(id string) *Session { return &Session{c: c, id: id} }

// Status probes a session's liveness (side-effect free): a normal answer
// whose Status is SESSION_STATUS_LIVE or SESSION_STATUS_NOT_FOUND.
func (c *Client) Status(ctx context.Context, sessionID string, opts ...grpc.CallOption) (*gatewayv1.GetSessionStatusResponse, error) {
	resp, err := c.api.GetSessionStatus(c.callContext(ctx, sessionID, true),
		&gatewayv1.GetSessionStatusRequest{SessionId: sessionID}, opts...)
	return resp, wrapError(err)
}

// ListSessions lists the caller's sessions, oldest first.
func (c *Client) ListSessions(ctx context.Context, opts ...grpc.CallOption) ([]*gatewayv1.SessionInfo, error) {
	resp, err := c.api.ListSessions(c.callContext(ctx, "", false), &gatewayv1.ListSessionsRequest{}, opts...)
	return resp.GetSessions(), wrapError(err)
}

// Session is a session on a runtime. Its methods may be called concurrently.
type Session struct {
	// immutable
	c  *Client
	id string
	// Opened is the OpenSession answer (features, agents, runtime, instance);
	// nil for a handle from Client.Session.
	Opened *gatewayv1.OpenSessionResponse

	closeMu  sync.Mutex
	closed   bool  // guarded by closeMu
	closeErr error // guarded by closeMu
}

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// JobOption sets an optional field of a job's request.
type JobOption func(*jobOptions)

type jobOptions struct {
	idempotencyKey string
	maxRuntimeSec  uint32
	agentVersion   string
	lease          Lease
	expiresAt      time.Time
	extensions     map[string]any
	traceparent    string
}

// Lease is a set of capability grants (ARCP §9): namespace ("fs.read",
// "cost.budget", …) to patterns ("/workspace/**", "USD:5.00", …).
type Lease map[string][]string

// AgentVersion runs the job on this version of the agent (the agent name
// must not name one too); the answer's Agent is the version resolved.
func AgentVersion(v string) JobOption {
	return func(o *jobOptions) { o.agentVersion = v }
}

// LeaseRequest asks the runtime for these capabilities; it grants them (the
// answer's Lease) or refuses the job with PERMISSION_DENIED.
func LeaseRequest(l Lease) JobOption {
	return func(o *jobOptions) { o.lease = l }
}

// LeaseExpiresAt bounds the job's lease: a job still running at t fails with
// LEASE_EXPIRED. t must be in the future.
func LeaseExpiresAt(t time.Time) JobOption {
	return func(o *jobOptions) { o.expiresAt = t }
}

// Extensions puts vendor extensions (keys "x-vendor.…", values anything
// encoding/json can marshal) on the job's submit envelope.
func Extensions(ext map[string]any) JobOption {
	return func(o *jobOptions) { o.extensions = ext }
}

// Traceparent sends a W3C traceparent header with the call, so that the
// job's trace id is the trace id in it. Without it the client sends the
// traceparent of the context's OpenTelemetry span, if it has a valid one,
// and otherwise none (the gateway then gives the job a fresh trace id).
func Traceparent(tp string) JobOption {
	return func(o *jobOptions) { o.traceparent = tp }
}

// IdempotencyKey makes a repeated submit with the same key and input return
// the same job. Without it each Run or Submit call gets a fresh random key,
// the same for all of the call's retried attempts.
func IdempotencyKey(key string) JobOption {
	return func(o *jobOptions) { o.idempotencyKey = key }
}

// MaxRuntime sets a runtime-side limit on the job's duration (whole seconds,
// rounded up).
func MaxRuntime(d time.Duration) JobOption {
	return func(o *jobOptions) { o.maxRuntimeSec = uint32((d + time.Second - 1) / time.Second) }
}

// RunResult is a successful job's result.
type RunResult struct {
	JobID string
	// Result is the result as encoding/json decodes into an any; when the
	// runtime's JSON had no google.protobuf.Value form (a number beyond
	// float64, invalid UTF-8) and came as raw text, numbers are json.Number.
	Result  any
	Summary string
	// Grant is what the runtime said of the job when it accepted it: the
	// resolved agent, the trace id, the lease.
	Grant
	// ResultID and ResultSize are set when the result was streamed in
	// result_chunk events; Result is then the assembled result.
	ResultID   string
	ResultSize int64
	// Extensions are the vendor extensions of the job's result envelope.
	Extensions map[string]any

	value *structpb.Value
	raw   []byte
}

// Decode decodes the result into out (a pointer), as encoding/json would
// (from the runtime's own text when the gateway sent it raw).
func (r *RunResult) Decode(out any) error {
	if len(r.raw) > 0 {
		return json.Unmarshal(r.raw, out)
	}
	return decodeValue(r.value, out)
}

// Run runs a job and waits for its result. A failed job returns the *Error
// of its status (Domain "arcp", Reason the ARCP code).
func (s *Session) Run(ctx context.Context, agent string, input any, opts ...JobOption) (*RunResult, error) {
	in, o, err := jobInput(input, opts)
	if err != nil {
		return nil, err
	}
	req := &gatewayv1.RunJobRequest{
		SessionId: s.id, Agent: agent, Input: in, IdempotencyKey: callKey(o.idempotencyKey), MaxRuntimeSec: o.maxRuntimeSec,
		AgentVersion: o.agentVersion, LeaseRequest: leaseProto(o.lease), LeaseConstraints: constraintsProto(o.expiresAt),
	}
	if req.Extensions, err = extensionsProto(o.extensions); err != nil {
		return nil, err
	}
	resp, err := s.c.api.RunJob(s.c.callContext(o.context(ctx), s.id, true), req)
	if err != nil {
		return nil, wrapError(err)
	}
	res := &RunResult{
		JobID: resp.GetJobId(), Summary: resp.GetSummary(), value: resp.GetResult(), raw: resp.GetRawResult(),
		Grant:    grant(resp.GetAgent(), resp.GetTraceId(), resp.GetLease(), resp.GetLeaseConstraints(), resp.GetBudget()),
		ResultID: resp.GetResultId(), ResultSize: resp.GetResultSize(), Extensions: extensionsMap(resp.GetExtensions()),
	}
	if len(res.raw) > 0 {
		d := json.NewDecoder(bytes.NewReader(res.raw))
		d.UseNumber()
		if err := d.Decode(&res.Result); err != nil {
			return nil, fmt.Errorf("sessiongate: job %s: raw result: %w", res.JobID, err)
		}
	} else {
		res.Result = res.value.AsInterface()
	}
	return res, nil
}

// Job is a job the runtime accepted.
type Job struct {
	ID         string
	AcceptedAt time.Time
	Grant
	// Extensions are the vendor extensions of the job.accepted envelope.
	Extensions map[string]any
	// AfterEventSeq: every event of the job has an event_seq above it (0
	// when the gateway cannot say). Watch from it, FromEventSeq(
	// job.AfterEventSeq), rather than from 0: the same events, and a watch
	// cut before its first event (a rolling restart) continues on the
	// replica that took the session over.
	AfterEventSeq uint64
}

// Grant is what the runtime says of a job it accepted.
type Grant struct {
	// Agent is the resolved agent, "name@version", when the runtime says.
	Agent string
	// TraceID is the job's W3C trace id: the caller's (see Traceparent), or
	// a fresh one.
	TraceID string
	// Lease is the lease granted; nil when the runtime granted none.
	Lease Lease
	// LeaseExpiresAt is when the lease ends; zero when it does not.
	LeaseExpiresAt time.Time
	// Budget holds the initial budget per currency, when the lease has
	// cost.budget.
	Budget map[string]float64
}

// Submit submits a job and returns it once the runtime accepted it; watch it
// with Watch(ctx, job.ID, FromEventSeq(job.AfterEventSeq)).
func (s *Session) Submit(ctx context.Context, agent string, input any, opts ...JobOption) (*Job, error) {
	in, o, err := jobInput(input, opts)
	if err != nil {
		return nil, err
	}
	req := &gatewayv1.SubmitJobRequest{
		SessionId: s.id, Agent: agent, Input: in, IdempotencyKey: callKey(o.idempotencyKey), MaxRuntimeSec: o.maxRuntimeSec,
		AgentVersion: o.agentVersion, LeaseRequest: leaseProto(o.lease), LeaseConstraints: constraintsProto(o.expiresAt),
	}
	if req.Extensions, err = extensionsProto(o.extensions); err != nil {
		return nil, err
	}
	resp, err := s.c.api.SubmitJob(s.c.callContext(o.context(ctx), s.id, true), req)
	if err != nil {
		return nil, wrapError(err)
	}
	job := &Job{
		ID:            resp.GetJobId(),
		Grant:         grant(resp.GetAgent(), resp.GetTraceId(), resp.GetLease(), resp.GetLeaseConstraints(), resp.GetBudget()),
		Extensions:    extensionsMap(resp.GetExtensions()),
		AfterEventSeq: resp.GetAfterEventSeq(),
	}
	if at := resp.GetAcceptedAt(); at != nil {
		job.AcceptedAt = at.AsTime()
	}
	return job, nil
}

func jobInput(input any, opts []JobOption) (*structpb.Value, jobOptions, error) {
	var o jobOptions
	for _, opt := range opts {
		opt(&o)
	}
	if input == nil {
		return nil, o, nil
	}
	v, err := toValue(input, "input")
	if err == nil {
		err = checkInputDepth(v) // depth.go
	}
	return v, o, err
}

// Cancel asks the runtime to cancel a job; the job then ends with a
// CANCELLED error item.
func (s *Session) Cancel(ctx context.Context, jobID, reason string) error {
	_, err := s.c.api.CancelJob(s.c.callContext(ctx, s.id, true),
		&gatewayv1.CancelJobRequest{SessionId: s.id, JobId: jobID, Reason: reason})
	return wrapError(err)
}

// Status probes the session's liveness.
func (s *Session) Status(ctx context.Context) (*gatewayv1.GetSessionStatusResponse, error) {
	return s.c.Status(ctx, s.id)
}

// Close closes the session upstream, under ctx (bounded to 10 s when ctx
// has no deadline). Once it has an answer it is idempotent (later calls
// return that answer); a Close that ctx ended may be called again. A session
// the gateway no longer knows counts as closed.
func (s *Session) Close(ctx context.Context) error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return s.closeErr
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, closeTimeout)
		defer cancel()
	}
	_, err := s.c.api.CloseSession(s.c.callContext(ctx, s.id, true), &gatewayv1.CloseSessionRequest{SessionId: s.id})
	var e *Error
	if err = wrapError(err); errors.As(err, &e) && e.Reason == "SESSION_NOT_FOUND" {
		err = nil
	}
	if err != nil && ctx.Err() != nil {
		return err // not an answer: the caller may try again
	}
	s.closed, s.closeErr = true, err
	return err
}
