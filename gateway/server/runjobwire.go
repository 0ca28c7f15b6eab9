package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// RunJob's answer on the wire. A runtime's result reaches the gateway as
// JSON and the caller as a google.protobuf.Value; the server's handler for
// RunJob (runJobHandler) has runJob transcode the one into the other's
// bytes and answer with those, a *rawMessage that the server's codec sends
// as it is. Results the transcoder leaves alone (not JSON, duplicate keys,
// deeper than 128, longer than 64 KiB, streamed in chunks) take the Value
// path as before, and RunJob itself (the SessionGatewayServer method)
// always answers with a *RunJobResponse.

// runJobHandler is the server's method handler for RunJob: the generated
// one, calling runJob with wire set.
func runJobHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(sessiongatev1.RunJobRequest)
	if err := dec(in); err != nil {
		return nil, err
	}
	s := srv.(*service)
	if interceptor == nil {
		return s.runJob(ctx, in, true)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: sessiongatev1.SessionGateway_RunJob_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		return s.runJob(ctx, req.(*sessiongatev1.RunJobRequest), true)
	})
}

// appendRunJobWire returns resp's encoding followed by result's as its
// result field, or false when the result has no wire form here
// (appendValueWire). A field after the others is valid protobuf: decoders
// take fields in any order, and resp has no result of its own.
func appendRunJobWire(resp *sessiongatev1.RunJobResponse, result []byte) ([]byte, bool) {
	b, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 0, proto.Size(resp)+len(result)+16), resp)
	if err != nil {
		return nil, false
	}
	b = protowire.AppendTag(b, runJobResultField, protowire.BytesType)
	at := len(b)
	b, ok := appendValueWire(append(b, 0), result)
	if !ok {
		return nil, false
	}
	return closeLength(b, at), true
}

// runJobResultField is RunJobResponse.result's field number.
var runJobResultField = (&sessiongatev1.RunJobResponse{}).ProtoReflect().Descriptor().Fields().ByName("result").Number()
