package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/arcp"
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

// arcpStatus builds a status for an ARCP error code with the ErrorInfo every
// caller can read: reason = the ARCP code, domain "arcp", metadata retryable.
func arcpStatus(code, msg string, retryable bool, extra map[string]string) error {
	code = arcp.NormalizeCode(code)
	md := map[string]string{"retryable": strconv.FormatBool(retryable)}
	for k, v := range extra {
		md[k] = v
	}
	st := status.New(arcpCode(code), msg)
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

// jobErrorStatus maps a job's terminal error.
func jobErrorStatus(jobID string, e *arcp.JobError) error {
	return arcpStatus(e.Code, fmt.Sprintf("job %s ended %s: %s: %s", jobID, e.FinalStatus, arcp.NormalizeCode(e.Code), e.Message),
		e.Retryable, map[string]string{"job_id": jobID, "final_status": e.FinalStatus})
}

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
		sessCap  *session.CapError
		sessLost *session.LostError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "call cancelled")
	case errors.As(err, &sessLost):
		if errors.As(err, &lost) {
			return arcpStatus(lost.Code, "session lost: the upstream runtime session could not be resumed ("+lost.Code+"); open a new session", true, nil)
		}
		return gatewayStatus(codes.Unavailable, "SESSION_LOST", "session lost: the upstream session ended; open a new session", nil)
	case errors.As(err, &lost):
		return arcpStatus(lost.Code, "session lost: the upstream runtime session could not be resumed ("+lost.Code+"); open a new session", true, nil)
	case errors.Is(err, session.ErrNotFound):
		return gatewayStatus(codes.NotFound, "SESSION_NOT_FOUND", "session not found: open one with OpenSession", nil)
	case errors.Is(err, session.ErrDraining):
		return gatewayStatus(codes.Unavailable, "DRAINING", "gateway is shutting down: open the session on another instance", nil)
	case errors.As(err, &sessCap):
		return gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
			fmt.Sprintf("cap %s=%d reached: close a session first", sessCap.Cap, sessCap.Limit),
			map[string]string{"cap": sessCap.Cap, "limit": strconv.Itoa(sessCap.Limit)})
	case errors.As(err, &upCap):
		return gatewayStatus(codes.ResourceExhausted, "CAP_EXCEEDED",
			fmt.Sprintf("cap %s=%d reached on this session", upCap.Cap, upCap.Limit),
			map[string]string{"cap": upCap.Cap, "limit": strconv.FormatInt(upCap.Limit, 10)})
	case errors.As(err, &arcpErr):
		return arcpStatus(arcpErr.Code, "runtime rejected the request: "+arcp.NormalizeCode(arcpErr.Code)+": "+arcpErr.Message, arcpErr.Retryable, nil)
	case errors.As(err, &jobErr):
		return arcpStatus(jobErr.Code, "job ended "+jobErr.FinalStatus+": "+arcp.NormalizeCode(jobErr.Code)+": "+jobErr.Message, jobErr.Retryable, nil)
	case errors.Is(err, upstream.ErrUnknownJob):
		return gatewayStatus(codes.NotFound, "JOB_NOT_FOUND", "job not found in this session (unknown, or its events are no longer retained)", nil)
	case errors.Is(err, upstream.ErrOutcomeUnknown):
		return gatewayStatus(codes.Unavailable, "OUTCOME_UNKNOWN",
			"the upstream connection dropped before the runtime answered; the job may or may not exist: retry with the same idempotency_key", nil)
	case errors.Is(err, upstream.ErrSlowConsumer):
		return gatewayStatus(codes.ResourceExhausted, "SLOW_CONSUMER",
			"the stream fell too far behind the job's events and the session's event buffer is full: watch again with from_event_seq", nil)
	case errors.Is(err, upstream.ErrFeatureNotNegotiated):
		return gatewayStatus(codes.FailedPrecondition, "FEATURE_NOT_NEGOTIATED", "the runtime did not negotiate the feature this call needs", nil)
	case errors.Is(err, upstream.ErrClosed):
		return gatewayStatus(codes.Unavailable, "SESSION_CLOSED", "the session was closed", nil)
	}
	log.Error("unmapped error", "err", err)
	return status.Error(codes.Internal, "internal error")
}
