package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/sessiongate/sessiongate/gateway/directory"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// statusAny is the status probe of any replica: the local table first, then
// (in cluster mode) the directory, read-only — a probe never takes a session
// over. instance_id is the owner's. While the directory cannot be read, a
// session not held here is UNAVAILABLE (never NOT_FOUND: it may be live).
func (s *service) statusAny(ctx context.Context, id, caller string) (*sessiongatev1.GetSessionStatusResponse, error) {
	resp := s.status(id, caller)
	if resp.GetStatus() == sessiongatev1.SessionStatus_SESSION_STATUS_LIVE || s.cluster == nil {
		return resp, nil
	}
	return s.cluster.status(ctx, id, caller, resp)
}

func (c *clusterState) status(ctx context.Context, id, caller string, notFound *sessiongatev1.GetSessionStatusResponse) (*sessiongatev1.GetSessionStatusResponse, error) {
	rec, err := c.dir.Get(ctx, id)
	c.observe(err)
	switch {
	case errors.Is(err, directory.ErrNotFound):
		return notFound, nil
	case errors.Is(err, directory.ErrRecovering):
		return nil, gatewayStatus(codes.Unavailable, "DIRECTORY_RECOVERING",
			"session "+id+" is not in the cluster directory, which lost its data a moment ago; owners are restoring their records: retry",
			map[string]string{"instance_id": c.self})
	case err != nil:
		if ctx.Err() != nil {
			return nil, toStatus(c.log, ctx.Err())
		}
		return nil, gatewayStatus(codes.Unavailable, "DIRECTORY_UNAVAILABLE",
			"session "+id+" is not held by this replica and the cluster directory cannot be reached: "+err.Error(),
			map[string]string{"instance_id": c.self})
	case rec.Caller != caller:
		return notFound, nil
	}
	phase := sessiongatev1.SessionPhase_SESSION_PHASE_READY
	if !rec.OwnerLive || rec.Owner == "" {
		// Released or owner gone: the next call (or a sweeper) resumes it.
		phase = sessiongatev1.SessionPhase_SESSION_PHASE_RECONNECTING
	}
	return &sessiongatev1.GetSessionStatusResponse{
		Status:       sessiongatev1.SessionStatus_SESSION_STATUS_LIVE,
		Phase:        phase,
		Runtime:      rec.Runtime,
		LastEventSeq: rec.AckedSeq,
		InstanceId:   rec.Owner,
	}, nil
}
