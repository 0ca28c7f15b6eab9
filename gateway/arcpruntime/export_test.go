package arcpruntime

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/sessiongate/sessiongate/gateway/arcp"
)

// sessionIDs returns the ids of the sessions that exist, for tests.
func (r *Runtime) sessionIDs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	return ids
}

// newStubbornServer returns a server whose runtime also has the agent
// "stubborn": it ignores cancellation and returns only when release is
// closed (or the test ends).
func newStubbornServer(tb testing.TB, opts Options, release <-chan struct{}) *Server {
	srv := NewTestServer(tb, opts)
	rt := srv.Runtime()
	rt.agents = append(slices.Clip(rt.agents), agent{
		name: "stubborn",
		prepare: func(json.RawMessage, agentEnv) (runFunc, error) {
			return func(_ context.Context, io jobIO) (json.RawMessage, error) {
				_ = io.emit(arcp.KindLog, map[string]string{"message": "started"})
				<-release
				return json.RawMessage(`"done anyway"`), nil
			}, nil
		},
	})
	return srv
}

// jobDone returns a channel closed when the job's goroutines have returned.
func (r *Runtime) jobDone(tb testing.TB, jobID string) <-chan struct{} {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.sessions {
		if j := s.jobs[jobID]; j != nil {
			return j.done
		}
	}
	tb.Fatalf("no job %s", jobID)
	return nil
}

// withHoldAgent adds the agent "hold" to srv's runtime (before any session
// uses it): it emits one log event, then waits for its context and ends
// with it, so a cancel ends it at once.
func withHoldAgent(srv *Server) *Server {
	rt := srv.Runtime()
	rt.agents = append(slices.Clip(rt.agents), agent{
		name: "hold",
		prepare: func(json.RawMessage, agentEnv) (runFunc, error) {
			return func(ctx context.Context, io jobIO) (json.RawMessage, error) {
				if err := io.emit(arcp.KindLog, map[string]string{"message": "holding"}); err != nil {
					return nil, err
				}
				<-ctx.Done()
				return nil, ctx.Err()
			}, nil
		},
	})
	return srv
}

// sessionSeq returns the last event_seq assigned in the session.
func (r *Runtime) sessionSeq(tb testing.TB, sid string) uint64 {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sessions[sid]
	if s == nil {
		tb.Fatalf("no session %s", sid)
	}
	return s.seq
}
