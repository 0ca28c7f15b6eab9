package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/budget"
	"github.com/sessiongate/sessiongate/gateway/directory"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// arcpCode maps an ARCP error code to a gRPC code. Unknown codes are
// INTERNAL_ERROR, as the protocol requires.
func arcpCode(code string) codes.Code {
	switch arcp.NormalizeCode(code) {
	case arcp.CodeUnauthenticated:
		return codes.Unauthenticated
	case arcp.CodePermissionDenied, arcp.CodeLeaseSubsetViolation, arcp.CodeLeaseExpired:
		return codes.PermissionDenied
	case arcp.CodeJobNotFound:
		return codes.NotFound
	case arcp.CodeAgentNotAvailable, arcp.CodeAgentVersionNotAvailable:
		// The named agent (or version) does not exist on this runtime:
		// NotFound, like any other named entity that is not there.
		return codes.NotFound
	case arcp.CodeDuplicateKey:
		return codes.AlreadyExists
	case arcp.CodeInvalidRequest:
		return codes.InvalidArgument
	case arcp.CodeCancelled:
		return codes.Canceled
	case arcp.CodeTimeout:
		return codes.DeadlineExceeded
	case arcp.CodeBudgetExhausted, arcp.CodeResourceExhausted:
		return codes.ResourceExhausted
	case arcp.CodeResumeWindowExpired, arcp.CodeHeartbeatLost:
		return codes.Unavailable
	default:
		return codes.Internal
	}
}

// jobCode maps the ARCP code of a job's own end — job.error from the agent,
// delivered after the runtime accepted the job — to a gRPC code. The call
// itself worked: the gateway and the runtime did their part, and the agent's
// work failed. So no code here may read as a fault of the gateway or of the
// transport, which meshes and clients count against the server (HTTP 5xx
// equivalents INTERNAL, UNKNOWN, DATA_LOSS, UNAVAILABLE, DEADLINE_EXCEEDED),
// and none may invite the automatic retries that
// timeoutprofile.RetryServiceConfig and meshes apply to DEADLINE_EXCEEDED and
// UNAVAILABLE:
//
//	job.error code                  gRPC code           why
//	INTERNAL_ERROR, unknown codes   ABORTED             the agent failed; google.rpc: "retry at a higher
//	                                                    level" — the runtime's retryable flag (always true
//	                                                    for INTERNAL_ERROR in ARCP §12) is in ErrorInfo
//	TIMEOUT                         ABORTED             the job ran past its own max_runtime_sec; the call's
//	                                                    deadline did not pass, and rerunning it as is would
//	                                                    end the same way
//	CANCELLED                       CANCELLED           someone cancelled the job
//	HEARTBEAT_LOST,                 UNAVAILABLE         the job was lost with its session: a transport fault
//	RESUME_WINDOW_EXPIRED
//	any other code                  as arcpCode         a 4xx-class code: PERMISSION_DENIED, NOT_FOUND,
//	                                                    INVALID_ARGUMENT, RESOURCE_EXHAUSTED, …
//
// FAILED_PRECONDITION was considered for INTERNAL_ERROR and rejected: it
// tells a caller not to retry until the system is fixed, and ARCP says
// INTERNAL_ERROR is always retryable. Calls that end this way are logged at
// INFO (ABORTED) or WARN, never ERROR.
func jobCode(code string) codes.Code {
	switch code = arcp.NormalizeCode(code); code {
	case arcp.CodeTimeout:
		return codes.Aborted
	case arcp.CodeCancelled, arcp.CodeResumeWindowExpired, arcp.CodeHeartbeatLost:
		return arcpCode(code)
	}
	if c := arcpCode(code); c != codes.Internal {
		return c
	}
	return codes.Aborted
}

// arcpStatus builds a status for an ARCP error code with the ErrorInfo every
// caller can read: reason = the ARCP code, domain "arcp", metadata retryable.
func arcpStatus(code, msg string, retryable bool, extra map[string]string) error {
	return arcpStatusCode(arcpCode(code), code, msg, retryable, extra)
}

