package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// Limits on request fields, so that bad input gets a clear error before it
// reaches a runtime.
const (
	maxNameLen   = 256
	maxReasonLen = 1024
	maxKeyLen    = 256
)

// service implements sessiongatev1.SessionGatewayServer. All methods are safe
// for concurrent use; the state lives in the session table, the budgets and
// the watcher counts.
//
// Goroutines: WatchJob runs its sends on a goroutine of its own (see
// sender), and a job submitted with SubmitJob (or abandoned by RunJob)
// holds its live-job unit on a goroutine that waits for the job's end (see
// holdUntilEnd). Both are counted in bg, which Gateway.Shutdown waits for
// once every session is closed (which ends every such wait).
type service struct {
	sessiongatev1.UnimplementedSessionGatewayServer

	// Immutable after construction.
	table             *session.Table[*upstream.Conn]
	runtimes          map[string]Runtime
	runtimeNames      []string
	defaultRuntime    string
	dial              func(ctx context.Context, rt Runtime, caller string, req *sessiongatev1.OpenSessionRequest) (*upstream.Conn, error)
	maxInputBytes     int
	maxWatchersPerJob int
	liveJobs          *budget.Budget // gateway-wide and per-caller live jobs
	cancelTimeout     time.Duration
	log               *slog.Logger

	bg sync.WaitGroup // senders and live-job holders

	mu       sync.Mutex
	watchers map[watchKey]int // guarded by mu: WatchJob streams per job

	agents jobAgents // agentprofiles.go: the agents of submitted jobs, for WatchJob's profile

	watchEnded func(error) // test hook, set before serving: runs when a WatchJob handler returns

	cluster *clusterState // set by New in cluster mode (see cluster_status.go)
}

type watchKey struct {
	sess *session.Session[*upstream.Conn]
	job  string
}

var _ sessiongatev1.SessionGatewayServer = (*service)(nil)

func (s *service) err(err error) error { return toStatus(s.log, err) }

func invalid(format string, args ...any) error {
	return gatewayStatus(codes.InvalidArgument, "INVALID_ARGUMENT", fmt.Sprintf(format, args...), nil)
}

// clip shortens untrusted text before it is echoed in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

func checkSessionID(id string) error {
	if id == "" {
		return invalid("session_id is required: pass the id returned by OpenSession")
	}
	if _, ok := session.ParseID(id); !ok {
		return invalid("session_id %q is malformed: pass the id returned by OpenSession", clip(id))
	}
	return nil
}

func checkJobID(id string) error {
	if id == "" {
		return invalid("job_id is required: pass the id returned by SubmitJob")
	}
	if len(id) > maxNameLen {
		return invalid("job_id is %d bytes; at most %d", len(id), maxNameLen)
	}
	return nil
}

func checkText(field, v string, max int) error {
	if len(v) > max {
		return invalid("%s is %d bytes; at most %d", field, len(v), max)
	}
	return nil
}

func (s *service) OpenSession(ctx context.Context, req *sessiongatev1.OpenSessionRequest) (*sessiongatev1.OpenSessionResponse, error) {
	name := req.GetRuntime()
	if name == "" {
		name = s.defaultRuntime
	}
	rt, ok := s.runtimes[name]
	if !ok {
		return nil, gatewayStatus(codes.NotFound, "RUNTIME_NOT_FOUND",
			fmt.Sprintf("runtime %q is not configured; configured runtimes: %s", clip(name), strings.Join(s.runtimeNames, ", ")), nil)
	}
	if err := checkText("client_name", req.GetClientName(), maxNameLen); err != nil {
		return nil, err
	}
	if err := checkText("upstream_token", req.GetUpstreamToken(), 4096); err != nil {
		return nil, err
	}
	for _, f := range req.GetFeatures() {
		if !slices.Contains(arcp.AllFeatures, f) {
			return nil, invalid("feature %q is not an ARCP 1.1 feature; known: %s", clip(f), strings.Join(arcp.AllFeatures, ", "))
		}
	}
	caller := callerFrom(ctx)
	sess, err := s.table.Open(ctx, caller, rt.Name, func(ctx context.Context) (*upstream.Conn, error) {
		return s.dial(ctx, rt, caller, req)
	})
	if err != nil {
		return nil, s.err(err)
	}
	w := sess.Conn.Welcome()
	st := sess.Conn.Status()
	resp := &sessiongatev1.OpenSessionResponse{
		SessionId:  sess.ID,
		Features:   slices.Clone(st.Features),
		Runtime:    &sessiongatev1.RuntimeInfo{Name: rt.Name, Implementation: w.Runtime.Name, Version: w.Runtime.Version},
		InstanceId: s.table.InstanceID(),
	}
	for _, a := range w.Capabilities.Agents {
		resp.Agents = append(resp.Agents, &sessiongatev1.Agent{Name: a.Name, Versions: a.Versions, DefaultVersion: a.Default})
	}
	return resp, nil
}

