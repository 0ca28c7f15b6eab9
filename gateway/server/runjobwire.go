package server

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	sessiongatev1 "github.com/sessiongate/sessiongate/gen/sessiongate/v1"
)

// RunJob's answer on the wire. A runtime's result reaches the gateway as
// JSON and the caller as a google.protobuf.Value; the server's handler for
// RunJob (runJobHandler) has runJob transcode the one into the other's
// bytes and answer with those, a *rawMessage that the server's codec sends
// as it is. The caller's input takes the opposite way: decodeRunJob writes
// the Value's bytes as the JSON the runtime gets (appendWireJSON). Results the transcoder leaves alone (not JSON, duplicate keys,
// deeper than 128, longer than 64 KiB, streamed in chunks) take the Value
// path as before, and RunJob itself (the SessionGatewayServer method)
// always answers with a *RunJobResponse.

// runJobHandler is the server's method handler for RunJob: the generated
// one, except that the request is decoded by decodeRunJob and runJob is
// called with wire set. The interceptors see the *RunJobRequest, without
// its input when decodeRunJob took that out as JSON; should one of them
// pass on a request of its own, that one is served as it is.
func runJobHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*service)
	raw := &rawMessage{}
	if err := dec(raw); err != nil {
		return nil, err
	}
	in, input, err := decodeRunJob(raw.b, s.maxInputBytes)
	if err != nil {
		return nil, err
	}
	if interceptor == nil {
		return s.runJob(ctx, in, input, true)
	}
	info := &grpc.UnaryServerInfo{Server: srv, FullMethod: sessiongatev1.SessionGateway_RunJob_FullMethodName}
	return interceptor(ctx, in, info, func(ctx context.Context, req any) (any, error) {
		r := req.(*sessiongatev1.RunJobRequest)
		if r != in {
			return s.runJob(ctx, r, nil, true)
		}
		return s.runJob(ctx, r, input, true)
	})
}

// decodeRunJob decodes a RunJobRequest. When its input is there once and
// in the plain encoding appendWireJSON reads, input is that Value's JSON
// text and the message is decoded without it (the bytes before and after
// the field, merged: protobuf's rule for a message split between fields);
// else input is nil and the message is proto.Unmarshal's, Input included,
// for submitPayload to convert or refuse as before.
func decodeRunJob(b []byte, max int) (req *sessiongatev1.RunJobRequest, input []byte, err error) {
	req = new(sessiongatev1.RunJobRequest)
	if start, end, v, ok := onlyField(b, runJobInputField); ok {
		if input, ok = appendWireJSON(make([]byte, 0, len(v)+16), v, max); ok &&
			proto.Unmarshal(b[:start], req) == nil && (proto.UnmarshalOptions{Merge: true}).Unmarshal(b[end:], req) == nil {
			return req, input, nil
		}
		req.Reset()
	}
	if err := proto.Unmarshal(b, req); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "grpc: error unmarshalling request: %v", err)
	}
	return req, nil, nil
}

// onlyField finds the one occurrence of the length-delimited field num in
// the message b: the field's span, tag included, and its bytes. ok is
// false when the field is absent, repeated or of another wire type, or b
// is not well formed.
func onlyField(b []byte, num protowire.Number) (start, end int, v []byte, ok bool) {
	found := false
	for i := 0; i < len(b); {
		n, typ, tn := protowire.ConsumeTag(b[i:])
		if tn < 0 {
			return 0, 0, nil, false
		}
		fn := protowire.ConsumeFieldValue(n, typ, b[i+tn:])
		if fn < 0 {
			return 0, 0, nil, false
		}
		if n == num {
			if found || typ != protowire.BytesType {
				return 0, 0, nil, false
			}
			val, _ := protowire.ConsumeBytes(b[i+tn:])
			start, end, v, found = i, i+tn+fn, val, true
		}
		i += tn + fn
	}
	return start, end, v, found
}

// runJobInputField is RunJobRequest.input's field number.
var runJobInputField = (&sessiongatev1.RunJobRequest{}).ProtoReflect().Descriptor().Fields().ByName("input").Number()

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