func arcpStatusCode(c codes.Code, code, msg string, retryable bool, extra map[string]string) error {
	code = arcp.NormalizeCode(code)
	md := map[string]string{"retryable": strconv.FormatBool(retryable)}
	for k, v := range extra {
		md[k] = v
	}
	st := status.New(c, msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: code, Domain: "arcp", Metadata: md}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// gatewayStatus builds a status for a condition of the gateway itself, with
// ErrorInfo{domain:"sessiongate"}.
func gatewayStatus(c codes.Code, reason, msg string, md map[string]string) error {
	st := status.New(c, msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "sessiongate", Metadata: md}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// handedOffStatus is the end of a WatchJob stream whose session this
// replica handed off (or lost to a takeover): retryable, with the cursor
// (the last event_seq sent, also as ErrorInfo from_event_seq).
func handedOffStatus(jobID string, cursor uint64) error {
	seq := strconv.FormatUint(cursor, 10)
	return gatewayStatus(codes.Unavailable, "SESSION_HANDED_OFF",
		"this replica handed the session to another (draining, or the session was taken over): retry; WatchJob from event_seq "+seq,
		map[string]string{"job_id": jobID, "from_event_seq": seq})
}

// jobErrorStatus maps a job's terminal error (see jobCode).
func jobErrorStatus(jobID string, e *arcp.JobError) error {
	if e.Code == upstream.CodeJobLost {
		return jobLostStatus(jobID, e) // caller_jobs.go
	}
	return arcpStatusCode(jobCode(e.Code), e.Code, fmt.Sprintf("job %s ended %s: %s: %s", jobID, e.FinalStatus, arcp.NormalizeCode(e.Code), e.Message),
		e.Retryable, map[string]string{"job_id": jobID, "final_status": e.FinalStatus})
}

// budgetHints say what a caller can do about each budget.
var budgetHints = map[string]string{
	"sessions":                  "the gateway is full: retry later or on another instance",
	"sessions_per_caller":       "close a session you no longer use (CloseSession), or let idle ones expire",
	"live_jobs":                 "the gateway runs as many jobs as it may: retry later",
	"live_jobs_per_caller":      "wait for a running job to end, or cancel one (CancelJob), then retry",
	"retained_bytes":            "the gateway holds as many results and events as it may: retry later",
	"retained_bytes_per_caller": "read the results of your finished jobs (RunJob, WatchJob) or close sessions you no longer use, then retry",
}

// exceededStatus maps a refused reservation: RESOURCE_EXHAUSTED with
// ErrorInfo{reason: CAP_EXCEEDED, metadata: {cap, limit, in_use, scope}}.
func exceededStatus(e *budget.ExceededError) error {
	hint := budgetHints[e.Budget]
	if hint == "" {
		hint = "retry later"
	}
	return gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
		fmt.Sprintf("cap %s=%d reached (%d in use, %d requested): %s", e.Budget, e.Limit, e.InUse, e.Requested, hint),
		map[string]string{
			"cap": e.Budget, "limit": strconv.FormatInt(e.Limit, 10), "in_use": strconv.FormatInt(e.InUse, 10),
			"scope": string(e.Scope),
		})
}

// upstreamCapNames renames the upstream's per-session caps where the bare
// name would be mistaken for a gateway-wide budget.
var upstreamCapNames = map[string]string{"live_jobs": "live_jobs_per_session"}

// toStatus is the one place where errors of the inner packages become gRPC
// statuses. Errors that already carry a status pass through. Anything not
// recognised is logged and reported as Internal without its text.
func toStatus(log *slog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var (
		arcpErr  *arcp.Error
		jobErr   *arcp.JobError
		lost     *upstream.LostError
		upCap    *upstream.CapError
		exceeded *budget.ExceededError
		sessLost *session.LostError
		asm      *assemblyError
	)
	var (
		unreachable *upstream.UnreachableError
		protoErr    *upstream.ProtocolError
		fault       *upstream.RuntimeFaultError
	)
	switch {
	case errors.As(err, &protoErr):
		return gatewayStatus(codes.Unavailable, "RUNTIME_PROTOCOL_ERROR",
			"the agent runtime broke the ARCP "+protoErr.Stage+": "+protoErr.Detail+"; its operator must fix it (retrying may reach a healthy instance)",
			map[string]string{"stage": protoErr.Stage, "detail": protoErr.Detail})
	case errors.As(err, &fault):
		return gatewayStatus(codes.Internal, "RUNTIME_PROTOCOL_ERROR",
			"the agent runtime answered this submit with unreadable frames again and again ("+fault.Fault+"); the job may exist upstream and is cancelled if it appears",
			map[string]string{"fault": fault.Fault})
	case errors.Is(err, upstream.ErrResumeMismatch):
		return gatewayStatus(codes.Unavailable, "SESSION_LOST",
			"session lost: the agent runtime answered the resume with a welcome for another session; open a new session",
			map[string]string{"cause": "resume_session_mismatch"})
	case errors.As(err, &unreachable):
		return gatewayStatus(codes.Unavailable, "RUNTIME_UNREACHABLE",
			"the agent runtime could not be reached ("+unreachable.Stage+"): retry later; the gateway's log has the cause",
			map[string]string{"stage": unreachable.Stage})
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "call cancelled")
	case errors.Is(err, upstream.ErrDetached):
		// Before sessLost: a session whose connection was detached (handed
		// off while draining, or fenced) is found so by Acquire, which
		// reports it as lost, but it lives on another replica.
		return gatewayStatus(codes.Unavailable, "SESSION_HANDED_OFF",
			"this replica handed the session to another (draining, or the session was taken over): retry; WatchJob from your last event_seq", nil)
	case errors.As(err, &sessLost):
		if errors.As(err, &lost) {
			return lostStatus(lost)
		}
		return gatewayStatus(codes.Unavailable, "SESSION_LOST", "session lost: the upstream session ended; open a new session", nil)
	case errors.As(err, &lost):
		return lostStatus(lost)
	case errors.Is(err, session.ErrNotFound):
		return gatewayStatus(codes.NotFound, "SESSION_NOT_FOUND", "session not found: open one with OpenSession", nil)
	case errors.Is(err, session.ErrDraining):
		return gatewayStatus(codes.Unavailable, "DRAINING", "gateway is shutting down: open the session on another instance", nil)
	case errors.As(err, &exceeded):
		return exceededStatus(exceeded)
	case errors.As(err, &asm) && !errors.As(err, &upCap):
		return gatewayStatus(codes.DataLoss, "RESULT_ASSEMBLY_FAILED", asm.Error()+": the job succeeded; watch its events (WatchJob) for the chunks",
			map[string]string{"job_id": asm.jobID})
	case errors.As(err, &upCap):
		name := upCap.Cap
		if n, ok := upstreamCapNames[name]; ok {
			name = n
		}
		return gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
			fmt.Sprintf("cap %s=%d reached on this session: wait for its jobs to end, or use another session", name, upCap.Limit),
			map[string]string{"cap": name, "limit": strconv.FormatInt(upCap.Limit, 10), "scope": "session"})
	case errors.As(err, &arcpErr):
		c := arcpCode(arcpErr.Code)
		if c == codes.Internal && arcpErr.Retryable {
			// The runtime says trying again may work (an INTERNAL_ERROR
			// at its caps, an overload): a retryable code, not a fault
			// of the gateway's.
			c = codes.Unavailable
		}
		return arcpStatusCode(c, arcpErr.Code, "runtime rejected the request: "+arcp.NormalizeCode(arcpErr.Code)+": "+runtimeText(arcpErr.Message), arcpErr.Retryable, nil)
	case errors.As(err, &jobErr):
		return arcpStatusCode(jobCode(jobErr.Code), jobErr.Code, "job ended "+jobErr.FinalStatus+": "+arcp.NormalizeCode(jobErr.Code)+": "+jobErr.Message, jobErr.Retryable, nil)
	case errors.As(err, new(*upstream.JobEndedError)), errors.As(err, new(*upstream.BeyondEndError)):
		return jobEdgeStatus(err) // caller_jobs.go
	case errors.Is(err, upstream.ErrUnknownJob):
		return gatewayStatus(codes.NotFound, "JOB_NOT_FOUND", "job not found in this session (unknown, or its events are no longer retained)", nil)
	case errors.Is(err, upstream.ErrOutcomeUnknown):
		return gatewayStatus(codes.Unavailable, "OUTCOME_UNKNOWN",
			"the upstream connection dropped before the runtime answered; the job may or may not exist: retry with the same idempotency_key", nil)
	case errors.As(err, new(*upstream.NotRetainedError)):
		var nr *upstream.NotRetainedError
		errors.As(err, &nr)
		return gatewayStatus(codes.ResourceExhausted, "SLOW_CONSUMER",
			fmt.Sprintf("job %s: the events after from_event_seq %d are no longer retained (this replica holds them from after event_seq %d): watch again from %d; the events between are lost to this watch",
				clip(nr.JobID), nr.From, nr.Held, nr.Held),
			map[string]string{"job_id": nr.JobID, "from_event_seq": strconv.FormatUint(nr.From, 10), "held_after_seq": strconv.FormatUint(nr.Held, 10)})
	case errors.Is(err, upstream.ErrSlowConsumer):
		return gatewayStatus(codes.ResourceExhausted, "SLOW_CONSUMER",
			"the stream fell too far behind the job's events and the session's event buffer is full: watch again with from_event_seq", nil)
	case errors.Is(err, upstream.ErrResultEvicted):
		return gatewayStatus(codes.ResourceExhausted, "RESULT_EVICTED",
			"the job ended but its result was not collected before the retained-bytes budget or the session's buffer needed the room: collect results promptly (RunJob, WatchJob) or raise --max-retained-bytes-per-caller", nil)
	case errors.Is(err, upstream.ErrFeatureNotNegotiated):
		return gatewayStatus(codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED", "the runtime did not negotiate the feature this call needs", nil)
	case errors.Is(err, directory.ErrUnavailable):
		return gatewayStatus(codes.Unavailable, "DIRECTORY_UNAVAILABLE", "the cluster directory cannot be reached: "+err.Error(), nil)
	case errors.Is(err, upstream.ErrClosed):
		return gatewayStatus(codes.Unavailable, "SESSION_CLOSED", "the session was closed", nil)
	}
	log.Error("unmapped error", "err", err)
	return status.Error(codes.Internal, "internal error")
}