func phaseOf(sess *session.Session[*upstream.Conn], st upstream.Status) sessiongatev1.SessionPhase {
	if sess.Closing() {
		return sessiongatev1.SessionPhase_SESSION_PHASE_CLOSING
	}
	switch st.State {
	case upstream.StateReady:
		return sessiongatev1.SessionPhase_SESSION_PHASE_READY
	case upstream.StateClosing, upstream.StateClosed:
		return sessiongatev1.SessionPhase_SESSION_PHASE_CLOSING
	default:
		return sessiongatev1.SessionPhase_SESSION_PHASE_RECONNECTING
	}
}

// GetSessionStatus answers from memory: a map lookup and an atomic snapshot of
// the upstream connection. It sends nothing upstream and touches no timer.
func (s *service) GetSessionStatus(ctx context.Context, req *sessiongatev1.GetSessionStatusRequest) (*sessiongatev1.GetSessionStatusResponse, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return nil, err
	}
	view := req.GetView()
	if _, known := sessiongatev1.SessionStatusView_name[int32(view)]; !known {
		return nil, invalid("view %d is unknown: use SESSION_STATUS_VIEW_BASIC or SESSION_STATUS_VIEW_FULL", int32(view))
	}
	resp, err := s.statusAny(ctx, req.GetSessionId(), callerFrom(ctx))
	if err == nil && view == sessiongatev1.SessionStatusView_SESSION_STATUS_VIEW_BASIC {
		resp.Runtime, resp.Features = "", nil
	}
	return resp, err
}

// status is the probe shared by gRPC and HTTP; id must be well-formed.
func (s *service) status(id, caller string) *sessiongatev1.GetSessionStatusResponse {
	sess, ok := s.table.Get(id, caller)
	if !ok || sess.Lost() {
		return &sessiongatev1.GetSessionStatusResponse{
			Status:     sessiongatev1.SessionStatus_SESSION_STATUS_NOT_FOUND,
			InstanceId: s.table.InstanceID(),
		}
	}
	st := sess.Conn.Status()
	return &sessiongatev1.GetSessionStatusResponse{
		Status:       sessiongatev1.SessionStatus_SESSION_STATUS_LIVE,
		Phase:        phaseOf(sess, st),
		Runtime:      sess.Runtime,
		Features:     st.Features,
		LastEventSeq: st.LastEventSeq,
		Generation:   st.Generation,
		InstanceId:   s.table.InstanceID(),
	}
}

func (s *service) CloseSession(ctx context.Context, req *sessiongatev1.CloseSessionRequest) (*sessiongatev1.CloseSessionResponse, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.GetReason(), maxReasonLen); err != nil {
		return nil, err
	}
	if err := s.table.CloseWithReason(ctx, req.GetSessionId(), callerFrom(ctx), req.GetReason()); err != nil {
		// Once removed from the table the session is gone whatever the
		// upstream close said; only "not found" is the caller's business.
		if errors.Is(err, session.ErrNotFound) {
			return nil, s.err(err)
		}
		s.log.Warn("upstream close was not clean", "session_id", req.GetSessionId(), "err", err)
	}
	return &sessiongatev1.CloseSessionResponse{}, nil
}

func (s *service) ListSessions(ctx context.Context, _ *sessiongatev1.ListSessionsRequest) (*sessiongatev1.ListSessionsResponse, error) {
	list := s.table.List(callerFrom(ctx))
	resp := &sessiongatev1.ListSessionsResponse{Sessions: make([]*sessiongatev1.SessionInfo, 0, len(list))}
	for _, sess := range list {
		resp.Sessions = append(resp.Sessions, &sessiongatev1.SessionInfo{
			SessionId:  sess.ID,
			Phase:      phaseOf(sess, sess.Conn.Status()),
			Runtime:    sess.Runtime,
			OpenedAt:   timestamppb.New(sess.OpenedAt),
			ActiveJobs: uint32(sess.Conn.ActiveJobs()),
		})
	}
	return resp, nil
}

