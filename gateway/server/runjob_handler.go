package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessiongate/sessiongate/gateway/wirecodec"
	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// runJobHandler is the server's method handler for RunJob: the generated
// one, except that the request is decoded by wirecodec.DecodeRunJob and runJob is
// called with wire set. The interceptors see the *RunJobRequest, without
// its input when wirecodec.DecodeRunJob took that out as JSON; should one of them
// pass on a request of its own, that one is served as it is.
func runJobHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*service)
	raw := &wirecodec.RawMessage{}
	if err := dec(raw); err != nil {
		return nil, err
	}
	in, input, err := wirecodec.DecodeRunJob(raw.Bytes, s.maxInputBytes)
	if err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.runJob(ctx, in, input, true)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: sessiongatev1.SessionGateway_RunJob_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		r, ok := req.(*sessiongatev1.RunJobRequest)
		switch {
		case !ok:
			return nil, status.Errorf(codes.Internal, "grpc: RunJob's request is a %T", req)
		case r != in:
			return s.runJob(ctx, r, nil, true)
		}
		return s.runJob(ctx, r, input, true)
	})
}
