package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// Error is a call that failed with a gRPC status, with the
// google.rpc.ErrorInfo the gateway attaches decoded. status.FromError and
// status.Code work on it. errors.Is(err, context.DeadlineExceeded) holds for
// DEADLINE_EXCEEDED and errors.Is(err, context.Canceled) for CANCELLED.
type Error struct {
	Code    codes.Code
	Message string
	// Reason and Domain are the ErrorInfo's, e.g. "SESSION_NOT_FOUND" in
	// "sessiongate", or an ARCP code in "arcp"; empty without one.
	Reason, Domain string
	// Metadata is the ErrorInfo's, e.g. "retryable", "job_id", "cap".
	Metadata map[string]string

	status *status.Status
}

// Error reads e.g. `sessiongate: NotFound: session not found (sessiongate/SESSION_NOT_FOUND)`.
func (e *Error) Error() string {
	s := fmt.Sprintf("sessiongate: %v: %s", e.Code, e.Message)
	if e.Reason != "" {
		s += fmt.Sprintf(" (%s/%s)", e.Domain, e.Reason)
	}
	return s
}

// GRPCStatus returns the status the call failed with, details included.
func (e *Error) GRPCStatus() *status.Status { return e.status }

// Is reports DEADLINE_EXCEEDED as context.DeadlineExceeded and CANCELLED as
// context.Canceled.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	return false
}

// TimeoutError is a DEADLINE_EXCEEDED that carries the gateway's
// timeoutprofile.v1.TimeoutExceeded detail. errors.As also finds its *Error.
type TimeoutError struct {
	Profile    string        // the timeout profile the call ran under, e.g. "tool_call"
	Configured time.Duration // the budget that ran out
	Elapsed    time.Duration // the time elapsed when it did
	Limit      string        // "unary", "caller_deadline", "initial", "gap" or "total"
	Service    string        // e.g. "sessiongate.v1.SessionGateway"
	Method     string        // e.g. "RunJob"
	Err        *Error        // the status
}

// Error reads as the gateway's status message, e.g.
// `sessiongate: DeadlineExceeded: timeout profile "tool_call" exceeded: …`.
func (e *TimeoutError) Error() string { return e.Err.Error() }

// Unwrap returns the *Error.
func (e *TimeoutError) Unwrap() error { return e.Err }

// GRPCStatus returns the status the call failed with, details included.
func (e *TimeoutError) GRPCStatus() *status.Status { return e.Err.status }

// wrapError returns err as an *Error or *TimeoutError when it is a gRPC
// status error; other errors (context errors before the call started, input
// conversion) are returned as they are.
func wrapError(err error) error {
	if err == nil {
		return nil
	}
	var already *Error
	if errors.As(err, &already) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Message: st.Message(), status: st}
	var timeout *timeoutprofilev1.TimeoutExceeded
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if e.Reason == "" {
				e.Reason, e.Domain, e.Metadata = d.GetReason(), d.GetDomain(), d.GetMetadata()
			}
		case *timeoutprofilev1.TimeoutExceeded:
			if timeout == nil {
				timeout = d
			}
		}
	}
	if e.Code == codes.DeadlineExceeded && timeout != nil {
		return &TimeoutError{
			Profile:    timeout.GetProfileName(),
			Configured: time.Duration(timeout.GetConfiguredTimeoutMs()) * time.Millisecond,
			Elapsed:    time.Duration(timeout.GetElapsedMs()) * time.Millisecond,
			Limit:      timeout.GetLimit(),
			Service:    timeout.GetService(),
			Method:     timeout.GetMethod(),
			Err:        e,
		}
	}
	return e
}