// jobRequest is what SubmitJob and RunJob share.
type jobRequest interface {
	submitExtras // jobs_api.go
	GetSessionId() string
	GetAgent() string
	GetInput() *structpb.Value
	GetIdempotencyKey() string
	GetMaxRuntimeSec() uint32
}

// submitPayload checks req and builds the job.submit payload. input, when
// not nil, is req's input already as JSON text (wirecodec.DecodeRunJob), held to
// the cap; req then has none.
func (s *service) submitPayload(req jobRequest, input []byte) (arcp.Submit, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return arcp.Submit{}, err
	}
	agent := req.GetAgent()
	if agent == "" {
		return arcp.Submit{}, invalid("agent is required, e.g. \"echo\" or \"echo@1.0.0\"")
	}
	if err := checkText("agent", agent, maxNameLen); err != nil {
		return arcp.Submit{}, err
	}
	if err := checkText("idempotency_key", req.GetIdempotencyKey(), maxKeyLen); err != nil {
		return arcp.Submit{}, err
	}
	if req.GetMaxRuntimeSec() > 7*24*3600 {
		return arcp.Submit{}, invalid("max_runtime_sec %d exceeds one week", req.GetMaxRuntimeSec())
	}
	sub := arcp.Submit{Agent: agent, IdempotencyKey: req.GetIdempotencyKey(), MaxRuntimeSec: int(req.GetMaxRuntimeSec())}
	if input != nil {
		sub.Input = input
	} else if in := req.GetInput(); in != nil {
		raw, err := wirecodec.AppendJSONMax(make([]byte, 0, 64), in, s.maxInputBytes)
		if err == wirecodec.ErrTooLong || err == nil && len(raw) > s.maxInputBytes {
			return arcp.Submit{}, gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
				fmt.Sprintf("input is more than %d bytes of JSON; cap max_input_bytes=%d", s.maxInputBytes, s.maxInputBytes),
				map[string]string{"cap": "max_input_bytes"})
		}
		if err != nil {
			return arcp.Submit{}, inputError(err)
		}
		sub.Input = raw
	}
	if path, deep := jsonTooDeep(sub.Input, MaxValueDepth); deep {
		return arcp.Submit{}, tooDeepInput(path)
	}
	return sub, nil
}

func (s *service) acquire(ctx context.Context, id string) (*session.Session[*upstream.Conn], func(), error) {
	sess, release, err := s.table.Acquire(id, callerFrom(ctx))
	if err != nil {
		noteDetached(ctx, err) // cluster mode: the call may be routed again
		return nil, nil, s.err(err)
	}
	if s.cluster != nil && s.cluster.movingSession(ctx, id) {
		release() // being moved: routed again (clusterUnary)
		return nil, nil, s.err(upstream.ErrDetached)
	}
	return sess, release, nil
}

// inputError explains why a job's input could not be encoded, in terms a
// caller can act on.
func inputError(err error) error {
	var ve *wirecodec.ValueError
	if !errors.As(err, &ve) {
		return invalid("input is not a JSON value: %v", err)
	}
	field := "input" + ve.Path
	if ve.NoKind {
		return gatewayStatus(codes.InvalidArgument, "VALUE_KIND_NOT_SET", field+": google.protobuf.Value has no kind set. "+
			"Every Value needs exactly one of null_value, number_value, string_value, bool_value, struct_value, list_value. "+
			"In Node with @grpc/proto-loader a plain object is not converted: build {structValue: {fields: {hello: {stringValue: \"world\"}}}}; "+
			"in Python use google.protobuf.json_format.ParseDict(obj, struct_pb2.Value()); "+
			"or use the sessiongate clients (@sessiongate/client, Python sessiongate), which take plain values",
			map[string]string{"field": field})
	}
	return gatewayStatus(codes.InvalidArgument, "INVALID_ARGUMENT", field+": "+ve.Err.Error()+": JSON has no NaN or infinite numbers",
		map[string]string{"field": field})
}

