package timeoutprofile

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// NewService returns an implementation of timeoutprofile.v1's
// TimeoutProfileService reporting e's configuration: ListProfiles returns
// e.Profiles(); ResolveProfile returns e.Resolve(full_method, caller),
// rejecting a malformed full_method or an over-long caller with
// INVALID_ARGUMENT. Register it with
// timeoutprofilev1.RegisterTimeoutProfileServiceServer.
func NewService(e *Enforcer) timeoutprofilev1.TimeoutProfileServiceServer {
	return &service{e: e}
}

type service struct {
	timeoutprofilev1.UnimplementedTimeoutProfileServiceServer
	e *Enforcer
}

func (s *service) ListProfiles(context.Context, *timeoutprofilev1.ListProfilesRequest) (*timeoutprofilev1.ListProfilesResponse, error) {
	return &timeoutprofilev1.ListProfilesResponse{Profiles: s.e.Profiles()}, nil
}

func (s *service) ResolveProfile(_ context.Context, req *timeoutprofilev1.ResolveProfileRequest) (*timeoutprofilev1.ResolveProfileResponse, error) {
	if _, _, ok := splitFullMethod(req.GetFullMethod()); !ok {
		return nil, status.Error(codes.InvalidArgument, `full_method: want "/package.Service/Method"`)
	}
	if len(req.GetCaller()) > 256 {
		return nil, status.Error(codes.InvalidArgument, "caller: at most 256 bytes")
	}
	r, err := s.e.Resolve(req.GetFullMethod(), req.GetCaller())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, `full_method: want "/package.Service/Method"`)
	}
	resp := &timeoutprofilev1.ResolveProfileResponse{
		Profile: r.Profile.proto(),
		Source:  r.Source,
		Reason:  r.Reason,
	}
	if r.Streaming != nil {
		resp.Streaming = r.Streaming.proto()
	}
	return resp, nil
}
