package timeoutprofile

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	timeoutprofilev1 "github.com/sessiongate/sessiongate/gen/timeoutprofile/v1"
)

// NewService returns an implementation of timeoutprofile.v1's
// TimeoutProfileService reporting e's configuration. Register it with
// timeoutprofilev1.RegisterTimeoutProfileServiceServer, behind the same
// authentication as the services it describes.
//
// ListProfiles returns e.Profiles(): the table without per-caller
// overrides, which is the same for every caller.
//
// ResolveProfile returns e.Resolve(full_method, caller) for the calling
// identity only: caller is the identity e's WithCallerIdentity function
// gives the ResolveProfile call itself, the one the server interceptors
// use for per-caller overrides (none when e has no such function). The
// request's caller field may be left empty or name that same identity; a
// request naming any other caller gets PERMISSION_DENIED, so no caller can
// read another's overrides. A malformed full_method or a caller longer than
// 256 bytes is INVALID_ARGUMENT.
func NewService(e *Enforcer) timeoutprofilev1.TimeoutProfileServiceServer {
	return &service{e: e}
}

type service struct {
	timeoutprofilev1.UnimplementedTimeoutProfileServiceServer
	e *Enforcer
}

func (s *service) ListProfiles(context.Context, *timeoutprofilev1.ListProfilesRequest) (*timeoutprofilev1.ListProfilesResponse, error) {
	subKeys, methods := s.e.SubKeyMappings()
	return &timeoutprofilev1.ListProfilesResponse{Profiles: s.e.Profiles(), SubKeys: subKeys, SubKeyMethods: methods}, nil
}

func (s *service) ResolveProfile(ctx context.Context, req *timeoutprofilev1.ResolveProfileRequest) (*timeoutprofilev1.ResolveProfileResponse, error) {
	if _, _, ok := splitFullMethod(req.GetFullMethod()); !ok {
		return nil, status.Error(codes.InvalidArgument, `full_method: want "/package.Service/Method"`)
	}
	if len(req.GetCaller()) > 256 {
		return nil, status.Error(codes.InvalidArgument, "caller: at most 256 bytes")
	}
	caller := s.e.callerOf(ctx)
	if req.GetCaller() != "" && req.GetCaller() != caller {
		return nil, status.Error(codes.PermissionDenied, "caller: a caller may resolve only its own profiles; leave caller empty")
	}
	if len(req.GetSubKey()) > maxSubKeyLen {
		return nil, status.Errorf(codes.InvalidArgument, "sub_key: at most %d bytes", maxSubKeyLen)
	}
	r, err := s.e.ResolveSubKey(req.GetFullMethod(), caller, req.GetSubKey())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, `full_method: want "/package.Service/Method"`)
	}
	resp := &timeoutprofilev1.ResolveProfileResponse{
		Profile: r.Profile.proto(),
		Source:  r.Source,
		Reason:  r.Reason,

		SubKeyPattern: r.SubKeyPattern,
	}
	if r.Streaming != nil {
		resp.Streaming = r.Streaming.proto()
	}
	return resp, nil
}