// runtimeText makes text from a runtime fit for a status: valid UTF-8 (a
// status detail with invalid UTF-8 cannot be marshalled) and at most 512
// bytes.
func runtimeText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > 512 {
		s = strings.ToValidUTF8(s[:512], "") + "…"
	}
	return s
}

// slowConsumerStatus is ErrSlowConsumer for a watcher of jobID: its events
// were shed under the session's caps (this job's stream, not another's).
func slowConsumerStatus(jobID string) error {
	return gatewayStatus(codes.ResourceExhausted, "SLOW_CONSUMER",
		"the stream of job "+jobID+" fell too far behind its events and the session's event buffer is full: watch again with from_event_seq",
		map[string]string{"job_id": jobID})
}

// lostStatus maps a session the runtime ended or would not resume, with the
// runtime's own code and message when it sent them.
func lostStatus(lost *upstream.LostError) error {
	var ae *arcp.Error
	if errors.As(lost.Err, &ae) && ae.Message != "" {
		msg := runtimeText(ae.Message)
		return arcpStatus(lost.Code, "session lost: the runtime ended the session: "+arcp.NormalizeCode(ae.Code)+": "+msg+"; open a new session",
			true, map[string]string{"runtime_code": runtimeText(ae.Code), "runtime_message": msg})
	}
	return arcpStatus(lost.Code, "session lost: the upstream runtime session could not be resumed ("+lost.Code+"); open a new session", true, nil)
}

// assemblyError: a streamed result (§8.4) could not be put together.
type assemblyError struct {
	jobID string
	err   error
}

func (e *assemblyError) Error() string {
	return "job " + e.jobID + ": the streamed result could not be assembled: " + e.err.Error()
}

func (e *assemblyError) Unwrap() error { return e.err }
