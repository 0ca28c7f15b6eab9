package server

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