// submit validates a job request, acquires its session, takes a unit of the
// caller's live-job budget and submits the job. On success the caller must
// call release when its call ends, and owns the live-job unit: it gives it
// back with s.liveJobs.Release or hands it to holdUntilEnd.
func (s *service) submit(ctx context.Context, req jobRequest, input []byte) (*session.Session[*upstream.Conn], func(), arcp.Accepted, error) {
	sub, err := s.submitPayload(req, input)
	if err != nil {
		return nil, nil, arcp.Accepted{}, err
	}
	opts, err := applyExtras(ctx, req, &sub)
	if err != nil {
		return nil, nil, arcp.Accepted{}, err
	}
	_, opts.AwaitResult = req.(*sessiongatev1.RunJobRequest) // runJob Waits for the result
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return nil, nil, arcp.Accepted{}, err
	}
	if err := checkExtraFeatures(sub, sess.Conn.Status().Features); err != nil {
		release()
		return nil, nil, arcp.Accepted{}, err
	}
	if err := s.liveJobs.Reserve(sess.Caller, 1); err != nil {
		release()
		return nil, nil, arcp.Accepted{}, s.err(err)
	}
	sctx, span := upstreamSpan(ctx, "job.submit", submitAttrs(sub, opts)...) // tracing.go
	acc, err := sess.Conn.SubmitWith(sctx, sub, opts)
	endSpan(span, err)
	if acc.TraceID == "" {
		acc.TraceID = opts.TraceID // the runtime did not echo it
	}
	if err != nil {
		// OUTCOME_UNKNOWN included: a job that may exist but that this
		// connection does not know cannot be waited for; its unit goes back.
		s.liveJobs.Release(sess.Caller, 1)
		release()
		return nil, nil, arcp.Accepted{}, s.err(err)
	}
	return sess, release, acc, nil
}

// holdUntilEnd keeps the live-job unit of a job until the job has ended on
// the runtime (its terminal arrived, the connection forgot it, or the
// session ended), then gives it back.
func (s *service) holdUntilEnd(sess *session.Session[*upstream.Conn], jobID string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer s.liveJobs.Release(sess.Caller, 1)
		defer s.agents.drop(jobID)
		<-sess.Conn.JobDone(jobID) // the terminal, the job forgotten, or the session ended
	}()
}

