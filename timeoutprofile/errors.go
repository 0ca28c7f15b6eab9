package timeoutprofile

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// The google.rpc.ErrorInfo a timeout carries: reason ErrorReason in domain
// ErrorDomain, with metadata profile_name, configured_timeout_ms,
// elapsed_ms, limit, service and method.
const (
	ErrorDomain = "timeoutprofile"
	ErrorReason = "TIMEOUT_PROFILE_EXCEEDED"
)

// TimeoutError is the cause of a handler's context when its profile's
// budget ran out (context.Cause returns it), and the error the interceptors
// turn into DEADLINE_EXCEEDED. errors.Is(err, context.DeadlineExceeded)
// holds for it.
type TimeoutError struct {
	Profile string // the profile the call ran under
	// Configured is the limit that fired; for LimitCallerDeadline, the time
	// from the start of the call to the caller's deadline less the margin.
	Configured time.Duration
	Elapsed    time.Duration // time since the start of the call (since the last message for LimitGap)
	Service    string        // fully qualified service name
	Method     string        // method name
	Limit      string        // LimitUnary, LimitInitial, LimitGap, LimitTotal or LimitCallerDeadline
}

// Error reads e.g. `timeout profile "tool_call" exceeded: 1000ms configured, 1003ms elapsed (unary)`.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("timeout profile %q exceeded: %dms configured, %dms elapsed (%s)",
		e.Profile, msOf(e.Configured), msOf(e.Elapsed), e.Limit)
}

// Unwrap returns context.DeadlineExceeded.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// GRPCStatus is DEADLINE_EXCEEDED with two details: the typed
// timeoutprofile.v1.TimeoutExceeded and a google.rpc.ErrorInfo.
func (e *TimeoutError) GRPCStatus() *status.Status {
	st := status.New(codes.DeadlineExceeded, e.Error())
	d := e.detail()
	info := &errdetails.ErrorInfo{
		Reason: ErrorReason,
		Domain: ErrorDomain,
		Metadata: map[string]string{
			"profile_name":          d.ProfileName,
			"configured_timeout_ms": strconv.FormatUint(uint64(d.ConfiguredTimeoutMs), 10),
			"elapsed_ms":            strconv.FormatUint(uint64(d.ElapsedMs), 10),
			"limit":                 d.Limit,
			"service":               d.Service,
			"method":                d.Method,
		},
	}
	if withDetails, err := st.WithDetails(d, info); err == nil {
		return withDetails
	}
	return st
}

func (e *TimeoutError) detail() *timeoutprofilev1.TimeoutExceeded {
	return &timeoutprofilev1.TimeoutExceeded{
		ProfileName:         e.Profile,
		ConfiguredTimeoutMs: msOf(e.Configured),
		ElapsedMs:           msOf(e.Elapsed),
		Service:             e.Service,
		Method:              e.Method,
		Limit:               e.Limit,
	}
}

// FromError returns the TimeoutExceeded detail of err: a status error
// received from a server using this package, or a *TimeoutError (such as a
// handler's context.Cause). It reports false for any other error.
func FromError(err error) (*timeoutprofilev1.TimeoutExceeded, bool) {
	if err == nil {
		return nil, false
	}
	var te *TimeoutError
	if errors.As(err, &te) {
		return te.detail(), true
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.DeadlineExceeded {
		return nil, false
	}
	for _, d := range st.Details() {
		if t, ok := d.(*timeoutprofilev1.TimeoutExceeded); ok {
			return t, true
		}
	}
	return nil, false
}
