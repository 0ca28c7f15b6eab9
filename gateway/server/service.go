package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
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
// for concurrent use; the state lives in the session table.
type service struct {
	sessiongatev1.UnimplementedSessionGatewayServer

	// Immutable after construction.
	table          *session.Table[*upstream.Conn]
	runtimes       map[string]Runtime
	runtimeNames   []string
	defaultRuntime string
	dial           func(ctx context.Context, rt Runtime, req *sessiongatev1.OpenSessionRequest) (*upstream.Conn, error)
	maxInputBytes  int
	cancelTimeout  time.Duration
	log            *slog.Logger
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
		return s.dial(ctx, rt, req)
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
	return s.status(req.GetSessionId(), callerFrom(ctx)), nil
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
	if err := s.table.Close(ctx, req.GetSessionId(), callerFrom(ctx)); err != nil {
		// Once removed from the table the session is gone whatever the
		// upstream close said; only "not found" is the caller's business.
		if status.Code(s.err(err)) == codes.NotFound {
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
	GetSessionId() string
	GetAgent() string
	GetInput() *structpb.Value
	GetIdempotencyKey() string
	GetMaxRuntimeSec() uint32
}

func (s *service) submitPayload(req jobRequest) (arcp.Submit, error) {
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
	if in := req.GetInput(); in != nil {
		if sz := marshalSize(in); sz > s.maxInputBytes {
			return arcp.Submit{}, gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
				fmt.Sprintf("input is %d bytes; cap max_input_bytes=%d", sz, s.maxInputBytes),
				map[string]string{"cap": "max_input_bytes"})
		}
		raw, err := appendJSON(make([]byte, 0, 64), in)
		if err != nil {
			return arcp.Submit{}, invalid("input is not a JSON value: %v", err)
		}
		if len(raw) > s.maxInputBytes {
			return arcp.Submit{}, gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
				fmt.Sprintf("input is %d bytes of JSON; cap max_input_bytes=%d", len(raw), s.maxInputBytes),
				map[string]string{"cap": "max_input_bytes"})
		}
		sub.Input = raw
	}
	return sub, nil
}

func (s *service) acquire(ctx context.Context, id string) (*session.Session[*upstream.Conn], func(), error) {
	sess, release, err := s.table.Acquire(id, callerFrom(ctx))
	if err != nil {
		return nil, nil, s.err(err)
	}
	return sess, release, nil
}

// submit validates a job request, acquires its session and submits the job.
// On success the caller must call release when its call ends.
func (s *service) submit(ctx context.Context, req jobRequest) (*session.Session[*upstream.Conn], func(), arcp.Accepted, error) {
	sub, err := s.submitPayload(req)
	if err != nil {
		return nil, nil, arcp.Accepted{}, err
	}
	sess, release, err := s.acquire(ctx, req.GetSessionId())
	if err != nil {
		return nil, nil, arcp.Accepted{}, err
	}
	acc, err := sess.Conn.Submit(ctx, sub)
	if err != nil {
		release()
		return nil, nil, arcp.Accepted{}, s.err(err)
	}
	return sess, release, acc, nil
}

func (s *service) SubmitJob(ctx context.Context, req *sessiongatev1.SubmitJobRequest) (*sessiongatev1.SubmitJobResponse, error) {
	_, release, acc, err := s.submit(ctx, req)
	if err != nil {
		return nil, err
	}
	release()
	return &sessiongatev1.SubmitJobResponse{JobId: acc.JobID, AcceptedAt: parseTime(acc.AcceptedAt)}, nil
}

func (s *service) RunJob(ctx context.Context, req *sessiongatev1.RunJobRequest) (*sessiongatev1.RunJobResponse, error) {
	sess, release, acc, err := s.submit(ctx, req)
	if err != nil {
		return nil, err
	}
	defer release()
	term, err := sess.Conn.Wait(ctx, acc.JobID)
	if err != nil {
		if ctx.Err() != nil {
			// The caller gave up or its budget ran out: the job must not
			// run on for nobody. Cancel it upstream before answering,
			// bounded so that a stalled runtime cannot hold the answer.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cancelTimeout)
			if cerr := sess.Conn.Cancel(cctx, acc.JobID, "caller gave up"); cerr != nil {
				s.log.Warn("cancel after caller gave up", "job_id", acc.JobID, "err", cerr)
			}
			cancel()
		}
		return nil, s.err(err)
	}
	if term.Error != nil {
		return nil, jobErrorStatus(acc.JobID, term.Error)
	}
	resp := &sessiongatev1.RunJobResponse{JobId: acc.JobID}
	if term.Result != nil {
		resp.Summary = term.Result.Summary
		v, err := jsonValue(term.Result.Result)
		if err != nil {
			return nil, gatewayStatus(codes.Internal, "BAD_RESULT", "the runtime sent a result that is not valid JSON", nil)
		}
		resp.Result = v
	}
	return resp, nil
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
	if err := sess.Conn.Cancel(ctx, req.GetJobId(), req.GetReason()); err != nil {
		return nil, s.err(err)
	}
	return &sessiongatev1.CancelJobResponse{}, nil
}

func (s *service) WatchJob(req *sessiongatev1.WatchJobRequest, stream sessiongatev1.SessionGateway_WatchJobServer) error {
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
	w, err := sess.Conn.Watch(req.GetJobId(), req.GetFromEventSeq())
	if err != nil {
		return s.err(err)
	}
	defer w.Close()
	for {
		item, err := w.Next(ctx)
		if err != nil {
			if isEOF(err) {
				return nil
			}
			return s.err(err)
		}
		msg, err := watchItem(item)
		if err != nil {
			return err
		}
		if err := stream.Send(msg); err != nil {
			return err
		}
		if item.Result != nil || item.Error != nil {
			return nil
		}
	}
}

func watchItem(item upstream.Item) (*sessiongatev1.WatchJobResponse, error) {
	msg := &sessiongatev1.WatchJobResponse{EventSeq: item.Seq}
	switch {
	case item.Event != nil:
		body, err := jsonValue(item.Event.Body)
		if err != nil {
			return nil, gatewayStatus(codes.Internal, "BAD_EVENT", "the runtime sent an event body that is not valid JSON", nil)
		}
		msg.Item = &sessiongatev1.WatchJobResponse_Event{Event: &sessiongatev1.JobEvent{
			Kind: item.Event.Kind, Ts: parseTime(item.Event.TS), Body: body,
		}}
	case item.Result != nil:
		v, err := jsonValue(item.Result.Result)
		if err != nil {
			return nil, gatewayStatus(codes.Internal, "BAD_RESULT", "the runtime sent a result that is not valid JSON", nil)
		}
		msg.Item = &sessiongatev1.WatchJobResponse_Result{Result: &sessiongatev1.JobResult{Result: v, Summary: item.Result.Summary}}
	case item.Error != nil:
		details, _ := jsonValue(item.Error.Details)
		msg.Item = &sessiongatev1.WatchJobResponse_Error{Error: &sessiongatev1.JobError{
			FinalStatus: item.Error.FinalStatus, Code: arcp.NormalizeCode(item.Error.Code),
			Message: item.Error.Message, Retryable: item.Error.Retryable, Details: details,
		}}
	}
	return msg, nil
}

// jsonValue converts raw JSON to a protobuf Value; empty input is nil.
func jsonValue(raw json.RawMessage) (*structpb.Value, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	v := &structpb.Value{}
	if err := protojson.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	return v, nil
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