func (s *service) SubmitJob(ctx context.Context, req *sessiongatev1.SubmitJobRequest) (*sessiongatev1.SubmitJobResponse, error) {
	sess, release, acc, err := s.submit(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	release()
	s.agents.put(acc.JobID, acceptedAgent(acc, req))
	s.holdUntilEnd(sess, acc.JobID)
	resp := submitResponse(acc)
	resp.AfterEventSeq = sess.Conn.JobStartAfter(acc.JobID)
	return resp, nil
}

func (s *service) RunJob(ctx context.Context, req *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
	resp, err := s.runJob(ctx, req, nil, false)
	if err != nil {
		return nil, err
	}
	return resp.(*sessiongatev1.RunJobResponse), nil
}

// runJob is RunJob; input is submitPayload's. With wire, the answer may be a *wirecodec.RawMessage instead of
// a *RunJobResponse: the runtime's result transcoded from JSON straight to
// its protobuf bytes (appendValueWire) after the other fields, where the
// Value would be built only to be marshalled at once. runJobHandler, the
// server's handler for the method, asks for that.
func (s *service) runJob(ctx context.Context, req *sessiongatev1.RunJobRequest, input []byte, wire bool) (any, error) {
	sess, release, acc, err := s.submit(ctx, req, input)
	if err != nil {
		return nil, err
	}
	defer release()
	term, err := s.waitJob(ctx, sess, acc.JobID) // caller_jobs.go
	if err == nil {
		s.liveJobs.Release(sess.Caller, 1)
	} else {
		s.holdUntilEnd(sess, acc.JobID)
		if ctx.Err() != nil {
			// The caller gave up or its budget ran out: the job must not
			// run on for nobody. Cancel it upstream before answering,
			// bounded so that a stalled runtime cannot hold the answer.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cancelTimeout)
			var ended *upstream.JobEndedError
			if cerr := sess.Conn.Cancel(cctx, acc.JobID, "caller gave up"); cerr != nil && !errors.As(cerr, &ended) {
				s.log.Warn("cancel after caller gave up", "job_id", acc.JobID, "err", cerr)
			}
			cancel()
		}
		return nil, s.err(err)
	}
	if term.Error != nil {
		s.forgetRun(sess, req, acc.JobID)
		return nil, jobErrorStatus(acc.JobID, term.Error)
	}
	if term.AssemblyErr != nil {
		s.forgetRun(sess, req, acc.JobID)
		return nil, s.err(&assemblyError{jobID: acc.JobID, err: term.AssemblyErr})
	}
	resp := &sessiongatev1.RunJobResponse{JobId: acc.JobID}
	decorateRun(resp, acc, term)
	if term.Result != nil {
		resp.Summary = term.Result.Summary
		if wire && term.Assembled == nil && len(term.Result.Result) > 0 && valueDepthOK(term.Result.Result) {
			if b, ok := wirecodec.AppendRunJobWire(resp, term.Result.Result); ok {
				s.forgetRun(sess, req, acc.JobID) // the result now lives in b only
				return &wirecodec.RawMessage{Bytes: b}, nil
			}
		}
		resp.Result, resp.RawResult = valueOrRaw(term.Result.Result)
	}
	if a := term.Assembled; a != nil {
		// A result streamed in result_chunk events (§8.4): text as a
		// string, bytes as the raw result.
		if a.Text {
			resp.Result, resp.RawResult = structpb.NewStringValue(string(a.Data)), nil
		} else {
			resp.Result, resp.RawResult = nil, slices.Clone(a.Data)
		}
	}
	s.forgetRun(sess, req, acc.JobID) // the result now lives in resp only
	return resp, nil
}

// valueOrRaw converts a runtime's JSON to a Value, or, when it has no Value
// form, returns it raw for the API's raw_* field.
func valueOrRaw(raw []byte) (*structpb.Value, []byte) {
	if !valueDepthOK(raw) {
		return nil, slices.Clone(raw) // deeper than every client decodes (depth.go)
	}
	if v, ok := wirecodec.JSONValue(raw); ok {
		return v, nil
	}
	return nil, slices.Clone(raw)
}

func (s *service) CancelJob(ctx context.Context, req *sessiongatev1.CancelJobRequest) (*sessiongatev1.CancelJobResponse, error) {
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return nil, err
	}
	if err := checkJobID(req.GetJobId()); err != nil {
		return nil, err
	}
	if err := checkText("reason", req.GetReason(), maxReasonLen); err != nil {
		return nil, err
	}
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return nil, err
	}
	defer release()
	if sess.Conn.Subscribed(req.GetJobId()) {
		return nil, subscriberCancelError(req.GetJobId()) // jobs_api.go
	}
	if err := sess.Conn.Cancel(ctx, req.GetJobId(), req.GetReason()); err != nil {
		return nil, s.err(err)
	}
	return &sessiongatev1.CancelJobResponse{}, nil
}

func (s *service) WatchJob(req *sessiongatev1.WatchJobRequest, stream sessiongatev1.SessionGateway_WatchJobServer) (err error) {
	if s.watchEnded != nil {
		defer func() { s.watchEnded(err) }()
	}
	ctx := stream.Context()
	if err := checkSessionID(req.GetSessionId()); err != nil {
		return err
	}
	if err := checkJobID(req.GetJobId()); err != nil {
		return err
	}
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return err
	}
	defer release()
	key := watchKey{sess, req.GetJobId()}
	if err := s.addWatcher(key); err != nil {
		return err
	}
	defer s.dropWatcher(key)
	w, err := sess.Conn.Watch(req.GetJobId(), req.GetFromEventSeq())
	if err != nil {
		return s.err(err)
	}
	defer w.Close()
	snd := s.startSender(stream)
	defer snd.close()
	cursor := req.GetFromEventSeq() // the last event_seq sent
	for {
		item, err := w.Next(ctx)
		if err != nil {
			if isEOF(err) {
				return nil
			}
			if errors.Is(err, upstream.ErrSlowConsumer) {
				// Shed under the session's caps: say which job's stream.
				return slowConsumerStatus(req.GetJobId())
			}
			if errors.Is(err, upstream.ErrDetached) {
				// Handed off (a draining replica) or taken over: the
				// caller resumes elsewhere from the cursor.
				return handedOffStatus(req.GetJobId(), cursor)
			}
			return s.err(err)
		}
		if err := snd.send(ctx, watchItem(item)); err != nil {
			return err
		}
		cursor = item.Seq
		if item.Result != nil || item.Error != nil {
			return nil
		}
	}
}

