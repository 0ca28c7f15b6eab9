package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/arcp"
	"github.com/sessiongate/sessiongate/gateway/session"
	"github.com/sessiongate/sessiongate/gateway/upstream"
)

// TestToStatusDetachedIsHandedOff: a session whose upstream connection was
// detached lives on another replica. The session table's Acquire reports
// it wrapped in session.LostError, as it does a session whose upstream
// really ended, and the caller must not be told to open a new session
// (SESSION_LOST) but to retry (SESSION_HANDED_OFF). A call that reached a
// draining replica after its hand-off detached the session, and before the
// table was drained, got SESSION_LOST in a rolling restart of the bench.
func TestToStatusDetachedIsHandedOff(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name   string
		err    error
		code   codes.Code
		reason string
	}{
		{"detached, through Acquire", &session.LostError{Err: upstream.ErrDetached}, codes.Unavailable, "SESSION_HANDED_OFF"},
		{"detached, wrapped again", errors.Join(errors.New("run job"), &session.LostError{Err: upstream.ErrDetached}), codes.Unavailable, "SESSION_HANDED_OFF"},
		{"detached, from a waiter", upstream.ErrDetached, codes.Unavailable, "SESSION_HANDED_OFF"},
		{"upstream ended otherwise", &session.LostError{Err: upstream.ErrClosed}, codes.Unavailable, "SESSION_LOST"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := status.FromError(toStatus(log, tc.err))
			if !ok || st.Code() != tc.code {
				t.Fatalf("toStatus(%v) = %v, want code %v", tc.err, st, tc.code)
			}
			var reason string
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok {
					reason = info.GetReason()
				}
			}
			if reason != tc.reason {
				t.Fatalf("toStatus(%v): reason %q (%s), want %q", tc.err, reason, st.Message(), tc.reason)
			}
		})
	}
}

// TestToStatusSaysWhatTheRuntimeDid: the runtime's own code and message
// reach the caller, a retryable runtime error gets a retryable code, and the
// runtime's faults get reasons of their own.
func TestToStatusSaysWhatTheRuntimeDid(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name    string
		err     error
		code    codes.Code
		reason  string
		message string // a part of the message
		md      map[string]string
	}{
		{"retryable runtime error", &arcp.Error{Code: "INTERNAL_ERROR", Message: "busy, try again", Retryable: true},
			codes.Unavailable, "INTERNAL_ERROR", "busy, try again", map[string]string{"retryable": "true"}},
		{"non-retryable runtime error", &arcp.Error{Code: "INTERNAL_ERROR", Message: "broken", Retryable: false},
			codes.Internal, "INTERNAL_ERROR", "broken", map[string]string{"retryable": "false"}},
		{"session ended by the runtime", &upstream.LostError{Code: "UNAUTHENTICATED", Err: &arcp.Error{Code: "UNAUTHENTICATED", Message: "token revoked"}},
			codes.Unauthenticated, "UNAUTHENTICATED", "token revoked", map[string]string{"runtime_message": "token revoked"}},
		{"fatal error with invalid UTF-8", &upstream.LostError{Code: "INTERNAL_ERROR", Err: &arcp.Error{Code: "INTERNAL_ERROR", Message: "bad \xff byte"}},
			codes.Internal, "INTERNAL_ERROR", "bad \uFFFD byte", map[string]string{"runtime_message": "bad \uFFFD byte"}},
		{"resume answered for another session", &upstream.LostError{Code: "INTERNAL_ERROR", Err: fmt.Errorf("%w: x", upstream.ErrResumeMismatch)},
			codes.Unavailable, "SESSION_LOST", "another session", map[string]string{"cause": "resume_session_mismatch"}},
		{"wrong handshake frame", &upstream.UnreachableError{Stage: "welcome", Err: &upstream.ProtocolError{Stage: "handshake", Detail: `"job.accepted" instead of session.welcome`}},
			codes.Unavailable, "RUNTIME_PROTOCOL_ERROR", "job.accepted", map[string]string{"stage": "handshake"}},
		{"garbage answers", &upstream.RuntimeFaultError{Fault: "unreadable_answers", Err: errors.New("x")},
			codes.Internal, "RUNTIME_PROTOCOL_ERROR", "unreadable", map[string]string{"fault": "unreadable_answers"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, ok := status.FromError(toStatus(log, tc.err))
			if !ok || st.Code() != tc.code {
				t.Fatalf("toStatus(%v) = %v, want code %v", tc.err, st, tc.code)
			}
			if !strings.Contains(st.Message(), tc.message) {
				t.Fatalf("message %q does not say %q", st.Message(), tc.message)
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info == nil || info.GetReason() != tc.reason {
				t.Fatalf("ErrorInfo %v, want reason %q", info, tc.reason)
			}
			for k, v := range tc.md {
				if got := info.GetMetadata()[k]; got != v {
					t.Fatalf("metadata[%s] = %q, want %q", k, got, v)
				}
			}
		})
	}
}