// addWatcher counts a WatchJob stream of a job under the cap.
func (s *service) addWatcher(k watchKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.watchers[k]; s.maxWatchersPerJob > 0 && n >= s.maxWatchersPerJob {
		return gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
			fmt.Sprintf("cap watchers_per_job=%d reached: job %s already has %d WatchJob streams; close one, or watch from one stream and fan out", s.maxWatchersPerJob, clip(k.job), n),
			map[string]string{"cap": "watchers_per_job", "limit": strconv.Itoa(s.maxWatchersPerJob), "in_use": strconv.Itoa(n)})
	}
	s.watchers[k]++
	return nil
}

func (s *service) dropWatcher(k watchKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers[k]--; s.watchers[k] <= 0 {
		delete(s.watchers, k)
	}
}

// sender runs one stream's Sends on a goroutine of its own, so that the
// handler can return when its context ends (a timeout profile's gap or total
// limit, the caller's cancellation) even while a Send is blocked in gRPC
// flow control by a client that stopped reading: cancelling the context
// does not unblock such a Send, but the handler's return does, because
// grpc-go then finishes the stream, which wakes every blocked write. The
// goroutine exits after that Send; service.bg owns it.
type sender struct {
	in  chan *sessiongatev1.WatchJobResponse // unbuffered: the goroutine is idle whenever send is called
	out chan error                           // one result per message; buffered so the goroutine never waits for a handler that has left
	err func(error) error                    // the service's status mapping
}

func (s *service) startSender(stream sessiongatev1.SessionGateway_WatchJobServer) *sender {
	snd := &sender{in: make(chan *sessiongatev1.WatchJobResponse), out: make(chan error, 1), err: s.err}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		for msg := range snd.in {
			snd.out <- stream.Send(msg)
		}
	}()
	return snd
}

// send sends msg and waits for the Send to finish or for ctx to end.
func (snd *sender) send(ctx context.Context, msg *sessiongatev1.WatchJobResponse) error {
	select {
	case snd.in <- msg:
	case <-ctx.Done():
		return snd.err(context.Cause(ctx))
	}
	select {
	case err := <-snd.out:
		return err
	case <-ctx.Done():
		// The Send may still be blocked; returning ends the stream, which
		// unblocks it.
		return snd.err(context.Cause(ctx))
	}
}

// close lets the goroutine exit once its current Send (if any) returns.
func (snd *sender) close() { close(snd.in) }

// watchItem converts an item of a job's log. It never fails: JSON without a
// google.protobuf.Value form travels in the raw_* fields, so one odd event
// never ends the stream of every watcher.
func watchItem(item upstream.Item) *sessiongatev1.WatchJobResponse {
	msg := &sessiongatev1.WatchJobResponse{EventSeq: item.Seq}
	switch {
	case item.Event != nil:
		ev := &sessiongatev1.JobEvent{Kind: item.Event.Kind, Ts: parseTime(item.Event.TS)}
		ev.Body, ev.RawBody = valueOrRaw(item.Event.Body)
		msg.Item = &sessiongatev1.WatchJobResponse_Event{Event: ev}
	case item.Result != nil:
		res := &sessiongatev1.JobResult{Summary: item.Result.Summary}
		res.Result, res.RawResult = valueOrRaw(item.Result.Result)
		msg.Item = &sessiongatev1.WatchJobResponse_Result{Result: res}
	case item.Error != nil:
		je := &sessiongatev1.JobError{
			FinalStatus: item.Error.FinalStatus, Code: itemCode(item.Error.Code), // caller_jobs.go
			Message: item.Error.Message, Retryable: item.Error.Retryable,
		}
		je.Details, je.RawDetails = valueOrRaw(item.Error.Details)
		msg.Item = &sessiongatev1.WatchJobResponse_Error{Error: je}
	}
	decorateItem(msg, item) // jobs_api.go
	return msg
}

func parseTime(s string) *timestamppb.Timestamp {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return timestamppb.New(t)
}
